#!/usr/bin/env python3
"""How faithful is ``fsscope replay``? A workload captured by ``watch --capture`` on a recipe's
fresh RAM target, replayed on a fresh target of the same recipe: per call type, the replayed
median and p99 against the captured ones (the same calls, the same file system and state).

Target (issue 37): replayed median within 10 % and p99 within 25 % of the captured ones per
call type (call types with fewer than ``--min-calls`` calls are shown, not judged). The
captured calls ran under watch's tracepoints (a few µs each), the replayed ones do not: the
ratio of a call type that takes a few µs says more about the tracing than the replay.

Workload: the maildir-like delivery of tests/maildir_writer.py (``--messages``, fsync each).
The load (``uptime``) is printed beside every figure. Root (watch and the targets need it).
The prepared target is released even on Ctrl-C.

    .venv/bin/python bench/replay_fidelity.py [--recipe xfs-default] [--messages 1000]
        [--runs 3] [--pace asap|recorded] [--size 512M] [--min-calls 100] [--smoke]
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
WRITER = HERE.parent / "tests" / "maildir_writer.py"


def fsscope(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fsscope", *args], capture_output=True, text=True, check=False, **kw)


def load() -> str:
    return "load " + " ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", default="xfs-default")
    p.add_argument("--messages", type=int, default=1000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--pace", choices=("asap", "recorded"), default="asap")
    p.add_argument("--size", default="512M")
    p.add_argument("--min-calls", type=int, default=100)
    benchlib.add_smoke(p, "50 messages, 1 replay run; its log and report are not kept")
    args = p.parse_args()
    args.work = None
    benchlib.start()
    benchlib.smoke(args, messages=50, runs=1)
    try:
        return measure(args)
    finally:
        if args.smoke and args.work is not None:
            shutil.rmtree(args.work, ignore_errors=True)


def measure(args: argparse.Namespace) -> int:
    work = args.work = Path(tempfile.mkdtemp(prefix="replay-fidelity-", dir="/var/tmp"))
    log = work / "capture.oplog.gz"
    prepared = fsscope("prepare", "--recipe", args.recipe, "--ram", "--size", args.size)
    if prepared.returncode != 0:
        print(prepared.stderr.strip(), file=sys.stderr)
        return 2
    mnt = prepared.stdout.strip().splitlines()[-1]
    try:
        print(f"capture: {args.messages} messages on {args.recipe} ({load()})", flush=True)
        watched = fsscope("watch", "--capture", str(log), "--", sys.executable, str(WRITER), f"{mnt}/mail",
                          str(args.messages), "--fsync", cwd=mnt)
        if watched.returncode != 0:
            print(watched.stderr.strip()[-2000:], file=sys.stderr)
            return 1
    finally:
        fsscope("release", mnt)
    out = work / "replay.json"
    print(f"replay: {args.runs} run(s) on fresh {args.recipe}, pace {args.pace} ({load()})", flush=True)
    replayed = fsscope("replay", str(log), "--recipe", args.recipe, "--ram", "--size", args.size,
                       "--runs", str(args.runs), "--pace", args.pace, "--json", str(out))
    if replayed.returncode != 0:
        print(replayed.stderr.strip()[-2000:], file=sys.stderr)
        return 1
    report = json.loads(out.read_text())
    print(f"after ({load()})")
    print(f"{'op':10} {'calls':>6} {'p50 replayed/captured µs':>26} {'ratio':>6} {'p99 replayed/captured µs':>26} "
          f"{'ratio':>6}  verdict")
    met, judged = True, 0
    for o in report["ops"]:
        c50, c99 = o["captured_p50_us"], o["captured_p99_us"]
        r50 = o["p50_us"] / c50 if c50 else float("nan")
        r99 = o["p99_us"] / c99 if c99 else float("nan")
        if o["captured_calls"] < args.min_calls:
            verdict = "too few calls to judge"
        else:
            ok = abs(r50 - 1) <= 0.10 and abs(r99 - 1) <= 0.25
            met &= ok
            judged += 1
            verdict = "within bounds" if ok else "outside bounds"
        print(f"{o['op']:10} {o['captured_calls']:6d} {o['p50_us']:12.1f} / {c50:11.1f} {r50:6.2f} "
              f"{o['p99_us']:12.1f} / {c99:11.1f} {r99:6.2f}  {verdict}")
    kept = "" if args.smoke else f"; log and report in {work}"
    verdict = ("inconclusive: no call type had --min-calls calls (more --messages would decide)" if not judged
               else "met" if met else "NOT met")
    print(f"target (p50 within 10 %, p99 within 25 % per call type): {verdict}{kept}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
