"""Pair the watched calls' entry and exit events per thread into call records.

Pure numpy. A thread makes one system call at a time, so among one thread's syscall events
in time order an entry followed by the exit of the same call is one call; anything else (an
exit whose entry came before the watch, an entry still open when it stopped, a pair broken by
events the ring buffer lost) is counted, not guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fsscope.watch.syscalls import ENTRY_FILTERED, syscall_codes

#: One call: the thread, what it was (``op`` indexes syscalls.OPS; ``code`` its entry event),
#: when and for how long (monotonic ns), its result, the bytes it asked for, its descriptor
#: (-1: none) and open flags.
CALL_DTYPE = np.dtype([("tid", "<i4"), ("op", "<i2"), ("code", "<i2"), ("start_ns", "<i8"),
                       ("duration_ns", "<i8"), ("result", "<i8"), ("bytes", "<i8"), ("fd", "<i4"),
                       ("flags", "<i4")])


@dataclass
class Paired:
    calls: np.ndarray        # CALL_DTYPE, by start time
    unpaired_enters: int     # entries with no exit (open when the watch stopped, or lost)
    unpaired_exits: int      # exits with no entry (entered before the watch, or lost)
    across_loss: int = 0     # an entry and an exit with events lost between: not made a call


def merged(spans: list[tuple[int, int]]) -> np.ndarray:
    """Loss spans (after, before ns) as sorted disjoint intervals, shape (k, 2)."""
    out: list[list[int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return np.array(out, dtype=np.int64).reshape(-1, 2)


def overlaps(starts: np.ndarray, ends: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """Which windows [start, end] meet one of the disjoint sorted ``spans``."""
    if not len(spans):
        return np.zeros(len(starts), bool)
    k = np.searchsorted(spans[:, 0], ends, side="left") - 1  # the last span beginning before the end
    return (k >= 0) & (spans[np.clip(k, 0, None), 1] > starts)


def pair(events: np.ndarray, names: list[str], losses: list[tuple[int, int]] | None = None) -> Paired:
    """``losses``: where the tasks' ring buffer lost events (see :mod:`.session`). An entry and
    an exit of the same syscall with a loss between them may be two calls whose other halves
    were lost: never one call (its window would take the kernel events of both)."""
    enters, exits, syscall = syscall_codes(names)
    codes = events["code"]
    is_enter = np.isin(codes, list(enters))
    is_exit = np.isin(codes, list(exits))
    sel = np.flatnonzero(is_enter | is_exit)
    ev = events[sel]
    order = np.lexsort((ev["ts_ns"], ev["pid"]))
    ev, enter = ev[order], is_enter[sel][order]
    name_of = np.array([syscall[c].name if c in syscall else "" for c in range(len(names))], dtype=object)
    short = name_of[ev["code"]] if len(ev) else np.zeros(0, dtype=object)
    if len(ev) > 1:
        ok = (enter[:-1] & ~enter[1:] & (ev["pid"][:-1] == ev["pid"][1:]) & (short[:-1] == short[1:]))
    else:
        ok = np.zeros(0, dtype=bool)
    across = np.zeros(len(ok), bool)
    if losses and len(ok):
        across = ok & overlaps(ev["ts_ns"][:-1], ev["ts_ns"][1:], merged(losses))
    first = np.flatnonzero(ok & ~across)
    calls = np.zeros(len(first), CALL_DTYPE)
    a, b = ev[first], ev[first + 1]
    calls["tid"] = a["pid"]
    op_of = np.full(len(names), -1, dtype=np.int16)
    for code, op in enters.items():
        op_of[code] = op
    calls["op"] = op_of[a["code"]]
    calls["code"] = a["code"]
    calls["start_ns"] = a["ts_ns"]
    calls["duration_ns"] = b["ts_ns"] - a["ts_ns"]
    calls["result"] = b["arg"]
    calls["bytes"] = a["bytes"].astype(np.int64)
    takes_fd = np.array([bool(syscall[c].fd) if c in syscall else False for c in range(len(names))])
    calls["fd"] = np.where(takes_fd[a["code"]], a["arg"], -1)
    calls["flags"] = a["flags"]
    calls = calls[np.argsort(calls["start_ns"], kind="stable")]
    used = np.zeros(len(ev), dtype=bool)
    used[first] = used[first + 1] = True
    split = np.flatnonzero(across)
    used[split] = used[split + 1] = True  # counted as split by a loss, not as unpaired
    filtered = np.isin(short, list(ENTRY_FILTERED)) & ~enter  # exits whose entries a filter dropped
    return Paired(calls, int((~used & enter).sum()), int((~used & ~enter & ~filtered).sum()), len(split))


def inside(calls: np.ndarray, events: np.ndarray) -> np.ndarray:
    """For each event, the index (in ``calls``) of the call its own thread was inside when it
    fired (start <= ts <= end), or -1. A thread's calls do not overlap, so one searchsorted
    per thread places them."""
    out = np.full(len(events), -1, dtype=np.int64)
    if not len(calls) or not len(events):
        return out
    for tid in np.unique(calls["tid"]):
        mine = np.flatnonzero(calls["tid"] == tid)
        mine = mine[np.argsort(calls["start_ns"][mine], kind="stable")]
        starts = calls["start_ns"][mine]
        ends = starts + calls["duration_ns"][mine]
        rows = np.flatnonzero(events["pid"] == tid)
        ts = events["ts_ns"][rows]
        k = np.searchsorted(starts, ts, side="right") - 1
        hit = (k >= 0) & (ts <= ends[np.clip(k, 0, len(mine) - 1)])
        out[rows[hit]] = mine[k[hit]]
    return out
