"""How many runs of what length a trustworthy throughput result needs: pure statistics over the
short calibration runs of ``fsscope check``.

- :func:`runs_needed` — runs for a confidence interval of the mean of ±``precision`` (relative),
  given the coefficient of variation of the runs' cumulative throughput. Student-t, not the
  normal approximation: n is the smallest whole number with ``n >= (t(conf, n-1) · CV / e)²``
  (t depends on n, so the fixed point is searched; the normal formula ``(z · CV / e)²``
  undercounts, e.g. CV 5 %, ±2 %: 25 runs by z, 27 by t).
- :func:`stable_after_s` — the run length after which a run's cumulative throughput stays in
  a band (the criterion is :data:`CRITERION`, printed with the result).
- :func:`window_curve` / :func:`window_needed_s` — the Throughput-N window at which the relative
  range across runs (Cao et al.'s metric) falls below the precision.

Everything takes plain sequences / numpy arrays and returns numbers (None where the data cannot
say), so the tests feed synthetic series with known answers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fsscope.analysis import scipy_stats
from fsscope.analysis.variation.metrics import relative_range, rsd, throughput_bands, throughput_n

MAX_RUNS = 100_000
STABLE_POINTS = 5          # cumulative-throughput samples the band must hold over
CANDIDATE_WINDOWS_S = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 400, 600, 900, 1200)


def t_quantile(confidence: float, dof: int) -> float:
    """Two-sided Student-t quantile: the ``t`` with P(|T| <= t) = confidence."""
    return float(scipy_stats().t.ppf(0.5 + confidence / 2.0, dof))


def runs_needed(cv: float | None, precision: float, confidence: float = 0.95, minimum: int = 2) -> int | None:
    """Smallest n with ``n >= (t(confidence, n-1) · cv / precision)²`` (Student-t, iterated).

    ``cv`` and ``precision`` are fractions (0.05 = 5 %); the interval is mean ± precision·mean.
    None when ``cv`` is not a finite number; at least ``minimum`` (a t interval needs two)."""
    if cv is None or not math.isfinite(cv) or not precision > 0 or not 0 < confidence < 1:
        return None
    cv = abs(cv)

    def enough(n: int) -> bool:
        return n >= (t_quantile(confidence, n - 1) * cv / precision) ** 2

    z = float(scipy_stats().norm.ppf(0.5 + confidence / 2.0))
    lo = max(minimum, math.ceil((z * cv / precision) ** 2))  # t > z: never fewer than the z answer
    if enough(lo):
        return lo
    hi = lo
    while not enough(hi):  # t(n-1) falls as n grows: the predicate is monotone, so bisect
        hi *= 2
        if hi > MAX_RUNS:
            return MAX_RUNS
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi


def runs_needed_normal(cv: float | None, precision: float, confidence: float = 0.95) -> int | None:
    """The normal-approximation answer ``ceil((z · cv / e)²)``, for comparison only."""
    if cv is None or not math.isfinite(cv) or not precision > 0:
        return None
    z = float(scipy_stats().norm.ppf(0.5 + confidence / 2.0))
    return max(1, math.ceil((z * abs(cv) / precision) ** 2))


def ci_relative_halfwidth(values: Sequence[float], confidence: float = 0.95) -> float | None:
    """Half-width of the Student-t interval of the mean, as a fraction of the mean."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2 or x.mean() == 0:
        return None
    return float(t_quantile(confidence, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size) / x.mean())


def cv_upper(cv: float | None, runs: int, confidence: float = 0.95) -> float | None:
    """One-sided upper confidence bound of the CV from ``runs`` samples (chi-squared bound on
    the standard deviation): a few calibration runs can underestimate the spread."""
    if cv is None or not math.isfinite(cv) or runs < 2:
        return None
    return float(abs(cv) * math.sqrt((runs - 1) / scipy_stats().chi2.ppf(1 - confidence, runs - 1)))


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    value = rsd(values)
    return None if math.isnan(value) else value


