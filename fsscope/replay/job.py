"""The replay job: an op log (:mod:`fsscope.oplog`) played ``runs`` times, each on a file
system the recipe makes fresh (the starting tree recreated, the recipe's hygiene after it),
then per call type and per file the latency distributions and throughput, the calls watch's
judge finds slow against their own kind, what repeats, and the captured latencies beside the
replayed ones. See :mod:`fsscope.replay`.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import numpy as np
from msgspec import Meta

from fsscope import oplog
from fsscope.errors import FsscopeError
from fsscope.records import SpecRecord
from fsscope.replay.records import DATA, FileStats, OpStats, Repeat, Report, RunPlayed, RunStats

__all__ = ["DATA", "Report", "RunPlayed", "Spec", "run"]

#: The files shown, the most time first.
SHOW_FILES = 10
#: A directory's key among file keys (a call judged by its directory).
DIR_KEY_BASE = 1 << 40


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "replay"

    log: str = ""                                # the op log (an absolute path)
    runs: Annotated[int, Meta(ge=1, description="replays, each on a freshly made file system (2+ for a Welch "
                                                "test)")] = 1
    pace: Annotated[Literal["asap", "recorded", "wall"], Meta(
        description="asap: each call as soon as the one before it (and what it depends on) returned; recorded: "
                    "after its recorded think time, its parts as captured (asleep, then on this thread's CPU; "
                    "the captured wait for a CPU left to this machine's load); wall: after its whole think "
                    "time in wall time")] = "asap"
    slow_factor: Annotated[float, Meta(gt=1, description="slow: at least X times its local baseline")] = 4.0
    slow_floor_us: Annotated[float, Meta(ge=0, description="slow: and at least US µs above it")] = 100.0
    trace: bool = True            # under watch's tracing (root): kernel-timed, format changes, causes
    buffer_kb: Annotated[int, Meta(ge=4, description="the trace ring buffer per CPU, in KiB")] = 8192

    def __post_init__(self) -> None:
        if not self.log:
            raise FsscopeError("replay needs an op log (written by 'fsscope watch --capture LOG')")


def record_bytes(spec: Spec) -> int:
    """The calls arrays each run keeps in the run record."""
    try:
        return os.path.getsize(spec.log) * 8 * spec.runs  # a call is ~10 compressed bytes, 48 in the array
    except OSError:
        return 0


def _tracing(spec: Spec) -> str:
    """Why the replay is not traced ("" : it is)."""
    if not spec.trace:
        return "not traced (--trace off): replayed calls timed by the replayer around each call"
    from fsscope.trace.tracefs import TraceUnavailable, tracefs_root

    try:
        tracefs_root()
    except TraceUnavailable as exc:
        return f"not traced ({exc}): replayed calls timed by the replayer, no format changes or causes"
    return ""


def run(ctx, spec: Spec) -> Report:
    from fsscope.replay.play import play, recreate

    log = oplog.read(spec.log)  # one line when it is not a whole log (the CLI read it before too)
    ops = log.ops
    played_runs = []
    traced_runs: list = []
    fs_name = ""
    tree_bytes = 0
    untraced = _tracing(spec)
    geometry = None
    notes: list[str] = [untraced] if untraced else []
    for r in range(spec.runs):
        if ctx.cancelled:
            break
        with ctx.run_fs(True) as fs:
            fs_name = fs.fs
            root = Path(fs.workdir) / "replay"
            root.mkdir()
            ctx.phase("starting tree", run=r + 1, runs=spec.runs, entries=len(log.entries))
            tree_bytes = recreate(root, log.entries)
            ctx.after_populate()
            ctx.phase("replay", run=r + 1, runs=spec.runs, calls=len(ops), traced=not untraced)
            on_ready, held = None, []
            if not untraced:
                from fsscope.replay.traced import session_starter

                on_ready, held = session_starter(ctx, fs, Path(ctx.run_dir.path) / f"trace-raw-{r + 1}",
                                                 spec.buffer_kb)
            try:
                played = play(root, log, pace=spec.pace, cancelled=lambda: ctx.cancelled, on_ready=on_ready)
            except BaseException:
                for session in held:
                    session.abort()
                raise
            if held:
                traced, geometry = _traced(held[0].finish(), played, root, fs, geometry, notes)
                traced_runs.append(traced)
        kept = played.calls[played.played]
        ctx.run_dir.save_array(f"calls-{r + 1}", kept)
        ctx.emit(RunPlayed(run=r + 1, runs=spec.runs, elapsed_s=round(played.elapsed_ns / 1e9, 4), played=len(kept),
                           ops=_op_stats(kept, played.elapsed_ns / 1e9)))
        ctx.progress(r + 1, spec.runs, unit="runs", info=f"run {r + 1}: {int(played.played.sum())} calls in "
                                                          f"{played.elapsed_ns / 1e9:.2f} s")
        played_runs.append(played)
    return _report(ctx, spec, log, played_runs, fs_name, tree_bytes, traced_runs, geometry, notes)


def _traced(recorded, played, root: Path, fs, geometry, notes: list[str]):
    """One traced run joined to its played calls (their durations become the traced system
    calls'), with what the arithmetic needs read while the file system is mounted."""
    from fsscope.explain.geometry import read_geometry
    from fsscope.replay.traced import join

    rows = np.flatnonzero(played.played)
    traced = join(recorded, played, rows, root)
    played.calls["duration_ns"][rows] = traced.calls["duration_ns"]
    if geometry is None and fs.fs != "tmpfs":
        try:
            geometry = read_geometry(fs.fs, fs.device, fs.mountpoint, existing=True, sync=False)
        except (FsscopeError, OSError) as exc:
            notes.append(f"no geometry of the replayed file system ({exc}): format changes come without arithmetic")
    return traced, geometry


def _keys(log: oplog.OpLog) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, str]]:
    """Per op: its file key, its directory key, whether it may create; key -> a path to show."""
    n = len(log.ops)
    file = np.zeros(n, np.int64)
    dirk = np.zeros(n, np.int64)
    created = np.zeros(n, bool)
    dirs: dict[str, int] = {}
    label: dict[int, str] = {}
    for i, op in enumerate(log.ops):
        where = op.path2 if op.op == "rename" and op.path2 else op.path
        if op.file:
            file[i] = op.file
            if where is not None:
                label[op.file] = where
        if where is not None:
            parent = where.rsplit("/", 1)[0] if "/" in where else "."
            dirk[i] = DIR_KEY_BASE + dirs.setdefault(parent, len(dirs) + 1)
            label[int(dirk[i])] = parent + "/"
        created[i] = op.op == "open" and bool(op.flags & os.O_CREAT)
    return file, dirk, created, label


