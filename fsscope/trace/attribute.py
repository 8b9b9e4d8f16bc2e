"""Join kernel events to what the job measured: calls (probe), windows (bench), writes.

Pure functions on numpy arrays. Events and calls share CLOCK_MONOTONIC ns (trace_clock mono
and time.monotonic_ns), so an event belongs to call i when start_i <= ts <= start_i + latency_i.
Calls are sequential (one process, one call at a time), so one ``searchsorted`` places every
event. Event names are used without their system ("xfs_dir2_sf_to_block").
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from fsscope.trace import catalog
from fsscope.trace.decode import RWBS_FLUSH, RWBS_FUA, RWBS_READ, RWBS_SYNC, RWBS_WRITE

ISSUE = "block_rq_issue"
COMPLETE = "block_rq_complete"
SWITCH = "sched_switch"
COMMIT_EVENTS = ("jbd2_start_commit", "jbd2_end_commit", "btrfs_transaction_commit")
COMMIT_STARTS = ("jbd2_start_commit", "btrfs_transaction_commit")  # one per commit
#: A block READ issued inside a call: metadata that was not cached (e.g. a cold XFS inode
#: cluster). Counted as its own pseudo-event beside block_rq_issue.
BLOCK_READ = "block_read"
#: Structures whose kernel evidence is a block read inside the call.
READ_EVIDENCE = {"xfs-inode-cluster-read": BLOCK_READ}


def short(name: str) -> str:
    return name.split("/", 1)[-1]


def call_index(ts_ns: np.ndarray, start_ns: np.ndarray, latency_ns: np.ndarray) -> np.ndarray:
    """For each event time, the index of the call it fell inside, or -1. Calls not reached
    (latency < 0) hold nothing."""
    reached = latency_ns >= 0
    count = len(reached) if reached.all() else int(np.argmax(~reached))  # calls run in order
    if count == 0:
        return np.full(len(ts_ns), -1, dtype=np.int64)
    starts, ends = start_ns[:count], start_ns[:count] + latency_ns[:count]
    idx = np.searchsorted(starts, ts_ns, side="right") - 1
    inside = (idx >= 0) & (ts_ns <= ends[np.clip(idx, 0, count - 1)])
    return np.where(inside, idx, -1)


@dataclass
class OffCpu:
    index: int
    off_ns: int
    preempted: bool      # runnable when switched out (another task took the CPU)
    by: str              # who ran instead (first switch)


@dataclass
class RunCalls:
    """One traced run: which events fell into which call."""

    run: int
    latency_ns: np.ndarray
    events: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    io_requests: Counter = field(default_factory=Counter)
    io_bytes: Counter = field(default_factory=Counter)
    io_flags: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    off_cpu: dict[int, list[OffCpu]] = field(default_factory=lambda: defaultdict(list))
    #: per call: slab objects taken, by cache (kmem_cache_alloc fires in every call: kept
    #: apart from ``events``, whose share of calls would only call it common)
    objects: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    #: per call: the caches it took a new slab for (pages, then that cache's object: see
    #: :func:`_slab_pages`), each also an event ``new_slab:CACHE``; cache -> the pages' order
    slab_orders: dict[str, int] = field(default_factory=dict)


#: The pseudo-event of a call that took pages for a new slab of a cache: ``new_slab:dentry``.
NEW_SLAB = "new_slab:"
#: The structures :func:`in_memory` names: ``slab:CACHE``, ``memory:CACHE``.
IN_MEMORY = ("slab:", "memory:")


def attribute_run(events: np.ndarray, names: list[str], start_ns: np.ndarray,
                  latency_ns: np.ndarray, *, pid: int, run: int = 0,
                  comms: dict[int, str] | None = None, texts: list[str] | None = None) -> RunCalls:
    """Place one run's events (already selected for that run) into its calls (``texts``: the
    trace's strings, the slab caches' names)."""
    comms = comms or {}
    out = RunCalls(run, latency_ns)
    if len(events) == 0:
        return out
    short_names = [short(n) for n in names]
    idx = call_index(events["ts_ns"], start_ns, latency_ns)
    slab_codes = [c for c, n in enumerate(short_names) if n in catalog.SLAB_NAMES]
    if slab_codes:
        slab = np.isin(events["code"], slab_codes)
        _slab_pages(events[slab], idx[slab], short_names, texts or [], out)
        events, idx = events[~slab], idx[~slab]
    for ev, i in zip(events, idx):
        if i < 0:
            continue
        name = short_names[ev["code"]]
        if name in (COMPLETE, SWITCH):
            continue
        out.events[int(i)][name] += 1
        if name == ISSUE:
            out.io_requests[int(i)] += 1
            out.io_bytes[int(i)] += int(ev["bytes"])
            out.io_flags[int(i)] |= int(ev["flags"])
            if ev["flags"] & RWBS_READ:
                out.events[int(i)][BLOCK_READ] += 1
    _off_cpu(events, short_names, idx, pid, comms, out)
    return out


def _slab_pages(events: np.ndarray, idx: np.ndarray, short_names: list[str], texts: list[str],
                out: RunCalls) -> None:
    """Slab objects per call, and the calls that took pages for a new slab: an mm_page_alloc
    whose next slab event in the same call is kmem_cache_alloc of cache C (the allocator takes
    the pages, then hands out the object; the tracepoint fires on the way out) is C's new slab."""
    inside = idx >= 0
    events, idx = events[inside], idx[inside]
    if len(events) == 0:
        return
    codes = events["code"]
    alloc = codes == (short_names.index("kmem_cache_alloc") if "kmem_cache_alloc" in short_names else -1)
    pages = codes == (short_names.index("mm_page_alloc") if "mm_page_alloc" in short_names else -1)
    name_of = np.asarray(texts + ["?"], dtype=object)
    cache = np.where(alloc, events["arg"], len(texts)).clip(0, len(texts))
    for i, name in zip(idx[alloc].tolist(), name_of[cache[alloc]].tolist()):
        out.objects[i][name] += 1
    after_pages = np.flatnonzero(alloc[1:] & pages[:-1] & (idx[1:] == idx[:-1])) + 1
    for k in after_pages.tolist():
        name = str(name_of[cache[k]])
        out.events[int(idx[k])][NEW_SLAB + name] += 1
        out.slab_orders[name] = int(events["bytes"][k - 1])


