"""Why a slow call was slow: the kernel events inside its [entry, exit] window.

On the call's own thread: a directory changing format, a block or inode allocation, an XFS log
force, writeback throttling (``balance_dirty_pages``), pages entering the page cache with a
block read of its own (a page-cache miss), and its time off the CPU (``sched_switch``): blocked
(waiting), preempted or woken and still waiting for a CPU (``sched_wakeup`` to switch-in),
from :mod:`fsscope.watch.sched` as the capture's think times; a stretch whose switch back the
kernel did not record is claimed as neither (``sched-unknown``: its scheduling is not known). On
the device, whoever fired it: a jbd2 commit running meanwhile, and other processes' block
requests (named by pid and command as the block tracepoint recorded them, so a process that
has since exited is still named). What none of these explains says so. Pure numpy + dicts.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from fsscope.trace.catalog import lookup
from fsscope.trace.decode import RWBS_READ
from fsscope.watch import sched

#: Directory-format events (the rules' structures) and allocation events, by name.
FORMAT_EVENTS = frozenset({"xfs_dir2_sf_to_block", "xfs_dir2_block_to_leaf", "xfs_dir2_leaf_to_node",
                           "xfs_dir2_block_to_sf", "xfs_dir2_leaf_to_block", "xfs_dir2_node_to_leaf",
                           "xfs_dir2_grow_inode"})
ALLOC_EVENTS = frozenset({"xfs_alloc_vextent_finish", "ext4_allocate_blocks", "ext4_mballoc_alloc",
                          "ext4_mb_new_inode_pa", "ext4_mb_new_group_pa", "btrfs_reserve_extent",
                          "btrfs_chunk_alloc"})


QUEUE = "block_bio_queue"
SECTOR_BYTES = 512
#: Block requests issued by these threads are the kernel's own work (jbd2's commit, the
#: flusher's writeback, a completion worker), not another process's.
KERNEL_THREADS = ("jbd2/", "kworker/", "xfsaild/", "xfs-", "ksoftirqd/", "flush-", "btrfs-")


@dataclass
class Cause:
    kind: str    # format | alloc | journal | writeback | cache-miss | other-io | kernel-io | cpu | blocked | none | sched-unknown
    text: str


#: An allocation event's meaning inside someone else's call (the catalog's speaks of the probe's creat).
ALLOC_MEANING = {"ext4_allocate_blocks": "ext4 allocated blocks to a file: delayed allocation, done at fsync "
                                         "or writeback"}


@dataclass
class Window:
    """What happened inside one call."""

    own: Counter = field(default_factory=Counter)        # its thread's events by name
    dirs_grown: list[int] = field(default_factory=list)  # ext4: directories it allocated blocks to
    read_bytes: int = 0
    write_bytes: int = 0
    others: dict[tuple[int, str], list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    commits: list[int] = field(default_factory=list)     # jbd2 transactions committed meanwhile
    blocked_ns: int = 0
    preempted_ns: int = 0
    runqueue_ns: int = 0
    pause_ms: int = 0
    sched_traced: bool = True  # sched_switch was traced (only with ``watch --sched`` or ``--capture``)
    # off its CPU with no switch back recorded before its next event: neither blocked nor
    # waiting for a CPU can be claimed for it (the kernel misses one now and then)
    sched_unknown_ns: int = 0


def _short(names: list[str]) -> list[str]:
    return [n.split("/", 1)[-1] for n in names]


def windows(indices: np.ndarray, calls: np.ndarray, events: np.ndarray, where: np.ndarray,
            names: list[str], texts: list[str], watched: set[int], dirs: set[int]) -> dict[int, Window]:
    """The :class:`Window` of each call in ``indices``."""
    short = _short(names)
    code_of = {n: c for c, n in enumerate(short)}
    out: dict[int, Window] = {int(i): Window() for i in indices}
    mine = np.isin(where, indices)
    for k in np.flatnonzero(mine):
        ev = events[k]
        w = out[int(where[k])]
        name = short[int(ev["code"])]
        if name.startswith(("sys_enter_", "sys_exit_")) or name in ("sched_switch", "sched_wakeup"):
            continue
        w.own[name] += 1
        if name == "ext4_allocate_blocks" and int(ev["arg"]) in dirs:
            w.dirs_grown.append(int(ev["arg"]))
        if name == QUEUE:
            key = "read_bytes" if int(ev["flags"]) & RWBS_READ else "write_bytes"
            setattr(w, key, getattr(w, key) + int(ev["bytes"]) * SECTOR_BYTES)
        if name == "balance_dirty_pages":
            w.pause_ms += int(ev["arg"])
    ts = events["ts_ns"]
    codes = events["code"]
    issue, commit = code_of.get(QUEUE, -1), code_of.get("jbd2_start_commit", -1)
    io_rows = np.flatnonzero((codes == issue) & ~np.isin(events["pid"], list(watched)))
    commit_rows = np.flatnonzero(codes == commit)
    spans = sched.off_cpu(events, names)
    for i, w in out.items():
        start = int(calls["start_ns"][i])
        end = start + int(calls["duration_ns"][i])
        tid = int(calls["tid"][i])
        lo, hi = np.searchsorted(ts[io_rows], [start, end])
        for k in io_rows[lo:hi]:
            ev = events[k]
            who = (int(ev["pid"]), texts[int(ev["arg"])] if 0 <= int(ev["arg"]) < len(texts) else "")
            w.others[who][0] += 1
            w.others[who][1] += int(ev["bytes"]) * SECTOR_BYTES
        lo, hi = np.searchsorted(ts[commit_rows], [start, end])
        w.commits = [int(events[k]["arg"]) for k in commit_rows[lo:hi]]
        w.sched_traced = spans is not None
        if spans is not None and tid in spans:
            off = sched.parts(spans[tid], start, end)
            w.blocked_ns, w.preempted_ns = off.asleep_ns, off.preempted_ns
            w.runqueue_ns, w.sched_unknown_ns = off.runnable_ns, off.unknown_ns
    return out


def _us(ns: int) -> str:
    return f"{ns / 1e3:.0f} µs"


def explain(w: Window, duration_ns: int, fs_label: str = "", kernel_pids: set[int] | None = None) -> list[Cause]:
    """The causes a window shows, most specific first; ``none`` when nothing explains it.
    ``kernel_pids``: which of the other tasks are kernel threads by the kernel's own flag
    (:func:`fsscope.watch.job.kernel_threads`); None: judged by their names alone."""
    out: list[Cause] = []
    fmt = sorted(n for n in w.own if n in FORMAT_EVENTS)
    if fmt:
        out.append(Cause("format", "the directory changed format: " + ", ".join(
            f"{n} ({_meaning(n)})" for n in fmt)))
    if w.dirs_grown:
        out.append(Cause("format", f"ext4 allocated {len(w.dirs_grown)} block(s) to the directory "
                                   f"(ext4_allocate_blocks on its inode): it grew by a block"))
    alloc = sorted(n for n in w.own if n in ALLOC_EVENTS and not (n == "ext4_allocate_blocks" and w.dirs_grown))
    if alloc:
        out.append(Cause("alloc", "allocation: " + ", ".join(f"{n} ×{w.own[n]} ({ALLOC_MEANING.get(n, _meaning(n))})"
                                                            for n in alloc)))
    if w.own.get("xfs_log_force"):
        out.append(Cause("journal", f"it forced the XFS log ×{w.own['xfs_log_force']} (xfs_log_force) and "
                                    f"waited for the log write"))
    if w.commits:
        out.append(Cause("journal", f"a jbd2 journal commit ran meanwhile (transaction "
                                    f"{', '.join(map(str, w.commits[:3]))})"
                                    + (f"; it waited blocked {_us(w.blocked_ns)}" if w.blocked_ns else "")))
    if w.own.get("balance_dirty_pages"):
        out.append(Cause("writeback", f"writeback throttling: balance_dirty_pages paused it ×"
                                      f"{w.own['balance_dirty_pages']} ({w.pause_ms} jiffies asked)"))
    if w.own.get("mm_filemap_add_to_page_cache") and w.read_bytes:
        out.append(Cause("cache-miss", f"page-cache miss: {w.own['mm_filemap_add_to_page_cache']} page(s) "
                                       f"added and it read {w.read_bytes // 1024} KiB from the device"))
    elif w.read_bytes:
        out.append(Cause("cache-miss", f"it read {w.read_bytes // 1024} KiB from the device (metadata or data "
                                       f"not in memory)"))
    # a name is not proof: any process can call itself "jbd2/sda1-8" (prctl PR_SET_NAME)
    kernel = {who: v for who, v in w.others.items()
              if (who[0] in kernel_pids if kernel_pids is not None else who[1].startswith(KERNEL_THREADS))}
    users = {who: v for who, v in w.others.items() if who not in kernel}
    if users:
        top = sorted(users.items(), key=lambda kv: -kv[1][1])[:3]
        out.append(Cause("other-io", "other processes' I/O on the device meanwhile: " + ", ".join(
            f"pid {pid} ({comm or '?'}) {n} request(s) {b // 1024} KiB" for (pid, comm), (n, b) in top)))
    if kernel:
        top = sorted(kernel.items(), key=lambda kv: -kv[1][1])[:3]
        out.append(Cause("kernel-io", "the kernel's own writers on the device meanwhile (journal, "
                                      "writeback, completions): " + ", ".join(
            f"{comm} (pid {pid}) {n} request(s) {b // 1024} KiB" for (pid, comm), (n, b) in top)))
    if w.runqueue_ns + w.preempted_ns >= duration_ns // 4 and w.runqueue_ns + w.preempted_ns:
        out.append(Cause("cpu", f"it waited for a CPU {_us(w.runqueue_ns + w.preempted_ns)} of "
                                f"{_us(duration_ns)} (preempted {_us(w.preempted_ns)}, runnable after a "
                                f"wake-up {_us(w.runqueue_ns)})"))
    if not out:
        if w.blocked_ns >= duration_ns // 2:
            out.append(Cause("blocked", f"it was blocked {_us(w.blocked_ns)} of {_us(duration_ns)} and no "
                                        f"traced event names what it waited for (a lock, or an event "
                                        f"this kernel does not trace)"))
        elif not w.sched_traced:
            out.append(Cause("none", "not attributed: no traced kernel event inside it (its scheduling was "
                                     "not traced: on the CPU or waiting is not known)"))
        else:
            on_cpu = duration_ns - w.blocked_ns - w.preempted_ns - w.runqueue_ns - w.sched_unknown_ns
            out.append(Cause("none", "not attributed: no traced kernel event inside it; "
                                     + ("at least " if w.sched_unknown_ns else "") + f"{_us(on_cpu)} on the CPU"))
    if w.sched_unknown_ns:
        out.append(Cause("sched-unknown", f"its scheduling is not known for {_us(w.sched_unknown_ns)} of "
                                          f"{_us(duration_ns)}: it left the CPU and the kernel recorded no "
                                          f"switch back before its next event (on the CPU, blocked or "
                                          f"waiting for a CPU then: not known)"))
    return out


def _meaning(name: str) -> str:
    entry = lookup(name)
    return entry.meaning if entry is not None else name
