"""The probe analysis' state carried from run to run, in memory that does not grow with the
matrix: what :class:`fsscope.analysis.outliers.RunningAnalysis` keeps between runs.

A million files x 10 runs is 80 MB per int64 matrix, and the analysis used to hold a dozen
float64 copies of it at once (masks, baselines, sorts): 1.1 GiB. Here a run is read once, a
chunk of files at a time, and folded into per-file state; what a later run needs of earlier
runs is either kept compactly (per-file counts, per-block baselines, packed bits) or read
back from the matrix, a chunk or a few files at a time (the run arrays are memory-mapped .npy files:
their pages are dropped from this process after each read, :func:`release`).

* :func:`block_neighbourhood` -- per run, each block's local typical latency (the outlier
  scan's baseline, block by block; a file's baseline is its block's value).
* :func:`median_curve` -- the per-file median over the runs, a chunk of files at a time (the
  running analysis reads its runs back the same way rather than keep a sorted copy of them).
* :class:`RunningSummary` -- the statistics of every measured value so far (count, mean,
  sd, percentiles, the low/high split) from a histogram of the values' float64 bit patterns
  (monotone in the value: a bin holds a contiguous range of ranks), per-bin sums and one pass
  over the runs for the values in the few bins that hold a wanted rank.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator

import numpy as np
from numpy.typing import NDArray

from fsscope.analysis.latency import _PERCENTILES, nanmedian_last_axis

#: Files per chunk of a run processed at once (a multiple of any block size that divides it):
#: a few MiB of float64 temporaries whatever the number of files.
CHUNK_FILES = 1 << 16


def release(view: NDArray) -> None:
    """Drop ``view``'s pages from this process if it lies in a shared memory map (np.memmap of a
    run array): they were read, the page cache keeps them, the process' RSS no longer counts
    them. A private (copy-on-write) map is left alone: dropping its pages would lose writes."""
    mapped = getattr(view, "_mmap", None)
    if not isinstance(mapped, mmap.mmap) or getattr(view, "mode", "c") == "c" or view.size == 0:
        return
    base = np.frombuffer(mapped, dtype=np.uint8).ctypes.data
    start = view.ctypes.data - base
    end = start + (view.size - 1) * view.itemsize + 1 if view.ndim == 1 and view.strides[0] == view.itemsize \
        else len(mapped) - start
    page = mmap.PAGESIZE
    first = start // page * page
    mapped.madvise(mmap.MADV_DONTNEED, first, min(-(-end // page) * page, len(mapped)) - first)


def read_row(matrix: NDArray, run: int) -> NDArray[np.int64]:
    """Row ``run`` of ``matrix`` as an int64 copy; its mapped pages released."""
    view = matrix[run]
    row = np.asarray(view, dtype=np.int64).copy()
    release(view)
    return row


def read_part(row: NDArray, part: slice) -> NDArray[np.int64]:
    """Files ``part`` of one run's row as an int64 copy; their mapped pages released."""
    view = row[part]
    values = np.asarray(view, dtype=np.int64).copy()
    release(view)
    return values


def as_float_row(row: NDArray) -> NDArray[np.float64]:
    """float64 copy, NaN where not measured (< 0)."""
    out = row.astype(np.float64)
    out[row < 0] = np.nan
    return out


