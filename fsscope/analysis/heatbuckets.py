"""Per-file latencies bucketed for a heatmap: columns of ``zoom`` files, each shown by one
aggregate (max, a percentile, the mean), and colour levels on a log scale.

Pure numpy, no screen: the heatmap widget asks for a bucketing once per data version, zoom and
aggregate, and patches the columns of a live batch with the same function.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

AGGREGATES = ("max", "p99", "p90", "p50", "mean")
NOT_MEASURED = -1


def bucket(values: np.ndarray, zoom: int, aggregate: str, summary: BlockSummary | None = None,
           columns: tuple[int, int] | None = None) -> np.ndarray:
    """runs x files int64 (-1 = not measured) -> runs x ceil(files/zoom) by ``aggregate``.

    A bucket with no measured file is -1. Percentiles ignore unmeasured files: -1 sorts
    first, so the q-th measured value of a bucket is at (unmeasured + q*(measured-1)).

    With ``summary`` (the BlockSummary of ``values``) the same result from the blocks; without
    it every value is read (the reference the summarised way is tested against).
    ``columns`` (c0, c1): only those buckets, runs x (c1 - c0) (a screen's worth of 1M files:
    what a frame draws, not every bucket)."""
    runs, files = values.shape
    if columns is not None:
        c0, c1 = max(0, columns[0]), min(columns[1], -(-files // max(1, zoom)))
        if c1 <= c0:
            return np.empty((runs, 0), dtype=np.int64)
        if summary is not None and zoom >= SUMMARY_MIN_ZOOM:
            return _bucket_summarised(values, zoom, aggregate, summary, (c0, c1))
        values, summary = values[:, c0 * zoom: min(files, c1 * zoom)], None  # the buckets' own files
        runs, files = values.shape
    if zoom <= 1 or files == 0:
        return np.array(values, dtype=np.int64, copy=True)
    if summary is not None and zoom >= SUMMARY_MIN_ZOOM:
        return _bucket_summarised(values, zoom, aggregate, summary, (0, -(-files // zoom)))
    whole = files // zoom
    out = np.empty((runs, -(-files // zoom)), dtype=np.int64)
    if whole:  # the full buckets: a reshaped view, no copy of the matrix
        out[:, :whole] = _aggregate(values[:, : whole * zoom].reshape(runs, whole, zoom), aggregate)
    if whole * zoom < files:  # the last, partial bucket, padded with "not measured"
        tail = np.full((runs, 1, zoom), -1, dtype=np.int64)
        tail[:, 0, : files - whole * zoom] = values[:, whole * zoom:]
        out[:, whole:] = _aggregate(tail, aggregate)
    return out


def _aggregate(blocks: np.ndarray, aggregate: str) -> np.ndarray:
    """runs x columns x zoom -> runs x columns (see bucket)."""
    zoom = blocks.shape[2]
    if aggregate == "max":
        return blocks.max(axis=2)
    all_measured = blocks.size == 0 or blocks.min() >= 0
    valid = np.full(blocks.shape[:2], zoom) if all_measured else (blocks >= 0).sum(axis=2)
    if aggregate == "mean":
        total = blocks.sum(axis=2) if all_measured else np.where(blocks >= 0, blocks, 0).sum(axis=2)
        return np.where(valid > 0, total // np.maximum(valid, 1), -1)
    q = {"p99": 0.99, "p90": 0.90, "p50": 0.50}[aggregate]
    # Buckets are mostly full, so most share one rank: a partial sort around it (O(n)) for
    # those, and a full sort only of the few partly measured buckets. int32 selects twice as
    # fast as int64 and is exact for latencies below 2.1 s (the usual case).
    full_rank = int(np.floor(q * (zoom - 1)))
    own = blocks.astype(np.int32) if blocks.size and blocks.max() < 2**31 else blocks.copy()
    own.partition(full_rank, axis=2)  # in place: np.partition would copy it once more
    picked = own[..., full_rank].astype(np.int64)
    partial = valid < zoom
    if partial.any():
        idx = np.minimum((zoom - valid) + np.floor(q * np.maximum(valid - 1, 0)).astype(np.int64), zoom - 1)
        ordered = np.sort(blocks[partial], axis=1)
        picked[partial] = np.take_along_axis(ordered, idx[partial][:, None], axis=1)[:, 0]
    return np.where(valid > 0, picked, -1)


BLOCK_FILES = 100  # files per block of a BlockSummary: divides every zoom step from 100 up (no ragged edges)
SUMMARY_MIN_ZOOM = 5 * BLOCK_FILES  # below it a bucket is a few blocks (and the screen a sliver of the files)


class BlockSummary:
    """Per run, per block of BLOCK_FILES files: the max, the min, the sum of the measured values
    and their count, each made on first use for one data version and patched by live batches.

    Why: a full bucketing reads every value (10 million at 1M files x 10 runs, 8-50 ms); from
    the blocks a bucket's max, sum and count are a reduction over zoom/64 blocks plus its two
    ragged edges, so a zoom or aggregate switch reads ~1/64 of the data. Percentiles do not
    decompose: they still select among a bucket's values, but with the blocks saying which
    buckets are wholly measured and whether the values fit int32, the selection skips those
    passes and works run by run in a reused scratch buffer (no page faults, cache-sized)."""

    def __init__(self) -> None:
        self.kinds: dict[str, np.ndarray] = {}  # "max" | "min" | "sum" | "count" -> runs x blocks
        self._scratch = np.empty(0, dtype=np.uint8)  # bytes reused by percentile selection
        self.hists: dict[int, LogHistograms] = {}  # by block, for big data (see _sketched_percentiles)

    def clear(self) -> None:
        self.kinds.clear()
        self.hists.clear()

    def prime(self, values: np.ndarray, zoom: int) -> None:
        """Make every summary a bucketing may ask for, at once: the first frame of new data
        pays for them, a switch of zoom or aggregate later finds them made (and patched)."""
        for kind in ("max", "min"):
            self.get(values, kind)
        for kind in ("count", "sum"):
            _measured_blocks(values, self, kind)
        if values.size >= SKETCH_MIN_VALUES:  # the zoom steps' and this zoom's (a fit)
            self.histograms(values, HIST_BLOCK)
            self.histograms(values, hist_block(zoom))

    def histograms(self, values: np.ndarray, block: int) -> LogHistograms:
        hist = self.hists.pop(block, None)
        if hist is None or hist.shape != values.shape:
            hist = LogHistograms(values, block)
        while len(self.hists) >= 3:  # the steps' and a fit or two: the least recently used goes
            del self.hists[next(iter(self.hists))]
        self.hists[block] = hist  # (re)inserted: the most recently used
        return hist

    def scratch_for(self, n: int, dtype: type) -> np.ndarray:
        """n values of ``dtype`` in the reused buffer (grown when too small)."""
        size = n * np.dtype(dtype).itemsize
        if self._scratch.size < size:
            self._scratch = np.empty(size, dtype=np.uint8)
        return self._scratch[:size].view(dtype)

    def get(self, values: np.ndarray, kind: str) -> np.ndarray:
        made = self.kinds.get(kind)
        blocks = values.shape[1] // BLOCK_FILES
        if made is None or made.shape != (values.shape[0], blocks):
            made = self.kinds[kind] = _block_summary(values, kind, 0, blocks)
        return made

    def patch(self, values: np.ndarray, run: int, start: int, stop: int) -> None:
        """Files [start, stop) of run ``run`` are new (the files may have grown)."""
        runs, files = values.shape
        blocks = files // BLOCK_FILES
        for block, hist in list(self.hists.items()):
            if not hist.patch(values, run, start, stop):
                del self.hists[block]  # made anew when next asked for
        for kind, made in list(self.kinds.items()):
            if made.shape[0] != runs:
                del self.kinds[kind]
                continue
            if made.shape[1] < blocks:  # the files grew: the new whole blocks summarised once
                grown = np.empty((runs, blocks), dtype=np.int64)
                grown[:, : made.shape[1]] = made
                grown[:, made.shape[1]:] = _block_summary(values, kind, made.shape[1], blocks)
                made = self.kinds[kind] = grown
            b0, b1 = start // BLOCK_FILES, min(blocks, -(-stop // BLOCK_FILES))
            if b1 > b0:
                made[run, b0:b1] = _block_summary(values[run:run + 1], kind, b0, b1)[0]


def _block_summary(values: np.ndarray, kind: str, b0: int, b1: int) -> np.ndarray:
    """runs x (b1 - b0): ``kind`` of each whole block of BLOCK_FILES files. reduceat over the
    rows: as fast as one pass (a reshape reducing axes of 100 values takes twice as long)."""
    if b1 <= b0:
        return np.empty((values.shape[0], 0), dtype=np.int64)
    rows = values[:, b0 * BLOCK_FILES: b1 * BLOCK_FILES]
    starts = np.arange(0, (b1 - b0) * BLOCK_FILES, BLOCK_FILES)
    if kind == "max":
        return np.maximum.reduceat(rows, starts, axis=1)
    if kind == "min":
        return np.minimum.reduceat(rows, starts, axis=1)
    if kind == "sum":  # of the measured values
        return np.add.reduceat(np.where(rows >= 0, rows, 0), starts, axis=1)
    return np.add.reduceat((rows >= 0).astype(np.int64), starts, axis=1)


def _measured_blocks(values: np.ndarray, summary: BlockSummary, kind: str) -> np.ndarray:
    """The count or the sum of the measured values of each block: from the block minima, a
    block with nothing unmeasured is counted as whole (no pass over it)."""
    low = summary.get(values, "min")
    made = summary.kinds.get(kind)
    if made is not None and made.shape == low.shape:
        return made
    if kind == "count":
        made = np.full(low.shape, BLOCK_FILES, dtype=np.int64)
    else:
        made = np.add.reduceat(values[:, : low.shape[1] * BLOCK_FILES], np.arange(0, low.shape[1] * BLOCK_FILES,
                                                                                   BLOCK_FILES), axis=1) \
            if (low >= 0).all() and low.shape[1] else _block_summary(values, "sum", 0, low.shape[1])
    holes = np.argwhere(low < 0)
    if holes.size and kind == "count":
        rows = values[:, : low.shape[1] * BLOCK_FILES].reshape(*low.shape, BLOCK_FILES)[holes[:, 0], holes[:, 1]]
        made[holes[:, 0], holes[:, 1]] = (rows >= 0).sum(axis=1)
    summary.kinds[kind] = made
    return made


def _reduce_buckets(values: np.ndarray, per_block: np.ndarray, edges: Callable[[np.ndarray], np.ndarray],
                    zoom: int, ufunc: np.ufunc, empty: int, cols: tuple[int, int]) -> np.ndarray:
    """runs x (c1 - c0): ``ufunc`` over each bucket's whole blocks (``per_block``) and its ragged
    edge files (``edges``: their raw values -> what to reduce), ``empty`` for a bucket of
    neither; buckets ``cols`` = (c0, c1)."""
    runs, files = values.shape
    blocks = per_block.shape[1]
    columns = cols[1] - cols[0]
    starts = np.arange(cols[0], cols[1], dtype=np.int64) * zoom
    stops = np.minimum(starts + zoom, files)
    first = -(-starts // BLOCK_FILES)  # the whole blocks inside each bucket: [first, last)
    last = np.minimum(stops // BLOCK_FILES, blocks)
    inner = last > first
    first, last = np.where(inner, first, 0), np.where(inner, last, 0)
    out = np.full((runs, columns), empty, dtype=np.int64)
    if inner.any():
        padded = np.concatenate([per_block, np.zeros((runs, 1), dtype=np.int64)], axis=1)
        bounds = np.stack([first[inner], last[inner]], axis=1).ravel()
        out[:, inner] = ufunc.reduceat(padded, bounds, axis=1)[:, ::2]
    # the edges: files of a bucket outside its whole blocks (all of it when it has none),
    # gathered bucket by bucket: [start, left_stop) then [right_start, stop)
    left_stop = np.where(inner, first * BLOCK_FILES, stops)
    right_start = np.where(inner, last * BLOCK_FILES, stops)
    seg_starts = np.stack([starts, right_start], axis=1).ravel()
    seg_lengths = np.stack([left_stop - starts, stops - right_start], axis=1).ravel()
    total = int(seg_lengths.sum())
    if total:
        offsets = np.cumsum(seg_lengths) - seg_lengths
        idx = np.repeat(seg_starts - offsets, seg_lengths) + np.arange(total)
        lengths = seg_lengths[0::2] + seg_lengths[1::2]
        has = lengths > 0
        group_starts = (np.cumsum(lengths) - lengths)[has]
        reduced = ufunc.reduceat(edges(values[:, idx]), group_starts, axis=1)
        out[:, has] = np.where(inner[has], ufunc(out[:, has], reduced), reduced)
    return out


def _bucket_summarised(values: np.ndarray, zoom: int, aggregate: str, summary: BlockSummary,
                       cols: tuple[int, int]) -> np.ndarray:
    """Buckets ``cols`` = (c0, c1), 0 <= c0 < c1 <= the columns, from ``summary``."""
    if aggregate == "max":
        return _reduce_buckets(values, summary.get(values, "max"), lambda raw: raw, zoom, np.maximum, NOT_MEASURED,
                               cols)
    if aggregate == "mean":
        valid = _reduce_buckets(values, _measured_blocks(values, summary, "count"),
                                lambda raw: (raw >= 0).astype(np.int64), zoom, np.add, 0, cols)
        total = _reduce_buckets(values, _measured_blocks(values, summary, "sum"), lambda raw: np.where(raw >= 0, raw, 0),
                                zoom, np.add, 0, cols)
        return np.where(valid > 0, total // np.maximum(valid, 1), NOT_MEASURED)
    q = {"p99": 0.99, "p90": 0.90, "p50": 0.50}[aggregate]
    if values.size >= SKETCH_MIN_VALUES and zoom >= HIST_BLOCK:
        return _sketched_percentiles(values, zoom, q, summary, cols)
    if cols != (0, -(-values.shape[1] // zoom)):  # the buckets' own files, selected exactly
        return _percentiles(values[:, cols[0] * zoom: cols[1] * zoom], zoom, q, aggregate, summary)
    return _percentiles(values, zoom, q, aggregate, summary)


def _percentiles(values: np.ndarray, zoom: int, q: float, aggregate: str, summary: BlockSummary) -> np.ndarray:
    """As _aggregate's percentiles, one run at a time in a reused scratch buffer: the run's
    values are copied (as int32 when they fit: it selects twice as fast and is exact below
    2.1 s) into memory that stays cached and mapped, and what is unmeasured is read there."""
    runs, files = values.shape
    whole = files // zoom
    columns = -(-files // zoom)
    full_rank = int(np.floor(q * (zoom - 1)))
    out = np.empty((runs, columns), dtype=np.int64)
    valid = np.full((runs, columns), zoom, dtype=np.int64)
    top = summary.kinds.get("max")
    low = summary.kinds.get("min")
    blocks = files // BLOCK_FILES
    for run in range(runs):
        if whole:
            row = values[run, : whole * zoom]
            if top is not None and top.shape == (runs, blocks):  # held: no pass for the bound
                high = max(int(top[run].max(initial=NOT_MEASURED)),
                           int(values[run, top.shape[1] * BLOCK_FILES:].max(initial=NOT_MEASURED)))
            else:
                high = int(row.max())
            scratch = summary.scratch_for(whole * zoom, np.int32 if high < 2**31 else np.int64)
            np.copyto(scratch, row, casting="unsafe")
            own = scratch.reshape(whole, zoom)
            if low is not None and low.shape == (runs, blocks):  # held: no pass to see unmeasured files
                holes = low[run].min(initial=0) < 0 or values[run, blocks * BLOCK_FILES: whole * zoom].min(initial=0) < 0
            else:
                holes = scratch.min() < 0
            if holes:  # unmeasured files: count them per bucket before the selection
                valid[run, :whole] = (own >= 0).sum(axis=1)
            own.partition(full_rank, axis=1)  # in place, in the reused buffer
            out[run, :whole] = own[:, full_rank]
            # buckets with unmeasured files: sorted, as few as they usually are
            inside = np.flatnonzero(valid[run, :whole] < zoom)
            if inside.size:
                counts = valid[run, inside]
                idx = np.minimum((zoom - counts) + np.floor(q * np.maximum(counts - 1, 0)).astype(np.int64), zoom - 1)
                ordered = np.sort(row.reshape(whole, zoom)[inside], axis=1)
                out[run, inside] = np.take_along_axis(ordered, idx[:, None], axis=1)[:, 0]
        if whole < columns:  # the last, partial bucket
            tail = values[run, whole * zoom:]
            valid[run, whole] = int((tail >= 0).sum())
            out[run, whole] = bucket(values[run:run + 1, whole * zoom:], zoom, aggregate)[0, 0]
    return np.where(valid > 0, out, NOT_MEASURED)


SKETCH_MIN_VALUES = 1_000_000  # below it exact percentiles cost a few ms: no approximation
HIST_BLOCK = SUMMARY_MIN_ZOOM  # files per histogram block: divides every zoom step from 500 up
HIST_SHIFT = 19  # float32 bits >> 19: the exponent and 4 mantissa bits, 16 bins an octave
HIST_MARGIN = 16  # bins (an octave) either side of the data's range: a live run rarely leaves it


def _log_keys(values: np.ndarray) -> np.ndarray:
    """The log bin of each value (>= 1): its float32 bits' exponent and top 4 mantissa bits,
    monotone in the value, 16 bins an octave (3.1-6.2 % wide). Integer work, no logarithm."""
    return (np.maximum(values, 1).astype(np.float32).view(np.int32) >> HIST_SHIFT).astype(np.int64)


def _key_values(keys: np.ndarray) -> np.ndarray:
    """The middle of each bin (the float32 with the bin's bits and the next mantissa bit set)."""
    bits = (keys.astype(np.int64) << HIST_SHIFT) | (1 << (HIST_SHIFT - 1))
    return np.rint(bits.astype(np.int32).view(np.float32)).astype(np.int64)


class LogHistograms:
    """Per run, the log-bin histograms of the measured values as prefix sums over blocks of
    ``block`` files and over bins: ``prefix[run, b, k]`` counts the values of blocks [0, b)
    in bins <= k, so a run of whole blocks has its cumulative histogram at any bin in one
    subtraction, whatever the zoom. Bins span the data's range (an octave to spare either
    side); a live batch patches its run's blocks and the sums after them, or says the
    histograms must be made anew (a value outside the bins)."""

    def __init__(self, values: np.ndarray, block: int):
        self.shape = values.shape
        self.block = block
        runs, files = values.shape
        measured = values[values >= 0]
        low, high = (int(measured.min()), int(measured.max())) if measured.size else (1, 1)
        self.lo = int(_log_keys(np.array([low]))[0]) - HIST_MARGIN
        self.bins = int(_log_keys(np.array([high]))[0]) + HIST_MARGIN - self.lo + 1
        blocks = files // block
        self.prefix = np.zeros((runs, blocks + 1, self.bins), dtype=np.int32)
        for run in range(runs):  # run by run: the temporaries stay one run's size
            np.cumsum(self._counts(values[run], 0, blocks), axis=0, out=self.prefix[run, 1:])
        np.cumsum(self.prefix, axis=2, out=self.prefix)

    def keys(self, values: np.ndarray) -> np.ndarray | None:
        """Each value's bin (``bins`` for not measured), or None when one is outside the bins."""
        keys = np.where(values >= 0, _log_keys(values) - self.lo, self.bins)
        return keys if keys.size == 0 or (keys.min() >= 0 and keys.max() <= self.bins) else None

    def _counts(self, row: np.ndarray, b0: int, b1: int) -> np.ndarray:
        """(b1 - b0) x bins: each block's histogram of its measured values."""
        keys = self.keys(row[b0 * self.block: b1 * self.block])
        if keys is None:
            raise ValueError("a value outside the histograms' bins")
        keys += np.repeat(np.arange(b1 - b0, dtype=np.int64) * (self.bins + 1), self.block)
        return np.bincount(keys, minlength=(b1 - b0) * (self.bins + 1)).reshape(b1 - b0, self.bins + 1)[:, :-1]

    def patch(self, values: np.ndarray, run: int, start: int, stop: int) -> bool:
        """Files [start, stop) of run ``run`` are new; False: make the histograms anew."""
        runs, files = values.shape
        if runs != self.shape[0]:
            return False
        blocks = files // self.block
        held = self.prefix.shape[1] - 1
        try:
            if blocks > held:  # the files grew: the new whole blocks of every run appended
                grown = np.empty((runs, blocks + 1, self.bins), dtype=np.int32)
                grown[:, : held + 1] = self.prefix
                for r in range(runs):
                    new = np.cumsum(np.cumsum(self._counts(values[r], held, blocks), axis=1), axis=0)
                    grown[r, held + 1:] = self.prefix[r, held] + new
                self.prefix = grown
            self.shape = values.shape
            b0, b1 = start // self.block, min(blocks, -(-stop // self.block))
            if b1 > b0:
                prefix = self.prefix[run]
                old = prefix[b0 + 1: b1 + 1] - prefix[b0:b1]
                delta = np.cumsum(self._counts(values[run], b0, b1), axis=1) - old
                prefix[b0 + 1: b1 + 1] += np.cumsum(delta, axis=0, dtype=np.int32)
                prefix[b1 + 1:] += delta.sum(axis=0, dtype=np.int32)
        except ValueError:
            return False
        return True


COARSE_BINS = 8  # the rank's bin is looked for 8 bins at a time, then bin by bin within them


def hist_block(zoom: int) -> int:
    """The block of the histograms a zoom's buckets are made of: HIST_BLOCK for the zoom steps
    (its multiples), the zoom itself otherwise (the fit of the width): whole blocks, no edges."""
    return HIST_BLOCK if zoom % HIST_BLOCK == 0 else zoom


def _sketched_percentiles(values: np.ndarray, zoom: int, q: float, summary: BlockSummary,
                          cols: tuple[int, int]) -> np.ndarray:
    """Percentiles of big data from the log histograms: a bucket's cumulative histogram is its
    whole blocks' (two reads of the prefix sums per bin looked at), and its percentile the
    middle of the bin holding that rank. The bin is found 8 bins at a time (every bucket the
    same bins: slices), then among those 8 (a take): not every bin, where the exact selection reads every
    value at every switch (20-50 ms at 1M files x 10 runs). The last bucket, when partial, is
    selected exactly (it is at most one bucket of values).

    Approximate by half a bin: a bin is 3.1-6.2 % wide (16 to the octave, linear within it),
    so within 3.1 % (0.013 decade) of the exact percentile. That is enough for what it is for,
    a colour: the 64 levels of a scale of 0.82 decade or more are 0.013 decade apart or more,
    so a bucket is at most one level off there (usually none: on a typical 2-3 decade scale a
    level is 0.03-0.05 decade), two on the narrowest, half-decade scale. The cursor's readout
    is exact (the widget buckets that one bucket itself). Buckets ``cols`` = (c0, c1) only."""
    runs, files = values.shape
    hist = summary.histograms(values, hist_block(zoom))
    prefix, bins, per = hist.prefix, hist.bins, zoom // hist.block
    c0, c1 = cols
    whole = min(files // zoom, c1) - c0  # the whole buckets asked for, from c0
    out = np.empty((runs, c1 - c0), dtype=np.int64)
    if whole > 0:
        coarse_at = np.append(np.arange(COARSE_BINS - 1, bins - 1, COARSE_BINS), bins - 1)
        # every bucket edge's sums at every group's end
        sums = prefix[:, c0 * per: (c0 + whole) * per + 1: per, coarse_at]
        coarse = (sums[:, 1:] - sums[:, :-1]).astype(np.int64)
        flat = prefix.reshape(-1)  # each bucket's two edges as offsets into it: one take a bin
        first = (np.arange(runs, dtype=np.int64)[:, None] * prefix.shape[1]
                 + np.arange(c0, c0 + whole, dtype=np.int64) * per)[..., None] * bins
        after = first + per * bins
        measured = coarse[..., -1]
        rank = np.floor(q * np.maximum(measured - 1, 0)).astype(np.int64)[..., None]
        group = (coarse <= rank).sum(axis=2, keepdims=True)  # the rank's bin is in this group
        fine_at = np.minimum(group * COARSE_BINS + np.arange(COARSE_BINS), bins - 1)
        fine = flat.take(after + fine_at).astype(np.int64) - flat.take(first + fine_at)
        key = group[..., 0] * COARSE_BINS + (fine <= rank).sum(axis=2) + hist.lo
        out[:, :whole] = np.where(measured > 0, _key_values(key), NOT_MEASURED)
    if max(whole, 0) < c1 - c0:  # the last, partial bucket: exactly
        last = files // zoom
        out[:, -1:] = bucket(values[:, last * zoom:], zoom, {0.99: "p99", 0.90: "p90", 0.50: "p50"}[q])
    return out


def bucket_mask(mask: np.ndarray, zoom: int) -> np.ndarray:
    """files bool -> columns bool (any file of the bucket)."""
    if zoom <= 1 or mask.size == 0:
        return mask.copy()
    cols = -(-mask.size // zoom)
    padded = np.zeros(cols * zoom, dtype=bool)
    padded[: mask.size] = mask
    return np.asarray(padded.reshape(cols, zoom).any(axis=1))


def levels(values: np.ndarray, scale: tuple[float, float], n_levels: int) -> np.ndarray:
    """Level 0..n_levels-1 of each value on the log10 ``scale`` (lo, hi); -1 = not measured."""
    lo, hi = scale
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = (np.log10(np.maximum(values, 1)) - lo) / (hi - lo) * (n_levels - 1)
    out = np.clip(np.rint(scaled), 0, n_levels - 1).astype(np.int64)
    out[values < 0] = -1
    return out


class Bucketings:
    """The bucketings of one matrix by (zoom, aggregate), kept for one data version: each is
    made once per data change, a live batch patches only its own columns in every one held, so
    switching back and forth buckets nothing twice, and one made ahead (off the frame path, see
    the heatmap widget) costs the frame that switches to it nothing. A new zoom or aggregate is
    bucketed from the data's BlockSummary, made once per data version and patched alike.

    Only the columns asked for are bucketed (``columns``: a screen's worth, where a zoom of 500
    has 2,000 columns at 1M files and the screen shows 193): a bucketing's cost follows the
    screen, not the files. Each holds which of its columns are made; scrolling makes the rest.

    One file per column (zoom 1) is the values themselves: nothing to make or patch."""

    def __init__(self, limit: int = 8):
        self.limit = limit  # bucketings held at once (a zoom walk makes one per step)
        self._made: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}  # -> (buckets, columns made)
        self._data: tuple[int, int, int] | None = None  # (version, runs, files) of _made
        self._summary = BlockSummary()  # of the same data: any zoom and aggregate bucketed from it

    def clear(self) -> None:
        self._made.clear()
        self._summary.clear()
        self._data = None

    def has(self, version: int, values: np.ndarray, zoom: int, aggregate: str,
            columns: tuple[int, int] | None = None) -> bool:
        """Whether ``columns`` (None: all) of that bucketing are made for this data."""
        if zoom <= 1:
            return True
        held = self._made.get((zoom, aggregate)) if self._data == (version, *values.shape) else None
        if held is None:
            return False
        c0, c1 = columns if columns is not None else (0, held[1].size)
        return bool(held[1][max(0, c0):c1].all())

    def get(self, version: int, values: np.ndarray, zoom: int, aggregate: str,
            columns: tuple[int, int] | None = None) -> np.ndarray:
        """runs x columns of ``values`` (data version ``version``), made now where not held:
        ``columns`` (c0, c1) of them (None: all); the others may be -1, not made."""
        if zoom <= 1:
            return values
        data = (version, *values.shape)
        if self._data != data:
            self._summary.clear()
            self._made.clear()
            self._data = data
        runs, files = values.shape
        total = -(-files // zoom)
        held = self._made.pop((zoom, aggregate), None)
        if held is None:
            while len(self._made) >= self.limit:  # the least recently asked for goes, not all of them
                del self._made[next(iter(self._made))]
            held = (np.full((runs, total), NOT_MEASURED, dtype=np.int64), np.zeros(total, dtype=bool))
        made, done = held
        c0, c1 = (0, total) if columns is None else (max(0, columns[0]), min(total, columns[1]))
        missing = np.flatnonzero(~done[c0:c1])
        if missing.size:  # the columns not made yet, as one span
            m0, m1 = c0 + int(missing[0]), c0 + int(missing[-1]) + 1
            if zoom >= SUMMARY_MIN_ZOOM:
                self._summary.prime(values, zoom)
            made[:, m0:m1] = bucket(values, zoom, aggregate, summary=self._summary, columns=(m0, m1))
            done[m0:m1] = True
        self._made[(zoom, aggregate)] = held  # (re)inserted: the most recently asked for
        return made

    def patch(self, version: int, values: np.ndarray, run: int, start: int, stop: int) -> bool:
        """Version ``version`` is version - 1 with files [start, stop) of run ``run`` new:
        bucket those columns anew in every bucketing held. False (and nothing held any more)
        when what is held is of other data than version - 1 with the same runs."""
        runs, files = values.shape
        if self._data is None or self._data[:2] != (version - 1, runs):
            self.clear()
            return False
        self._summary.patch(values, run, start, stop)
        for key, (made, done) in list(self._made.items()):
            zoom = key[0]
            columns = -(-files // zoom)
            if made.shape[1] < columns:  # the files grew: new buckets, not made yet
                grown = np.full((runs, columns), NOT_MEASURED, dtype=np.int64)
                grown[:, : made.shape[1]] = made
                grown_done = np.zeros(columns, dtype=bool)
                grown_done[: done.size] = done
                made, done = self._made[key] = (grown, grown_done)
            c0, c1 = start // zoom, -(-stop // zoom)
            part = bucket(values[run:run + 1, c0 * zoom: min(files, c1 * zoom)], zoom, key[1])
            made[run, c0:c0 + part.shape[1]] = part[0]
            # the other runs' buckets of those columns are made only where they were
        self._data = (version, runs, files)
        return True
