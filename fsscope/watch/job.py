"""The watch job: attach to running tasks (or start a command), record their file-system calls
and the kernel's events for ``duration_s`` (or until they end or the job is cancelled), then
name, judge, explain and find what repeats. See :mod:`fsscope.watch`.

Root only (tracefs instances are): the CLI refuses in one line before the job starts.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
from msgspec import Meta

from fsscope.engine.events import Finding
from fsscope.errors import FsscopeError
from fsscope.records import SpecRecord
from fsscope.watch.records import CauseRow, FormatChange, Loss, OpSummary, Repeat, Report, SlowCall, WatchProgress

DATA = (WatchProgress,)
PROGRESS_EVERY_S = 1.0
#: How often the tasks' descriptors are read while watching (names for files gone by the end).
FD_POLL_S = 0.25


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "watch"

    pid: Annotated[int, Meta(ge=1)] | None = None
    children: bool = False
    cgroup: str = ""
    command: list[str] = []
    cwd: str = ""                 # where the command runs (the CLI's directory)
    tree: str = ""                # the tree whose inodes are mapped (default: the watched cwd)
    duration_s: Annotated[float, Meta(gt=0, description="stop after this long (30s, 2m); default: until the "
                                                        "process or command exits, or Ctrl-C")] | None = None
    slow_factor: Annotated[float, Meta(gt=1, description="slow: at least X times its local baseline")] = 4.0
    slow_floor_us: Annotated[float, Meta(ge=0, description="slow: and at least US µs above it")] = 100.0
    buffer_kb: Annotated[int, Meta(ge=4, description="ring buffer per CPU and instance, in KiB")] = 8192
    #: the events kept (raw, on disk while watching) are all decoded in memory at the end, with
    #: the calls and the op log built from them: past this the watch stops, and says so
    max_events_mb: Annotated[int, Meta(ge=1, description="stop watching when the recorded events reach MB (they "
                                                         "are decoded in memory)")] = 512
    #: off by default: of watch's events the costliest to a workload of microsecond calls (a
    #: SQLite commit on a RAM disk fires about 8-10 of its 21-25; bench/watch_overhead.py counts them)
    sched: Annotated[bool, Meta(description="trace the tasks' scheduling (sched_switch, sched_wakeup: about two "
                                            "events each time a call blocks, the costliest to cheap calls), "
                                            "which the 'waiting for a CPU' and 'blocked' causes need; on "
                                            "with --capture (the op log's think times)")] = False
    io_names: Annotated[bool, Meta(description="the events of reads, writes and fsyncs that name their inode "
                                               "(xfs_file_*, ext4 write_begin/sync_file, filemap), which name "
                                               "a descriptor whose open named nothing (a cached file opened "
                                               "while watched)")] = True
    show_slow: Annotated[int, Meta(ge=0)] = 50
    capture: str = ""             # write an op log here (fsscope.oplog; `fsscope replay` plays it)
    anonymize: bool = False       # the op log's names as same-length pseudonyms

    def __post_init__(self) -> None:
        given = [name for name, on in (("--pid", self.pid is not None), ("--cgroup", bool(self.cgroup)),
                                       ("a command", bool(self.command))) if on]
        if len(given) != 1:
            raise FsscopeError("watch needs exactly one of --pid PID, --cgroup PATH or -- COMMAND"
                               + (f" (given: {', '.join(given)})" if given else ""))
        if self.children and self.pid is None:
            raise FsscopeError("watch --children goes with --pid")


class _Tasks:
    """The watched tasks: resolved once, their commands and processes kept as they come."""

    def __init__(self, spec: Spec):
        from fsscope.watch import tasks

        self.held = None
        if spec.command:
            self.held = tasks.HeldCommand(spec.command, cwd=spec.cwd or None)
            self.tids = [self.held.pid]
            self.label = "command " + " ".join(spec.command)
            self.cwd = spec.cwd or os.getcwd()
        elif spec.pid is not None:
            self.tids = tasks.process_tids(spec.pid, with_children=spec.children)
            self.label = f"pid {spec.pid} ({tasks.comm(spec.pid)})" + (" and its children" if spec.children else "")
            self.cwd = _cwd(spec.pid)
        else:
            self.tids = tasks.cgroup_tids(spec.cgroup)
            self.label = f"cgroup {spec.cgroup}"
            self.cwd = _cwd(self.tids[0])
        self.comms = {tid: tasks.comm(tid) for tid in self.tids}
        self.tgid = {tid: _tgid(tid) or tid for tid in self.tids}
        self.seen_files: dict[tasks.OpenFile, int] = {}  # what a descriptor named -> first seen (mono ns)
        self.open_files_ns: int | None = None  # when /proc/PID/fd was read at attach (tracing on)
        self.followed: Path | None = None  # the tasks' instance, whose set_event_pid the kernel keeps

    def poll_files(self) -> None:
        """What the watched processes' descriptors name now, and when each was first seen."""
        from fsscope.watch import tasks

        now = time.monotonic_ns()
        for pid in sorted(set(self.tgid.values())):
            for f in tasks.open_files(pid):
                self.seen_files.setdefault(dataclasses.replace(f, pid=0, fd=0), now)

    def alive(self, spec: Spec) -> bool:
        if self.held is not None:
            return self.held.proc.poll() is None
        if spec.pid is not None and spec.children:  # its children may outlive it: any followed task
            if self.followed is not None:  # the kernel's own list (event-fork drops a task once it
                try:                       # is reaped: an orphan's zombie may stay listed a while)
                    return any(_running(int(t)) for t in (self.followed / "set_event_pid").read_text().split())
                except (OSError, ValueError):  # the instance is gone (detached)
                    pass
            return any(_running(t) for t in self.tgid)  # a task seen still runs (a reused pid errs on "running")
        if spec.pid is not None:
            return _running(spec.pid)
        from fsscope.watch import tasks

        try:
            return bool(tasks.cgroup_pids(tasks.cgroup_dir(spec.cgroup)))  # a service that stopped: done
        except FsscopeError:  # the cgroup itself is gone
            return False

    def learn(self, instance: Path | None) -> int:
        """Note the tasks the kernel follows now (forks included): process and command, while
        they still exist. Returns how many are followed."""
        from fsscope.watch import tasks

        if instance is None:
            return len(self.tids)
        try:
            followed = [int(t) for t in (instance / "set_event_pid").read_text().split()]
        except (OSError, ValueError):
            return len(self.tgid)
        for tid in followed:
            tgid = self.tgid.get(tid) or _tgid(tid)
            if tgid:
                self.tgid[tid] = tgid
                self.comms[tid] = tasks.comm(tid) or self.comms.get(tid, "")  # after an exec: the new one
        return len(followed)