def _off_cpu(events: np.ndarray, short_names: list[str], idx: np.ndarray, pid: int, comms: dict[int, str],
             out: RunCalls) -> None:
    """Pair each switch-out of ``pid`` inside a call with its next switch-in."""
    switch_code = short_names.index(SWITCH) if SWITCH in short_names else -1
    if switch_code < 0:
        return
    sel = np.flatnonzero(events["code"] == switch_code)
    pending = None
    for k in sel:
        ev = events[k]
        if int(ev["sector"]) == pid and pending is None:  # prev_pid == pid: it left the CPU
            state = int(ev["flags"])
            pending = (int(idx[k]), int(ev["ts_ns"]), (state & 0x7F) == 0,
                       comms.get(int(ev["arg"]), f"pid {int(ev['arg'])}"))
        elif int(ev["arg"]) == pid and pending is not None:  # next_pid == pid: back on
            call, t_out, preempted, by = pending
            if call >= 0:
                out.off_cpu[call].append(OffCpu(call, int(ev["ts_ns"]) - t_out, preempted, by))
            pending = None


def waited_on_others_ns(rc: RunCalls, files: int) -> np.ndarray:
    """Per call: the time it spent off the CPU, blocked, while it issued no block request
    of its own -- it waited on another process (a lock holder, a kernel thread, someone
    else's I/O), not on the file system's work for this call. A call that read or wrote
    itself (a cold inode cluster) keeps its wait: that is the structure's cost."""
    out = np.zeros(files, dtype=np.int64)
    for index, offs in rc.off_cpu.items():
        if 0 <= index < files and not rc.io_requests.get(index):
            out[index] = sum(off.off_ns for off in offs if not off.preempted)
    return out


def kernel_evidence(runs: list[RunCalls], indices: list[int]) -> dict:
    """The probe JSON's ``kernel`` block for a flag at ``indices``: in how many traced runs
    each event fired inside one of those calls, and the block requests/bytes they issued
    (median over the traced runs); for a single call also what kept it off the CPU, for a
    series in how many of its calls each event fired (``members``)."""
    seen: Counter = Counter()
    members: Counter = Counter()
    requests, nbytes, causes = [], [], []
    for rc in runs:
        names: set[str] = set()
        for i in indices:
            names.update(rc.events.get(i, {}))
        seen.update(names)
        requests.append(sum(rc.io_requests.get(i, 0) for i in indices))
        nbytes.append(sum(rc.io_bytes.get(i, 0) for i in indices))
        if len(indices) == 1:
            causes += _off_cpu_summary(rc.off_cpu.get(indices[0], []))
    if len(indices) > 1:
        for i in indices:
            members.update({name for rc in runs for name in rc.events.get(i, {})})
    out = {"events": dict(sorted(seen.items())),
           "io_requests": int(np.median(requests)) if requests else 0,
           "io_bytes": int(np.median(nbytes)) if nbytes else 0,
           "runs_traced": len(runs), "off_cpu": causes[:5]}
    if len(indices) > 1:
        out |= {"members": dict(sorted(members.items())), "calls": len(indices)}
    return out


