"""A replay run under watch's tracing, so its calls are timed and explained as watch's were.

The replay threads are traced through watch's own session (:class:`fsscope.watch.session.
WatchSession`: their syscall entry/exit and structure events, the device's requests), started
once the threads exist and before any call. Then, per replayed call:

- its **duration** is the traced system call's (entry to exit, under the same tracepoints as
  the captured call): replayed and captured latencies are measured the same way. A call with
  no single traced system call of its kind inside the replayer's window keeps the replayer's
  own timing, counted;
- the kernel events inside it (:func:`fsscope.watch.calls.inside`, by thread and time) give the
  **directory-format changes** with the same arithmetic watch sets beside them
  (``watch.repeats.predicted`` on the directory's names before the call, counted from the log)
  and the **causes** of its slow calls (``watch.causes``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fsscope.oplog import OpLog
from fsscope.watch.calls import CALL_DTYPE
from fsscope.watch.records import FormatChange


@dataclass
class Traced:
    events: np.ndarray
    names: list[str]
    texts: list[str]
    calls: np.ndarray                 # CALL_DTYPE per played row, on the kernel's tids and clock
    where: np.ndarray                 # per event: the played row it fired inside (-1: none)
    dirs: dict[int, str]              # directory inode -> path relative to the replay root
    lost: int = 0
    kernel_timed: int = 0             # rows timed by their traced system call
    lengths: dict[int, list[int]] = field(default_factory=dict)  # directory inode -> its names' byte lengths


def session_starter(ctx, fs, raw_dir: Path, buffer_kb: int = 8192):
    """(on_ready for :func:`fsscope.replay.play.play`, the holder of the session it starts)."""
    from fsscope.watch.session import WatchSession

    held: list = []

    def on_ready(tids: list[int]) -> None:
        session = WatchSession(raw_dir, fs=fs.fs, device=fs.device, tids=tids,
                               journal=getattr(ctx.target, "journal", None), buffer_kb=buffer_kb)
        session.open()
        held.append(session)
        session.begin()

    return on_ready, held


def dir_inodes(root: Path) -> tuple[dict[int, str], dict[int, list[int]]]:
    """Every directory under ``root`` by inode (its path relative to root), and the byte
    lengths of the names each holds (for the format arithmetic)."""
    paths: dict[int, str] = {}
    lengths: dict[int, list[int]] = {}
    for here, subdirs, files in os.walk(root):
        ino = os.lstat(here).st_ino
        rel = os.path.relpath(here, root)
        paths[ino] = rel
        lengths[ino] = [len(os.fsencode(n)) for n in (*subdirs, *files)]
    return paths, lengths


def join(recorded, played, rows: np.ndarray, root: Path) -> Traced:
    """The traced run set beside the played rows (see the module docstring)."""
    from fsscope.watch.calls import inside, pair

    native = played.native[rows]
    mine = played.calls[rows]
    calls = np.zeros(len(rows), CALL_DTYPE)
    for col in ("op", "code", "result", "bytes", "fd", "flags"):
        calls[col] = mine[col]
    calls["tid"] = native
    calls["start_ns"] = mine["start_ns"] + played.t0_ns
    calls["duration_ns"] = mine["duration_ns"]
    kernel = pair(recorded.events, recorded.names).calls
    timed = 0
    for tid in np.unique(native):
        of = np.flatnonzero(native == tid)
        k = kernel[kernel["tid"] == tid]
        k = k[np.argsort(k["start_ns"], kind="stable")]
        starts, ends = calls["start_ns"][of], calls["start_ns"][of] + calls["duration_ns"][of]
        lo = np.searchsorted(k["start_ns"], starts, side="left")
        hi = np.searchsorted(k["start_ns"], ends, side="right")
        for j, row in enumerate(of):
            inside_call = k[lo[j]:hi[j]]
            inside_call = inside_call[(inside_call["op"] == calls["op"][row])
                                      & (inside_call["start_ns"] + inside_call["duration_ns"] <= ends[j])]
            if len(inside_call) == 1:  # the call itself (os.listdir's several calls keep the outer time)
                calls["duration_ns"][row] = inside_call["duration_ns"][0]
                timed += 1
    where = inside(calls, recorded.events)
    dirs, lengths = dir_inodes(root)
    lost = sum(x.total for x in recorded.lost)
    return Traced(recorded.events, recorded.names, recorded.texts, calls, where, dirs, lost, timed, lengths)


def entries_before(log: OpLog) -> tuple[list[str | None], np.ndarray]:
    """Per op: the directory its name is in (a rename's: the target's) and how many names that
    directory held before it, counted from the starting tree and the calls before it that
    succeeded when captured (-1: not known)."""
    held: dict[str, set[str]] = {".": set()}
    for e in log.entries:
        parent, _, name = e.path.rpartition("/")
        held.setdefault(parent or ".", set()).add(name)
        if e.kind == "dir":
            held.setdefault(e.path, set())

    def split(path: str) -> tuple[str, str]:
        parent, _, name = path.rpartition("/")
        return parent or ".", name

    where: list[str | None] = []
    before = np.full(len(log.ops), -1, np.int64)
    for i, op in enumerate(log.ops):
        target = op.path2 if op.op == "rename" else op.path
        if target is None or target == ".":
            where.append(None)
            continue
        d, name = split(target)
        where.append(d)
        if d in held:
            before[i] = len(held[d])
        if op.result < 0:
            continue
        if (op.op == "open" and op.flags & os.O_CREAT) or op.op == "mkdir":
            held.setdefault(d, set()).add(name)
            if op.op == "mkdir":
                held.setdefault(target, set())
        elif op.op in ("unlink", "rmdir"):
            held.get(d, set()).discard(name)
        elif op.op == "rename" and op.path is not None:
            src_dir, src = split(op.path)
            held.get(src_dir, set()).discard(src)
            held.setdefault(d, set()).add(name)
    return where, before


def format_changes(traced: Traced, rows: np.ndarray, log: OpLog, slow: np.ndarray, geometry) -> list[FormatChange]:
    """The directory-format changes inside the played calls, as watch reports them (``call``
    is the op's number in the log)."""
    from fsscope.watch.repeats import format_events, format_verdict

    op_dir, before = entries_before(log)
    ino_of = {path: ino for ino, path in traced.dirs.items()}
    out: list[FormatChange] = []
    for i, name, d in format_events([n.split("/", 1)[-1] for n in traced.names], traced.events, traced.where,
                                    traced.dirs):
        seq = int(rows[i])
        op = log.ops[seq]
        got = traced.lengths.get(d) or []
        name_bytes = int(np.median(got)) if got else 0
        in_dir = ino_of.get(op_dir[seq] or "") == d
        n_before, at, text, matches = format_verdict(geometry, name, name_bytes, op.op == "mkdir" and not in_dir,
                                                     int(before[seq]) if in_dir else -1)
        out.append(FormatChange(dir=traced.dirs.get(d), event=name, call=seq, op=op.op, entries_before=n_before,
                                name_bytes=name_bytes, predicted=at, matches=matches, arithmetic=text,
                                duration_us=round(int(traced.calls["duration_ns"][i]) / 1e3, 1),
                                slow=bool(slow[i])))
    return out


def explain_slow(traced: Traced, slow: np.ndarray) -> dict[int, list]:
    """Per slow row: watch's causes (its kernel events, the device's I/O, the journal...)."""
    from fsscope.watch import causes
    from fsscope.watch.job import kernel_threads

    idx = np.flatnonzero(slow)
    tids = set(int(t) for t in np.unique(traced.calls["tid"]))
    wins = causes.windows(idx, traced.calls, traced.events, traced.where, traced.names, traced.texts, tids,
                          set(traced.dirs))
    kernel_pids = kernel_threads({who for w in wins.values() for who in w.others})
    return {i: causes.explain(w, int(traced.calls["duration_ns"][i]), kernel_pids=kernel_pids)
            for i, w in wins.items()}