def block_neighbourhood(block_median: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per block (last axis): the higher of the medians of the blocks before and after it
    (edge blocks their one neighbour, a lone block its own median)."""
    nothing = np.full(block_median.shape[:-1] + (1,), np.nan)
    previous = np.concatenate([nothing, block_median[..., :-1]], axis=-1)
    following = np.concatenate([block_median[..., 1:], nothing], axis=-1)
    with np.errstate(invalid="ignore"):
        neighbourhood = np.fmax(previous, following)
    return np.where(np.isnan(neighbourhood), block_median, neighbourhood)


def block_medians(row: NDArray[np.float64], block_files: int) -> NDArray[np.float64]:
    """The NaN-ignoring median of each block of ``block_files`` files of one run (the last
    block padded with NaN), a chunk of blocks at a time."""
    files = row.size
    blocks = -(-files // block_files)
    out = np.empty(blocks, dtype=np.float64)
    step = max(CHUNK_FILES // block_files, 1)
    for first in range(0, blocks, step):
        last = min(first + step, blocks)
        chunk = np.full((last - first) * block_files, np.nan)
        part = row[first * block_files: last * block_files]
        chunk[:part.size] = part
        out[first:last] = nanmedian_last_axis(chunk.reshape(last - first, block_files))
    return out


def chunks(files: int, block_files: int) -> Iterator[slice]:
    """File ranges of about :data:`CHUNK_FILES`, each a whole number of blocks."""
    step = max(CHUNK_FILES // block_files, 1) * block_files
    for lo in range(0, files, step):
        yield slice(lo, min(lo + step, files))


def median_curve(matrix: NDArray) -> NDArray[np.float64]:
    """Per-file median over the runs (``latency.median_curve_ns``: < 0 not measured, NaN where no
    run measured a file), a chunk of files at a time: a few MiB of float64 whatever the number
    of files."""
    runs, files = matrix.shape
    curve = np.full(files, np.nan)
    for part in chunks(files, 1):
        block = np.asarray(matrix[:, part])
        values = block.astype(np.float64)
        values[block < 0] = np.nan
        curve[part] = nanmedian_last_axis(values.T)
    return curve


def _key(values: NDArray[np.int64]) -> NDArray[np.int64]:
    """Histogram bin of non-negative values: the top bits of their float64 pattern (exponent and
    8 bits of mantissa: 256 bins an octave), monotone in the value."""
    return values.astype(np.float64).view(np.int64) >> 44


#: Bins: every non-negative float64 up to 2**63 ns.
_BINS = (0x43E << 8) + 1

Rows = Callable[[], Iterator[NDArray[np.int64]]]  # each run's values again (< 0: not measured)


def _measured(rows: Rows) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64]]]:
    for row in rows():
        values = row[row >= 0]
        yield values, _key(values)


class RunningSummary:
    """count, mean, sd, min, percentiles, max of every measured value so far, and the low/high
    split at ``factor`` x their median, as :func:`fsscope.analysis.latency.summarize` and
    ``split_low_high`` make them of the whole matrix (the order statistics exactly; mean and
    sd from per-bin sums about a value seen, equal to ~1e-12 and exactly 0 for a constant)."""

    def __init__(self) -> None:
        self.counts = np.zeros(_BINS, dtype=np.int64)
        self.sums = np.zeros(_BINS, dtype=np.float64)     # of (value - origin)
        self.squares = np.zeros(_BINS, dtype=np.float64)  # of (value - origin) ** 2
        self.origin = 0.0

    def add(self, row: NDArray[np.int64]) -> None:
        values = row[row >= 0]
        if values.size == 0:
            return
        if not self.counts.any():
            self.origin = float(values[0])
        keys = _key(values)
        shifted = values.astype(np.float64) - self.origin
        self.counts += np.bincount(keys, minlength=_BINS)
        self.sums += np.bincount(keys, weights=shifted, minlength=_BINS)
        self.squares += np.bincount(keys, weights=shifted * shifted, minlength=_BINS)

    def _bins_of(self, ranks: list[int], rows: Rows) -> dict[int, tuple[int, NDArray[np.int64]]]:
        """The bins holding ``ranks`` (0-based, in the ascending order of every value): bin ->
        (rank of its first value, its values sorted), from one pass over the runs."""
        ends = np.cumsum(self.counts)
        bins = np.unique(np.searchsorted(ends, np.asarray(ranks, dtype=np.int64), side="right"))
        found: dict[int, list[NDArray[np.int64]]] = {int(b): [] for b in bins}
        for values, keys in _measured(rows):
            inside = np.isin(keys, bins)
            for b in np.unique(keys[inside]).tolist():
                found[b].append(values[keys == b])
        return {b: (int(ends[b] - self.counts[b]), np.sort(np.concatenate(parts)) if parts
                    else np.zeros(0, dtype=np.int64)) for b, parts in found.items()}

    def summaries(self, factor: float, rows: Rows) -> tuple[dict, dict]:
        """(summary of every value, the low/high split at ``factor`` x their median)."""
        n = int(self.counts.sum())
        if n == 0:
            empty = _group_summary(0, 0, {}, (0.0, 0.0), 0.0)
            return empty, {"threshold_ns": None, "factor": factor, "low": empty, "high": empty}
        bins = self._bins_of(sorted({(n - 1) // 2, n // 2}), rows)
        median = (_at(bins, (n - 1) // 2) + _at(bins, n // 2)) / 2.0  # np.median of the float64 values
        threshold = float(factor * median)
        # Low: values below the threshold (a zero threshold: the zeros; no value is below 0).
        bar = threshold if threshold > 0 else 1.0
        key = int(np.array([bar]).view(np.int64)[0] >> 44)
        split = int(self.counts[:min(key, _BINS)].sum())
        if key < _BINS and self.counts[key]:
            split += int(np.count_nonzero(self._bins_of([int(self.counts[:key].sum())], rows)[key][1] < bar))
        edges = [0, split, n]
        ranks = _summary_ranks(0, n) | _summary_ranks(0, split) | _summary_ranks(split, n)
        bins = self._bins_of(sorted(ranks | {e for e in edges[1:-1] if 0 < e < n}), rows)
        stats = {rank: _at(bins, rank) for rank in ranks}
        groups = [_group_summary(lo, hi, stats, self._moments(lo, hi, bins), self.origin)
                  for lo, hi in ((0, n), (0, split), (split, n))]
        return groups[0], {"threshold_ns": threshold, "factor": factor, "low": groups[1], "high": groups[2]}

    def _moments(self, lo: int, hi: int, bins: dict[int, tuple[int, NDArray[np.int64]]]
                 ) -> tuple[float, float]:
        """Sum and sum of squares (about the origin) of the values at ranks [lo, hi): whole
        bins from their sums, a bin that ``lo`` or ``hi`` cuts from its values."""
        ends = np.cumsum(self.counts)
        starts = ends - self.counts
        whole = (starts >= lo) & (ends <= hi) & (self.counts > 0)
        total, square = float(self.sums[whole].sum()), float(self.squares[whole].sum())
        for b in np.flatnonzero(((starts < lo) & (ends > lo)) | ((starts < hi) & (ends > hi))).tolist():
            first, values = bins[b]
            part = values[max(lo - first, 0):max(min(hi - first, values.size), 0)].astype(np.float64) - self.origin
            total, square = total + float(part.sum()), square + float((part * part).sum())
        return total, square


def _at(bins: dict[int, tuple[int, NDArray[np.int64]]], rank: int) -> int:
    for first, values in bins.values():
        if first <= rank < first + values.size:
            return int(values[rank - first])
    raise KeyError(rank)


def _group_summary(lo: int, hi: int, stats: dict[int, int], moments: tuple[float, float], origin: float) -> dict:
    """:func:`fsscope.analysis.latency.summarize` of the values at ranks [lo, hi)."""
    count = hi - lo
    if count <= 0:
        return {"count": 0, "mean_ns": None, "sd_ns": None, "min_ns": None, "p50_ns": None,
                "p95_ns": None, "p99_ns": None, "max_ns": None, "rsd": None}
    total, square = moments
    mean_ns = origin + total / count
    sd_ns = float(np.sqrt(max(square - total * total / count, 0.0) / (count - 1))) if count > 1 else 0.0
    p50, p95, p99 = (_percentile(stats, lo, count, q) for q in _PERCENTILES)
    return {"count": count, "mean_ns": mean_ns, "sd_ns": sd_ns, "min_ns": stats[lo], "p50_ns": p50,
            "p95_ns": p95, "p99_ns": p99, "max_ns": stats[hi - 1], "rsd": (sd_ns / mean_ns) if mean_ns > 0 else None}


def _summary_ranks(lo: int, hi: int) -> set[int]:
    """The ranks a summary of ranks [lo, hi) reads: min, max and the percentiles' neighbours."""
    count = hi - lo
    if count <= 0:
        return set()
    ranks = {lo, hi - 1}
    for q in _PERCENTILES:
        below = int(np.floor((count - 1) * (q / 100.0)))
        ranks |= {lo + below, lo + min(below + 1, count - 1)}
    return ranks


def _percentile(stats: dict[int, int], lo: int, count: int, q: float) -> float:
    """np.percentile(values, q) ('linear', numpy's own arithmetic) of the ``count`` values from rank ``lo``."""
    virtual = (count - 1) * (q / 100.0)
    below = int(np.floor(virtual))
    gamma = virtual - below
    a = float(stats[lo + below])
    b = float(stats[lo + min(below + 1, count - 1)])
    diff = b - a
    return b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma
