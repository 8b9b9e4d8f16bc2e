#!/usr/bin/env python3
"""What ``fsscope watch`` costs the workload it watches, beside ``strace -f -T``.

In ONE run, on each target (a fresh RAM image of the recipe, and/or an image file on this
machine's disk; formatted once, each run working in its own new directory), each workload runs
plain, watched (as ``fsscope watch`` does by default), watched with ``--sched``, watched with
``--no-io-names``, and under strace, alternated (A B C D, D C B A, ...) so drift on a shared
machine hits all alike. ``--groups`` adds one run per event group alone (``watched-only-sched``
...): what each costs by itself. A workload times itself (its loop only, not the
interpreter's start) and prints its operations per second. Watched = what ``fsscope watch --
CMD`` does while the workload runs: its two tracefs instances (the task's syscalls and file
system events, set_event_pid + event-fork; the device's block and journal events) and their
reader processes; the decoding and analysis after the workload ended are not in its time.
strace = ``strace -f -T -o /dev/null``.

Workloads: ``maildir`` (messages written into tmp/, fsync'd and renamed into new/, one
directory), ``sqlite`` (one-row transactions in WAL mode with synchronous=FULL: an fdatasync
per commit).

Printed per target and workload: the median ops/s of each mode, and mode/plain (target, issue
#36: watched/plain >= 0.95; strace's beside), and the events the ring buffers lost; the events
per operation each group recorded (``watched-sched``: every group); each run's
figure in its order; and the CPU each mode spends per operation -- the workload's own (the
tracepoints' cost lands in its system time) plus, watched, the trace readers', or strace's --
from this process's reaped children (``RUSAGE_CHILDREN``), with plain/mode beside: on a shared
machine a run's wall-clock rate moves with everyone else's load, its CPU time much less.

    .venv/bin/python bench/watch_overhead.py [--target ram,disk] [--reps 7] [--groups] [--smoke]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import msgspec
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib  # noqa: E402

from fsscope import recipes  # noqa: E402
from fsscope.targets import Journal, Target, TargetSpec  # noqa: E402
from fsscope.watch.job import Spec  # noqa: E402
from fsscope.watch.session import WatchSession  # noqa: E402
from fsscope.watch.syscalls import DEVICE, GROUPS, group_of, leaving_out  # noqa: E402

DEVICE_EVENTS = frozenset(e.event for e in DEVICE)
from fsscope.watch.tasks import HeldCommand  # noqa: E402

WORKLOAD = r'''
import os, sqlite3, sys, time
kind, where, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "maildir":
    for sub in ("tmp", "new", "cur"):
        os.makedirs(os.path.join(where, sub))
    body = b"From: a@example.org\nSubject: test\n\n" + b"x" * 2048
    t0, c0 = time.monotonic(), time.process_time()
    for i in range(n):
        name = f"{1700000000 + i}.M{i:06d}P{os.getpid()}.host"
        fd = os.open(os.path.join(where, "tmp", name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.write(fd, body)
        os.fsync(fd)
        os.close(fd)
        os.rename(os.path.join(where, "tmp", name), os.path.join(where, "new", name))
else:
    os.makedirs(where)
    db = sqlite3.connect(os.path.join(where, "db"), isolation_level=None)
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=full")
    db.execute("create table t (k integer primary key, v blob)")
    t0, c0 = time.monotonic(), time.process_time()
    for i in range(n):
        db.execute("begin")
        db.execute("insert into t (v) values (?)", (b"x" * 200,))
        db.execute("commit")
print(n / (time.monotonic() - t0), (time.process_time() - c0) / n)  # ops/s, the loop's own CPU s per op
'''


def children_cpu_s() -> float:
    """User + system CPU of this process's children reaped so far."""
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def run_once(mode: str, kind: str, where: Path, n: int, device: str | None, fs: str,
             raw: Path) -> tuple[float, float, int, float]:
    """(ops/s the workload reported, its loop's own CPU s per op, events lost, CPU s of the
    workload and of whatever watched or traced it) for one run in ``mode``."""
    cpu0 = children_cpu_s()
    rate, own, lost = _run(mode, kind, where, n, device, fs, raw)
    return rate, own, lost, children_cpu_s() - cpu0