def _running(pid: int) -> bool:
    """The process exists and has not exited (a zombie its parent has not reaped has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError as exc:
        raise FsscopeError(f"cannot read the working directory of pid {pid}: {exc.strerror}") from None


def _tgid(tid: int) -> int | None:
    try:
        for line in Path(f"/proc/{tid}/status").read_text().splitlines():
            if line.startswith("Tgid:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def run(ctx, spec: Spec) -> Report:
    from fsscope import trust
    from fsscope.explain.geometry import read_geometry
    from fsscope.targets.existing import existing_fs
    from fsscope.trace.tracefs import tracefs_root
    from fsscope.watch import syscalls, tasks
    from fsscope.watch.names import Tree
    from fsscope.watch.session import WatchSession

    tracefs_root()  # refuses in one line without root or tracefs (the CLI said so before)
    ctx.phase("attach")
    watched = _Tasks(spec)
    try:
        # the tree named through links only a trusted user made (a user's ~/tree -> /root is
        # not the user's tree: its names and sizes would go into the report and the op log)
        tree_root = trust.real_tree(spec.tree, "watch --tree") if spec.tree else os.path.realpath(watched.cwd)
        found = existing_fs(tree_root)
        notes: list[str] = []
        try:
            geometry = read_geometry(found.fs, found.device, found.mountpoint, existing=True, sync=False)
            notes += [f"geometry not read: {gap}" for gap in geometry.unread]
        except (FsscopeError, OSError) as exc:
            geometry = None
            notes.append(f"no geometry of {found.mountpoint} ({exc}): format changes come without arithmetic")
        sched = spec.sched or bool(spec.capture)  # the op log's think times are split by it
        session = WatchSession(Path(ctx.run_dir.path) / "trace-raw", fs=found.fs, device=found.device,
                               tids=watched.tids, journal=getattr(ctx.target, "journal", None),
                               buffer_kb=spec.buffer_kb,
                               leave_out=syscalls.leaving_out(sched=sched, io_names=spec.io_names))
        if not sched:
            notes.append("the tasks' scheduling was not traced (watch --sched traces it, at about two events "
                         "more each time a call blocks): a slow call's time off the CPU is neither 'waiting "
                         "for a CPU' nor 'blocked', and an unexplained one says so")
        if not spec.io_names:
            notes.append("reads, writes and fsyncs were traced without the events naming their inode "
                         "(--no-io-names): a call on a descriptor whose open named nothing (a cached file "
                         "opened while watched) is unnamed, and a page-cache miss is not counted in pages")
        session.open()
        try:
            session.begin()
            # the tree and the descriptors are read with tracing on: a change made while they
            # are read is in the record, on the clock of each directory's listing (names.py)
            tree = Tree.walk(tree_root)
            if tree.truncated:
                notes.append(f"{tree_root} has more than {len(tree.paths)} entries: only those were mapped at attach")
            notes += [f"not walked: {why}" for why in tree.swapped]
            open_files = [f for pid in sorted(set(watched.tgid.values())) for f in tasks.open_files(pid)]
            watched.open_files_ns = time.monotonic_ns()
            if watched.held is not None:
                watched.held.release()
            ctx.phase("watching", tasks=len(watched.tids), tree=tree_root)
            full = _watch(ctx, spec, watched, session)
            if full:
                notes.append(full)
        except BaseException:
            session.abort()
            raise
        exit_status = watched.held.stop() if watched.held is not None else None
        ctx.phase("decode")
        recorded = session.finish()
    finally:
        if watched.held is not None:
            watched.held.stop()
    # a change after tracing stopped would be missing from the record: the walk at detach
    # counts a directory only when the watched tasks have ended
    end_settled = watched.held is not None or not watched.alive(spec)
    try:
        end_tree = Tree.walk(tree_root)
    except (OSError, FsscopeError) as exc:  # the tree went or was swapped: the record is kept all the same
        end_tree = Tree(tree_root, tree.dev)
        notes.append(f"{tree_root} could not be walked at detach ({exc}): files made meanwhile may be unnamed")
    ctx.phase("analyse")
    return _analyse(ctx, spec, watched, recorded, tree, end_tree, end_settled, open_files, found, geometry,
                    notes, exit_status)


def _watch(ctx, spec: Spec, watched: _Tasks, session) -> str | None:
    """Until the time is up, the tasks are gone, the events kept reach ``max_events_mb`` or the
    job is cancelled: progress every second. Returns why it stopped early (the events' bound)."""
    t0 = time.monotonic()
    full = None
    next_progress = next_poll = t0
    instance = session.sides[0].instance.path if session.sides[0].instance is not None else None
    watched.followed = instance
    while not ctx.cancelled and watched.alive(spec):
        now = time.monotonic()
        if spec.duration_s is not None and now - t0 >= spec.duration_s:
            break
        if now >= next_progress:
            followed = watched.learn(instance)
            raw = session.raw_bytes()
            ctx.emit(WatchProgress(elapsed_s=round(now - t0, 2), raw_bytes=raw, tasks=followed))
            ctx.progress(round(now - t0, 1), spec.duration_s, unit="s",
                         info=f"{followed} task(s), {raw // 1024} KiB of events")
            next_progress = now + PROGRESS_EVERY_S
        if now >= next_poll:
            watched.poll_files()
            next_poll = now + FD_POLL_S
            raw = session.raw_bytes()
            if raw >= spec.max_events_mb * 2**20:  # what the decode would hold in memory: bounded
                full = (f"the watch stopped after {now - t0:.1f} s: its events reached {raw // 2**20} MiB "
                        f"(max_events_mb {spec.max_events_mb}; they are all decoded in memory): the calls "
                        f"after that were not recorded" + (" and the command was stopped" if watched.held else ""))
                ctx.log(full)
                break
        time.sleep(0.05)  # the job's own polling interval (what it waits for has no fd to wait on)
    watched.learn(instance)
    return full


def _analyse(ctx, spec: Spec, watched: _Tasks, recorded, tree, end_tree, end_settled: bool, open_files, found,
             geometry, notes: list[str], exit_status: int | None) -> Report:
    from fsscope.watch import calls as calls_mod
    from fsscope.watch import causes, slow
    from fsscope.watch.names import name_calls, transferred
    from fsscope.watch.syscalls import OPS
    from fsscope.watch.tasks import processes

    # which process each thread was in, by the kernel's record of each clone (a short-lived
    # thread is gone before /proc could be read: it is not a process of its own)
    watched.tgid.update(processes(recorded.events, recorded.names, watched.tgid))
    tasks_lost = next((x for x in recorded.lost if x.instance == "tasks"), None)
    paired = calls_mod.pair(recorded.events, recorded.names, tasks_lost.spans if tasks_lost else None)
    calls = paired.calls
    where = calls_mod.inside(calls, recorded.events)
    named = name_calls(calls, recorded.events, where, recorded.names, recorded.texts, tree,
                       open_files=open_files, open_files_ns=watched.open_files_ns, tgid=watched.tgid, fs=found.fs, end_tree=end_tree,
                       end_settled=end_settled, later_files=[(t, f) for f, t in watched.seen_files.items()])
    if spec.capture:
        from fsscope.watch.capture import write_capture

        notes.append(write_capture(ctx, spec, calls, recorded, where, named, tree, watched, found.fs, open_files))
    group = slow.groups(calls, named.file, named.dir, named.created)
    judged = slow.judge(calls, group, factor=spec.slow_factor, floor_ns=int(spec.slow_floor_us * 1000))
    ctx.run_dir.save_array("calls", calls)
    t0 = int(calls["start_ns"].min()) if len(calls) else 0
    slow_idx = np.flatnonzero(judged.slow)
    watched_tids = set(watched.tgid) | set(int(t) for t in np.unique(calls["tid"]))
    wins = causes.windows(slow_idx, calls, recorded.events, where, recorded.names, recorded.texts,
                          watched_tids, named.dirs)
    comms = {**watched.comms, **recorded.comms, **_exec_comms(recorded)}  # what the kernel recorded first
    moved = transferred(calls)
    kernel_pids = kernel_threads({who for w in wins.values() for who in w.others})
    explained: dict[int, list[causes.Cause]] = {
        i: causes.explain(w, int(calls["duration_ns"][i]), kernel_pids=kernel_pids) for i, w in wins.items()}
    _lost_inside(explained, calls, recorded.lost)
    cause_count = Counter(c.kind for cs in explained.values() for c in cs)

    def slow_row(i: int) -> SlowCall:
        return SlowCall(index=int(i), tid=int(calls["tid"][i]), comm=comms.get(int(calls["tid"][i]), ""),
                        op=OPS[calls["op"][i]], start_s=round((int(calls["start_ns"][i]) - t0) / 1e9, 6),
                        duration_us=round(int(calls["duration_ns"][i]) / 1e3, 1),
                        baseline_us=round(int(judged.baseline_ns[i]) / 1e3, 1),
                        local_baseline=bool(judged.local[i]), result=int(calls["result"][i]),
                        bytes=int(moved[i]), file=named.file_path(int(i)),
                        dir=named.path(int(named.dir[i])),
                        causes=[CauseRow(kind=c.kind, text=c.text) for c in explained[int(i)]])

    by_duration = slow_idx[np.argsort(-calls["duration_ns"][slow_idx], kind="stable")]
    changes = _format_changes(calls, recorded, where, named, judged, geometry, tree, end_tree)
    reps = _repeats(calls, judged, named, explained)
    unnamed = np.array([named.file_path(i) is None and named.path(int(named.dir[i])) is None
                        for i in range(len(calls))], dtype=bool)
    ops = []
    window_s = window_length_s(recorded.duration_s)
    window = ((calls["start_ns"] - t0) // int(window_s * 1e9)).astype(np.int64) if len(calls) else calls["start_ns"]
    for o in np.unique(calls["op"]):
        rows = calls["op"] == o
        d = calls["duration_ns"][rows] / 1e3
        p50s, p99s, counts = by_window(d, window[rows], int(window.max()) + 1)
        ops.append(OpSummary(op=OPS[o], calls=int(rows.sum()), p50_us=round(float(np.percentile(d, 50)), 1),
                             p99_us=round(float(np.percentile(d, 99)), 1), max_us=round(float(d.max()), 1),
                             slow=int(judged.slow[rows].sum()), bytes=int(moved[rows].sum()),
                             unnamed=int(unnamed[rows].sum()), inconclusive=int(judged.inconclusive[rows].sum()),
                             p50_us_by_window=p50s, p99_us_by_window=p99s, calls_by_window=counts))
    lost = [Loss(instance=x.instance, overrun=x.overrun, dropped=x.dropped, pages_with_loss=x.pages_with_loss)
            for x in recorded.lost]
    lost_total = sum(x.total for x in recorded.lost)
    if lost_total or any(x.pages_with_loss for x in recorded.lost):
        notes.append(f"the ring buffer lost {lost_total} event(s): calls whose entry or exit was lost are "
                     f"counted as unpaired, and a slow call may lack some of its kernel events "
                     f"(a larger buffer_kb keeps more)")
    if paired.across_loss:
        notes.append(f"{paired.across_loss} entr(ies) and exit(s) with lost events between them were not "
                     f"made calls: they may be two calls whose other halves were lost, and their window "
                     f"would take the kernel events of both")
    unplaced = [x.instance for x in recorded.lost if x.unplaced]
    if unplaced:
        notes.append(f"the {' and '.join(unplaced)} ring buffer lost events no page marked: any call may "
                     f"lack kernel events, and two calls' halves may have been paired as one")
    if paired.unpaired_enters or paired.unpaired_exits:
        notes.append(f"{paired.unpaired_enters} entr(ies) without exit and {paired.unpaired_exits} exit(s) "
                     f"without entry (calls in progress at attach or detach, or lost events)")
    if int(unnamed.sum()):
        notes.append(f"{int(unnamed.sum())} call(s) could not be named: no kernel event inside them "
                     f"named a file and their descriptor was not seen opening (uprobes are not used)")
    undecided = np.flatnonzero(judged.inconclusive)
    if len(undecided):
        where_ = list(dict.fromkeys(f"{OPS[calls['op'][i]]} on {named.path(int(judged.group[i])) or 'an unnamed file'} "
                                    f"({int(judged.group_size[i])} calls)" for i in undecided.tolist()))
        notes.append(f"{len(undecided)} call(s) inconclusive ({'; '.join(where_[:3])}): slow beside the other "
                     f"calls of their kind but not beside their own file's or directory's few calls, or the "
                     f"reverse; {slow.MIN_GROUP} or more calls there (a longer watch) would decide them")
    if named.unsure:
        notes.append(f"{len(named.unsure)} director(ies) changed while they were listed "
                     f"({', '.join(sorted(named.path(d) or str(d) for d in named.unsure)[:3])}): the names they "
                     f"held are not known, so their format changes have no verdict; a listing between "
                     f"their changes (or the watched tasks ending before detach) would decide it")
    if recorded.missing:
        notes.append(f"{len(recorded.missing)} event(s) this kernel does not have were left out")
    report = Report(
        watched=watched.label, tids=watched.tids, comms={str(k): v for k, v in sorted(comms.items())
                                                         if k in watched_tids},
        fs=found.fs, device=found.device, tree=tree.root, duration_s=round(recorded.duration_s, 3), window_s=window_s,
        exit_status=exit_status, calls=len(calls), across_loss=paired.across_loss,
        unpaired_enters=paired.unpaired_enters,
        unpaired_exits=paired.unpaired_exits, unnamed=int(unnamed.sum()), events=len(recorded.events),
        ops=ops, slow_total=len(slow_idx), inconclusive_total=len(undecided), slow=[slow_row(i) for i in by_duration[:spec.show_slow]],
        format_changes=changes, repeats=reps, lost=lost, lost_total=lost_total,
        causes=dict(cause_count.most_common()), missing=recorded.missing, notes=notes)
    _emit_findings(ctx, report)
    return report


#: The windows an op's latency is summarised over: about this many over the watch, none shorter
#: than MIN_WINDOW_S (a sparkline's glyphs; fewer calls per window would make noisy percentiles).
WINDOWS = 40
MIN_WINDOW_S = 0.25


def window_length_s(duration_s: float) -> float:
    """The windows' length for a watch of ``duration_s``: a round number of quarter seconds."""
    return max(MIN_WINDOW_S, round(duration_s / WINDOWS / MIN_WINDOW_S) * MIN_WINDOW_S)


def by_window(duration_us: np.ndarray, window: np.ndarray,
              windows: int) -> tuple[list[float | None], list[float | None], list[int]]:
    """Per window 0..windows-1: the calls' p50 and p99 (µs; None where there was none) and
    their count (every op over the same windows, so their sparklines line up)."""
    counts = np.bincount(window, minlength=windows)
    order = np.argsort(window, kind="stable")
    groups = np.split(duration_us[order], np.cumsum(counts)[:-1])
    p50s = [round(float(np.percentile(g, 50)), 1) if len(g) else None for g in groups]
    p99s = [round(float(np.percentile(g, 99)), 1) if len(g) else None for g in groups]
    return p50s, p99s, [int(c) for c in counts]


def _lost_inside(explained: dict, calls: np.ndarray, lost: list) -> None:
    """A slow call during which a ring buffer lost events says so: its causes may lack some
    (the device's I/O, its own thread's events)."""
    from fsscope.watch.calls import merged, overlaps
    from fsscope.watch.causes import Cause

    rows = np.array(sorted(explained), dtype=np.int64)
    if not len(rows):
        return
    starts = calls["start_ns"][rows]
    ends = starts + calls["duration_ns"][rows]
    for x in lost:
        hit = overlaps(starts, ends, merged(x.spans))
        for i in rows[hit].tolist():
            explained[i].append(Cause("lost", f"the {x.instance} ring buffer lost events during this call: "
                                              f"its causes may be incomplete (a larger --buffer-kb keeps more)"))


#: /proc/PID/stat's flags: the task is a kernel thread (include/linux/sched.h).
PF_KTHREAD = 0x00200000


def kernel_threads(tasks: set[tuple[int, str]]) -> set[int]:
    """Which (pid, command) are kernel threads: by the kernel's PF_KTHREAD flag, never by the
    name alone (a user's process can name itself "kworker/0:1" and hide its I/O among the
    kernel's). A task gone by now is judged by its name (kworkers come and go)."""
    from fsscope.watch.causes import KERNEL_THREADS

    out = set()
    for pid, comm in tasks:
        try:
            flags = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[6])
        except (OSError, ValueError, IndexError):
            if comm.startswith(KERNEL_THREADS):
                out.add(pid)
            continue
        if flags & PF_KTHREAD:
            out.add(pid)
    return out


def _exec_comms(recorded) -> dict[int, str]:
    """Each task's command after its last exec (the kernel's comm: the program's file name,
    15 bytes at most), from ``sched_process_exec``."""
    code = next((c for c, n in enumerate(recorded.names) if n.endswith("/sched_process_exec")), -1)
    out = {}
    for row in recorded.events[recorded.events["code"] == code]:
        out[int(row["arg"])] = os.path.basename(recorded.texts[int(row["sector"])])[:15]
    return out


def _format_changes(calls, recorded, where, named, judged, geometry, tree, end_tree) -> list[FormatChange]:
    from fsscope.watch.repeats import format_events, format_verdict
    from fsscope.watch.syscalls import OPS

    out = []
    for i, name, d in format_events([n.split("/", 1)[-1] for n in recorded.names], recorded.events, where, named.dirs):
        lengths = end_tree.name_bytes.get(d) or tree.name_bytes.get(d) or []
        name_bytes = int(np.median(lengths)) if lengths else 0
        op = OPS[calls["op"][i]]
        in_dir = int(named.dir[i]) == d
        before, at, text, matches = format_verdict(geometry, name, name_bytes, op == "mkdir" and not in_dir,
                                                   int(named.entries_before[i]) if in_dir else -1)
        out.append(FormatChange(dir=named.path(d), event=name, call=i, op=op, entries_before=before,
                                name_bytes=name_bytes, predicted=at, matches=matches, arithmetic=text,
                                duration_us=round(int(calls["duration_ns"][i]) / 1e3, 1),
                                slow=bool(judged.slow[i])))
    return out


def _repeats(calls, judged, named, explained) -> list[Repeat]:
    from fsscope.watch.repeats import stride
    from fsscope.watch.syscalls import OPS

    out = []
    for o in np.unique(calls["op"]):
        of_op = calls["op"] == o
        for key in np.unique(judged.group[of_op]):
            rows = np.flatnonzero(of_op & (judged.group == key))
            ordinals = np.flatnonzero(judged.slow[rows])
            found = stride(ordinals)
            if found is None:
                continue
            gap, hits = found
            kinds = Counter(cause_label(c, OPS[o]) for i in rows[ordinals] for c in explained.get(int(i), [])[:1])
            cause = kinds.most_common(1)[0][0] if kinds else ""
            where_ = named.path(int(key))
            title = (f"{OPS[o]} calls {'in' if int(key) in named.dirs else 'on'} {where_ or 'an unnamed file'} "
                     f"are slow every {gap} calls" + (f" — {cause}" if cause else ""))
            out.append(Repeat(op=OPS[o], where=where_, calls=len(rows), slow=len(ordinals), stride=gap,
                              hits=hits, cause=cause, title=title))
    return out


#: What a repeat's title says its calls share, by their first cause's kind.
CAUSE_LABELS = {"format": "a directory format change", "alloc": "an allocation",
                "journal": "a journal commit or log force", "writeback": "writeback throttling",
                "cache-miss": "page-cache misses", "other-io": "other processes' I/O on the device",
                "kernel-io": "the journal's or writeback's I/O on the device",
                "cpu": "waiting for a CPU", "blocked": "blocked on something no traced event names",
                "none": "nothing the kernel traced"}


def cause_label(cause, op: str) -> str:
    """What a repeat's title says its calls share, from their first cause."""
    if cause.kind == "alloc" and op == "open" and "xfs_alloc_vextent_finish" in cause.text:
        return "a new inode chunk (XFS allocated an extent inside the create)"
    return CAUSE_LABELS.get(cause.kind, cause.kind)


def format_finding(c: FormatChange) -> Finding:
    """The flag of a directory format change (watch's and replay's alike)."""
    verdict = {True: "as the arithmetic predicts", False: f"the arithmetic predicts {c.predicted}",
               None: "no exact prediction"}[c.matches]
    # -1: the names it held are not known (it changed while it was listed), as the CLI says
    names = f"{c.entries_before} names" if c.entries_before >= 0 else "names not known"
    return Finding(flag="format-change", title=f"{c.dir or 'a directory'}: {c.event} at {c.op} with "
                                               f"{names} ({verdict})",
                   note=c.arithmetic, index=c.call, structure=c.event)


def _emit_findings(ctx, report: Report) -> None:
    for r in report.repeats:
        ctx.emit(Finding(flag="repeat", title=r.title, note=f"{r.slow} of {r.calls} {r.op} calls slow; {r.hits} "
                                                            f"of the gaps between them are {r.stride} calls",
                         stride=r.stride, count=r.slow))
    for c in report.format_changes:
        ctx.emit(format_finding(c))
    if report.lost_total:
        ctx.finding("lost-events", f"the ring buffer lost {report.lost_total} event(s)",
                    "; ".join(f"{x.instance}: overrun {x.overrun}, dropped {x.dropped}" for x in report.lost))