#: A series is a slab's when its calls took that cache's new slab at least this often (per
#: member call of the traced runs) and this many times as often as the run's calls at large.
SLAB_SHARE, SLAB_LIFT = 0.5, 3.0
#: ... and an in-memory structure's when its calls took more objects of one cache than the
#: other calls: on the median member call at least this many more than the others' median.
EXTRA_OBJECTS = 1


def _member_calls(runs: list[RunCalls], indices: list[int]) -> tuple[list[tuple[RunCalls, int]], int]:
    """(run, call) of every measured member call of the traced runs, and every measured call's count."""
    pairs = [(rc, i) for rc in runs for i in indices if 0 <= i < len(rc.latency_ns) and rc.latency_ns[i] >= 0]
    return pairs, sum(int((rc.latency_ns >= 0).sum()) for rc in runs)


#: A member call is slow in its run above this many times its neighbours' median there (the
#: analysis' lower per-run bar, ``analysis.outliers.DEFAULT_SERIES_FACTOR``).
SLOW_IN_RUN = 1.4


def _slow_in_their_run(pairs: list[tuple[RunCalls, int]], half_width: int = 8) -> list[tuple[RunCalls, int]]:
    """The member calls that were slow in their own run. A slab's phase can move between runs
    (the last run's unlinks leave a partial slab): measured on tmpfs, a series every 21 creates
    was slow in 3 of 10 runs, exactly the runs whose member calls took the new slab."""
    out = []
    for rc, i in pairs:
        near = np.delete(rc.latency_ns[max(0, i - half_width): i + half_width + 1], min(i, half_width))
        near = near[near >= 0]
        if len(near) and rc.latency_ns[i] > SLOW_IN_RUN * float(np.median(near)):
            out.append((rc, i))
    return out


def in_memory(runs: list[RunCalls], indices: list[int], stride: int, caches: dict) -> dict | None:
    """What the kernel's in-memory structures say of a series at ``indices`` every ``stride``
    files, with the arithmetic: a slab cache whose objects per slab (``caches``: name ->
    ``explain.slab.SlabCache``, read at the run) divide the stride and whose new slab the
    member calls slow in their run took (:data:`SLAB_SHARE`, :data:`SLAB_LIFT` x the other
    calls); else a cache the member calls took more objects of than the others
    (:data:`EXTRA_OBJECTS`); None when neither holds (or nothing was traced)."""
    pairs, calls = _member_calls(runs, indices)
    if not pairs or not calls:
        return None
    slow = _slow_in_their_run(pairs) or pairs
    best = None
    for name, cache in caches.items():
        if stride % cache.objects_per_slab:
            continue
        hits = sum(1 for rc, i in slow if rc.events.get(i, {}).get(NEW_SLAB + name))
        everywhere = sum(1 for rc in runs for names in rc.events.values() if names.get(NEW_SLAB + name))
        share, base = hits / len(slow), everywhere / calls
        if share >= SLAB_SHARE and share >= SLAB_LIFT * base and (best is None or share > best[0]):
            best = (share, cache, hits, base)
    if best is not None:
        share, cache, hits, base = best
        every = (f"every {cache.objects_per_slab} creates" if stride == cache.objects_per_slab
                 else f"every {stride} creates ({stride // cache.objects_per_slab} slabs of {cache.objects_per_slab})")
        order = runs[0].slab_orders.get(cache.name, cache.order) if runs else cache.order
        return {"structure": f"slab:{cache.name}", "cache": cache.name, "objects_per_slab": cache.objects_per_slab,
                "event": NEW_SLAB + cache.name,
                "title": f"a new {cache.name} slab every {cache.objects_per_slab} objects (kernel)",
                "arithmetic": f"{cache.arithmetic()}: a new slab {every}",
                "note": (f"{every} take a new {cache.name} slab: {cache.arithmetic()}; the slow call allocated "
                         f"it: pages of order {order} then a {cache.name} object inside {hits} of {len(slow)} "
                         f"member calls slow in their traced run ({share:.0%}; {base:.0%} of all calls)")}
    return _extra_objects(runs, pairs, indices)