def _run(mode: str, kind: str, where: Path, n: int, device: str | None, fs: str,
         raw: Path) -> tuple[float, float, int]:
    argv = [sys.executable, "-c", WORKLOAD, kind, str(where), str(n)]
    if mode == "strace":
        argv = ["strace", "-f", "-T", "-o", "/dev/null", *argv]
    if not mode.startswith("watched"):
        fields = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
        return float(fields[-2]), float(fields[-1]), 0
    log = raw.parent / "watched.out"
    with open(log, "w") as out:
        held = HeldCommand(argv, stdout=out)
    session = WatchSession(raw, fs=fs, device=device, tids=[held.pid], journal=Journal(),  # cleanup finds it
                           leave_out=leave_out(mode))
    try:
        session.open()
        session.begin()
        held.release()
        held.proc.wait()
        recorded = session.finish()
    finally:
        session.abort()
        held.stop()
    fields = log.read_text().split()
    if mode == "watched-sched":  # what every group recorded: the cost's other factor, whatever the load
        groups = Counter("device" if side == "device" else group_of(recorded.names[code])
                         for code, side in ((int(c), _side(recorded, int(c))) for c in recorded.events["code"]))
        EVENTS[kind].append({g: c / n for g, c in groups.items()})
    return float(fields[-2]), float(fields[-1]), sum(x.total for x in recorded.lost)


#: workload -> per watched run, its events per operation by group
EVENTS: dict[str, list[dict[str, float]]] = {"maildir": [], "sqlite": []}


def _side(recorded, code: int) -> str:
    """Which instance recorded the event of ``code`` (the device's events are DEVICE's)."""
    return "device" if recorded.names[code] in DEVICE_EVENTS else "tasks"


