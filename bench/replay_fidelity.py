#!/usr/bin/env python3
"""How faithful is ``fsscope replay``? A workload captured by ``watch --capture`` on a recipe's
fresh RAM target, replayed on a fresh target of the same recipe: per call type, the replayed
median and p99 against the captured ones (the same calls, the same file system and state).

Target (issue 37): replayed median within 10 % and p99 within 25 % of the captured ones per
call type, on each workload (call types with fewer than ``--min-calls`` calls are shown, not
judged). What makes the comparison like for like:

- the same measurement: the replay runs under watch's tracing (``--trace on``), so both sides
  are the system call's entry-to-exit under the same tracepoints (an untraced replay, timed
  around the Python call, is a different clock and not judged here);
- the same pace: ``--pace recorded`` (default) keeps each call's think time, as the captured
  program had it (asap runs the calls back to back, which changes when the journal commits);
- the same state: a fresh file system of the same recipe, the starting tree recreated, caches
  as the recipe's hygiene leaves them (the capture runs on ``fsscope prepare``'s fresh target).

A single capture is one sample: each figure is set beside the capture's own sampling noise
(a bootstrap 95 % interval of the captured median and p99 over its calls, as ratios); where
that interval alone is wider than the bound, the verdict is "inconclusive" (a longer capture
would decide), never "met".

Workloads: the maildir-like delivery of tests/maildir_writer.py (``--messages``, fsync each)
and the SQLite WAL writer of tests/sqlite_writer.py (``--commits``, synchronous=full). The load
is printed beside every figure. Root (watch and the targets need it). The prepared target is
released even on Ctrl-C.

    .venv/bin/python bench/replay_fidelity.py [--workloads maildir,sqlite] [--recipe xfs-default]
        [--messages 1000] [--commits 1000] [--runs 3] [--pace recorded|asap] [--size 512M]
        [--min-calls 100] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import benchlib

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
sys.path.insert(0, str(HERE.parent))  # the oplog reader, from this checkout

BOOTSTRAP = 2000


def fsscope(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fsscope", *args], capture_output=True, text=True, check=False, **kw)


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def workload(name: str, args: argparse.Namespace, mnt: str) -> list[str]:
    if name == "maildir":
        return [sys.executable, str(TESTS / "maildir_writer.py"), f"{mnt}/mail", str(args.messages), "--fsync"]
    return [sys.executable, str(TESTS / "sqlite_writer.py"), f"{mnt}/db.sqlite", str(args.commits)]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="maildir,sqlite")
    p.add_argument("--recipe", default="xfs-default")
    p.add_argument("--messages", type=int, default=1000)
    p.add_argument("--commits", type=int, default=1000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--pace", choices=("asap", "recorded"), default="recorded")
    p.add_argument("--size", default="512M")
    p.add_argument("--min-calls", type=int, default=100)
    benchlib.add_smoke(p, "50 messages and 50 commits, 1 replay run; logs and reports are not kept")
    args = p.parse_args()
    args.work = None
    benchlib.start()
    benchlib.smoke(args, messages=50, commits=50, runs=1)
    args.work = Path(tempfile.mkdtemp(prefix="replay-fidelity-", dir="/var/tmp"))
    verdicts = {}
    try:
        for name in args.workloads.split(","):
            if name not in ("maildir", "sqlite"):
                print(f"--workloads: {name!r} is not maildir or sqlite", file=sys.stderr)
                return 2
            verdict = measure(args, name)
            if verdict is None:
                return 1
            verdicts[name] = verdict
    finally:
        if args.smoke:
            shutil.rmtree(args.work, ignore_errors=True)
    kept = "" if args.smoke else f" (logs and reports in {args.work})"
    print("overall: " + ", ".join(f"{k} {v}" for k, v in verdicts.items()) + kept)
    return 0


def captured_noise(log_path: Path, op: str, rng) -> tuple[float, float]:
    """The half-widths of the bootstrap 95 % intervals of the captured median and p99 of
    ``op``, as fractions of the point values (the capture's own sampling noise)."""
    import numpy as np

    from fsscope import oplog

    d = np.array([o.duration_ns for o in oplog.read(log_path).ops if o.op == op and o.path is not None], float)
    if len(d) < 2:
        return float("inf"), float("inf")
    boot = rng.choice(d, size=(BOOTSTRAP, len(d)), replace=True)
    out = []
    for q in (50, 99):
        point = np.percentile(d, q)
        lo, hi = np.percentile(np.percentile(boot, q, axis=1), [2.5, 97.5])
        out.append(max(point - lo, hi - point) / point if point else float("inf"))
    return out[0], out[1]


def measure(args: argparse.Namespace, name: str) -> str | None:
    import numpy as np

    rng = np.random.default_rng(37)
    log = args.work / f"{name}.oplog.gz"
    prepared = fsscope("prepare", "--recipe", args.recipe, "--ram", "--size", args.size)
    if prepared.returncode != 0:
        print(prepared.stderr.strip(), file=sys.stderr)
        return None
    mnt = prepared.stdout.strip().splitlines()[-1]
    try:
        print(f"[{name}] capture on {args.recipe} ({load()})", flush=True)
        watched = fsscope("watch", "--capture", str(log), "--", *workload(name, args, mnt), cwd=mnt)
        if watched.returncode != 0:
            print(watched.stderr.strip()[-2000:], file=sys.stderr)
            return None
    finally:
        fsscope("release", mnt)
    out = args.work / f"{name}.replay.json"
    print(f"[{name}] replay: {args.runs} run(s) on fresh {args.recipe}, pace {args.pace}, traced ({load()})",
          flush=True)
    replayed = fsscope("replay", str(log), "--recipe", args.recipe, "--ram", "--size", args.size,
                       "--runs", str(args.runs), "--pace", args.pace, "--trace", "on", "--json", str(out))
    if replayed.returncode != 0:
        print(replayed.stderr.strip()[-2000:], file=sys.stderr)
        return None
    report = json.loads(out.read_text())
    print(f"[{name}] after ({load()}); replay traced: {report.get('traced')}")
    print(f"{'op':10} {'calls':>6} {'p50 replayed/captured µs':>26} {'ratio':>6} {'±capture':>8} "
          f"{'p99 replayed/captured µs':>26} {'ratio':>6} {'±capture':>8}  verdict")
    met, judged, undecided = True, 0, 0
    for o in report["ops"]:
        c50, c99 = o["captured_p50_us"], o["captured_p99_us"]
        r50 = o["p50_us"] / c50 if c50 else float("nan")
        r99 = o["p99_us"] / c99 if c99 else float("nan")
        n50, n99 = captured_noise(log, o["op"], rng)
        if o["captured_calls"] < args.min_calls or not report.get("traced"):
            verdict = "too few calls to judge" if report.get("traced") else "untraced replay: not judged"
        else:
            ok = abs(r50 - 1) <= 0.10 and abs(r99 - 1) <= 0.25
            if not ok and (n50 > 0.10 or n99 > 0.25):
                verdict = "inconclusive (the capture's own interval is wider than the bound)"
                undecided += 1
            else:
                met &= ok
                judged += 1
                verdict = "within bounds" if ok else "outside bounds"
        print(f"{o['op']:10} {o['captured_calls']:6d} {o['p50_us']:12.1f} / {c50:11.1f} {r50:6.2f} {n50:7.0%} "
              f"{o['p99_us']:12.1f} / {c99:11.1f} {r99:6.2f} {n99:7.0%}  {verdict}")
    if not met:
        verdict = "NOT met"
    elif undecided:
        verdict = f"inconclusive ({undecided} call type(s) undecided: a longer capture would decide)"
    elif not judged:
        verdict = "inconclusive: no call type had --min-calls calls (a longer capture would decide)"
    else:
        verdict = "met"
    print(f"[{name}] target (p50 within 10 %, p99 within 25 % per call type): {verdict}")
    return verdict


if __name__ == "__main__":
    sys.exit(main())
