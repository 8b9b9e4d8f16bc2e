"""A call is slow against its own kind on its own file or directory: the local baseline.

As the probe judges a file against the curve around it, a watched call is judged against the
calls of the same kind (op) on the same file -- or, for calls that change or list a directory
(and opens that create), the same directory -- made just before and after it: the median of
up to ``NEIGHBOURS`` on each side. It is slow when it took ``factor`` times that and at least
``floor_ns`` more. A group too small for a baseline of its own (fewer than ``MIN_GROUP``
calls) is judged against every call of its kind, and says so. Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fsscope.watch.syscalls import DIR_OPS, OPS

NEIGHBOURS = 8
MIN_GROUP = NEIGHBOURS + 1


@dataclass
class Judged:
    group: np.ndarray         # per call: the key it was judged in (its file or directory; 0 none)
    baseline_ns: np.ndarray   # per call: its local baseline
    local: np.ndarray         # per call: the baseline is its group's own (not the op's)
    slow: np.ndarray          # per call: slow


def groups(calls: np.ndarray, file: np.ndarray, dirk: np.ndarray, created: np.ndarray) -> np.ndarray:
    """The key each call is judged in: its directory for directory ops and creating opens,
    else its file."""
    by_dir = np.isin(calls["op"], [OPS.index(o) for o in DIR_OPS]) | created
    return np.where(by_dir, dirk, file)


def neighbour_median(values: np.ndarray, k: int = NEIGHBOURS) -> np.ndarray:
    """For each value, the median of up to ``k`` values on each side of it (not itself)."""
    padded = np.concatenate([np.full(k, np.nan), values.astype(float), np.full(k, np.nan)])
    windows = sliding_window_view(padded, 2 * k + 1).copy()
    windows[:, k] = np.nan
    return np.nanmedian(windows, axis=1)


def judge(calls: np.ndarray, group: np.ndarray, *, factor: float, floor_ns: int) -> Judged:
    n = len(calls)
    baseline = np.zeros(n)
    local = np.zeros(n, bool)
    duration = calls["duration_ns"].astype(float)
    for op in np.unique(calls["op"]):
        of_op = calls["op"] == op
        op_median = float(np.median(duration[of_op]))
        keys = group[of_op]
        for key in np.unique(keys):
            rows = np.flatnonzero(of_op)[keys == key]
            if len(rows) >= MIN_GROUP:
                baseline[rows] = neighbour_median(duration[rows])
                local[rows] = True
            else:
                baseline[rows] = op_median
    slow = (duration >= factor * baseline) & (duration - baseline >= floor_ns)
    return Judged(group, baseline.astype(np.int64), local, slow)
