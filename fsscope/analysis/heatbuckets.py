"""Per-file latencies bucketed for a heatmap: columns of ``zoom`` files, each shown by one
aggregate (max, a percentile, the mean), and colour levels on a log scale.

Pure numpy, no screen: the heatmap widget asks for a bucketing once per data version, zoom and
aggregate, and patches the columns of a live batch with the same function.
"""

from __future__ import annotations

import numpy as np

AGGREGATES = ("max", "p99", "p90", "p50", "mean")


def bucket(values: np.ndarray, zoom: int, aggregate: str) -> np.ndarray:
    """runs x files int64 (-1 = not measured) -> runs x ceil(files/zoom) by ``aggregate``.

    A bucket with no measured file is -1. Percentiles ignore unmeasured files: -1 sorts
    first, so the q-th measured value of a bucket is at (unmeasured + q*(measured-1))."""
    runs, files = values.shape
    if zoom <= 1 or files == 0:
        return np.array(values, dtype=np.int64, copy=True)
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
    the heatmap widget) costs the frame that switches to it nothing.

    One file per column (zoom 1) is the values themselves: nothing to make or patch."""

    def __init__(self, limit: int = 8):
        self.limit = limit  # bucketings held at once (a zoom walk makes one per step)
        self._made: dict[tuple[int, str], np.ndarray] = {}
        self._data: tuple[int, int, int] | None = None  # (version, runs, files) of _made

    def clear(self) -> None:
        self._made.clear()
        self._data = None

    def has(self, version: int, values: np.ndarray, zoom: int, aggregate: str) -> bool:
        return zoom <= 1 or (self._data == (version, *values.shape) and (zoom, aggregate) in self._made)

    def get(self, version: int, values: np.ndarray, zoom: int, aggregate: str) -> np.ndarray:
        """runs x columns of ``values`` (data version ``version``): made now unless held."""
        if zoom <= 1:
            return values
        data = (version, *values.shape)
        if self._data != data or len(self._made) >= self.limit:
            self._made.clear()
            self._data = data
        made = self._made.get((zoom, aggregate))
        if made is None:
            made = self._made[(zoom, aggregate)] = bucket(values, zoom, aggregate)
        return made

    def patch(self, version: int, values: np.ndarray, run: int, start: int, stop: int) -> bool:
        """Version ``version`` is version - 1 with files [start, stop) of run ``run`` new:
        bucket those columns anew in every bucketing held. False (and nothing held any more)
        when what is held is of other data than version - 1 with the same runs."""
        runs, files = values.shape
        if self._data is None or self._data[:2] != (version - 1, runs):
            self.clear()
            return False
        for (zoom, aggregate), made in list(self._made.items()):
            columns = -(-files // zoom)
            if made.shape[1] < columns:  # the files grew: new buckets, not measured yet
                grown = np.full((runs, columns), -1, dtype=np.int64)
                grown[:, : made.shape[1]] = made
                made = self._made[(zoom, aggregate)] = grown
            c0, c1 = start // zoom, -(-stop // zoom)
            part = bucket(values[run:run + 1, c0 * zoom: min(files, c1 * zoom)], zoom, aggregate)
            made[run, c0:c0 + part.shape[1]] = part[0]
        self._data = (version, runs, files)
        return True
