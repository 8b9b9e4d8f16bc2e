"""How well a tree matches an aging profile: bucketing, chi-squared fit, the convergence bound.

Pure functions on numpy arrays, shared by the ager (which keeps counts incrementally),
profile capture (which buckets a walked tree) and tests (which re-walk an aged tree), so
all three put a file into the same bucket by the same rule:

- size: a file of ``s`` bytes belongs to the first bucket whose size is >= ``s`` (the
  last bucket takes everything larger). The ager creates files of exactly a bucket's size.
- depth: the number of directories between the root and the file (a file in the root has
  depth 0); first bucket whose depth is >= the file's, the last one takes deeper files.
- relative age: ``(now - born) / now`` in (0, 1], where ``now`` is the current operation
  count and ``born`` the operation that created the file (aging time is counted in
  operations, as in Geriatrix); the bucket is the first whose relative cutoff
  ``cutoff_i / cutoff_last`` is >= the relative age. For a captured tree ``now - born``
  is the age in seconds from the mtime and ``now`` is the last cutoff.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fsscope.analysis import scipy_stats


def size_bucket_index(size_bytes: np.ndarray, bucket_bytes: np.ndarray) -> np.ndarray:
    """Bucket of each file size: the first bucket size >= the file size (last if larger)."""
    index = np.searchsorted(np.asarray(bucket_bytes), np.asarray(size_bytes), side="left")
    return np.minimum(index, len(bucket_bytes) - 1)


def depth_bucket_index(depth: np.ndarray, bucket_depths: np.ndarray) -> np.ndarray:
    """Bucket of each file depth: the first bucket depth >= the file's (last if deeper)."""
    index = np.searchsorted(np.asarray(bucket_depths), np.asarray(depth), side="left")
    return np.minimum(index, len(bucket_depths) - 1)


def relative_cutoffs(age_cutoffs: np.ndarray) -> np.ndarray:
    """Cutoffs as fractions of the oldest one; only these ratios matter (Geriatrix does the same)."""
    cutoffs = np.asarray(age_cutoffs, dtype=np.float64)
    return cutoffs / cutoffs[-1]


def relative_age(born_op: np.ndarray, now_op: int) -> np.ndarray:
    """Relative age in (0, 1] of files created at operation ``born_op`` when ``now_op`` ops are done."""
    born = np.asarray(born_op, dtype=np.int64)
    return (now_op - born) / now_op


def age_bucket_index(rel_age: np.ndarray, rel_cutoffs: np.ndarray) -> np.ndarray:
    """Bucket of each relative age: the first relative cutoff >= it (ages above 1 go last)."""
    index = np.searchsorted(np.asarray(rel_cutoffs), np.asarray(rel_age), side="left")
    return np.minimum(index, len(rel_cutoffs) - 1)


def bucket_counts(index: np.ndarray, n_buckets: int) -> np.ndarray:
    """Number of files in each of ``n_buckets`` buckets."""
    return np.bincount(np.asarray(index, dtype=np.int64), minlength=n_buckets)[:n_buckets]


def fractions(weights: np.ndarray) -> np.ndarray:
    """Weights normalised to sum to 1 (weights are validated to have a positive sum)."""
    w = np.asarray(weights, dtype=np.float64)
    return w / w.sum()


@dataclass(frozen=True)
class Fit:
    """One distribution, target against actual, with a chi-squared goodness of fit.

    ``p_value`` is from ``scipy.stats.chisquare`` with the expected counts scaled to the
    observed total, after neighbouring buckets are pooled until each group expects at
    least 5 files (:func:`pool_buckets`; the chi-squared approximation needs it, and a
    zero-weight bucket has no term of its own), so a file in such a bucket still costs
    fit. ``target``/``actual``/``counts`` stay per bucket. ``p_value`` is None when there
    are no files, and 1.0 when everything pools into one group (nothing can deviate).
    """

    labels: tuple[str, ...]
    target: tuple[float, ...]
    actual: tuple[float, ...]
    counts: tuple[int, ...]
    chi2: float | None
    p_value: float | None

    def to_json(self) -> dict:
        return {
            "labels": list(self.labels),
            "target": [round(x, 6) for x in self.target],
            "actual": [round(x, 6) for x in self.actual],
            "counts": list(self.counts),
            "chi2": self.chi2,
            "p_value": self.p_value,
        }


