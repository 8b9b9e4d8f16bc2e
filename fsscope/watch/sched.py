"""A thread's time off its CPU from the kernel's ``sched_switch`` and ``sched_wakeup``, shared
by watch's causes (a slow call's time blocked or waiting for a CPU) and its capture (a think
time's parts): both must not read a switch back the kernel did not record as time off the CPU.
Pure numpy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: sched_switch's prev_state of a task that left the CPU still runnable (0, "R"; or the
#: preempted TASK_REPORT_MAX, "R+"): its low byte is 0; any other state is a sleep.
_RUNNABLE_MASK = 0xFF


def _grouped(keys: np.ndarray, values: np.ndarray) -> dict[int, np.ndarray]:
    """``values`` by ``keys``, each group in its sorted order."""
    order = np.lexsort((values, keys))
    k, v = keys[order], values[order]
    uniq, first = np.unique(k, return_index=True)
    return {int(u): part for u, part in zip(uniq.tolist(), np.split(v, first[1:]))}


def off_cpu(events: np.ndarray, names: list[str]) -> dict[int, np.ndarray] | None:
    """Per thread, the spans it was off its CPU (from sched_switch), as rows (left, back,
    woken, returned): ``woken`` is when a sleep ended (its sched_wakeup, else ``back``), ``left``
    for a thread preempted (runnable all along: from ``woken`` to ``back`` it waited for a CPU);
    ``returned`` is 0 where the kernel recorded no switch back to the thread before its next
    own event or its next leave, so ``back`` is only that (when it came back is not known).
    None: the scheduling was not traced.

    The kernel itself does not record every switch: with a fresh instance, read from its text
    ``trace`` (no reader, no decoder; ``set_event_pid`` or an event filter alike), a thread
    that spins and sleeps under load had up to 3 in 400 of its switches back missing."""
    code = {n.split("/", 1)[-1]: k for k, n in enumerate(names)}
    sw, wk = code.get("sched_switch"), code.get("sched_wakeup")
    if sw is None:
        return None
    is_switch = events["code"] == sw
    is_wake = events["code"] == wk if wk is not None else np.zeros(len(events), bool)
    rows = events[is_switch]
    rows = rows[np.argsort(rows["ts_ns"], kind="stable")]
    own = events[~(is_switch | is_wake)]
    wakes = events[is_wake]
    leaves = _grouped(rows["sector"].astype(np.int64), np.arange(len(rows)))
    backs = _grouped(rows["arg"], rows["ts_ns"])
    # the thread's own other events: it was on its CPU then, so an off span ends by the first
    # of them (a lost return would otherwise make the span swallow the calls after it)
    ran_at = _grouped(own["pid"].astype(np.int64), own["ts_ns"])
    woken_at = _grouped(wakes["arg"], wakes["ts_ns"])
    none = np.zeros(0, np.int64)
    out: dict[int, np.ndarray] = {}
    for tid, idx in leaves.items():
        t = rows["ts_ns"][idx]
        back, ran = backs.get(tid, none), ran_at.get(tid, none)
        k = np.searchsorted(back, t, side="right")
        r = np.searchsorted(ran, t, side="right")
        big = np.iinfo(np.int64).max
        next_back = np.where(k < len(back), back[np.minimum(k, len(back) - 1)] if len(back) else big, big)
        next_ran = np.where(r < len(ran), ran[np.minimum(r, len(ran) - 1)] if len(ran) else big, big)
        # its next leave: it was back on a CPU before it, so a leave with no switch back
        # recorded before the next one lost its return too (a preempted fsync whose return was
        # lost, then asleep, woken and back, read as 6.7 ms waiting for a CPU of 7.2 ms)
        next_leave = np.append(t[1:], big)
        end = np.minimum(np.minimum(next_back, next_ran), next_leave)
        returned = next_back <= np.minimum(next_ran, next_leave)
        seen = end < big  # never back inside the capture: no span
        t, end, returned, idx = t[seen], end[seen], returned[seen], idx[seen]
        asleep = (rows["flags"][idx].astype(np.int64) & _RUNNABLE_MASK) != 0
        ws = woken_at.get(tid, none)
        j = np.searchsorted(ws, t, side="right")
        next_wake = np.where(j < len(ws), ws[np.minimum(j, len(ws) - 1)] if len(ws) else big, big)
        woken = np.where(asleep, np.minimum(next_wake, end), t)
        out[tid] = np.stack([t, end, woken, returned.astype(np.int64)], axis=1).reshape(-1, 4)
    return out


class Parts(NamedTuple):
    """A stretch of a thread's time off its CPU, in ns, by what the kernel recorded."""

    asleep_ns: int     # blocked: left the CPU asleep, until its wake-up
    preempted_ns: int  # left the CPU still runnable, until it was back: waited for a CPU
    runnable_ns: int   # woken, until it was back on a CPU: waited for a CPU
    unknown_ns: int    # left the CPU and no switch back was recorded before its next event
    #: of ``unknown_ns``, what follows a recorded wake-up (a sleep's end is known, not when it
    #: was back on a CPU: waiting for one or running). The switch from the idle task back to a
    #: woken thread is the one seen missing most (a whole capture's sleeps, in some runs)
    after_wake_ns: int = 0

    @property
    def known_ns(self) -> int:
        return self.asleep_ns + self.preempted_ns + self.runnable_ns


def parts(spans: np.ndarray, begin: int, end: int) -> Parts:
    """Of the thread's off-CPU ``spans`` (:func:`off_cpu`'s rows), the parts inside [begin, end).
    A span whose switch back the kernel did not record is only ``unknown_ns``: it ended by the
    thread's own next event, so how much of it the thread was off its CPU, asleep or waiting
    for one, is not known (it may have run all along)."""
    lo, hi = np.maximum(spans[:, 0], begin), np.minimum(spans[:, 1], end)
    inside = hi > lo
    lo, hi, woken, returned = lo[inside], hi[inside], spans[inside, 2], spans[inside, 3] != 0
    length = hi - lo
    preempted = woken == spans[inside, 0]
    # a sleep ends at its wake-up (``woken``); a preempted span's woken is its leave: none asleep
    slept = np.where(preempted, 0, np.clip(np.minimum(woken, hi) - lo, 0, length))
    # a sleep whose wake-up was recorded but not its switch back: asleep until the wake-up is
    # known, the rest is not (a sleep with no wake-up before its end is not known at all)
    woke = ~returned & ~preempted & (woken < spans[inside, 1])
    return Parts(asleep_ns=int(slept[returned | woke].sum()),
                 preempted_ns=int(length[returned & preempted].sum()),
                 runnable_ns=int((length - slept)[returned & ~preempted].sum()),
                 unknown_ns=int(length[~returned].sum() - slept[woke].sum()),
                 after_wake_ns=int((length - slept)[woke].sum()))