def _us(values_ns: np.ndarray, q: float) -> float:
    return round(float(np.percentile(values_ns, q)) / 1e3, 1) if len(values_ns) else 0.0


def _report(ctx, spec: Spec, log: oplog.OpLog, played_runs, fs_name: str, tree_bytes: int,
            traced_runs: list, geometry, notes: list[str]) -> Report:
    from fsscope.replay.traced import explain_slow, format_changes
    from fsscope.watch import slow
    from fsscope.watch.job import cause_label, format_finding
    from fsscope.watch.repeats import stride
    from fsscope.watch.syscalls import OPS

    file, dirk, created, label = _keys(log)
    # the captured latencies of the calls replayed (not of those skipped: outside the tree, unnamed)
    made = played_runs[0].played if played_runs else np.zeros(len(log.ops), bool)
    captured = {op: np.array([o.duration_ns for o, m in zip(log.ops, made, strict=True) if m and o.op == op],
                             np.int64) for op in dict.fromkeys(o.op for o in log.ops)}
    runs: list[RunStats] = []
    skipped: dict[str, int] = {}
    pooled: list[np.ndarray] = []
    rows_of: list[np.ndarray] = []
    slow_of: list[np.ndarray] = []
    repeats: dict[tuple[str, str | None], Repeat] = {}
    total_s = 0.0
    changes: list = []
    changes_per_run: list[int] = []
    causes: Counter[str] = Counter()
    kernel_timed = lost = 0
    for r, p in enumerate(played_runs):
        rows = np.flatnonzero(p.played)
        calls = p.calls[rows]
        judged = slow.judge(calls, slow.groups(calls, file[rows], dirk[rows], created[rows]),
                            factor=spec.slow_factor, floor_ns=int(spec.slow_floor_us * 1000))
        traced = traced_runs[r] if r < len(traced_runs) else None
        explained: dict[int, list] = {}
        if traced is not None:
            found_changes = format_changes(traced, rows, log, judged.slow, geometry)
            changes_per_run.append(len(found_changes))
            if r == 0:
                changes = found_changes
            explained = explain_slow(traced, judged.slow)
            for cs in explained.values():
                causes.update(c.kind for c in cs)
            kernel_timed += traced.kernel_timed
            lost += traced.lost
        for o in np.unique(calls["op"]):
            of_op = calls["op"] == o
            for key in np.unique(judged.group[of_op]):
                mine = np.flatnonzero(of_op & (judged.group == key))
                found = stride(np.flatnonzero(judged.slow[mine]))
                where = label.get(int(key))
                if found is not None and (OPS[o], where) not in repeats:
                    # what most of its slow calls share, as watch labels it (their first cause)
                    firsts = [explained[int(i)][0] for i in mine[judged.slow[mine]] if explained.get(int(i))]
                    kinds = Counter(cause_label(c, OPS[o]) for c in firsts)
                    cause = kinds.most_common(1)[0][0] if kinds else ""
                    repeats[(OPS[o], where)] = Repeat(op=OPS[o], where=where, calls=len(mine),
                                                      slow=int(judged.slow[mine].sum()), stride=found[0],
                                                      hits=found[1], cause=cause,
                                                      title=f"{OPS[o]} calls on {where or 'an unnamed file'} "
                                                            f"are slow every {found[0]} calls"
                                                            + (f" — {cause}" if cause else ""))
        for why, n in p.skipped.items():
            skipped[why] = skipped.get(why, 0) + n
        total_s += p.elapsed_ns / 1e9
        p50 = {OPS[o]: _us(calls["duration_ns"][calls["op"] == o], 50) for o in np.unique(calls["op"])}
        mean = {OPS[o]: round(float(calls["duration_ns"][calls["op"] == o].mean()) / 1e3, 2)
                for o in np.unique(calls["op"])}
        runs.append(RunStats(run=r + 1, elapsed_s=round(p.elapsed_ns / 1e9, 4), played=len(rows),
                             skipped=len(log.ops) - len(rows), differs=p.differs, timeouts=p.timeouts,
                             p50_us=p50, mean_us=mean))
        pooled.append(calls)
        rows_of.append(rows)
        slow_of.append(judged.slow)
    calls = np.concatenate(pooled) if pooled else np.zeros(0, played_runs[0].calls.dtype if played_runs else None)
    rows = np.concatenate(rows_of) if rows_of else np.zeros(0, np.int64)
    is_slow = np.concatenate(slow_of) if slow_of else np.zeros(0, bool)
    ops = _op_stats(calls, total_s, is_slow, captured)
    files = _files(calls, rows, file, dirk, label)
    notes = list(log.header.notes) + notes
    if skipped:
        notes.append(f"{sum(skipped.values())} call(s) skipped over {len(played_runs)} run(s): "
                     + "; ".join(f"{n} {why}" for why, n in skipped.items()))
    differs = sum(r.differs for r in runs)
    if differs:
        first = next(p for p in played_runs if p.differs)
        shown = "; ".join(f"#{seq} {log.ops[seq].op} {log.ops[seq].path or ''} (captured {log.ops[seq].result}, "
                          f"here {int(first.calls['result'][seq])})" for seq in first.differing)
        notes.append(f"{differs} call(s) succeeded here where they failed when captured, or the reverse: {shown}")
    if any(r.timeouts for r in runs):
        notes.append(f"{sum(r.timeouts for r in runs)} dependenc(ies) between threads were not met within "
                     f"the timeout: those calls went ahead")
    if traced_runs:
        rest = " (the rest around the call)" if kernel_timed < len(rows) else ""
        notes.append(f"replayed under watch's tracing, as captured: {kernel_timed:,} of {len(rows):,} replayed calls "
                     f"timed by their system call's entry and exit events{rest}")
        if lost:
            notes.append(f"the ring buffer lost {lost} event(s) while replaying: a format change or a cause may be "
                         f"missing (a larger --buffer-kb keeps more)")
        if len(set(changes_per_run)) > 1:
            notes.append(f"format changes per run differ: {changes_per_run} (shown: the first run's)")
    else:
        notes.append("captured latencies were measured under watch's tracepoints (each call a few µs longer); "
                     "replayed ones are not traced")
    report = Report(log=spec.log, source=log.header.source, captured_fs=log.header.fs,
                    anonymized=log.header.anonymized, pace=spec.pace, fs=fs_name,
                    snapshot=ctx.target.spec.snapshot, threads=len(log.threads()),
                    calls=len(log.ops), tree_entries=len(log.entries), tree_bytes=tree_bytes, runs=runs,
                    ops=ops, files=files, slow_total=int(is_slow.sum()), repeats=list(repeats.values()),
                    skipped=skipped, kept=log.header.kept, dropped=log.header.dropped, notes=notes,
                    traced=bool(traced_runs), format_changes=changes, format_changes_per_run=changes_per_run,
                    causes=dict(causes.most_common()))
    for rep in report.repeats:
        ctx.finding("repeat", rep.title,
                    f"{rep.slow} of {rep.calls} slow; {rep.hits} of the gaps are {rep.stride} calls",
                    stride=rep.stride, count=rep.slow)
    for c in report.format_changes:
        ctx.emit(format_finding(c))
    return report


