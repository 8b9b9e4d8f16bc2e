"""Level shifts and linear growth in a probe's per-file median latency curve.

The curve (log scale, reported outliers masked) is cut into piecewise-linear segments by
penalised optimal partitioning (PELT) on a binned (<= 2048 bins), median-filtered curve, so
single-file spikes cannot become segments and the cost stays bounded for a million files;
cuts are then refined to file resolution and classified. Segments span >= 16 files, the
first one >= 8 (btrfs with 4 KiB nodes splits its first leaf at file 9). A shift or a ramp
must also repeat run by run (see :class:`_RunsCheck`). Works on float64/int64 arrays and
views of the latency matrix; :func:`fsscope.analysis.outliers.analyze` drives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fsscope.analysis.findings import LevelShift, LinearGrowth
from fsscope.analysis.latency import as_float_matrix, nanmedian_last_axis

_MAD_TO_SD = 1.4826
_MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2.0)  # sd of a median / sd of a mean (normal noise)
_SIGMA_FLOOR = 1e-3  # 0.1 % in log scale: keeps noise-free synthetic curves well-behaved


def median5(values: ArrayLike) -> NDArray[np.float64]:
    """Running median of 5 with mirrored edges (``scipy.ndimage.median_filter(values, size=5,
    mode="mirror")``, without importing scipy.ndimage)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size < 3:  # too short to filter (scipy's edge handling differs there; no caller needs it)
        return values.copy()
    padded = np.pad(values, 2, mode="reflect")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, 5), axis=1)


def needed_runs(valid_counts: NDArray[np.int64], runs: int, min_runs: int | None,
                 min_fraction: float) -> NDArray[np.int64]:
    """Per file (or step), how many runs must show it for it to count as repeatable."""
    if min_runs is not None:
        if min_runs < 1:
            raise ValueError(f"min_runs must be >= 1, got {min_runs}")
        return np.full(valid_counts.shape, min_runs, dtype=np.int64)
    needed = np.ceil(min_fraction * valid_counts - 1e-9).astype(np.int64)
    floor = 2 if runs >= 2 else 1
    return np.maximum(needed, floor)


# --------------------------------------------------------------------------------------------
# Segmentation of the median curve: level shifts and linear growth


@dataclass(frozen=True)
class SegmentKnobs:
    """Settings of the median-curve segmentation, shared by level shifts and linear growth."""

    min_segment_files: int = 16  # shortest level worth reporting (btrfs' first leaf: ~45 files)
    #: the first level may be shorter: small first structures end early (btrfs -n 4096: the
    #: first leaf holds 9 files). One boundary position near the start hardly adds chances
    #: for noise, unlike short segments everywhere (a burst of slow files becomes a bump).
    first_segment_files: int = 8
    max_bins: int = 2048  # the curve is binned (bin medians) to at most this many points (O(bins^2) worst case)
    penalty_factor: float = 4.0  # per-segment penalty in sigma^2 log(bins) (BIC uses ~3 per line)


DEFAULT_KNOBS = SegmentKnobs()


@dataclass(frozen=True)
class _Segmentation:
    """Piecewise-linear cut of the (log) median curve."""

    file_index: NDArray[np.int64]  # file index of each measured point (curve compressed to valid)
    log_latency: NDArray[np.float64]  # log ns of each measured point
    bin_size: int  # measured points per bin
    bin_log: NDArray[np.float64]  # median-filtered log median of each bin
    sigma_bin: float  # noise sd of a bin (log scale)
    sigma_point: float  # noise sd of a single point (log scale)
    cuts: tuple[int, ...]  # segment starts in point positions (first is 0), file resolution
    penalty: float = 0.0  # cost of one more segment (bin scale)
    short_bins: int = 3  # shortest segment allowed anywhere (the first one), in bins


def _robust_noise_sd(log_values: NDArray[np.float64]) -> float:
    """Noise sd from first differences (MAD), insensitive to steps, ramps and spikes."""
    if log_values.size < 3:
        return _SIGMA_FLOOR
    steps = np.diff(log_values)
    steps -= _median_in_place(steps.copy())
    mad = _median_in_place(np.abs(steps, out=steps))  # in place: a million files' curve is 8 MB a copy
    return max(float(_MAD_TO_SD * mad / math.sqrt(2.0)), _SIGMA_FLOOR)