def _extra_objects(runs: list[RunCalls], pairs: list[tuple[RunCalls, int]], indices: list[int]) -> dict | None:
    """The cache whose objects the member calls took more of than the other calls."""
    members = set(indices)
    names = {name for rc, i in pairs for name in rc.objects.get(i, {})}
    best = None
    for name in sorted(names):
        mine = [rc.objects.get(i, Counter())[name] for rc, i in pairs]
        others = [rc.objects.get(i, Counter())[name] for rc in runs
                  for i in np.flatnonzero(rc.latency_ns >= 0).tolist() if i not in members]
        if not others:
            continue
        extra = float(np.median(mine)) - float(np.median(others))
        more = sum(m > np.median(others) for m in mine) / len(mine)
        if extra >= EXTRA_OBJECTS and more >= SLAB_SHARE and (best is None or more > best[0]):
            best = (more, name, float(np.median(mine)), float(np.median(others)))
    if best is None:
        return None
    more, name, mine_median, others_median = best
    return {"structure": f"memory:{name}", "cache": name, "objects_per_slab": None, "event": "kmem_cache_alloc",
            "title": f"the kernel allocates more {name} objects there (kernel)",
            "arithmetic": f"{mine_median:g} {name} objects per slow call against {others_median:g} in the others",
            "note": (f"the slow calls build an in-memory structure from {name} objects: {mine_median:g} per call "
                     f"(median) against {others_median:g} in the other calls, more in {more:.0%} of the member calls "
                     f"of the traced runs (kmem:kmem_cache_alloc inside each call)")}


def _off_cpu_summary(offs: list[OffCpu]) -> list[str]:
    """'preempted by kworker/1:1 for 340 µs', 'blocked (waiting) 4× for 26 µs in total'."""
    groups: dict[tuple, list[int]] = defaultdict(list)
    for off in offs:
        groups[(off.preempted, off.by if off.preempted else "")].append(off.off_ns)
    out = []
    for (preempted, by), spans in groups.items():
        times = f"{len(spans)}× " if len(spans) > 1 else ""
        total = f"{sum(spans) / 1e3:.0f} µs" + (" in total" if len(spans) > 1 else "")
        out.append(f"preempted by {by} {times}for {total}" if preempted
                   else f"blocked off-CPU (waiting) {times}for {total}")
    return out


def evidence_sentence(kernel: dict, op: str) -> str:
    """'kernel (5 traced runs): inside this creat xfs_dir2_sf_to_block fired in 5/5; it
    issued 3 block requests (12 KiB)' -- or that the kernel shows nothing there."""
    n = kernel.get("runs_traced", 0)
    if not n:
        return ""
    runs_word = f"{n} traced run{'s' if n > 1 else ''}"
    events = {k: v for k, v in kernel["events"].items() if k not in (ISSUE, BLOCK_READ)}
    order = sorted(events.items(), key=lambda kv: (not _exclusive(kv[0]), -kv[1], kv[0]))
    members, calls = kernel.get("members"), kernel.get("calls")
    if order and members:  # a series: how many of its calls saw each event
        order = sorted(events.items(), key=lambda kv: (-members.get(kv[0], 0), kv[0]))
        what = (f"kernel ({runs_word}): inside these {calls} {op} calls "
                + ", ".join(f"{name} fired in {members.get(name, 0)}/{calls}" for name, _ in order))
    elif order:
        what = (f"kernel ({runs_word}): inside this {op} "
                + ", ".join(f"{name} fired in {runs}/{n}" for name, runs in order))
    else:
        what = f"kernel ({runs_word}): no file-system event inside this {op}"
    if kernel.get("io_requests"):
        count = kernel["io_requests"]
        what += f"; it issued {count} block request{'s' if count != 1 else ''} ({kernel['io_bytes'] / 1024:.0f} KiB)"
    if kernel.get("off_cpu"):
        what += "; " + ", ".join(kernel["off_cpu"])
    return what


def _exclusive(name: str) -> bool:
    entry = catalog.lookup(name)
    return bool(entry and entry.exclusive)


def structural_events(runs: list[RunCalls], outlier_indices: set[int]) -> list[dict]:
    """Every structure-changing event seen inside a call, outlier or not (probe JSON)."""
    kinds = {}
    for group in catalog.BY_FS.values():
        for entry in group:
            kinds[entry.name] = entry.kind
    counts: Counter = Counter()
    for rc in runs:
        for i, names in rc.events.items():
            for name in names:
                if kinds.get(name) in catalog.STRUCTURAL_KINDS or name == BLOCK_READ:
                    counts[(i, name)] += 1
    return [{"index": i, "event": name, "runs": runs_seen, "latency_outlier": i in outlier_indices}
            for (i, name), runs_seen in sorted(counts.items())]