def _op_stats(calls: np.ndarray, total_s: float, is_slow: np.ndarray | None = None,
              captured: dict[str, np.ndarray] | None = None) -> list[OpStats]:
    """Per call type: latency distribution and throughput (with the report: how many were
    slow, and the captured latencies of the same calls)."""
    from fsscope.watch.syscalls import BYTE_OPS, OPS

    ops: list[OpStats] = []
    for o in np.unique(calls["op"]) if len(calls) else []:
        of_op = calls["op"] == o
        d = calls["duration_ns"][of_op]
        moved = calls["result"][of_op]
        nbytes = int(moved[moved > 0].sum()) if OPS[o] in BYTE_OPS else 0
        cap = (captured or {}).get(OPS[o], np.zeros(0, np.int64))
        ops.append(OpStats(
            op=OPS[o], calls=int(of_op.sum()), p50_us=_us(d, 50), p99_us=_us(d, 99),
            mean_us=round(float(d.mean()) / 1e3, 2), max_us=round(float(d.max()) / 1e3, 1),
            calls_per_s=round(float(of_op.sum()) / total_s, 1) if total_s else 0.0, bytes=nbytes,
            mb_per_s=round(nbytes / total_s / 1e6, 3) if total_s else 0.0,
            failed=int((calls["result"][of_op] < 0).sum()),
            slow=int(is_slow[of_op].sum()) if is_slow is not None else 0,
            captured_calls=len(cap), captured_p50_us=_us(cap, 50) if len(cap) else None,
            captured_p99_us=_us(cap, 99) if len(cap) else None))
    return ops


def _files(calls: np.ndarray, rows: np.ndarray, file: np.ndarray, dirk: np.ndarray, label: dict[int, str]
           ) -> list[FileStats]:
    """The files (else directories) the calls spent the most time on, over every run."""
    if not len(calls):
        return []
    keys = np.where(file[rows] != 0, file[rows], dirk[rows])
    out = []
    for key in np.unique(keys):
        if not key:
            continue
        d = calls["duration_ns"][keys == key]
        out.append(FileStats(path=label.get(int(key), "(not named)"), calls=len(d),
                             total_ms=round(float(d.sum()) / 1e6, 3), p50_us=_us(d, 50), p99_us=_us(d, 99)))
    return sorted(out, key=lambda f: -f.total_ms)[:SHOW_FILES]