def _median_in_place(values: NDArray[np.float64]) -> float:
    """``np.median`` of finite values, partitioning them in place (no copy)."""
    half = values.size // 2
    if values.size % 2:
        values.partition(half)
        return float(values[half])
    values.partition([half - 1, half])
    return float(np.mean(values[half - 1:half + 1]))


class _LineCost:
    """SSE of a least-squares line over [a, b) in O(1) from prefix sums (vectorised in a/b)."""

    def __init__(self, x: NDArray[np.float64], y: NDArray[np.float64]) -> None:
        x = x - x.mean()
        y = y - y.mean()
        zero = np.zeros(1)
        self.n = np.arange(x.size + 1, dtype=np.float64)
        self.sx = np.concatenate([zero, np.cumsum(x)])
        self.sy = np.concatenate([zero, np.cumsum(y)])
        self.sxx = np.concatenate([zero, np.cumsum(x * x)])
        self.sxy = np.concatenate([zero, np.cumsum(x * y)])
        self.syy = np.concatenate([zero, np.cumsum(y * y)])

    def cost(self, a, b):
        n = self.n[b] - self.n[a]
        sx = self.sx[b] - self.sx[a]
        sy = self.sy[b] - self.sy[a]
        sxx = self.sxx[b] - self.sxx[a] - sx * sx / n
        sxy = self.sxy[b] - self.sxy[a] - sx * sy / n
        syy = self.syy[b] - self.syy[a] - sy * sy / n
        with np.errstate(divide="ignore", invalid="ignore"):
            explained = np.where(sxx > 1e-12, sxy * sxy / np.where(sxx > 1e-12, sxx, 1.0), 0.0)
        return np.maximum(syy - explained, 0.0)

    def best_split(self, a: int, b: int, min_len: int) -> tuple[float, int]:
        """(gain, split) of the best single cut of [a, b) into two lines of >= min_len."""
        if b - a < 2 * min_len:
            return 0.0, -1
        splits = np.arange(a + min_len, b - min_len + 1)
        total = self.cost(splits * 0 + a, splits) + self.cost(splits, splits * 0 + b)
        best = int(np.argmin(total))
        return float(self.cost(a, b) - total[best]), int(splits[best])


def _segment_bins(line_cost: _LineCost, bin_count: int, min_len: int, penalty: float,
                  first_min_len: int | None = None) -> list[int]:
    """Optimal partitioning into lines (minimum SSE + penalty per segment) with PELT pruning.

    Exact rather than greedy: binary segmentation misses a sawtooth (ext4's per-block ramps),
    where no single cut pays for itself. Every segment spans >= ``min_len`` bins, the first
    one >= ``first_min_len`` (default: the same). Returns the sorted cut bins, 0 and
    bin_count included.
    """
    first_min_len = min_len if first_min_len is None else first_min_len
    best_cost = np.full(bin_count + 1, np.inf)
    best_cost[0] = -penalty
    previous_cut = np.zeros(bin_count + 1, dtype=np.int64)
    candidates = np.zeros(1, dtype=np.int64)
    for end in range(min(min_len, first_min_len), bin_count + 1):
        too_short = candidates + np.where(candidates == 0, first_min_len, min_len) > end
        eligible = candidates[~too_short]
        if eligible.size == 0:
            continue
        ending_here = best_cost[eligible] + line_cost.cost(eligible, end)
        best = int(np.argmin(ending_here))
        best_cost[end] = ending_here[best] + penalty
        previous_cut[end] = eligible[best]
        # PELT: a start that is already worse than the optimum cannot become optimal later.
        still_useful = np.ones(candidates.size, dtype=bool)
        still_useful[~too_short] = ending_here <= best_cost[end]
        candidates = np.append(candidates[still_useful | too_short], end)
    cuts = [bin_count]
    while cuts[-1] > 0:
        cuts.append(int(previous_cut[cuts[-1]]))
    return cuts[::-1]


def _refine_cut(segmentation_points: tuple[NDArray[np.float64], NDArray[np.float64]],
                lo: int, hi: int) -> int:
    """Best cut of points [lo, hi) at file resolution (two lines, spikes median-filtered)."""
    file_x, log_y = segmentation_points
    window_y = median5(log_y[lo:hi])
    local = _LineCost(file_x[lo:hi].astype(np.float64), window_y)
    _, split = local.best_split(0, hi - lo, 2)
    return lo + split if split >= 0 else -1