MIN_EXPECTED_COUNT = 5.0  # Cochran's rule of thumb for the chi-squared approximation


def pool_buckets(observed: np.ndarray, expected: np.ndarray,
                 min_expected: float = MIN_EXPECTED_COUNT) -> tuple[np.ndarray, np.ndarray]:
    """Merge neighbouring buckets (in order) until each group expects >= ``min_expected`` files.

    Zero-target buckets always merge into a neighbour (a zero expectation has no
    chi-squared term); a short last group joins the one before it.
    """
    observed = np.asarray(observed, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    groups_obs: list[float] = []
    groups_exp: list[float] = []
    acc_obs = acc_exp = 0.0
    for o, e in zip(observed, expected):
        acc_obs += o
        acc_exp += e
        if acc_exp >= min_expected:
            groups_obs.append(acc_obs)
            groups_exp.append(acc_exp)
            acc_obs = acc_exp = 0.0
    if acc_exp > 0 or acc_obs > 0:
        if groups_obs:
            groups_obs[-1] += acc_obs
            groups_exp[-1] += acc_exp
        else:
            groups_obs.append(acc_obs)
            groups_exp.append(acc_exp)
    return np.array(groups_obs), np.array(groups_exp)


def chi2_fit(observed_counts: np.ndarray, target_weights: np.ndarray,
             labels: tuple[str, ...] | None = None) -> Fit:
    """Goodness of fit of observed bucket counts to target weights (see :class:`Fit`)."""
    observed = np.asarray(observed_counts, dtype=np.int64)
    target = fractions(target_weights)
    total = int(observed.sum())
    if labels is None:
        labels = tuple(str(i) for i in range(len(target)))
    actual = observed / total if total else np.zeros(len(target))
    chi2: float | None
    p_value: float | None
    if total == 0:
        chi2, p_value = None, None
    else:
        pooled_obs, pooled_exp = pool_buckets(observed, target * total)
        if len(pooled_obs) < 2:
            chi2, p_value = 0.0, 1.0
        else:
            expected = pooled_exp / pooled_exp.sum() * pooled_obs.sum()
            result = scipy_stats().chisquare(pooled_obs, expected)
            chi2, p_value = float(result.statistic), float(result.pvalue)
            if math.isnan(p_value):
                p_value = 0.0
    return Fit(
        labels=tuple(labels),
        target=tuple(float(x) for x in target),
        actual=tuple(float(x) for x in actual),
        counts=tuple(int(x) for x in observed),
        chi2=chi2,
        p_value=p_value,
    )


def convergence_ops(live_files: int, age_weights: np.ndarray, age_cutoffs: np.ndarray) -> int:
    """The paper's bound T on total operations (rapid + stable) for the age distribution to converge.

    With K live files after rapid aging, relative bucket widths ``s_b`` and target fractions
    ``g_b`` (Kadekodi et al. §6): ``T >= 2 K g_b / s_b`` for every bucket but the oldest
    (it must see enough creates), ``T >= (2 K (g_B - 1) + K) / s_B`` for the oldest, and
    ``T s_B >= K`` (rapid aging must fit in the oldest bucket). The paper's printed
    formula reads ``2 K g_b s_b``; its derivation and the reference code divide, as here.
    """
    g = fractions(age_weights)
    rel = relative_cutoffs(age_cutoffs)
    widths = np.diff(np.concatenate(([0.0], rel)))
    k = float(live_files)
    bound = 0.0
    for b in range(len(g) - 1):
        if widths[b] > 0:
            bound = max(bound, 2.0 * k * g[b] / widths[b])
    s_last = widths[-1]
    if s_last > 0:
        bound = max(bound, (2.0 * k * (g[-1] - 1.0) + k) / s_last, k / s_last)
    return int(math.ceil(bound))