def call_cause(rc: RunCalls, index: int) -> str:
    """Why one call was slow, as far as the trace shows; "" when it shows nothing."""
    causes = []
    causes += _off_cpu_summary(rc.off_cpu.get(index, []))
    if rc.io_requests.get(index):
        causes.append(f"waited on I/O ({rc.io_requests[index]} block request"
                      f"{'s' if rc.io_requests[index] != 1 else ''}, {rc.io_bytes[index] / 1024:.0f} KiB"
                      f"{', ' + flag_words(rc.io_flags[index]) if flag_words(rc.io_flags[index]) else ''})")
    names = rc.events.get(index, Counter())
    if any(name in names for name in COMMIT_EVENTS):
        causes.append("a journal commit ran during it")
    fs_events = [n for n in names if n not in (ISSUE, BLOCK_READ, *COMMIT_EVENTS)]
    if fs_events:
        causes.append(", ".join(sorted(fs_events)))
    return "; ".join(causes)


def flag_words(bits: int) -> str:
    return "/".join(w for w, b in (("FLUSH", RWBS_FLUSH), ("FUA", RWBS_FUA), ("SYNC", RWBS_SYNC))
                    if bits & b)


def noise(runs: list[RunCalls], flagged: set[int], *, factor: float = 5.0, limit: int = 10) -> list[dict]:
    """One-off slow calls of the traced runs (not at a flagged index), with their cause."""
    out: list[dict] = []
    for rc in runs:
        lat = rc.latency_ns
        reached = lat[lat >= 0]
        if len(reached) == 0:
            continue
        threshold = factor * float(np.median(reached))
        for i in np.flatnonzero(lat > threshold):
            if int(i) in flagged:
                continue
            out.append({"run": rc.run, "index": int(i), "latency_ns": int(lat[i]),
                        "cause": call_cause(rc, int(i)) or "no kernel event explains it"})
    out.sort(key=lambda d: -d["latency_ns"])
    return out[:limit]


# --- windows and writes -------------------------------------------------------------


def window_counts(events: np.ndarray, names: list[str], start_ns: int, window_ns: int,
                  windows: int) -> dict[str, list[int]]:
    """Per window [start + k*window, start + (k+1)*window): journal commits, writeback
    starts, block write requests and bytes written to the device."""
    short_names = [short(n) for n in names]
    k = (events["ts_ns"] - start_ns) // max(window_ns, 1)
    inside = (k >= 0) & (k < windows)

    def count(name: str, mask: np.ndarray | None = None) -> np.ndarray:
        if name not in short_names:
            return np.zeros(windows, np.int64)
        sel = inside & (events["code"] == short_names.index(name))
        if mask is not None:
            sel &= mask
        return np.bincount(k[sel].astype(np.int64), minlength=windows)[:windows]

    writes = (events["flags"] & RWBS_WRITE) != 0
    issue_sel = inside & writes & (events["code"] == (short_names.index(ISSUE) if ISSUE in short_names else -1))
    bytes_written = np.bincount(k[issue_sel].astype(np.int64), weights=events["bytes"][issue_sel].astype(float),
                                minlength=windows)[:windows]
    commits = count("jbd2_start_commit") + count("btrfs_transaction_commit")
    return {"journal_commits": commits.tolist(), "writeback_starts": count("writeback_start").tolist(),
            "write_requests": count(ISSUE, writes).tolist(),
            "bytes_written": [int(b) for b in bytes_written],
            "flushes": count(ISSUE, (events["flags"] & RWBS_FLUSH) != 0).tolist()}


def per_call_io(events: np.ndarray, names: list[str], start_ns: np.ndarray,
                latency_ns: np.ndarray) -> dict[str, np.ndarray]:
    """Per call (e.g. each synchronous write): block requests issued inside it, bytes, how
    many carried FLUSH and FUA -- the device-level cost of making it durable -- and the
    journal commits (jbd2) or transaction commits (btrfs) that started inside it. Calls not
    reached (latency < 0) count nothing, also between reached ones (a point cut short)."""
    short_names = [short(n) for n in names]
    n = len(latency_ns)
    out = {key: np.zeros(n, np.int64) for key in ("requests", "bytes", "flush", "fua", "commits")}
    reached = np.flatnonzero(np.asarray(latency_ns) >= 0)
    if len(events) == 0 or len(reached) == 0:
        return out
    starts, lats = np.asarray(start_ns)[reached], np.asarray(latency_ns)[reached]

    def per_call(selected: np.ndarray, weights: npt.ArrayLike | None = None) -> np.ndarray:
        idx = call_index(selected["ts_ns"], starts, lats)
        ok = idx >= 0
        w = None if weights is None else np.asarray(weights, dtype=float)[ok]
        counts = np.zeros(n, np.int64)
        counts[reached] = np.bincount(idx[ok], weights=w, minlength=len(reached))[:len(reached)].astype(np.int64)
        return counts

    if ISSUE in short_names:
        issues = events[events["code"] == short_names.index(ISSUE)]
        flags = issues["flags"]
        out |= {"requests": per_call(issues), "bytes": per_call(issues, issues["bytes"]),
                "flush": per_call(issues, (flags & RWBS_FLUSH) != 0),
                "fua": per_call(issues, (flags & RWBS_FUA) != 0)}
    commit_codes = [short_names.index(c) for c in COMMIT_STARTS if c in short_names]
    if commit_codes:
        out["commits"] = per_call(events[np.isin(events["code"], commit_codes)])
    return out