def _without(curve_ns: ArrayLike, exclude_indices: ArrayLike | None) -> NDArray[np.float64]:
    """The curve as float64 with the excluded files (e.g. reported outliers) unmeasured."""
    curve = np.array(curve_ns, dtype=np.float64).ravel()
    if exclude_indices is not None:
        excluded = np.asarray(exclude_indices, dtype=np.int64).ravel()
        curve[excluded[(excluded >= 0) & (excluded < curve.size)]] = np.nan
    return curve


def _segment_curve(curve_ns: ArrayLike, knobs: SegmentKnobs) -> _Segmentation | None:
    min_segment_files, max_bins = knobs.min_segment_files, knobs.max_bins
    curve = np.asarray(curve_ns, dtype=np.float64).ravel()
    measured = np.isfinite(curve) & (curve >= 0)
    file_index = np.flatnonzero(measured)
    point_count = file_index.size
    if point_count < max(2 * min_segment_files, 8):
        return None
    log_latency = np.log(np.maximum(curve[measured], 1.0))
    bin_size = max(1, -(-point_count // max_bins))
    bin_count = -(-point_count // bin_size)
    padded = np.full(bin_count * bin_size, np.nan)
    padded[:point_count] = log_latency
    raw_bin_log = nanmedian_last_axis(padded.reshape(bin_count, bin_size))
    sigma_bin = _robust_noise_sd(raw_bin_log)
    bin_log = median5(raw_bin_log) if bin_count >= 5 else raw_bin_log
    min_len = max(3, -(-min_segment_files // bin_size))
    first_min_len = min(min_len, max(3, -(-knobs.first_segment_files // bin_size)))
    penalty = knobs.penalty_factor * sigma_bin**2 * math.log(max(bin_count, 2))
    line_cost = _LineCost(np.arange(bin_count, dtype=np.float64), bin_log)
    cut_bins = _segment_bins(line_cost, bin_count, min_len, penalty, first_min_len)

    cuts = [0]
    file_x = file_index.astype(np.float64)
    for cut_bin in cut_bins[1:-1]:
        cut = cut_bin * bin_size
        if bin_size > 1:
            lo = max(cuts[-1] + 1, (cut_bin - 2) * bin_size)
            hi = min(point_count, (cut_bin + 2) * bin_size)
            refined = _refine_cut((file_x, log_latency), lo, hi)
            cut = refined if refined > cuts[-1] else cut
        cuts.append(cut)
    return _Segmentation(
        file_index=file_index,
        log_latency=log_latency,
        bin_size=bin_size,
        bin_log=bin_log,
        sigma_bin=sigma_bin,
        sigma_point=_robust_noise_sd(log_latency),
        cuts=tuple(cuts),
        penalty=penalty,
        short_bins=first_min_len,
    )


@dataclass(frozen=True)
class _Piece:
    """One segment of the cut curve: a line in log scale over point positions [start, end)."""

    start: int
    end: int
    intercept: float
    slope: float  # log latency per point position
    median_log: float
    rising: bool  # slope significantly > 0
    falling: bool = False  # slope significantly < 0

    def log_at(self, position: float) -> float:
        return self.intercept + self.slope * position

    def level_log(self) -> float:
        """The level a neighbour is compared with: the start of a ramp (rising or falling),
        else the median."""
        return self.log_at(self.start) if self.rising or self.falling else self.median_log


def _bin_range(segmentation: _Segmentation, start: int, end: int) -> tuple[int, int]:
    """Bins lying inside points [start, end) (at least one, at most all)."""
    size, bin_total = segmentation.bin_size, segmentation.bin_log.size
    first_bin = min(-(-start // size), bin_total - 1)
    last_bin = min(max(first_bin + 1, end // size), bin_total)
    return first_bin, last_bin


def _piece(segmentation: _Segmentation, start: int, end: int, min_z: float) -> _Piece:
    """The line fitted through points [start, end) of the cut curve."""
    size = segmentation.bin_size
    first_bin, last_bin = _bin_range(segmentation, start, end)
    y = segmentation.bin_log[first_bin:last_bin]
    x = (np.arange(first_bin, last_bin) + 0.5) * size - 0.5
    if y.size >= 2:
        slope, intercept = (float(v) for v in np.polyfit(x, y, 1))
    else:
        slope, intercept = 0.0, float(y.mean())
    # t statistic of a slope fitted through y.size points with noise sigma_bin
    slope_se = segmentation.sigma_bin / (size * math.sqrt(max(y.size, 2) ** 3 / 12.0))
    return _Piece(
        start=start, end=end, intercept=intercept, slope=slope,
        median_log=float(np.median(segmentation.log_latency[start:end])),
        rising=slope > 0 and slope / slope_se >= min_z,
        falling=slope < 0 and -slope / slope_se >= min_z,
    )


def _pieces(segmentation: _Segmentation, min_z: float) -> list[_Piece]:
    cuts = list(segmentation.cuts) + [segmentation.file_index.size]
    return [_piece(segmentation, start, end, min_z) for start, end in zip(cuts[:-1], cuts[1:])]


def _inner_step(segmentation: _Segmentation, piece: _Piece,
                min_z: float) -> tuple[_Piece, _Piece] | None:
    """A rising piece cut in two at its best two-line split (sides >= the shortest segment),
    as a candidate shift between the halves; None for other pieces.

    A step followed, within a segment's length, by another change cannot be cut on its own:
    btrfs with 4 KiB nodes splits its first leaf at file 9, then the new leaf's cost climbs
    for ~13 files until the next split, and the cheapest cut is one line over the step and
    the climb. The halves face the same tests as any two neighbouring segments (ratio, z,
    a jump at the cut; a ramp cut in two has no jump and fails), and as the cut did not pay
    the segment penalty, the runs (as many as an outlier needs) must each show half the step.
    """
    if not piece.rising:
        return None
    first_bin, last_bin = _bin_range(segmentation, piece.start, piece.end)
    count, shortest = last_bin - first_bin, segmentation.short_bins
    if count < 2 * shortest:
        return None
    line_cost = _LineCost(np.arange(count, dtype=np.float64),
                          segmentation.bin_log[first_bin:last_bin])
    _, split = line_cost.best_split(0, count, shortest)
    cut = (first_bin + split) * segmentation.bin_size
    if split < 0 or not piece.start < cut < piece.end:
        return None
    return _piece(segmentation, piece.start, cut, min_z), _piece(segmentation, cut, piece.end, min_z)


def _boundary_file(segmentation: _Segmentation, point: int) -> int:
    """File index where the segment starting at ``point`` begins: right after the previous
    segment's last measured file, so unmeasured or masked files (outliers) at a boundary
    belong to the new segment and segments tile the file range."""
    if point <= 0:
        return int(segmentation.file_index[0])
    if point >= segmentation.file_index.size:
        return int(segmentation.file_index[-1]) + 1
    return int(segmentation.file_index[point - 1]) + 1


def _jump_log(before: _Piece, after: _Piece) -> float:
    """How far the fitted lines jump at the cut between two neighbouring pieces."""
    at_cut = after.start - 0.5
    return after.log_at(at_cut) - before.log_at(at_cut)


#: Widest window (files on each side of a cut) in which each run's own step is measured.
REPEAT_WINDOW_FILES = 64


@dataclass(frozen=True)
class _RunsCheck:
    """The runs behind a median curve, to ask whether a change of the curve repeats.

    A structural change happens at the same file in every run; a burst of load on a shared
    machine slows one run over some stretch of files, and two such runs overlapping are
    enough to move a median of five. The curve's noise estimate (first differences) does
    not see such slow drifts, so each candidate is also checked run by run.
    """

    latency_ns: Any  # runs x files as given (< 0: not measured), or what reads it back sliced [:, lo:hi]
    excluded: NDArray[np.bool_]  # files left out of the curve (outliers, unmeasured)
    min_runs: int | None
    min_fraction: float

    def window_log_medians(self, lo: int, hi: int) -> NDArray[np.float64]:
        """Per run, log of the median of files [lo, hi) (NaN where fewer than 3 measured)."""
        window = as_float_matrix(self.latency_ns[:, lo:hi])
        window[:, self.excluded[lo:hi]] = np.nan
        enough = np.sum(~np.isnan(window), axis=1) >= min(3, max(hi - lo, 1))
        with np.errstate(divide="ignore"):
            return np.where(enough, np.log(np.maximum(nanmedian_last_axis(window), 1.0)), np.nan)

    def repeats(self, step_log: NDArray[np.float64], direction: float, min_log: float) -> bool:
        """Do enough runs step in ``direction`` by >= ``min_log``? (< 2 runs: cannot tell, yes)"""
        counted = step_log[~np.isnan(step_log)]
        if counted.size < 2:
            return True
        agree = int(np.count_nonzero((np.sign(counted) == np.sign(direction))
                                     & (np.abs(counted) >= min_log)))
        needed = needed_runs(np.array([counted.size]), counted.size, self.min_runs,
                              self.min_fraction)[0]
        return agree >= min(int(needed), counted.size)


def _shift_repeats(check: _RunsCheck, start_file: int, cut_file: int, end_file: int,
                   log_ratio: float, min_log: float) -> bool:
    """The step at ``cut_file``, measured in each run between the medians of the W files
    before and after it (W = the shorter neighbouring segment, at most REPEAT_WINDOW_FILES),
    goes the same way and by at least ``min_log`` in as many runs as an outlier needs."""
    width = max(1, min(cut_file - start_file, end_file - cut_file, REPEAT_WINDOW_FILES))
    step = (check.window_log_medians(cut_file, cut_file + width)
            - check.window_log_medians(cut_file - width, cut_file))
    return check.repeats(step, log_ratio, min_log)


def _growth_repeats(check: _RunsCheck, start_file: int, end_file: int, min_log: float,
                    direction: float = 1.0) -> bool:
    """Each run rises (``direction`` -1: falls) from the first to the last quarter of
    [start, end): a ramp fitted through a median curve must be a ramp in the runs, not one
    run's drift."""
    quarter = max(1, (end_file - start_file) // 4)
    rise = (check.window_log_medians(end_file - quarter, end_file)
            - check.window_log_medians(start_file, start_file + quarter))
    return check.repeats(rise, direction, min_log)


def _level_shifts_from(segmentation: _Segmentation, *, min_ratio: float, min_z: float,
                       runs_check: _RunsCheck | None = None) -> list[LevelShift]:
    shifts: list[LevelShift] = []
    pieces = _pieces(segmentation, min_z)
    # (before, after, inner): a cut inside a rising piece did not pay the segment penalty,
    # so each run must show at least half of its step, not just a step in its direction
    pairs = [(before, after, False) for before, after in zip(pieces[:-1], pieces[1:])]
    pairs += [(*pair, True) for pair in (_inner_step(segmentation, p, min_z) for p in pieces) if pair]
    min_log_ratio = math.log(min_ratio)
    for before, after, inner in sorted(pairs, key=lambda pair: pair[1].start):
        # A ramp's level is where it starts: ext4's drop back at the end of a directory block
        # returns to the level the ramp began at, which is a reset, not a shift.
        log_ratio = after.level_log() - before.level_log()
        if abs(log_ratio) < min_log_ratio:
            continue
        standard_error = (_MEDIAN_EFFICIENCY * segmentation.sigma_point
                          * math.sqrt(1.0 / (before.end - before.start) + 1.0 / (after.end - after.start)))
        if abs(log_ratio) / standard_error < min_z:
            continue
        # A real shift jumps at the cut; a ramp running into a plateau does not.
        jump = _jump_log(before, after)
        if jump * log_ratio <= 0 or abs(jump) < min_log_ratio / 2:
            continue
        cut_file = _boundary_file(segmentation, after.start)
        run_step_log = max(min_log_ratio, abs(log_ratio) if inner else 0.0) / 2
        if runs_check is not None and not _shift_repeats(
                runs_check, _boundary_file(segmentation, before.start), cut_file,
                _boundary_file(segmentation, after.end), log_ratio, run_step_log):
            continue
        shifts.append(LevelShift(
            index=cut_file,
            before_ns=int(round(math.exp(before.median_log))),
            after_ns=int(round(math.exp(after.median_log))),
        ))
    return shifts


def _linear_growth_from(segmentation: _Segmentation, *, min_growth_ratio: float, min_files: int,
                        min_r2: float, min_z: float,
                        runs_check: _RunsCheck | None = None) -> list[LinearGrowth]:
    pieces = _pieces(segmentation, min_z)
    min_log_ratio = math.log(min_growth_ratio)
    # Join consecutive pieces sloping the same way that meet without a jump: one ramp cut
    # into pieces. A falling ramp (latency easing off file by file: a cache warming, a
    # structure's cost shrinking) is one too, reported with its negative slope.
    ramps: list[list[int]] = []  # [start, end, direction] point positions
    previous: _Piece | None = None
    for piece in pieces:
        direction = 1 if piece.rising else -1 if piece.falling else 0
        if direction:
            joins = (previous is not None and ramps and ramps[-1][2] == direction and ramps[-1][1] == piece.start
                     and abs(_jump_log(previous, piece)) < min_log_ratio / 2)
            if joins:
                ramps[-1][1] = piece.end
            else:
                ramps.append([piece.start, piece.end, direction])
        previous = piece

    found: list[LinearGrowth] = []
    size = segmentation.bin_size
    for start, end, direction in ramps:
        first_file = _boundary_file(segmentation, start)
        end_file = _boundary_file(segmentation, end)
        if end_file - first_file < min_files:
            continue
        first_bin, last_bin = _bin_range(segmentation, start, end)
        if last_bin - first_bin < 3:
            continue
        latency_ns = np.exp(segmentation.bin_log[first_bin:last_bin])
        middle_points = np.minimum(np.arange(first_bin, last_bin) * size + (size - 1) // 2,
                                   segmentation.file_index.size - 1)
        file_x = segmentation.file_index[middle_points].astype(np.float64)
        slope, intercept = (float(v) for v in np.polyfit(file_x, latency_ns, 1))
        residual = float(np.sum((latency_ns - (intercept + slope * file_x)) ** 2))
        spread = float(np.sum((latency_ns - latency_ns.mean()) ** 2))
        r2 = 1.0 - residual / spread if spread > 0 else 0.0
        fit_start_ns = intercept + slope * first_file
        fit_end_ns = intercept + slope * (end_file - 1)
        if (slope * direction <= 0 or min(fit_start_ns, fit_end_ns) <= 0
                or (fit_end_ns / fit_start_ns) ** direction < min_growth_ratio or r2 < min_r2):
            continue
        if runs_check is not None and not _growth_repeats(runs_check, first_file, end_file,
                                                          min_log_ratio / 2, direction):
            continue
        found.append(LinearGrowth(start=first_file, end=end_file, slope_ns_per_file=slope, r2=r2))
    return found


def level_shifts(
    median_curve_ns: ArrayLike,
    *,
    min_ratio: float = 1.2,
    min_z: float = 5.0,
    exclude_indices: ArrayLike | None = None,
    knobs: SegmentKnobs = SegmentKnobs(),
) -> list[LevelShift]:
    """Change points of the per-file median curve where the level moves by >= ``min_ratio``.

    Optimal partitioning into lines (log scale, PELT, penalty ``knobs.penalty_factor`` x
    sigma^2 log(bins)) on a binned, median-filtered curve with a minimum segment length;
    ``exclude_indices`` (e.g. the reported outliers) are left out. A cut counts as a shift when (1) the medians of the two
    adjacent segments differ by >= ``min_ratio`` (20 %: above the run-to-run noise of a
    median curve, below btrfs' first-leaf step), (2) that difference is >= ``min_z``
    standard errors, and (3) the fitted lines jump at the cut in the same direction (a ramp
    running into a plateau is growth, not a shift). Single-file spikes never form segments.
    ``before_ns``/``after_ns`` are the medians of the adjacent segments. A curve alone has no
    runs to check repetition against; :func:`analyze` also asks the runs (module doc).
    """
    segmentation = _segment_curve(_without(median_curve_ns, exclude_indices), knobs)
    if segmentation is None:
        return []
    return _level_shifts_from(segmentation, min_ratio=min_ratio, min_z=min_z)


def linear_segments(
    median_curve_ns: ArrayLike,
    *,
    min_growth_ratio: float = 1.2,
    min_files: int = 32,
    min_r2: float = 0.3,
    min_z: float = 5.0,
    exclude_indices: ArrayLike | None = None,
    knobs: SegmentKnobs = SegmentKnobs(),
) -> list[LinearGrowth]:
    """Segments [start, end) where latency grows linearly (ext4: linear scan in a dir block),
    or falls linearly (a negative ``slope_ns_per_file``).

    Same segmentation as :func:`level_shifts`; pieces of one ramp (no jump between them) are
    joined, and a segment is reported when its slope is significant (>= ``min_z``), the fitted
    line rises (or falls) by >= ``min_growth_ratio`` over the segment, it spans >= ``min_files`` files and
    a line in ns explains >= ``min_r2`` of the (binned, spike-filtered) curve's variance.
    """
    segmentation = _segment_curve(_without(median_curve_ns, exclude_indices), knobs)
    if segmentation is None:
        return []
    return _linear_growth_from(segmentation, min_growth_ratio=min_growth_ratio,
                               min_files=min_files, min_r2=min_r2, min_z=min_z)