# ---------------------------------------------------------------------------------------------
# run length: when does the cumulative throughput stop moving?
# ---------------------------------------------------------------------------------------------

def criterion_text(band: float, step_s: float, points: int = STABLE_POINTS) -> str:
    return (f"cumulative throughput, sampled every {step_s:g} s, stays stable from the first time T where its "
            f"last {points} samples (T-{(points - 1) * step_s:g} s .. T) all lie within ±{band:.1%} of their "
            f"mean and their least-squares trend changes by less than {band:.1%} of that mean across them; "
            f"the run length needed is the largest T over the runs")


def cumulative_throughput(counts_per_bin: np.ndarray, bin_s: float) -> np.ndarray:
    """Ops/s from the start of the run to the end of each bin."""
    counts = np.asarray(counts_per_bin, dtype=np.float64)
    if counts.ndim == 2:
        counts = counts.sum(axis=0)
    return np.cumsum(counts) / (bin_s * np.arange(1, counts.size + 1))


def is_stable(samples: np.ndarray, band: float) -> bool:
    """The band test on one set of samples (see :func:`criterion_text`)."""
    y = np.asarray(samples, dtype=np.float64)
    mean = float(y.mean())
    if y.size < 2 or mean <= 0:
        return False
    if float(np.abs(y - mean).max()) > band * mean:
        return False
    slope = float(np.polyfit(np.arange(y.size, dtype=np.float64), y, 1)[0])
    return abs(slope) * (y.size - 1) < band * mean


def stable_after_s(counts_per_bin: np.ndarray, bin_s: float, band: float, step_s: float | None = None,
                   points: int = STABLE_POINTS) -> float | None:
    """The first time T (seconds) at which the cumulative throughput meets the band test over
    its last ``points`` samples taken every ``step_s`` (default: one bin), and keeps meeting it
    at every later sample of the run. None if the run never settles."""
    cum = cumulative_throughput(counts_per_bin, bin_s)
    per = max(1, int(round((step_s or bin_s) / bin_s)))
    sampled = cum[per - 1::per]
    times = bin_s * per * np.arange(1, sampled.size + 1)
    ok = [is_stable(sampled[i - points + 1: i + 1], band) for i in range(points - 1, sampled.size)]
    if not ok or not ok[-1]:
        return None
    first = len(ok) - 1
    while first > 0 and ok[first - 1]:
        first -= 1
    return float(times[first + points - 1])


# ---------------------------------------------------------------------------------------------
# observation window: Throughput-N and its relative range across runs
# ---------------------------------------------------------------------------------------------

def window_curve(per_run_counts: Sequence[np.ndarray], bin_s: float,
                 candidates_s: Sequence[float] = CANDIDATE_WINDOWS_S) -> list[tuple[float, float]]:
    """(N, median relative range across runs of the Throughput-N windows) for every candidate
    N that fits at least once in the shortest run; needs two runs or more."""
    if len(per_run_counts) < 2:
        return []
    shortest = min(np.asarray(c).shape[-1] for c in per_run_counts) * bin_s
    out = []
    for window_s in candidates_s:
        if window_s > shortest + 1e-9 or abs(window_s / bin_s - round(window_s / bin_s)) > 1e-9:
            continue
        series = [throughput_n(c, bin_s, window_s) for c in per_run_counts]
        rr = throughput_bands(series, window_s).relative_range
        rr = rr[np.isfinite(rr)]
        if rr.size:
            out.append((float(window_s), float(np.median(rr))))
    return out


def window_needed_s(curve: Sequence[tuple[float, float]], precision: float) -> float | None:
    """The smallest N from which on every longer candidate's median relative range is below
    ``precision`` (a window that happens to dip below and rises again does not count)."""
    answer = None
    for window_s, rr in reversed(list(curve)):
        if rr >= precision:
            break
        answer = window_s
    return answer


def cumulative_relative_range(ops_per_s: Sequence[float]) -> float | None:
    value = relative_range(ops_per_s)
    return None if math.isnan(value) else value