def leave_out(mode: str) -> frozenset[str]:
    """The event groups a watched mode leaves out: ``watched`` as ``fsscope watch`` does by
    default (its Spec's defaults), ``watched-sched`` with ``--sched``, ``watched-no-io-names``
    with ``--no-io-names``; ``watched-only-GROUP``: every group but that one (its cost alone)."""
    if mode.startswith("watched-only-"):
        return frozenset(GROUPS) - {mode.removeprefix("watched-only-")}
    default = {f.name: f.default for f in msgspec.structs.fields(Spec)}
    return leaving_out(sched=mode == "watched-sched" or default["sched"],
                       io_names=mode != "watched-no-io-names" and default["io_names"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="xfs-default")
    parser.add_argument("--target", default="ram,disk",
                        help="where: ram (a RAM image), disk (an image file in --image-dir), or both (default)")
    parser.add_argument("--image-dir", default="/var/tmp", help="the disk target's directory (default /var/tmp)")
    parser.add_argument("--reps", type=int, default=7, help="repetitions of each mode (default 7)")
    parser.add_argument("--ops", type=int, default=5000,
                        help="maildir messages and sqlite commits per run on RAM (default 5000)")
    parser.add_argument("--disk-ops", type=int, default=400,
                        help="per run on the disk image, where each one waits for the disk (default 400)")
    parser.add_argument("--groups", action="store_true",
                        help="also watch with one event group at a time (watched-only-calls, -names, "
                             "-io-names, -structure, -sched, -device): what each costs alone")
    parser.add_argument("--workloads", default="maildir,sqlite", help="maildir, sqlite or both (default)")
    benchlib.add_smoke(parser, "1 repetition, 100 ops (40 on disk)")
    args = parser.parse_args()
    benchlib.start()
    benchlib.smoke(args, reps=1, ops=100, disk_ops=40)
    targets = [t.strip() for t in args.target.split(",") if t.strip()]
    if not targets or set(targets) - {"ram", "disk"}:
        parser.error("--target: ram, disk or ram,disk")
    modes = ["plain", "watched", "watched-sched", "watched-no-io-names"] + (["strace"] if shutil.which("strace") else [])
    if args.groups:
        modes += [f"watched-only-{g}" for g in GROUPS]
    kinds = [k.strip() for k in args.workloads.split(",") if k.strip()]
    if not kinds or set(kinds) - {"maildir", "sqlite"}:
        parser.error("--workloads: maildir, sqlite or maildir,sqlite")
    scratch = Path(tempfile.mkdtemp(prefix="fsscope-watch-bench-"))
    try:
        for where in targets:
            if where == "ram":
                spec, n = TargetSpec("ram", size_bytes=1024 * 2**20), args.ops
            else:
                image_dir = Path(tempfile.mkdtemp(prefix="fsscope-watch-bench-", dir=args.image_dir))
                spec, n = TargetSpec("image", str(image_dir / "watch.img"), 1024 * 2**20), args.disk_ops
            try:
                with Target(spec, recipes.load(args.recipe)) as target:
                    mounted = target.format_and_mount()
                    try:
                        print(f"{args.recipe} on {where} ({spec.describe()}, {mounted.device}); modes "
                              f"{', '.join(modes)}; {n} ops per run; {benchlib.load()}")
                        for kind in kinds:
                            compare(kind, n, modes, args.reps, mounted, scratch)
                    finally:
                        target.unmount()
            finally:
                if where == "disk":
                    shutil.rmtree(image_dir, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def compare(kind: str, n: int, modes: list[str], reps: int, mounted, scratch: Path) -> None:
    """One workload in every mode, alternated; its lines printed."""
    rates: dict[str, list[float]] = {m: [] for m in modes}
    cpu_us: dict[str, list[float]] = {m: [] for m in modes}  # per operation
    own_us: dict[str, list[float]] = {m: [] for m in modes}  # the loop's own, per operation
    lost = 0
    for rep, mode in benchlib.alternate(modes, reps):
        where = Path(mounted.workdir) / f"{kind}-{mode}-{rep}"
        rate, own_s, dropped, cpu_s = run_once(str(mode), kind, where, n, mounted.device, mounted.fs,
                                               scratch / "raw")
        rates[str(mode)].append(rate)
        cpu_us[str(mode)].append(cpu_s / n * 1e6)
        own_us[str(mode)].append(own_s * 1e6)
        lost += dropped
        shutil.rmtree(where, ignore_errors=True)
    med = {m: float(np.median(v)) for m, v in rates.items()}
    line = f"{kind:8s} " + "  ".join(f"{m} {med[m]:,.0f} ops/s" for m in modes)
    line += "  " + "  ".join(f"{m}/plain {med[m] / med['plain']:.3f}" for m in modes if m != "plain")
    print(f"{line}  lost {lost}  ({benchlib.load()}; target watched/plain >= 0.95)")
    # each run in its order: on a shared machine the spread says how much a median can hold
    print("         runs: " + "; ".join(f"{m} " + " ".join(f"{r:,.0f}" for r in v) for m, v in rates.items()))
    if EVENTS[kind]:
        per = {g: float(np.median([r.get(g, 0.0) for r in EVENTS[kind]])) for g in (*GROUPS, "tasks")}
        print("         events per op by group, watched-sched (every group; median of its runs): " + "  ".join(
            f"{g} {v:.1f}" for g, v in per.items() if v) + f"  all {sum(per.values()):.1f}")
    for label, per_op in (("the loop's own CPU per op (tracepoints in its system time)", own_us),
                          ("CPU per op, workload + its watcher (start-up included)", cpu_us)):
        cpu = {m: float(np.median(v)) for m, v in per_op.items()}
        print(f"         {label}: " + "  ".join(f"{m} {cpu[m]:,.1f} µs" for m in modes) + "  "
              + "  ".join(f"plain/{m} {cpu['plain'] / cpu[m]:.3f}" for m in modes if m != "plain"))


if __name__ == "__main__":
    sys.exit(main())
