#!/usr/bin/env python3
"""What ``fsscope watch`` costs the workload it watches, beside ``strace -f -T``.

In ONE run, on a fresh RAM image of the recipe (formatted once; each run works in its own new
directory), each workload runs plain, watched and under strace, alternated (A B C, C B A, ...)
so drift on a shared machine hits all alike. A workload times itself (its loop only, not the
interpreter's start) and prints its operations per second. Watched = what ``fsscope watch --
CMD`` does while the workload runs: its two tracefs instances (the task's syscalls and file
system events, set_event_pid + event-fork; the device's block and journal events) and their
reader processes; the decoding and analysis after the workload ended are not in its time.
strace = ``strace -f -T -o /dev/null``.

Workloads: ``maildir`` (messages written into tmp/ and renamed into new/, one directory),
``sqlite`` (one-row transactions in WAL mode with synchronous=FULL: an fdatasync per commit).

Printed per workload: the median ops/s of each mode, and watched/plain and strace/plain
(target, issue #36: watched/plain >= 0.95), and the events the ring buffers lost.

    .venv/bin/python bench/watch_overhead.py [--recipe xfs-default] [--reps 5] [--smoke]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib  # noqa: E402

from fsscope import recipes  # noqa: E402
from fsscope.targets import Journal, Target, TargetSpec  # noqa: E402
from fsscope.watch.session import WatchSession  # noqa: E402
from fsscope.watch.tasks import HeldCommand  # noqa: E402

WORKLOAD = r'''
import os, sqlite3, sys, time
kind, where, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "maildir":
    for sub in ("tmp", "new", "cur"):
        os.makedirs(os.path.join(where, sub))
    body = b"From: a@example.org\nSubject: test\n\n" + b"x" * 2048
    t0 = time.monotonic()
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
    t0 = time.monotonic()
    for i in range(n):
        db.execute("begin")
        db.execute("insert into t (v) values (?)", (b"x" * 200,))
        db.execute("commit")
print(n / (time.monotonic() - t0))
'''


def run_once(mode: str, kind: str, where: Path, n: int, device: str | None, fs: str,
             raw: Path) -> tuple[float, int]:
    """(ops/s the workload reported, events lost) for one run in ``mode``."""
    argv = [sys.executable, "-c", WORKLOAD, kind, str(where), str(n)]
    if mode == "strace":
        argv = ["strace", "-f", "-T", "-o", "/dev/null", *argv]
    if mode != "watched":
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        return float(out.split()[-1]), 0
    log = raw.parent / "watched.out"
    with open(log, "w") as out:
        held = HeldCommand(argv, stdout=out)
    session = WatchSession(raw, fs=fs, device=device, tids=[held.pid], journal=Journal())  # cleanup finds it
    try:
        session.open()
        session.begin()
        held.release()
        held.proc.wait()
        recorded = session.finish()
    finally:
        session.abort()
        held.stop()
    return float(log.read_text().split()[-1]), sum(x.total for x in recorded.lost)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="xfs-default")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of each mode (default 5)")
    parser.add_argument("--messages", type=int, default=2000, help="maildir messages per run (default 2000)")
    parser.add_argument("--commits", type=int, default=1000, help="sqlite commits per run (default 1000)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run: 1 repetition, 100 ops")
    args = parser.parse_args()
    benchlib.start()
    if args.smoke:
        args.reps, args.messages, args.commits = 1, 100, 100
    modes = ["plain", "watched"] + (["strace"] if shutil.which("strace") else [])
    target = Target(TargetSpec("ram", size_bytes=1024 * 2**20), recipes.load(args.recipe))
    scratch = Path(tempfile.mkdtemp(prefix="fsscope-watch-bench-"))
    try:
        target.open()
        mounted = target.format_and_mount()
        print(f"{args.recipe} on {mounted.device}; modes {', '.join(modes)}; {benchlib.load()}")
        for kind, n in (("maildir", args.messages), ("sqlite", args.commits)):
            rates: dict[str, list[float]] = {m: [] for m in modes}
            lost = 0
            for rep, mode in benchlib.alternate(modes, args.reps):
                where = Path(mounted.workdir) / f"{kind}-{mode}-{rep}"
                rate, dropped = run_once(str(mode), kind, where, n, mounted.device, mounted.fs, scratch / "raw")
                rates[str(mode)].append(rate)
                lost += dropped
                shutil.rmtree(where, ignore_errors=True)
            med = {m: float(np.median(v)) for m, v in rates.items()}
            line = f"{kind:8s} " + "  ".join(f"{m} {med[m]:,.0f} ops/s" for m in modes)
            line += f"  watched/plain {med['watched'] / med['plain']:.3f}"
            if "strace" in med:
                line += f"  strace/plain {med['strace'] / med['plain']:.3f}"
            print(f"{line}  lost {lost}  ({benchlib.load()}; target watched/plain >= 0.95)")
    finally:
        target.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