# --- prediction / kernel / latency ----------------------------------------------------


def _prediction_indices(p: dict) -> list[int]:
    if p.get("kind") == "series" and p.get("index") is not None and p.get("stride"):
        return [p["index"] + k * p["stride"] for k in range(p.get("count") or 1)]
    if p.get("index") is not None:
        return [p["index"]]
    return [i for i in (p.get("index_low"), p.get("index_high")) if i is not None]


def _near(i: int, candidates: Iterable[int], tolerance: int) -> bool:
    return any(abs(i - c) <= tolerance for c in candidates)


def _fs_events_at(runs: list[RunCalls], index: int) -> list[str]:
    """File-system events the kernel showed inside call ``index`` (the same evidence a flag's
    note cites): everything but block requests, commits and switches."""
    names: set[str] = set()
    for rc in runs:
        names.update(n for n in rc.events.get(index, {}) if n not in (ISSUE, BLOCK_READ, *COMMIT_EVENTS))
    return sorted(names)


def _share_of_calls(runs: list[RunCalls], name: str) -> float:
    """Share of the traced calls in which ``name`` fired (an event in most calls marks none)."""
    fired = sum(sum(1 for names in rc.events.values() if name in names) for rc in runs)
    calls = sum(int((rc.latency_ns >= 0).sum()) for rc in runs)
    return fired / calls if calls else 0.0


def structure_table(predictions: list[dict], structural: list[dict], flagged: set[int],
                    enabled: list[str], runs: list[RunCalls] | None = None) -> list[dict]:
    """Per structure: predicted by geometry / seen by the kernel / slow in latency, with a
    verdict -- the one account of kernel vs prediction that the flags' notes repeat.

    - An exact prediction is confirmed where its structure's own event fired at that index.
    - A window (ext4's first htree leaf split: the index depends on a hash seed mkfs draws
      at random) predicts no index: the row says it is a range, where the kernel saw the
      event inside it in the traced run, and whether a file there was slow -- never
      "confirmed" from the window alone.
    - A structure no event marks (btrfs' leaf split, the first call) lists what the kernel
      did show inside the predicted call, as the flag's note does, and says whether those
      events are specific (they fire in most calls: not evidence of the structure).
    A kernel event nothing predicted (for events that fire only for their structure) gets a
    row of its own."""
    runs = runs or []
    evidence, exclusive = _evidence(enabled)
    seen_by_event: dict[str, set[int]] = defaultdict(set)
    for row in structural:
        seen_by_event[row["event"]].add(row["index"])
    rows = []
    for p in predictions:
        events = evidence.get(p.get("structure", ""), [])
        seen_all = sorted(set().union(*(seen_by_event[e] for e in events))) if events else []
        if p.get("index") is None and p.get("index_low") is not None:
            rows.append(_window_row(p, events, seen_all, flagged))
        else:
            rows.append(_prediction_row(p, events, seen_all, flagged, runs))
    predicted_structures = {p.get("structure") for p in predictions}
    for event, structure in exclusive.items():
        extra = sorted(seen_by_event.get(event, set()))
        if extra and structure not in predicted_structures:
            rows.append({"structure": structure, "events": [event], "predicted": [], "seen": extra,
                         "slow": [i for i in extra if i in flagged],
                         "verdict": "seen by the kernel, not predicted"})
    return rows


