"""A call is slow against its own kind on its own file or directory: the local baseline.

As the probe judges a file against the curve around it, a watched call is judged against the
calls of the same kind (op) on the same file -- or, for calls that change or list a directory
(and opens that create), the same directory -- made just before and after it: the median of
up to ``NEIGHBOURS`` on each side. It is slow when it took ``factor`` times that and at least
``floor_ns`` more. A group too small for a baseline of its own (fewer than ``MIN_GROUP``
calls) is judged against every call of its kind, and says so; with ``MIN_SMALL`` calls or
more it is also judged against its own other calls, and where the two disagree (slow beside
the op's calls, not beside its own file's, or the reverse) the call is *inconclusive*: more
calls on that file or directory (``MIN_GROUP``) would decide it. Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fsscope.watch.syscalls import DIR_OPS, OPS

NEIGHBOURS = 8
MIN_GROUP = NEIGHBOURS + 1
#: A smaller group still has a median of its own other calls to set beside the op's.
MIN_SMALL = 3


@dataclass
class Judged:
    group: np.ndarray         # per call: the key it was judged in (its file or directory; 0 none)
    baseline_ns: np.ndarray   # per call: its local baseline
    local: np.ndarray         # per call: the baseline is its group's own (not the op's)
    slow: np.ndarray          # per call: slow
    inconclusive: np.ndarray  # per call: its small group and the op's other calls disagree (never slow)
    group_size: np.ndarray    # per call: how many calls its group has (what a verdict rests on)


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
    own = np.full(n, np.nan)  # a small group's: the median of its other calls
    local = np.zeros(n, bool)
    size = np.zeros(n, np.int64)
    duration = calls["duration_ns"].astype(float)
    for op in np.unique(calls["op"]):
        of_op = calls["op"] == op
        op_median = float(np.median(duration[of_op]))
        keys = group[of_op]
        for key in np.unique(keys):
            rows = np.flatnonzero(of_op)[keys == key]
            size[rows] = len(rows)
            if len(rows) >= MIN_GROUP:
                baseline[rows] = neighbour_median(duration[rows])
                local[rows] = True
            else:
                baseline[rows] = op_median
                if len(rows) >= MIN_SMALL:
                    own[rows] = neighbour_median(duration[rows])

    def slow_against(base: np.ndarray) -> np.ndarray:
        return (duration >= factor * base) & (duration - base >= floor_ns)

    slow = slow_against(baseline)
    small = ~np.isnan(own)
    inconclusive = small & (slow != slow_against(np.where(small, own, 0.0)))
    slow &= ~inconclusive
    return Judged(group, baseline.astype(np.int64), local, slow, inconclusive, size)
