"""Structure in a probe's latency matrix: repeatable outliers, periodic series, level shifts,
linear growth (method of Aota & Kono: repeat the probe, keep what repeats).

Input: ``latency_ns``, int64 ns, runs x files; entries < 0 are "not measured" and ignored.

* Repeatable outliers -- a file is *slow in a run* when its latency exceeds ``factor`` (2.0)
  times the typical latency *around it* in that run (the higher median of the 16-file blocks
  before and after its own block, so a level shift or a ramp is not mistaken for a row of
  outliers, and a cluster of slow files does not hide itself). The paper's threshold, 300,000 cycles, was also ~2x its typical
  latency. A file slow in at least ``min_runs`` runs is structural; a file slow in some run
  but fewer is noise (counted, not flagged).
* Periodic series -- structural files at a constant stride (XFS inode chunks every 64
  files), tolerant of missing members and interleaved extras, reported only when the chain
  is unlikely under randomly placed candidates (Bonferroni over all starts/strides: the
  series' ``chance`` is that expected number of chance chains, the statistic that decides).
  Candidates are the repeatable outliers plus every file whose *per-file median* over the
  runs is ``series_ratio`` (1.25) x the median curve around it (the same neighbouring-block
  baseline as an outlier's). A median is what repeats: an XFS inode-chunk allocation costs
  1.4-2.3x its neighbours on a RAM image and 1.4-1.95x on a disk image, so per run it is
  above a 1.4x bar only in about half the runs and a per-run vote lost most members, while
  its median over 5-10 runs stays above 1.25x and a noise file's median does not (one-run
  spikes do not move a median). Files above the lower per-run bar (``series_factor``,
  1.4x) in as many runs as a structural file needs are still listed (``weak_outliers``),
  never as outliers. Under load ~10 % of files reach 1.25x, too dense for a short chain of
  strong members (XFS's six data-block allocations, > 2x each) to beat chance; a second
  search among the strong candidates only (medians > ``factor`` x) adds the series the
  first missed, each search at half the ``alpha``.
* Level shifts and linear growth -- the per-file median curve (log scale, reported outliers
  masked) is cut into piecewise-linear segments by penalised optimal partitioning (PELT) on
  a binned (<= 2048 bins), median-filtered curve, so single-file spikes cannot become
  segments and the cost stays bounded for a million files; cuts are then refined to file
  resolution and classified. Segments span >= 16 files, the first one >= 8 (btrfs with
  4 KiB nodes splits its first leaf at file 9). A shift or a ramp must also repeat run by
  run (the step across the cut, or the rise over the ramp, in as many runs as an outlier
  needs): on a shared machine a burst of load in two runs moves a median of five, and the
  curve's short-range noise estimate does not see such drifts.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fsscope.analysis.findings import LevelShift, LinearGrowth, Outlier, Series, to_dict
from fsscope.analysis.latency import (
    DEFAULT_SPLIT_FACTOR,
    as_float_matrix,
    nanmedian_last_axis,
)
from fsscope.analysis.nullgate import NULL_WORLDS, Found, gate
from fsscope.analysis.running import (
    RunningSummary,
    as_float_row,
    block_medians,
    block_neighbourhood,
    chunks,
    median_curve,
    read_part,
    read_row,
    release,
)
from fsscope.analysis.segments import (
    DEFAULT_KNOBS,
    SegmentKnobs,
    _level_shifts_from,
    _linear_growth_from,
    _RunsCheck,
    _segment_curve,
    _without,
    needed_runs,
)

#: A file is slow in a run above this multiple of its local typical latency (paper: ~2x).
DEFAULT_OUTLIER_FACTOR = 2.0
#: Default share of runs that must flag a file for it to be structural (8 of 10 runs).
DEFAULT_MIN_FRACTION = 0.8
#: The lower bar of the periodic-series search (only there): a file above this multiple of
#: its local typical latency in as many runs as a structural file needs is a series
#: candidate. 1.4x: XFS inode-chunk allocations on a RAM-backed image measure ~1.9-2.8x,
#: while lognormal noise of 10 % passes it in ~4e-4 of calls (twice in a row: ~2e-7).
DEFAULT_SERIES_FACTOR = 1.4
#: ... and only when it repeats in at least this many runs. On this shared 2-core machine
#: ~20 % of calls pass 1.4x by chance, so with 2 runs ~4 % of files pass it twice: too dense
#: to be evidence (it doubled the chance-series rate on such noise); with 3 runs ~1 %.
SERIES_MIN_RUNS = 3
#: The series search's bar on the per-file median curve: a file whose median over the runs
#: is this multiple of the median curve around it is a series candidate (from 3 runs on).
DEFAULT_SERIES_RATIO = 1.25
#: Block size for the local typical latency: long enough for a stable median, short enough
#: that only files within ~2 blocks of a level shift lose sensitivity.
BASELINE_BLOCK_FILES = 16
#: The repeatable-outlier rule's bound on a false flag per analysis: a file slow in k of n
#: runs is an outlier only when files x P(Binomial(n, p) >= k) <= this, p the runs' own share
#: of slow calls. The 80 % rule alone let noise through at few runs: on runs recorded here
#: 11 % of calls are above 2x their neighbours, so 4 of 5 happens to 0.07 % of files -- a
#: false flag in 32 % of 600-file probes of 5 runs. (Hoeffding: for per-run rates that
#: differ, the binomial at their mean bounds the tail, so one pooled rate is conservative.)
OUTLIER_ALPHA = 0.01



# --------------------------------------------------------------------------------------------
# Repeatable outliers


@dataclass(frozen=True)
class _OutlierScan:
    flags: NDArray[np.bool_]  # runs x files: slow in that run
    baseline_ns: NDArray[np.float64]  # runs x files: local typical latency
    flag_counts: NDArray[np.int64]  # per file: runs that flagged it
    needed_runs: NDArray[np.int64]  # per file: runs needed to call it repeatable


@dataclass(frozen=True)
class OutlierChance:
    """How many slow runs make a file an outlier beyond chance (:data:`OUTLIER_ALPHA`), per
    count of runs measured: ``needed[v]`` for a file measured in ``v`` runs, ``v + 1`` where no
    count would do (inconclusive at that many runs)."""

    needed: NDArray[np.int64]    # 0..runs: the slow runs needed (the 80 % rule, raised by chance)
    noise_rate: float            # share of calls slow, the 80 %-rule's repeatable files left out
    files: int                   # files measured: the tests made
    alpha: float | None

    def runs_to_decide(self, min_fraction: float, limit: int = 1000) -> int | None:
        """The fewest runs at which a file slow in every one is an outlier beyond chance."""
        if self.alpha is None:
            return None
        for runs in range(2, limit + 1):
            needed = max(2, math.ceil(min_fraction * runs - 1e-9))
            if needed <= runs and _chance_ok(needed, runs, self.noise_rate, self.files, self.alpha):
                return runs
        return None

    def to_json(self, runs: int, min_fraction: float) -> dict:
        decided = runs < 2 or self.alpha is None or int(self.needed[runs]) <= runs
        return {"alpha": self.alpha, "noise_rate": round(self.noise_rate, 5), "files": self.files,
                "slow_runs_needed": int(self.needed[runs]) if runs < self.needed.size else None,
                "runs_to_decide": None if decided else self.runs_to_decide(min_fraction)}


def _chance_ok(slow_runs: int, runs: int, noise_rate: float, files: int, alpha: float) -> bool:
    """files x P(slow in >= ``slow_runs`` of ``runs`` by chance) <= alpha."""
    if noise_rate <= 0.0:
        return True
    log_tail = binom_logsf(slow_runs - 1, runs, min(noise_rate, 1.0 - 1e-12))
    return math.log(max(files, 1)) + log_tail <= math.log(alpha)


def outlier_chance(base_needed: NDArray[np.int64], runs: int, flag_counts: NDArray, valid_counts: NDArray,
                   slow_calls: int, measured_calls: int, alpha: float | None) -> OutlierChance:
    """The 80 % rule's table ``base_needed`` (over 0..runs runs measured) raised until a file
    slow that often is unlikely by chance among all the files (``alpha`` None: not raised; a
    single run is never raised, the analysis says it is one). The chance is each file slow
    independently with the runs' pooled noise rate: the calls slow, leaving out the files the
    80 % rule calls repeatable (structure is not noise), plus one (no slow call is not p = 0)."""
    files = int(np.count_nonzero(valid_counts))
    repeatable = (flag_counts > 0) & (flag_counts >= base_needed[valid_counts])
    slow = slow_calls - int(flag_counts[repeatable].sum())
    measured = measured_calls - int(valid_counts[repeatable].sum())
    noise_rate = (max(slow, 0) + 1) / (max(measured, 0) + 1)
    needed = base_needed.astype(np.int64).copy()
    if alpha is not None and runs >= 2:
        for v in range(needed.size):
            while needed[v] <= v and not _chance_ok(int(needed[v]), v, noise_rate, files, alpha):
                needed[v] += 1
    return OutlierChance(needed=needed, noise_rate=noise_rate, files=files, alpha=alpha)


def _local_baseline_ns(latency: NDArray[np.float64], block_files: int) -> NDArray[np.float64]:
    """Per run, each file's typical latency: the higher of the medians of the block of
    ``block_files`` files before its own block and the block after it.

    Leaving the file's own block out keeps a cluster of slow files from raising its own bar;
    taking the higher neighbour keeps the files just past an upward level shift (or at the
    top of a ramp) from looking slow against the lower level before it. Edge blocks use
    their one neighbour; a run with a single block uses its own median.
    """
    runs, files = latency.shape
    block_count = -(-files // block_files)
    padded = np.full((runs, block_count * block_files), np.nan)
    padded[:, :files] = latency
    neighbourhood = block_neighbourhood(nanmedian_last_axis(padded.reshape(runs, block_count, block_files)))
    return np.repeat(neighbourhood, block_files, axis=1)[:, :files]


def _scan_outliers(latency: NDArray[np.float64], *, factor: float, min_runs: int | None,
                   min_fraction: float, block_files: int, alpha: float | None = OUTLIER_ALPHA) -> _OutlierScan:
    baseline_ns = _local_baseline_ns(latency, block_files)
    with np.errstate(invalid="ignore"):
        flags = latency > factor * baseline_ns  # NaN compares False: unmeasured never flags
    valid_counts = np.sum(~np.isnan(latency), axis=0)
    runs = latency.shape[0]
    flag_counts = flags.sum(axis=0)
    chance = outlier_chance(needed_runs(np.arange(runs + 1), runs, min_runs, min_fraction), runs, flag_counts,
                            valid_counts, int(flag_counts.sum()), int(valid_counts.sum()), alpha)
    return _OutlierScan(
        flags=flags,
        baseline_ns=baseline_ns,
        flag_counts=flag_counts,
        needed_runs=chance.needed[valid_counts],
    )


def _outliers_from_scan(latency: NDArray[np.float64], scan: _OutlierScan) -> tuple[list[Outlier], int]:
    flagged_somewhere = scan.flag_counts > 0
    repeatable = flagged_somewhere & (scan.flag_counts >= scan.needed_runs)
    noise_count = int(np.count_nonzero(flagged_somewhere & ~repeatable))
    indices = np.flatnonzero(repeatable)
    if indices.size == 0:
        return [], noise_count
    flags = scan.flags[:, indices]
    flagged_latency = np.where(flags, latency[:, indices], np.nan)
    flagged_baseline = np.where(flags, scan.baseline_ns[:, indices], np.nan)
    median_ns = nanmedian_last_axis(flagged_latency.T)
    typical_ns = nanmedian_last_axis(flagged_baseline.T)
    measured_runs = np.sum(~np.isnan(latency[:, indices]), axis=0)
    outliers = [
        Outlier(index=int(i), runs_flagged=int(k), runs=int(r), median_ns=int(round(m)),
                typical_ns=int(round(t)))
        for i, k, r, m, t in zip(indices.tolist(), scan.flag_counts[indices].tolist(),
                                 measured_runs.tolist(), median_ns.tolist(), typical_ns.tolist())
    ]
    return outliers, noise_count


def _weak_outliers(latency: NDArray[np.float64], scan: _OutlierScan, *, factor: float,
                   series_factor: float, strong: list[Outlier]) -> list[Outlier]:
    """Files repeatable above ``series_factor`` x the same local baseline but not outliers.

    Same runs needed as a structural file, but never fewer than :data:`SERIES_MIN_RUNS`: a
    weak flag is evidence only through repetition (a matrix of fewer runs gives none).
    """
    if series_factor >= factor or latency.shape[0] < SERIES_MIN_RUNS:
        return []
    with np.errstate(invalid="ignore"):
        weak_flags = latency > series_factor * scan.baseline_ns
    weak_scan = _OutlierScan(flags=weak_flags, baseline_ns=scan.baseline_ns,
                             flag_counts=weak_flags.sum(axis=0),
                             needed_runs=np.maximum(scan.needed_runs, SERIES_MIN_RUNS))
    weak, _ = _outliers_from_scan(latency, weak_scan)
    strong_indices = {o.index for o in strong}
    return [o for o in weak if o.index not in strong_indices]


def repeatable_outliers(
    matrix: ArrayLike,
    *,
    min_runs: int | None = None,
    factor: float = DEFAULT_OUTLIER_FACTOR,
    min_fraction: float = DEFAULT_MIN_FRACTION,
    block_files: int = BASELINE_BLOCK_FILES,
    alpha: float | None = OUTLIER_ALPHA,
) -> tuple[list[Outlier], int]:
    """Files slow in at least ``min_runs`` runs, and the number of files slow only sometimes.

    Slow in a run: latency > ``factor`` x the local typical latency of that run (see module
    doc). ``min_runs`` None means ``ceil(min_fraction x runs that measured the file)``, at
    least 2 when the matrix has >= 2 runs (so one run can never make a file structural); and,
    unless ``alpha`` is None, as many more as make that count unlikely by chance among the
    files (:func:`outlier_chance`; a file short of it counts as noise here). With
    a single run (R == 1) repetition cannot separate structure from noise: every slow file is
    reported with ``runs_flagged == runs == 1`` and the noise count is 0; callers should say so.
    ``Outlier.median_ns``/``typical_ns`` are medians over the runs that flagged the file.
    Returns ``(outliers sorted by index, noise_count)``.
    """
    latency = as_float_matrix(matrix)
    if latency.size == 0:
        return [], 0
    scan = _scan_outliers(latency, factor=factor, min_runs=min_runs, min_fraction=min_fraction,
                          block_files=block_files, alpha=alpha)
    return _outliers_from_scan(latency, scan)


def mask_disturbed(matrix: ArrayLike, wait_ns: ArrayLike, *, bar: float = DEFAULT_SERIES_FACTOR,
                   block_files: int = BASELINE_BLOCK_FILES) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """``matrix`` with the calls the machine disturbed marked not measured (-1), and where.

    Disturbed: above ``bar`` x the local typical latency, but not once the time the call
    waited for a CPU (``wait_ns``, same shape) is taken off -- another task had the CPU, the
    file system did not make it slow. Such a call does not vote; a call slow even without its
    wait, or fast despite it, does.
    """
    latency_matrix = np.atleast_2d(np.asarray(matrix))
    latency = as_float_matrix(latency_matrix)
    wait = np.clip(np.atleast_2d(np.asarray(wait_ns, dtype=np.float64)), 0, None)
    if latency.size == 0 or wait.shape != latency.shape:
        return latency_matrix.astype(np.int64), np.zeros(latency.shape, dtype=bool)
    limit_ns = bar * _local_baseline_ns(latency, block_files)
    with np.errstate(invalid="ignore"):
        disturbed = (latency > limit_ns) & (latency - wait <= limit_ns)
    return np.where(disturbed, -1, latency_matrix).astype(np.int64), disturbed


# --------------------------------------------------------------------------------------------
# Periodic series


def binom_logsf(k: int, n: int, p: float) -> float:
    """log P(X > k) for X ~ Binomial(n, p): scipy.stats.binom.logsf without importing
    scipy.stats (some 70 MiB of resident memory in the probe's process for one function)."""
    if k < 0:
        return 0.0
    if k >= n:
        return -math.inf
    first = k + 1
    js = np.arange(first, n + 1, dtype=np.float64)
    log_choose = (math.lgamma(n + 1) - math.lgamma(first + 1) - math.lgamma(n - first + 1)
                  + np.concatenate([[0.0], np.cumsum(np.log(n - js[:-1]) - np.log(js[:-1] + 1))]))
    log_pmf = log_choose + js * math.log(p) + (n - js) * math.log1p(-p)
    top = float(log_pmf.max())
    return min(0.0, top + math.log(float(np.exp(log_pmf - top).sum())))  # a log-probability


def _chance_log_expectation(present: int, terms: int, density: float, n_files: int) -> float:
    """log of the expected number of chains this good among randomly placed outliers.

    A chain spanning ``terms`` positions with its ends and ``present - 2`` of the middle
    positions flagged; ~n_files^2 / (2 (terms-1)) (start, stride) pairs could host it.
    """
    density = min(max(density, 1e-12), 1.0 - 1e-12)
    placements = max(n_files * n_files / (2.0 * max(terms - 1, 1)), 1.0)
    middle = binom_logsf(present - 3, terms - 2, density) if terms > 2 else 0.0
    return math.log(placements) + 2.0 * math.log(density) + float(middle)


def periodic_series(
    indices: ArrayLike,
    *,
    min_count: int = 3,
    n_files: int | None = None,
    max_gap: int = 2,
    min_fill: float = 0.5,
    alpha: float = 0.01,
    max_strides: int = 32,
    neighbours: int = 6,
) -> list[Series]:
    """Outlier indices at a constant stride, each run reported once as a :class:`Series`.

    Candidate strides are the most frequent differences between each index and its next
    ``neighbours`` indices (so interleaved extras and missing members do not hide the
    stride). For each stride (most frequent first), indices of equal residue form chains that
    may skip up to ``max_gap`` consecutive members; a chain is kept if it has at least
    ``min_count`` members, fills at least ``min_fill`` of its span, and would be expected
    fewer than ``alpha`` times if the same number of outliers were scattered at random over
    ``n_files`` (default: last index + 1). Members of a kept chain are not reused, so a
    64-series is not reported again as a 128-series. ``count`` is the span in terms
    (last = start + (count-1) x stride); ``missing`` how many of those were not flagged.

    The same search as :func:`fsscope.analysis.outliers_reference.periodic_series` (the
    findings agree one for one), in numpy and incremental from round to round (see
    :class:`_SeriesSearch`): O(candidates x log) per round where the reference took
    O(candidates x strides) Python steps, minutes at 100,000 files.
    """
    unique_indices = np.unique(np.asarray(indices, dtype=np.int64).ravel())
    unique_indices = unique_indices[unique_indices >= 0]
    index_count = unique_indices.size
    if index_count < max(min_count, 2):
        return []
    n_files = max(int(n_files or 0), int(unique_indices[-1]) + 1)
    log_alpha = math.log(alpha)

    # Enough neighbours that a period of a fifth of the files spans them at this density (dense
    # candidates put many between two members of a long-stride series), within a bound.
    reach = min(max(neighbours, math.ceil(index_count / 5)), 64)

    search = _SeriesSearch(unique_indices, reach, n_files, min_count=min_count, max_gap=max_gap,
                           min_fill=min_fill)
    found: list[Series] = []
    # The least likely chain first, then again over the indices it left: a 64-series with two
    # members missing is not cut into two 128-series because 128 is the commoner difference.
    # An index stays available to strides that are no multiple or divisor of its series' (a
    # weak 16-file period must not hide XFS's directory blocks every 168 files), but a chain
    # made mostly of other series' members is no period of its own.
    # Once a series is accepted its members are explained: the chance of the next chain is
    # judged against the density of the candidates it leaves.
    while (best := search.best_chain(search.strides(max_strides), density := search.density())
           ) is not None and best[0] < log_alpha:
        log_chance, stride, chain = _sparsest_part(unique_indices, *best, density=density,
                                                   n_files=n_files, log_alpha=log_alpha)
        chain = _extended(unique_indices, search.available(stride), chain, stride, max_gap)
        present, span = chain.size, int((unique_indices[chain[-1]] - unique_indices[chain[0]]) // stride) + 1
        log_chance = min(log_chance, _chance_log_expectation(present, span, density, n_files))
        found.append(Series(start=int(unique_indices[chain[0]]), stride=stride, count=span,
                            missing=span - present, chance=float(f"{math.exp(log_chance):.3g}"),
                            members=tuple(int(i) for i in unique_indices[chain])))
        search.accept(stride, chain)
    found.sort(key=lambda series: (series.start, series.stride))
    return found


def _related(a: int, b: int) -> bool:
    return a % b == 0 or b % a == 0


#: A dead chain's count of taken members: never "mostly free" again (twice it still an int32).
_DEAD = 1 << 29


@dataclass
class _Chains:
    """One stride's chains that can ever qualify (enough members, filled enough), cut from the
    indices available to it. Chains cut again are appended and their old selves marked dead,
    so a recut costs what it changes; ``key`` gives the reference's (residue, term) order.
    Counts, indices and positions are int32 (files and candidates number below 2^29): 32
    strides in play hold their chains at once, at a million files ~20 MB less than int64."""

    key: NDArray[np.int64]      # residue x (files + 1) + first member's index: the order
    last: NDArray[np.int32]     # the last member's index
    starts: NDArray[np.int32]   # where each chain begins in ``members``
    present: NDArray[np.int32]  # members of each chain
    terms: NDArray[np.int32]    # its span in terms
    taken: NDArray[np.int32]    # members already in some series (_DEAD: cut again since)
    members: NDArray[np.int32]  # positions into the indices, chain after chain, by value (a buffer)
    used: int = 0               # of ``members``
    live_members: int = 0
    by_key: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # live, sorted
    sorted_key: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # key[by_key]
    #: (the open chains, the distinct (present << 32 | terms) among them), until one changes
    opened: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None

    def open_pairs(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """The chains open to a series (at most half their members in other series, not dead)
        and the distinct (members, span) pairs among them, ascending: a round values the pairs,
        and most rounds leave most strides' open chains as they were."""
        if self.opened is None:
            open_chains = np.flatnonzero(self.taken * 2 <= self.present)
            self.opened = open_chains, np.unique(_pair_keys(self.present[open_chains], self.terms[open_chains]))
        return self.opened

    def sort(self) -> None:
        live = np.flatnonzero(self.taken != _DEAD)
        self.by_key = live[np.argsort(self.key[live], kind="stable")]
        self.sorted_key = self.key[self.by_key]

    def merge(self, fresh_from: int) -> None:
        """``by_key`` again after :meth:`kill` and :meth:`append` (the chains from ``fresh_from``
        on): the live chains keep their order and the fresh ones are merged in, where sorting
        every live key again cost a pass over all of them per series accepted. Live keys are
        distinct (a residue's chains begin at distinct members), so the order is the sort's."""
        keep = self.taken[self.by_key] != _DEAD
        old, old_keys = self.by_key[keep], self.sorted_key[keep]
        fresh_keys = self.key[fresh_from:]
        fresh = np.argsort(fresh_keys, kind="stable")
        at = np.searchsorted(old_keys, fresh_keys[fresh])
        self.by_key = np.insert(old, at, fresh + fresh_from)
        self.sorted_key = np.insert(old_keys, at, fresh_keys[fresh])

    def in_residues(self, residues: NDArray[np.int64], n_files: int) -> NDArray[np.int64]:
        """The live chains of these residues (ascending, distinct): key ranges of the sorted keys."""
        lo = np.searchsorted(self.sorted_key, residues * (n_files + 1))
        span = np.searchsorted(self.sorted_key, (residues + 1) * (n_files + 1)) - lo
        return self.by_key[np.repeat(lo - (np.cumsum(span) - span), span) + np.arange(int(span.sum()))]

    def append(self, fresh: _Chains) -> None:
        need = self.used + fresh.used
        if need > self.members.size:
            grown = np.empty(max(need, 2 * self.members.size), dtype=self.members.dtype)
            grown[:self.used] = self.members[:self.used]
            self.members = grown
        self.members[self.used:need] = fresh.members[:fresh.used]
        self.key, self.last, self.present, self.terms, self.taken = (
            np.concatenate([mine, theirs]) for mine, theirs in
            ((self.key, fresh.key), (self.last, fresh.last), (self.present, fresh.present),
             (self.terms, fresh.terms), (self.taken, fresh.taken)))
        self.starts = np.concatenate([self.starts, fresh.starts + self.used])
        self.used, self.live_members = need, self.live_members + fresh.used
        self.opened = None

    def kill(self, dead: NDArray[np.int64]) -> None:
        dead = dead[self.taken[dead] != _DEAD]
        self.taken[dead] = _DEAD
        self.opened = None
        self.live_members -= int(self.present[dead].sum())


@dataclass
class _Order:
    """Every index ordered for one stride: by residue, then by term (what chains are cut from).
    Only the positions are kept (int32), residues and terms computed when a cut needs them:
    4 bytes a candidate for each stride in play where three int64 arrays took 24 (on a busy
    machine ~14 % of a million files are candidates, and 32 strides are in play)."""

    positions: NDArray[np.int32]
    stride: int
    indices: NDArray[np.int64]
    #: the residues present, ascending, and where each one's positions begin (one more: the end):
    #: a recut finds its residues here instead of computing every index's residue again
    residue_values: NDArray[np.int64]
    residue_starts: NDArray[np.int32]

    def residue(self, at: NDArray[np.int64] | slice = slice(None)) -> NDArray[np.int64]:
        return self.indices[self.positions[at]] % self.stride

    def term(self, at: NDArray[np.int64] | slice = slice(None)) -> NDArray[np.int64]:
        return self.indices[self.positions[at]] // self.stride


class _SeriesSearch:
    """The state of :func:`periodic_series` between rounds, kept up to date instead of rebuilt.

    What the reference recomputed every round from scratch and how it is kept here:
    - which series hold each index: a mask per accepted stride (an index may be in series of
      unrelated strides), one for "in any series", and per stride in play the indices it may
      not use (in a series of a multiple or divisor);
    - the count of each difference between an index and its next ``reach`` ones over the
      pairs with a free end: counted once, then lowered by the pairs an accepted chain closes;
    - each candidate stride's qualifying chains: cut once; when a series of a multiple or
      divisor is accepted (nothing else changes which indices a stride may use) only the
      residues of its members are cut again; the other strides' chains only count the
      members the series took;
    - the chance of a chain depends only on (members, span) at this round's density, so each
      distinct pair is valued once per round, least promising last: a pair whose lower bound
      (the first term of the binomial tail) cannot beat the best exact value is not valued.
    The choice is the reference's: the least log chance, the first in stride order, then in
    (residue, term) order among equals.
    """

    def __init__(self, indices: NDArray[np.int64], reach: int, n_files: int, *, min_count: int,
                 max_gap: int, min_fill: float):
        self.indices, self.reach, self.n_files = indices, reach, n_files
        self.min_count, self.max_gap, self.min_fill = min_count, max_gap, min_fill
        self.taken_any = np.zeros(indices.size, dtype=bool)
        self.taken_by: dict[int, NDArray[np.int64]] = {}  # per accepted stride: the positions its series hold
        self.explained = 0
        self.orders: dict[int, _Order] = {}
        self.chains: dict[int, _Chains] = {}
        self.blocked: dict[int, NDArray[np.bool_]] = {}
        self.pair_counts = np.zeros(n_files + 1, dtype=np.int64)
        for k in range(1, min(reach, indices.size - 1) + 1):
            self.pair_counts += np.bincount(indices[k:] - indices[:-k], minlength=n_files + 1)
        # Counts only fall, so the strides that can still be chosen only shrink.
        self.live = np.flatnonzero(self.pair_counts >= 2)
        self.live = self.live[self.live >= 2]  # a stride of 1 is a slow stretch, not a period

    def density(self) -> float:
        """Share of the files that are candidates outside every accepted series."""
        return (self.indices.size - self.explained) / max(self.n_files - self.explained, 1)

    def strides(self, max_strides: int) -> NDArray[np.int64]:
        """The most frequent differences over pairs with a free end, most frequent first."""
        self.live = strides = self.live[self.pair_counts[self.live] >= 2]
        return strides[np.lexsort((strides, -self.pair_counts[strides]))][:max_strides]

    def available(self, stride: int) -> NDArray[np.bool_]:
        """Indices a chain of ``stride`` may use: in no series of a multiple or divisor of it."""
        if (blocked := self.blocked.get(stride)) is None:
            blocked = np.zeros(self.indices.size, dtype=bool)
            for taken_stride, taken in self.taken_by.items():
                if _related(stride, taken_stride):
                    blocked[taken] = True
        return ~blocked

    def _order(self, stride: int) -> _Order:
        if (cached := self.orders.get(stride)) is None:
            residue = self.indices % stride
            # Indices ascend, so terms ascend within a residue: a stable sort by residue orders
            # them as the reference's (residue, term) sort; a 16-bit key sorts in one radix pass.
            order = np.argsort(residue.astype(np.uint16) if stride <= 1 << 16 else residue, kind="stable")
            residue = residue[order]
            firsts = np.flatnonzero(residue[1:] != residue[:-1]) + 1
            starts = np.concatenate([[0], firsts, [residue.size]]).astype(np.int32)
            cached = self.orders[stride] = _Order(order.astype(np.int32), stride, self.indices,
                                                  residue[starts[:-1]], starts)
        return cached

    def _cut(self, positions: NDArray[Any], residue: NDArray[np.int64], term: NDArray[np.int64]) -> _Chains:
        """The qualifying chains of ``positions`` (whole residues, in (residue, term) order)."""
        breaks = np.flatnonzero((np.diff(residue) != 0) | (np.diff(term) > self.max_gap + 1)) + 1
        starts = np.concatenate([[0], breaks]).astype(np.int64)
        ends = np.concatenate([breaks, [residue.size]]).astype(np.int64)
        present = ends - starts
        terms = term[ends - 1] - term[starts] + 1 if residue.size else present
        keep = (present >= self.min_count) & (present >= self.min_fill * terms)
        members = positions[np.repeat(keep, present)]
        starts, present, terms = starts[keep], present[keep], terms[keep]
        begins = np.cumsum(present) - present
        taken = (np.add.reduceat(self.taken_any[members].astype(np.int64), begins) if members.size
                 else np.zeros(0, dtype=np.int64))
        chains = _Chains(key=residue[starts] * (self.n_files + 1) + self.indices[positions[starts]],
                         last=self.indices[members[begins + present - 1]].astype(np.int32),
                         starts=begins.astype(np.int32), present=present.astype(np.int32),
                         terms=terms.astype(np.int32), taken=taken.astype(np.int32),
                         members=members.astype(np.int32), used=members.size, live_members=members.size)
        chains.sort()
        return chains

    def _chains_of(self, stride: int) -> _Chains:
        if (cached := self.chains.get(stride)) is None:
            order = self._order(stride)
            self.blocked[stride] = ~self.available(stride)
            usable = ~self.blocked[stride][order.positions]
            cached = self.chains[stride] = self._cut(order.positions[usable], order.residue()[usable],
                                                     order.term()[usable])
        return cached

    def _recut(self, stride: int, chain: NDArray[np.int64]) -> None:
        """Cut ``stride``'s chains again in the residues where ``chain`` (just taken by a
        related stride) takes indices it could use."""
        chains, order = self.chains[stride], self._order(stride)
        blocked = self.blocked[stride]
        newly = chain[~blocked[chain]]
        if newly.size == 0:
            return
        blocked[newly] = True
        residues = np.unique(self.indices[newly] % stride)
        at = np.searchsorted(order.residue_values, residues)  # each is there: newly are indices
        lo = order.residue_starts[at].astype(np.int64)
        span = order.residue_starts[at + 1] - lo
        picked = np.repeat(lo - (np.cumsum(span) - span), span) + np.arange(int(span.sum()))
        positions = order.positions[picked]
        usable = ~blocked[positions]
        chains.kill(chains.in_residues(residues, self.n_files))
        fresh_from = chains.key.size
        chains.append(self._cut(positions[usable], order.residue(picked)[usable], order.term(picked)[usable]))
        if chains.live_members * 2 < chains.used:  # mostly dead: compact
            live = np.flatnonzero(chains.taken != _DEAD)
            present = chains.present[live]
            gather = np.repeat(chains.starts[live] - (np.cumsum(present) - present), present) \
                + np.arange(int(present.sum()))
            self.chains[stride] = chains = _Chains(
                key=chains.key[live], last=chains.last[live], starts=(np.cumsum(present) - present).astype(np.int32),
                present=present, terms=chains.terms[live], taken=chains.taken[live],
                members=chains.members[gather], used=int(present.sum()), live_members=int(present.sum()))
            chains.sort()
        else:
            chains.merge(fresh_from)

    def _count_taken(self, stride: int, newly: NDArray[np.int64]) -> None:
        """Count ``newly`` taken positions in the chains of ``stride`` that hold them (a chain
        holds every usable index of its residue between its first and last member)."""
        chains = self.chains[stride]
        if chains.by_key.size == 0:
            return
        values = self.indices[newly]
        residue = values % stride
        at = np.searchsorted(chains.sorted_key, residue * (self.n_files + 1) + values, side="right") - 1
        chain = chains.by_key[np.maximum(at, 0)]
        inside = ((at >= 0) & (chains.key[chain] // (self.n_files + 1) == residue)
                  & (chains.last[chain] >= values) & ~self.blocked[stride][newly])
        chain = chain[inside]
        was_open = chains.taken[chain] * 2 <= chains.present[chain]
        np.add.at(chains.taken, chain, 1)
        if (was_open & (chains.taken[chain] * 2 > chains.present[chain])).any():
            chains.opened = None  # a chain closed (taken counts only grow: none opens)

    def best_chain(self, strides: NDArray[np.int64], density: float
                   ) -> tuple[float, int, NDArray[np.int64]] | None:
        """The chain of available indices least likely by chance: (log expectation, stride,
        positions into the indices), or None when no chain qualifies."""
        for stale in set(self.chains) - set(strides.tolist()):
            del self.chains[stale], self.orders[stale], self.blocked[stale]  # memory: the strides in play
        eligible = []  # per stride (in order): (stride, chains, open chain numbers, their distinct pairs)
        for stride in strides.tolist():
            chains = self._chains_of(stride)
            open_chains, pairs = chains.open_pairs()  # else mostly another series' (or dead)
            if open_chains.size:
                eligible.append((stride, chains, open_chains, pairs))
        if not eligible:
            return None
        # A chain's chance is its (members, span)'s: each distinct pair valued once, as over every chain
        pairs = np.unique(np.concatenate([p for *_, p in eligible]))
        value = _least_chance_values(pairs >> 32, pairs & _PAIR_LOW, density, self.n_files)
        least = float(np.nanmin(value))
        for stride, chains, open_chains, mine in eligible:
            if not (value[np.searchsorted(pairs, mine)] == least).any():
                continue
            chain_pairs = _pair_keys(chains.present[open_chains], chains.terms[open_chains])
            hits = open_chains[value[np.searchsorted(pairs, chain_pairs)] == least]
            if hits.size:
                chain = int(hits[np.argmin(chains.key[hits])])
                begin = int(chains.starts[chain])
                return least, int(stride), chains.members[begin:begin + int(chains.present[chain])].astype(np.int64)
        raise AssertionError("the least chain is among the eligible ones")

    def accept(self, stride: int, chain: NDArray[np.int64]) -> None:
        """Mark ``chain`` (positions) as a series of ``stride``; update what depends on it."""
        newly = chain[~self.taken_any[chain]]
        self.taken_by[stride] = np.concatenate([self.taken_by.get(stride, np.zeros(0, dtype=np.int64)), chain])
        self.taken_any[chain] = True
        self.explained += int(newly.size)
        for cached in self.chains:
            if _related(cached, stride):
                self._recut(cached, chain)  # its usable indices changed in these residues
            elif newly.size:
                self._count_taken(cached, newly)
        if newly.size == 0:
            return
        # Pairs this chain closes (both ends taken now, one of them just now): counted once, from
        # the newly taken end, or from the lower end when both are new.
        is_new = np.zeros(self.indices.size, dtype=bool)
        is_new[newly] = True
        size = self.indices.size
        reach = min(self.reach, size - 1)
        offsets = np.concatenate([np.arange(-reach, 0), np.arange(1, reach + 1)])
        for first in range(0, newly.size, _PAIR_ROWS):  # a long chain's pairs a slice at a time
            part = newly[first:first + _PAIR_ROWS]
            other = part[:, None] + offsets[None, :]
            mine = np.broadcast_to(part[:, None], other.shape)
            inside = (other >= 0) & (other < size)
            other, mine, offset = other[inside], mine[inside], np.broadcast_to(offsets, inside.shape)[inside]
            shut = self.taken_any[other] & ~(is_new[other] & (offset < 0))
            closed = np.abs(self.indices[other[shut]] - self.indices[mine[shut]])
            strides, counts = np.unique(closed, return_counts=True)
            self.pair_counts[strides] -= counts


_PAIR_LOW = (1 << 32) - 1


def _pair_keys(present: NDArray[np.integer], terms: NDArray[np.integer]) -> NDArray[np.int64]:
    """(members, span) as one key ordered as the pairs (both below 2^31: counts of files)."""
    return (present.astype(np.int64) << 32) | terms.astype(np.int64)


#: Newly taken members whose pairs are counted at once (x 128 neighbours x 8 bytes, a few arrays).
_PAIR_ROWS = 2048


#: A pair's lower bound must beat the best exact value by this much (relative) to be skipped:
#: far more than the rounding of either, so the choice is the exact one.
_BOUND_SLACK = 1e-6


def _least_chance_values(present: NDArray[np.int64], terms: NDArray[np.int64], density: float,
                         n_files: int) -> NDArray[np.float64]:
    """:func:`_chance_log_expectation` of each chain where it may be the least, +inf where a
    lower bound shows it is not; each distinct (present, terms) valued once."""
    width = int(terms.max()) + 1
    keys, inverse = np.unique(present * width + terms, return_inverse=True)
    pairs = np.stack([keys // width, keys % width])
    bound = _chance_lower_bound(pairs[0], pairs[1], density, n_files)
    exact = np.full(pairs.shape[1], np.inf)
    best = math.inf
    for pair in np.argsort(bound, kind="stable").tolist():
        if bound[pair] > best + _BOUND_SLACK * max(1.0, abs(best)):
            break  # bounds ascend: no later pair can reach the best
        exact[pair] = _chance_log_expectation(int(pairs[0, pair]), int(pairs[1, pair]), density, n_files)
        best = min(best, float(exact[pair]))
    return exact[inverse]


def _chance_lower_bound(present: NDArray[np.int64], terms: NDArray[np.int64], density: float,
                        n_files: int) -> NDArray[np.float64]:
    """A lower bound of :func:`_chance_log_expectation`: the binomial tail P(X > k) is at least
    its first term P(X = k + 1)."""
    density = min(max(density, 1e-12), 1.0 - 1e-12)
    placements = np.maximum(n_files * n_files / (2.0 * np.maximum(terms - 1, 1)), 1.0)
    k, n = present - 3, terms - 2
    lgamma = np.frompyfunc(math.lgamma, 1, 1)
    first = k + 1
    whole = np.maximum(n, 0) + 1, np.maximum(first, 0) + 1, np.maximum(n - first, 0) + 1  # lgamma's domain
    log_pmf = (lgamma(whole[0]) - lgamma(whole[1]) - lgamma(whole[2])).astype(np.float64) \
        + first * math.log(density) + (n - first) * math.log1p(-density)
    middle = np.where(terms > 2, np.where(k < 0, 0.0, np.where(k >= n, -np.inf, np.minimum(log_pmf, 0.0))), 0.0)
    return np.log(placements) + 2.0 * math.log(density) + middle


def _extended(indices: NDArray[np.int64], available: NDArray[np.bool_], chain: NDArray[np.int64],
              stride: int, max_gap: int) -> NDArray[np.int64]:
    """The chain with the available indices that continue it at its stride on either side
    (skipping up to ``max_gap`` terms): members a coarser chain search had left out."""
    members = [int(p) for p in chain]
    chosen = set(members)

    def position(value: int) -> int | None:
        p = int(np.searchsorted(indices, value))
        return p if p < indices.size and indices[p] == value and available[p] and p not in chosen else None

    for direction in (-1, 1):
        end = int(indices[members[0] if direction < 0 else members[-1]])
        while True:
            step = next((k for k in range(1, max_gap + 2) if position(end + direction * k * stride) is not None),
                        None)
            if step is None:
                break
            end += direction * step * stride
            p = position(end)
            assert p is not None
            members.append(p)
            chosen.add(p)
    return np.array(sorted(members, key=lambda p: int(indices[p])), dtype=np.int64)


def _sparsest_part(indices: NDArray[np.int64], log_chance: float, stride: int,
                   chain: NDArray[np.int64], *, density: float, n_files: int, log_alpha: float
                   ) -> tuple[float, int, NDArray[np.int64]]:
    """The chain, or every k-th of its terms (k = 2, 3) when those are nearly all slow and the
    others mostly not: XFS's 64-file chunk series plus a weaker effect halfway between is
    the 64-series, not a 32-series with gaps."""
    values = indices[chain]
    terms = (values - values[0]) // stride
    for k in (2, 3):
        for phase in range(k):
            mine = (terms - phase) % k == 0
            if mine.sum() < 3:
                continue
            span_mine = int((terms[mine][-1] - terms[mine][0]) // k) + 1
            others = ~mine
            span_others = max(1, int(terms[-1] - terms[0]) + 1 - span_mine)
            fill_mine, fill_others = mine.sum() / span_mine, others.sum() / span_others
            part_chance = _chance_log_expectation(int(mine.sum()), span_mine, density, n_files)
            if fill_mine >= 0.85 and fill_others <= 0.6 and part_chance < log_alpha:
                return part_chance, stride * k, chain[mine]
    return log_chance, stride, chain


def local_ratio(curve_ns: ArrayLike, block_files: int = BASELINE_BLOCK_FILES) -> NDArray[np.float64]:
    """Each file's median latency over the median curve around it (the higher median of the
    neighbouring blocks, as for an outlier): 1.0 is typical, NaN where nothing was measured."""
    curve = np.asarray(curve_ns, dtype=np.float64)
    if curve.size == 0:
        return curve.copy()
    baseline = block_neighbourhood(block_medians(curve, block_files))  # per block, a chunk at a time
    out = np.empty(curve.size)
    for part in chunks(curve.size, block_files):
        with np.errstate(invalid="ignore", divide="ignore"):
            np.divide(curve[part], _file_baseline(baseline, part, block_files), out=out[part])
    return out


#: A series candidate is also a peak: its median above the lower of the adjacent files' by
#: this factor. A structural call is one slow call (possibly next to another structure's:
#: XFS's block->leaf at 124 beside the chunk at 125); the inside of a stretch of slow files
#: (a burst of load across the runs, a slowly filling leaf) is not a series member.
PEAK_RATIO = 1.1


def median_ratio_candidates(curve_ns: ArrayLike, ratio: float,
                            block_files: int = BASELINE_BLOCK_FILES) -> list[int]:
    """Files whose per-file median is at least ``ratio`` x the curve around them and a peak
    (:data:`PEAK_RATIO` x the lower adjacent file)."""
    curve = np.asarray(curve_ns, dtype=np.float64)
    if curve.size == 0:
        return []
    baseline = block_neighbourhood(block_medians(curve, block_files))
    found = []
    for part in chunks(curve.size, block_files):  # a chunk at a time: a million files' temporaries add up
        lo, hi = part.start, part.stop
        mine = curve[part]
        before = curve[lo - 1:hi - 1] if lo > 0 else np.concatenate([[np.nan], curve[lo:hi - 1]])
        after = curve[lo + 1:hi + 1] if hi < curve.size else np.concatenate([curve[lo + 1:hi], [np.nan]])
        adjacent = np.fmin(before, after)
        with np.errstate(invalid="ignore", divide="ignore"):
            peak = np.where(np.isnan(adjacent), np.inf, mine / adjacent) >= PEAK_RATIO
            ratio_ok = mine / _file_baseline(baseline, part, block_files) >= ratio
        found.append(np.flatnonzero(ratio_ok & peak) + lo)
    return np.concatenate(found).tolist()


def _tiered_series(outliers: list[int], curve_ns: NDArray[np.float64], candidates: list[int] | None, *,
                   factor: float, block_files: int, min_count: int, n_files: int, alpha: float) -> list[Series]:
    """Series among all candidates, then those among the strong ones only (outliers, and
    medians ``factor`` x the curve around them) that the first search missed: under load
    ~10 % of files reach the 1.25x bar, a density at which XFS's six data-block allocations
    (each > 2x) are no longer unlikely as a chain, while among the few strong files they are.
    Each search gets half of ``alpha`` (Bonferroni)."""
    if candidates is None:
        return periodic_series(outliers, min_count=min_count, n_files=n_files, alpha=alpha)
    found = periodic_series([*outliers, *candidates], min_count=min_count, n_files=n_files, alpha=alpha / 2)
    taken = {(m, s.stride) for s in found for m in s.members}
    strong = [s for s in periodic_series([*outliers, *median_ratio_candidates(curve_ns, factor, block_files)],
                                         min_count=min_count, n_files=n_files, alpha=alpha / 2)
              if sum((m, s.stride) in taken for m in s.members) * 2 < len(s.members)]  # not found already
    return sorted([*found, *strong], key=lambda s: (s.start, s.stride))


# --------------------------------------------------------------------------------------------
# Everything at once


@dataclass(frozen=True)
class ProbeAnalysis:
    """All findings of one latency matrix; ``to_json()`` is the output contract."""

    runs: int
    files: int
    stats: dict  # overall, per_run, low_high, low_high_per_run
    outliers: tuple[Outlier, ...]
    #: slow in enough runs for the 80 % rule but not beyond chance at this many runs (settings'
    #: ``outlier_chance`` says how many would decide): not flags; the sequential test's candidates
    inconclusive_outliers: tuple[Outlier, ...]
    noise_count: int  # files slow in some run but not in enough runs to be structural
    #: repeatable above the series bar only: candidates of the series search, not flags
    weak_outliers: tuple[Outlier, ...]
    series: tuple[Series, ...]
    level_shifts: tuple[LevelShift, ...]
    linear_growth: tuple[LinearGrowth, ...]
    settings: dict  # thresholds actually used, so a report can say how a flag was decided
    median_curve_ns: NDArray[np.float64] = field(repr=False, compare=False)
    #: what the permuted worlds took back (nullgate.Gated.to_json)
    null_gate: dict = field(default_factory=dict, compare=False)

    def to_json(self, *, include_curve: bool = False) -> dict:
        """Plain dicts/lists/numbers; the per-file median curve only on request (it is N long)."""
        payload = {
            "runs": self.runs,
            "files": self.files,
            "stats": self.stats,
            "outliers": [{**to_dict(o), "ratio": o.ratio} for o in self.outliers],
            "inconclusive_outliers": [{**to_dict(o), "ratio": o.ratio} for o in self.inconclusive_outliers],
            "noise_count": self.noise_count,
            "weak_outliers": [{**to_dict(o), "ratio": o.ratio} for o in self.weak_outliers],
            "series": [to_dict(s) for s in self.series],
            "level_shifts": [to_dict(s) for s in self.level_shifts],
            "linear_growth": [to_dict(g) for g in self.linear_growth],
            "settings": self.settings,
            "null_gate": self.null_gate,
        }
        if include_curve:
            payload["median_curve_ns"] = [None if math.isnan(v) else v for v in self.median_curve_ns.tolist()]
        return payload


def analyze(
    matrix: ArrayLike,
    *,
    factor: float = DEFAULT_OUTLIER_FACTOR,
    min_runs: int | None = None,
    min_fraction: float = DEFAULT_MIN_FRACTION,
    block_files: int = BASELINE_BLOCK_FILES,
    split_factor: float = DEFAULT_SPLIT_FACTOR,
    series_min_count: int = 3,
    series_alpha: float = 0.01,
    series_factor: float = DEFAULT_SERIES_FACTOR,
    series_ratio: float | None = DEFAULT_SERIES_RATIO,
    shift_min_ratio: float = 1.2,
    growth_min_ratio: float = 1.2,
    growth_min_files: int = 32,
    growth_min_r2: float = 0.3,
    min_z: float = 5.0,
    segment_knobs: SegmentKnobs = DEFAULT_KNOBS,
    wait_ns: ArrayLike | None = None,
    null_worlds: int = NULL_WORLDS,
    gate_levels: bool = False,
    outlier_alpha: float | None = OUTLIER_ALPHA,
) -> ProbeAnalysis:
    """Statistics, repeatable outliers, series, level shifts and linear growth of a probe.

    The series search runs over the outliers plus the files whose median over the runs is
    ``series_ratio`` x the median curve around them (from 3 runs on; None turns that off);
    ``weak_outliers`` are the files above ``series_factor`` x their local baseline in as
    many runs as an outlier needs (at least 3); see the module doc. Series, shifts and ramps
    stand only against ``null_worlds`` permuted worlds (:mod:`fsscope.analysis.nullgate`; 0:
    ungated), shifts and ramps only with ``gate_levels`` (a segmentation per world: the
    probe's final analysis, not every run's). ``wait_ns`` (runs x files,
    each call's time waiting for a CPU): calls the machine disturbed do not vote
    (:func:`mask_disturbed`); the stats still describe every measured call. The work is
    :class:`RunningAnalysis`'s, its runs folded in one after another.
    """
    knobs = Knobs(factor=factor, min_runs=min_runs, min_fraction=min_fraction, block_files=block_files,
                  split_factor=split_factor, series_min_count=series_min_count, series_alpha=series_alpha,
                  series_factor=series_factor, series_ratio=series_ratio, shift_min_ratio=shift_min_ratio,
                  growth_min_ratio=growth_min_ratio, growth_min_files=growth_min_files,
                  growth_min_r2=growth_min_r2, min_z=min_z, segment_knobs=segment_knobs,
                  outlier_alpha=outlier_alpha)
    return RunningAnalysis(knobs).update(matrix, wait_ns=wait_ns, null_worlds=null_worlds, gate_levels=gate_levels)


@dataclass(frozen=True)
class Knobs:
    """The settings of :func:`analyze` (its keywords, the same defaults)."""

    factor: float = DEFAULT_OUTLIER_FACTOR
    min_runs: int | None = None
    min_fraction: float = DEFAULT_MIN_FRACTION
    block_files: int = BASELINE_BLOCK_FILES
    split_factor: float = DEFAULT_SPLIT_FACTOR
    series_min_count: int = 3
    series_alpha: float = 0.01
    series_factor: float = DEFAULT_SERIES_FACTOR
    series_ratio: float | None = DEFAULT_SERIES_RATIO
    shift_min_ratio: float = 1.2
    growth_min_ratio: float = 1.2
    growth_min_files: int = 32
    growth_min_r2: float = 0.3
    min_z: float = 5.0
    segment_knobs: SegmentKnobs = DEFAULT_KNOBS
    outlier_alpha: float | None = OUTLIER_ALPHA

    @property
    def mask_bar(self) -> float:
        """A call above this multiple of its local baseline, and not without its CPU wait, is
        disturbed (:func:`mask_disturbed`)."""
        return min(self.factor, self.series_factor)


class RunningAnalysis:
    """:func:`analyze` of a probe's runs so far, carried from run to run instead of restarted.

    Each run is folded in once (:meth:`extend`), a chunk of files at a time: its statistics,
    its disturbed calls (against its own block baselines), its block baselines after masking
    them, each file's count of runs measured, slow (``factor``) and weakly slow
    (``series_factor``). :meth:`update` folds in the runs it has not seen and makes the
    analysis of them all from that state; what it needs of single runs -- the median curve,
    the values of the files that are outliers, a window a level shift is checked on -- it
    reads back from the matrices, a chunk of files (or those files only) at a time. Memory: a
    few per-file arrays, not copies of the matrix; the matrices' mapped pages
    are dropped after each read (:func:`fsscope.analysis.running.release`).

    The matrices given to :meth:`update` must hold the runs already folded in as their first
    rows (the probe's run arrays, growing); other files, fewer rows, or a wait matrix given
    where none was (or the reverse) start again from scratch.
    """

    def __init__(self, knobs: Knobs | None = None, capacity_runs: int = 0):
        self.knobs = knobs or Knobs()
        self.capacity_runs = capacity_runs
        self._start(0, "none")

    def _start(self, files: int, mode: str) -> None:
        self.files, self.mode, self.runs = files, mode, 0
        self.valid = np.zeros(files, dtype=np.uint16)  # per file: runs measured (undisturbed)
        self.flag_counts = np.zeros(files, dtype=np.uint16)  # runs: a probe makes at most thousands
        self.weak_counts = np.zeros(files, dtype=np.uint16)
        self.summary = RunningSummary()
        self.per_run: list[dict] = []
        self.low_high_per_run: list[dict] = []
        self.disturbed: list[int] = []
        self.slow_calls: list[int] = []      # per run: calls slow (``factor``) among the measured
        self.measured_calls: list[int] = []  # per run: calls measured and not disturbed
        self.disturbed_bits: list[NDArray[np.uint8]] = []   # per run, per file (packed): disturbed
        self.baselines: list[NDArray[np.float64]] = []      # per run, per block, after masking
        #: (runs, what :meth:`update` found of them before any null world): the probe's report
        #: analyses the runs the analysis after the last run just did, held to the worlds
        self.analysed: tuple[int, tuple] | None = None

    def extend(self, matrix: ArrayLike, wait_ns: ArrayLike | None = None) -> tuple[NDArray, NDArray | None]:
        """Fold in the runs of ``matrix`` not folded in yet; the matrices as read."""
        latency_matrix = np.atleast_2d(np.asanyarray(matrix))
        if latency_matrix.ndim != 2:
            raise ValueError(f"latency matrix must be 2-D (runs x files), got shape {latency_matrix.shape}")
        wait = None if wait_ns is None else np.atleast_2d(np.asanyarray(wait_ns))
        mode = "none" if wait is None else "mask" if wait.shape == latency_matrix.shape else "ignored"
        runs, files = latency_matrix.shape
        if files != self.files or mode != self.mode or runs < self.runs:
            self._start(files, mode)
        for r in range(self.runs, runs):
            self._add(latency_matrix[r], wait[r] if mode == "mask" and wait is not None else None)
        return latency_matrix, wait

    def _add(self, latency_row: NDArray, wait_row: NDArray | None) -> None:
        """Fold in one run, read a chunk of files at a time (three passes: the blocks' medians
        before masking, the disturbed calls and the medians after, then the per-file state)."""
        k, bf = self.knobs, self.knobs.block_files
        blocks = -(-self.files // bf)

        def parts() -> Iterator[tuple[slice, NDArray[np.int64], NDArray[np.float64]]]:
            for part in chunks(self.files, bf):
                raw = read_part(latency_row, part)
                yield part, raw, as_float_row(raw)

        run_summary = RunningSummary()
        raw_median = np.empty(blocks)
        for part, raw, latency in parts():
            run_summary.add(raw)
            self.summary.add(raw)
            raw_median[part.start // bf:-(-part.stop // bf)] = block_medians(latency, bf)
        overall, low_high = run_summary.summaries(
            k.split_factor, lambda: (read_part(latency_row, part) for part in chunks(self.files, bf)))
        self.per_run.append(overall)
        self.low_high_per_run.append(low_high)
        del run_summary
        raw_baseline = block_neighbourhood(raw_median) if blocks else np.zeros(0)
        disturbed_bits = np.zeros(self.files, dtype=bool)
        masked_median = raw_median  # filled again, block by block, after masking
        for part, _, latency in parts():
            if wait_row is not None:
                limit_ns = k.mask_bar * _file_baseline(raw_baseline, part, bf)
                wait = np.clip(read_part(wait_row, part).astype(np.float64), 0, None)
                with np.errstate(invalid="ignore"):
                    hit = (latency > limit_ns) & (latency - wait <= limit_ns)
                disturbed_bits[part] = hit
                latency[hit] = np.nan
            masked_median[part.start // bf:-(-part.stop // bf)] = block_medians(latency, bf)
        baseline = block_neighbourhood(masked_median) if blocks else np.zeros(0)
        del raw_baseline, masked_median, raw_median
        slow_calls = measured_calls = 0
        for part, _, latency in parts():
            latency[disturbed_bits[part]] = np.nan
            typical_ns = _file_baseline(baseline, part, bf)
            with np.errstate(invalid="ignore"):
                slow = latency > k.factor * typical_ns  # NaN compares False: unmeasured never flags
                self.weak_counts[part] += latency > k.series_factor * typical_ns
            self.flag_counts[part] += slow
            slow_calls += int(np.count_nonzero(slow))
            measured = ~np.isnan(latency)
            measured_calls += int(np.count_nonzero(measured))
            self.valid[part] += measured
        self.disturbed.append(int(np.count_nonzero(disturbed_bits)))
        self.disturbed_bits.append(np.packbits(disturbed_bits))
        self.slow_calls.append(slow_calls)
        self.measured_calls.append(measured_calls)
        self.baselines.append(baseline)
        self.runs += 1

    def masked_columns(self, latency_matrix: NDArray, wait: NDArray | None, indices: NDArray[np.int64]
                       ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """runs x len(indices): the files' latencies as the analysis sees them (NaN: not
        measured or disturbed), and their local baselines (after masking), read back."""
        bf = self.knobs.block_files
        values = np.empty((self.runs, indices.size))
        typical = np.empty((self.runs, indices.size))
        blocks = indices // bf
        for r in range(self.runs):
            view = latency_matrix[r]
            raw = np.asarray(view[indices], dtype=np.int64)
            release(view)
            values[r] = raw
            disturbed = (self.disturbed_bits[r][indices >> 3] >> (7 - (indices & 7))) & 1
            values[r, (raw < 0) | (disturbed == 1)] = np.nan
            typical[r] = self.baselines[r][blocks]
        return values, typical

    def outliers_at(self, latency_matrix: NDArray, wait: NDArray | None, indices: NDArray[np.int64], *,
                    factor: float, needed: NDArray[np.int64]) -> list[Outlier]:
        """The files at ``indices`` slow (``factor`` x their baseline) in ``needed`` runs each,
        as :func:`repeatable_outliers` reports them."""
        if indices.size == 0:
            return []
        latency, typical_ns = self.masked_columns(latency_matrix, wait, indices)
        with np.errstate(invalid="ignore"):
            flags = latency > factor * typical_ns
        scan = _OutlierScan(flags=flags, baseline_ns=typical_ns, flag_counts=flags.sum(axis=0), needed_runs=needed)
        found, _ = _outliers_from_scan(latency, scan)
        return [replace(o, index=int(indices[o.index])) for o in found]

    def median_curve(self, latency_matrix: NDArray, wait: NDArray | None) -> NDArray[np.float64]:
        """Each file's median over the runs that measured it (undisturbed), NaN where none did:
        read back from the matrices a chunk of files at a time. A sorted store of every value
        kept between runs (4 bytes a call, 40 MB at 10 x 1,000,000) was the largest part of
        the analysis' memory; reading the runs again costs about what inserting into it did."""
        curve = np.full(self.files, np.nan)
        for part in chunks(self.files, 8):  # whole bytes of the packed disturbed bits
            values = np.empty((part.stop - part.start, self.runs))
            for r in range(self.runs):
                raw = read_part(latency_matrix[r], part)
                disturbed = np.unpackbits(self.disturbed_bits[r][part.start // 8:-(-part.stop // 8)],
                                          count=raw.size).astype(bool)
                column = values[:, r]
                column[:] = raw
                column[(raw < 0) | disturbed] = np.nan
            curve[part] = nanmedian_last_axis(values)
        return curve

    def update(self, matrix: ArrayLike, wait_ns: ArrayLike | None = None, *, null_worlds: int = NULL_WORLDS,
               gate_levels: bool = False) -> ProbeAnalysis:
        """Fold in the new runs of ``matrix`` (and ``wait_ns``), then analyse every run so far
        (held to ``null_worlds`` permuted worlds as :func:`analyze` says)."""
        latency_matrix, wait = self.extend(matrix, wait_ns)
        k, runs, files = self.knobs, self.runs, self.files
        ratio = k.series_ratio if runs >= SERIES_MIN_RUNS else None  # too few runs for a median to judge

        def structure(matrix_ns: Any, outlier_indices: list[int], curve: NDArray[np.float64],
                      alpha: float | None, levels: bool) -> Found:
            """Series (None: no search), level shifts and ramps of a matrix and its median curve."""
            candidates = median_ratio_candidates(curve, ratio, k.block_files) if ratio is not None else None
            series = [] if alpha is None else _tiered_series(
                outlier_indices, curve, candidates, factor=k.factor, block_files=k.block_files,
                min_count=k.series_min_count, n_files=files, alpha=alpha)
            del candidates
            if not levels:
                return Found(series, [], [], curve)
            # The outliers are reported on their own; masking them keeps a slow file right at a
            # boundary (ext4's file 253) from shifting the cut by one.
            level_curve_ns = _without(curve, outlier_indices)
            segmentation = _segment_curve(level_curve_ns, k.segment_knobs)
            runs_check = _RunsCheck(latency_ns=matrix_ns, excluded=np.isnan(level_curve_ns),
                                    min_runs=k.min_runs, min_fraction=k.min_fraction)
            del level_curve_ns
            shifts = [] if segmentation is None else _level_shifts_from(
                segmentation, min_ratio=k.shift_min_ratio, min_z=k.min_z, runs_check=runs_check)
            growth = [] if segmentation is None else _linear_growth_from(
                segmentation, min_growth_ratio=k.growth_min_ratio, min_files=k.growth_min_files,
                min_r2=k.growth_min_r2, min_z=k.min_z, runs_check=runs_check)
            return Found(series, shifts, growth, curve)

        masked = _MaskedRuns(self, latency_matrix, wait)
        if self.analysed is None or self.analysed[0] != runs:  # the same runs: the same findings
            self.analysed = None  # its memory back before this analysis' peak
            self.analysed = runs, self._findings(latency_matrix, wait, masked, structure)
        stats, chance, outliers, unsure, weak, noise_count, curve_ns, found = self.analysed[1]
        stats = copy.deepcopy(stats)  # each analysis its own (a report may amend its stats)

        def null_search(matrix_ns: NDArray, least_chance: float | None, levels: bool) -> Found:
            """The same analysis of a null world (its series only as unlikely as ``least_chance``).
            From 3 runs on its outliers are left to its median candidates, which hold them (a file
            slow in 80 % of the runs has its median there): the scan cost a third of each world."""
            null_outliers: list[Outlier] = []
            if ratio is None:
                null_latency = as_float_matrix(matrix_ns)
                null_outliers, _ = _outliers_from_scan(null_latency, _scan_outliers(  # as ``repeating``
                    null_latency, factor=k.factor, min_runs=k.min_runs, min_fraction=k.min_fraction,
                    block_files=k.block_files, alpha=None))
            alpha = None if least_chance is None else 2 * least_chance * (1 + 1e-9)  # each tier searches at alpha / 2
            return structure(matrix_ns, [o.index for o in null_outliers], median_curve(matrix_ns), alpha, levels)

        # The null worlds permute the masked matrix whole: made only when a finding is held to them.
        # (gate reads its shape and its rows, what _MaskedRuns gives of the matrix it stands for)
        gated = gate(masked, found, null_search, worlds=null_worlds,  # type: ignore[arg-type]
                     levels=gate_levels) if null_worlds else None
        series, shifts, growth = (found.series, found.level_shifts, found.linear_growth) if gated is None else (
            gated.series, gated.level_shifts, gated.linear_growth)
        settings = {
            "outlier_factor": k.factor,
            "min_runs": k.min_runs,
            "min_fraction": k.min_fraction if k.min_runs is None else None,
            "block_files": k.block_files,
            "split_factor": k.split_factor,
            "series_min_count": k.series_min_count,
            "series_alpha": k.series_alpha,
            "series_factor": k.series_factor if runs >= SERIES_MIN_RUNS and k.series_factor < k.factor else None,
            "series_ratio": ratio,
            "shift_min_ratio": k.shift_min_ratio,
            "growth_min_ratio": k.growth_min_ratio,
            "min_z": k.min_z,
            "single_run": runs == 1,
            "outlier_chance": None if chance is None else chance.to_json(runs, k.min_fraction),
            "disturbed_calls_per_run": (None if self.mode == "none" else list(self.disturbed)),
        }
        null_gate = {} if gated is None else gated.to_json()  # {}: not held to null worlds (null_worlds=0)
        return ProbeAnalysis(
            runs=runs, files=files, stats=stats, outliers=tuple(outliers), inconclusive_outliers=tuple(unsure),
            noise_count=noise_count,
            weak_outliers=tuple(weak), series=tuple(series), level_shifts=tuple(shifts),
            linear_growth=tuple(growth),
            settings=settings, median_curve_ns=curve_ns, null_gate=null_gate,
        )

    def _findings(self, latency_matrix: NDArray, wait: NDArray | None, masked: _MaskedRuns,
                  structure: Callable[[Any, list[int], NDArray[np.float64], float | None, bool], Found]) -> tuple:
        """What :meth:`update` finds of the runs folded in before any null world: (stats,
        outlier chance, outliers, inconclusive ones, weak ones, noise count, median curve, the
        structure found)."""
        k, runs, files = self.knobs, self.runs, self.files

        def rows() -> Iterator[NDArray[np.int64]]:
            return (read_row(latency_matrix, r) for r in range(runs))

        overall, low_high = self.summary.summaries(k.split_factor, rows)
        stats = {"overall": overall, "per_run": list(self.per_run), "low_high": low_high,
                 "low_high_per_run": list(self.low_high_per_run)}
        chance = None
        if runs and files:
            # per file from a table over its count of measured runs (0..runs): no float copies
            base_table = needed_runs(np.arange(runs + 1), runs, k.min_runs, k.min_fraction)
            chance = outlier_chance(base_table, runs, self.flag_counts, self.valid, sum(self.slow_calls),
                                    sum(self.measured_calls), k.outlier_alpha)
            needed = base_table.astype(np.uint16)[self.valid]  # the 80 % rule
            flagged_somewhere = self.flag_counts > 0
            repeatable = flagged_somewhere & (self.flag_counts >= needed)
            noise_count = int(np.count_nonzero(flagged_somewhere & ~repeatable))
            beyond = chance.needed.astype(np.uint16)[self.valid]
            indices = np.flatnonzero(repeatable & (self.flag_counts >= beyond))
            outliers = self.outliers_at(latency_matrix, wait, indices, factor=k.factor, needed=beyond[indices].astype(np.int64))
            # repeatable by the 80 % rule but not beyond chance at this many runs: not flags
            # (more runs decide them), still the sequential test's candidates and the series'
            indices = np.flatnonzero(repeatable & (self.flag_counts < beyond))
            unsure = self.outliers_at(latency_matrix, wait, indices, factor=k.factor, needed=needed[indices].astype(np.int64))
            weak: list[Outlier] = []
            if k.series_factor < k.factor and runs >= SERIES_MIN_RUNS:
                weak_needed = np.maximum(needed, SERIES_MIN_RUNS)
                indices = np.flatnonzero((self.weak_counts > 0) & (self.weak_counts >= weak_needed))
                strong = {o.index for o in outliers} | {o.index for o in unsure}
                weak = [o for o in self.outliers_at(latency_matrix, wait, indices, factor=k.series_factor,
                                                    needed=weak_needed[indices].astype(np.int64)) if o.index not in strong]
            del needed, beyond, flagged_somewhere, repeatable, indices
            curve_ns = self.median_curve(latency_matrix, wait)
        else:
            outliers, unsure, weak, noise_count, curve_ns = [], [], [], 0, np.full(files, np.nan)
        repeating = sorted([o.index for o in outliers] + [o.index for o in unsure])  # the 80 % rule's
        found = structure(masked, repeating, curve_ns, k.series_alpha, True)
        return stats, chance, outliers, unsure, weak, noise_count, curve_ns, found


def _file_baseline(block_baseline: NDArray[np.float64], part: slice, block_files: int) -> NDArray[np.float64]:
    """The local baseline of each file in ``part`` (a whole number of blocks from its start)."""
    first = part.start // block_files
    return np.repeat(block_baseline[first:first - (-(part.stop - part.start) // block_files)],
                     block_files)[:part.stop - part.start]


class _MaskedRuns:
    """The masked latency matrix (runs x files, -1: not measured or disturbed) that a level
    shift's or a ramp's run-by-run check slices ``[:, lo:hi]``, read back per slice."""

    def __init__(self, running: RunningAnalysis, latency_matrix: NDArray, wait: NDArray | None):
        self.running, self.latency_matrix, self.wait = running, latency_matrix, wait
        self.shape = (running.runs, running.files)

    def __getitem__(self, key: tuple[slice, slice]) -> NDArray[np.int64]:
        rows, files = key
        assert rows == slice(None), "whole runs only"
        return self._columns(np.arange(*files.indices(self.running.files)))

    def _columns(self, indices: NDArray[np.int64]) -> NDArray[np.int64]:
        values, _ = self.running.masked_columns(self.latency_matrix, self.wait, indices)
        return np.where(np.isnan(values), -1, values).astype(np.int64)

    def __iter__(self) -> Iterator[NDArray[np.int64]]:
        """Run after run, the whole row (what a null world permutes)."""
        for r in range(self.running.runs):
            view = self.latency_matrix[r]
            row = np.asarray(view, dtype=np.int64).copy()
            release(view)
            disturbed = np.unpackbits(self.running.disturbed_bits[r], count=self.running.files).astype(bool)
            row[disturbed | (row < 0)] = -1
            yield row