def _evidence(enabled: list[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(structure -> the enabled events that mark it, event -> the one structure an exclusive
    event marks)."""
    enabled_short = {short(e) for e in enabled}
    evidence: dict[str, list[str]] = defaultdict(list)
    exclusive: dict[str, str] = {}
    for group in catalog.BY_FS.values():
        for entry in group:
            if entry.name in enabled_short:
                for s in entry.structures:
                    if entry.name not in evidence[s]:
                        evidence[s].append(entry.name)
                    if entry.exclusive:
                        exclusive[entry.name] = s
    if "block_rq_issue" in enabled_short:
        for structure, pseudo in READ_EVIDENCE.items():
            evidence[structure].append(pseudo)
    return evidence, exclusive


def _prediction_row(p: dict, events: list[str], seen_all: list[int], flagged: set[int],
                    runs: list[RunCalls]) -> dict:
    """The row of a prediction at exact indices: confirmed where its own event fired there."""
    predicted = _prediction_indices(p)
    tolerance = int(p.get("tolerance_files") or 0)
    confirmed = [i for i in predicted if _near(i, seen_all, tolerance)]
    slow = [i for i in predicted if _near(i, flagged, tolerance)]
    row = {"structure": p.get("structure", ""), "events": events, "predicted": predicted[:50],
           "seen": seen_all[:50], "slow": slow[:50]}
    if not events:
        row |= _unmarked(predicted, runs)
    elif len(predicted) > 1 and p.get("kind") == "series":
        row["verdict"] = f"confirmed {len(confirmed)}/{len(predicted)} members"
        if len(confirmed) < len(predicted):
            row["verdict"] += " (kernel contradicts the rest)"
    elif confirmed:
        row["verdict"] = "confirmed"
    else:
        near = [i for i in seen_all if abs(i - predicted[0]) <= 64] if predicted else []
        row["verdict"] = (f"contradicted: the kernel shows {', '.join(events)} at {near[:5]}"
                          if near else f"contradicted: {', '.join(events)} did not fire there")
    return row


def _window_row(p: dict, events: list[str], seen_all: list[int], flagged: set[int]) -> dict:
    low, high = int(p["index_low"]), int(p["index_high"])
    seen = [i for i in seen_all if low <= i <= high]
    slow = sorted(i for i in flagged if low <= i <= high)
    where = f"range {low}..{high}, not a prediction (the index depends on the directory hash seed)"
    if not events:
        verdict = f"{where}; no kernel event marks it"
    elif not seen:
        verdict = f"{where}; {', '.join(events)} did not fire inside it in the traced run"
    else:
        at = ", ".join(str(i) for i in seen[:5])
        slow_there = [i for i in seen if i in flagged]
        verdict = (f"{where}; the kernel saw it at {at} in the traced run"
                   + (f", slow there in the measured runs ({', '.join(map(str, slow_there))})"
                      if slow_there else ", not slow there in the measured runs (each mkfs draws "
                                         "its own seed, so the split moves from run to run)"))
    return {"structure": p.get("structure", ""), "events": events, "predicted": [],
            "window": [low, high], "seen": seen[:50], "slow": slow[:50], "verdict": verdict}


def _unmarked(predicted: list[int], runs: list[RunCalls]) -> dict:
    """Row fields of a structure that no kernel event marks: what did fire in its calls."""
    inside = sorted({name for i in predicted[:50] for name in _fs_events_at(runs, i)})
    if not runs:
        return {"verdict": "no kernel event marks this structure"}
    if not inside:
        return {"verdict": "no kernel event marks this structure, and none fired inside "
                           f"{'that call' if len(predicted) == 1 else 'those calls'}"}
    common = [n for n in inside if _share_of_calls(runs, n) >= 0.5]
    specific = [n for n in inside if n not in common]
    parts = []
    if specific:
        parts.append(f"{', '.join(specific)} fired there")
    if common:
        parts.append(f"{', '.join(common)} fired there too, but in most calls (not specific)")
    return {"inside": inside,
            "verdict": "no event marks this structure; " + "; ".join(parts)}


def annotate_dips(ops_per_s: np.ndarray, kernel: dict[str, list[int]], window_s: float, *,
                  threshold: float = 0.10) -> list[dict]:
    """Throughput-N windows more than ``threshold`` below the run's median, each with what
    the kernel did in it (journal commits, writeback starts, bytes written)."""
    ops_per_s = np.asarray(ops_per_s, dtype=float)
    if ops_per_s.size < 2:
        return []
    median = float(np.median(ops_per_s))
    out = []
    for k in map(int, np.flatnonzero(ops_per_s < median * (1 - threshold))):
        counts = {name: values[k] for name, values in kernel.items() if k < len(values)}
        parts = []
        if counts.get("journal_commits"):
            parts.append(f"{counts['journal_commits']} journal commit{'s' if counts['journal_commits'] != 1 else ''}")
        if counts.get("writeback_starts"):
            parts.append(f"writeback started {counts['writeback_starts']}×")
        if counts.get("bytes_written"):
            parts.append(f"{counts['bytes_written'] / 2**20:.1f} MiB written to the device")
        if counts.get("flushes"):
            parts.append(f"{counts['flushes']} cache flush{'es' if counts['flushes'] != 1 else ''}")
        below = 1 - ops_per_s[k] / median if median else 0.0
        note = (f"{k * window_s:g}–{(k + 1) * window_s:g} s: {ops_per_s[k]:,.0f} ops/s, {below:.0%} below the "
                f"run's median; kernel: " + (", ".join(parts) if parts else "no commit, writeback or device write"))
        out.append({"window": k, "t_s": [k * window_s, (k + 1) * window_s], "ops_per_s": float(ops_per_s[k]),
                    "below_median": round(below, 3), "kernel": counts, "note": note})
    return out


# --- thresholds: kernel evidence, latency evidence, or both -------------------------------

#: A call at most this many times its neighbours' median is "not distinguishable" from them.
INDISTINCT_RATIO = 1.5


def neighbour_ratio(latency_ns: np.ndarray, index: int, half_width: int = 8) -> float | None:
    """Median over the measured runs of call ``index`` against the median of its neighbours
    (``half_width`` calls either side, the call itself left out); None if not measured."""
    lat = np.atleast_2d(np.asarray(latency_ns))
    if not 0 <= index < lat.shape[1]:
        return None
    call = lat[:, index]
    near = np.delete(lat[:, max(0, index - half_width): index + half_width + 1],
                     index - max(0, index - half_width), axis=1)
    call, near = call[call >= 0], near[near >= 0]
    if len(call) == 0 or len(near) == 0 or np.median(near) <= 0:
        return None
    return float(np.median(call) / np.median(near))


def latency_words(ratio: float | None) -> str:
    """An honest label of what a kernel-marked call cost in the measured runs."""
    if ratio is None:
        return "not measured"
    if ratio <= INDISTINCT_RATIO:
        return f"not distinguishable from its neighbours (median ×{ratio:.2f})"
    return f"slower than its neighbours (median ×{ratio:.2f}), but not a repeatable outlier"


def threshold_evidence(flag: dict, rows: list[dict]) -> str:
    """'kernel+latency' when the structure's own event fired inside the flag's calls in the
    traced run, else 'latency' (the latency alone found it)."""
    events = next((set(r["events"]) for r in rows if r["structure"] == flag.get("structure")), set())
    return "kernel+latency" if events & set((flag.get("kernel") or {}).get("events", {})) else "latency"


def kernel_thresholds(rows: list[dict], runs: list[RunCalls], measured_ns: np.ndarray, op: str,
                      taken: set[tuple[str, int]]) -> list[dict]:
    """Thresholds the kernel marks but the latency did not flag: every index of the structure
    table where a predicted structure's own event fired at exactly the predicted index (a
    hash-dependent window: at the index seen inside it), unless ``taken`` (structure, index)
    already reports it. Each with its kernel evidence and the latency it cost."""
    out = []
    for row in rows:
        if not row["events"] or not (row["verdict"].startswith("confirmed") or row.get("window")):
            continue
        seen = set(row["seen"])
        at = ([(i, None) for i in row["seen"]] if row.get("window")
              else [(i, i) for i in row["predicted"] if i in seen])
        at = [(i, p) for i, p in at if (row["structure"], i) not in taken]
        if len(row["predicted"]) > 1 and at:  # a series: one threshold, its marked members
            members = [i for i, _ in at]
            kernel = kernel_evidence(runs, members)
            ratios = [r for r in (neighbour_ratio(measured_ns, i) for i in members) if r is not None]
            ratio = float(np.median(ratios)) if ratios else None  # the typical member's cost
            out.append({"index": members[0], "predicted_index": members[0], "indices": members,
                        "structure": row["structure"], "flag": "kernel", "evidence": "kernel",
                        "kernel": kernel, "latency": latency_words(ratio),
                        "latency_ratio": None if ratio is None else round(ratio, 3),
                        "kernel_verdict": row["verdict"],
                        "note": f"the kernel marked {len(members)} of the predicted files "
                                f"({_short_list(members)}) at exactly those files; latency (median member): "
                                f"{latency_words(ratio)}. {evidence_sentence(kernel, op)}."})
            continue
        for index, predicted in at:
            kernel = kernel_evidence(runs, [index])
            ratio = neighbour_ratio(measured_ns, index)
            where = (f"the kernel saw it at file {index} in the traced run, inside the range "
                     f"{row['window'][0]}..{row['window'][1]} (the index depends on the hash seed)"
                     if predicted is None else f"the kernel marked it at the predicted file {index}")
            out.append({"index": index, "predicted_index": predicted, "structure": row["structure"],
                        "flag": "kernel", "evidence": "kernel", "kernel": kernel,
                        "latency": latency_words(ratio),
                        "latency_ratio": None if ratio is None else round(ratio, 3),
                        "kernel_verdict": row["verdict"],
                        "note": f"{where}; latency: {latency_words(ratio)}. "
                                f"{evidence_sentence(kernel, op)}.",
                        **({"window": row["window"]} if row.get("window") else {})})
    return out


def _short_list(values: list[int], limit: int = 6) -> str:
    return ", ".join(map(str, values[:limit])) + (", …" if len(values) > limit else "")
