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

A capture is one sample of the workload. The reference, measured in the same run: a second
capture B of the same workload on a fresh target of the same recipe, made after the replay
(A, replay, B: a drifting load moves B as it moves the replay), its p50 and p99 over the
first capture A's (B/A), and A's own sampling noise (±A: the half-width of a bootstrap 95 %
interval of its median and p99). A call type outside the bounds where B/A or ±A is outside
them too is "inconclusive" (the workload does not repeat itself that closely here: a quieter
machine or a longer capture would decide), never "met".

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


def durations(log_path: Path):
    """Per call type, the captured durations (ns) of the calls inside the tree (those replay plays)."""
    import numpy as np

    from fsscope import oplog

    out: dict[str, list[int]] = {}
    for o in oplog.read(log_path).ops:
        if o.path is not None:
            out.setdefault(o.op, []).append(o.duration_ns)
    return {op: np.array(d, float) for op, d in out.items()}


def noise(d, rng) -> tuple[float, float]:
    """The half-widths of the bootstrap 95 % intervals of the median and p99 of ``d``, as
    fractions of the point values (a capture's own sampling noise)."""
    import numpy as np

    if len(d) < 2:
        return float("inf"), float("inf")
    boot = rng.choice(d, size=(BOOTSTRAP, len(d)), replace=True)
    out = []
    for q in (50, 99):
        point = np.percentile(d, q)
        lo, hi = np.percentile(np.percentile(boot, q, axis=1), [2.5, 97.5])
        out.append(max(point - lo, hi - point) / point if point else float("inf"))
    return out[0], out[1]


def judge(ratio: float, reference: float, noise_frac: float, bound: float) -> str:
    """within | outside | undecided: a ratio outside the bound is decided only where the
    workload repeats itself within it (B/A and A's own interval inside the bound)."""
    if abs(ratio - 1) <= bound:
        return "within"
    return "outside" if abs(reference - 1) <= bound and noise_frac <= bound else "undecided"


def capture(args: argparse.Namespace, name: str, log: Path) -> bool:
    prepared = fsscope("prepare", "--recipe", args.recipe, "--ram", "--size", args.size)
    if prepared.returncode != 0:
        print(prepared.stderr.strip(), file=sys.stderr)
        return False
    mnt = prepared.stdout.strip().splitlines()[-1]
    try:
        print(f"[{name}] capture {log.name} on {args.recipe} ({load()})", flush=True)
        watched = fsscope("watch", "--capture", str(log), "--", *workload(name, args, mnt), cwd=mnt)
        if watched.returncode != 0:
            print(watched.stderr.strip()[-2000:], file=sys.stderr)
            return False
    finally:
        fsscope("release", mnt)
    return True


def measure(args: argparse.Namespace, name: str) -> str | None:
    """Capture A, replay A, capture B (the reference, after the replay: the replay sits between
    the two captures, so a load that drifts moves B as it moves the replay); per call type
    replay/A beside B/A."""
    import numpy as np

    rng = np.random.default_rng(37)
    log, again = args.work / f"{name}.oplog.gz", args.work / f"{name}.again.oplog.gz"
    if not capture(args, name, log):
        return None
    out = args.work / f"{name}.replay.json"
    print(f"[{name}] replay: {args.runs} run(s) on fresh {args.recipe}, pace {args.pace}, traced ({load()})",
          flush=True)
    replayed = fsscope("replay", str(log), "--recipe", args.recipe, "--ram", "--size", args.size,
                       "--runs", str(args.runs), "--pace", args.pace, "--trace", "on", "--json", str(out))
    if replayed.returncode != 0:
        print(replayed.stderr.strip()[-2000:], file=sys.stderr)
        return None
    if not capture(args, name, again):
        return None
    report = json.loads(out.read_text())
    a, b = durations(log), durations(again)
    print(f"[{name}] after ({load()}); replay traced: {report.get('traced')}; reference: a second capture (B) "
          f"against the first (A), the replayed one")
    print(f"{'op':10} {'calls':>6} {'p50 replay/A µs':>20} {'ratio':>6} {'B/A':>5} {'±A':>5} "
          f"{'p99 replay/A µs':>22} {'ratio':>6} {'B/A':>5} {'±A':>5}  verdict")
    met, judged, undecided = True, 0, 0
    for o in report["ops"]:
        c50, c99 = o["captured_p50_us"], o["captured_p99_us"]
        r50 = o["p50_us"] / c50 if c50 else float("nan")
        r99 = o["p99_us"] / c99 if c99 else float("nan")
        da, db = a.get(o["op"], np.zeros(0)), b.get(o["op"], np.zeros(0))
        n50, n99 = noise(da, rng)
        b50 = np.percentile(db, 50) / np.percentile(da, 50) if len(da) and len(db) else float("nan")
        b99 = np.percentile(db, 99) / np.percentile(da, 99) if len(da) and len(db) else float("nan")
        if o["captured_calls"] < args.min_calls or not report.get("traced"):
            verdict = "too few calls to judge" if report.get("traced") else "untraced replay: not judged"
        else:
            # each statistic on its own: outside its bound where the workload repeats itself
            # within it (B/A and ±A inside the bound) is decided; outside where it does not is not
            said = [judge(r, b, n, bound) for r, b, n, bound in ((r50, b50, n50, 0.10), (r99, b99, n99, 0.25))]
            if "outside" in said:
                met = False
                judged += 1
                verdict = "outside bounds (" + ", ".join(f"{q} {w}" for q, w in zip(("p50", "p99"), said, strict=True)) + ")"
            elif "undecided" in said:
                verdict = ("inconclusive (" + ", ".join(f"{q} {w}" for q, w in zip(("p50", "p99"), said, strict=True))
                           + ": the workload's own capture-to-capture spread is wider than the bound)")
                undecided += 1
            else:
                judged += 1
                verdict = "within bounds"
        print(f"{o['op']:10} {o['captured_calls']:6d} {o['p50_us']:9.1f} / {c50:8.1f} {r50:6.2f} {b50:5.2f} "
              f"{n50:5.0%} {o['p99_us']:10.1f} / {c99:9.1f} {r99:6.2f} {b99:5.2f} {n99:5.0%}  {verdict}")
    if not met:
        verdict = "NOT met"
    elif undecided:
        verdict = f"inconclusive ({undecided} call type(s) undecided: a quieter machine or a longer capture)"
    elif not judged:
        verdict = "inconclusive: no call type had --min-calls calls (a longer capture would decide)"
    else:
        verdict = "met"
    print(f"[{name}] target (p50 within 10 %, p99 within 25 % per call type): {verdict}")
    return verdict


if __name__ == "__main__":
    sys.exit(main())
