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

A capture is one sample of the workload, and on a shared machine the load drifts between
one capture and the next by more than the bounds. So the benchmark alternates, in one
process, ``--rounds`` rounds of: capture C_i on a fresh target, replay C_i (one run) on a fresh
target of the same recipe. Per call type and round, the replayed p50 and p99 over C_i's (the
same calls, adjacent in time, so a drifting load moves both alike); the estimate is their
geometric mean over the rounds, with a 95 % t-interval. It is "within" when the estimate is
inside the bound, "outside" when the whole interval is outside it, and "undecided" otherwise
(more rounds or a quieter machine would decide). The reference printed beside it: the
workload against itself, C_{i+1}/C_i (geometric mean and its largest departure from 1).
Structural flags: the directory-format changes watch reported on each capture against those
the replay of it reported (event, names before, name bytes, prediction), the same or not.

Workloads: the maildir-like delivery of tests/maildir_writer.py (``--messages``, fsync each)
and the SQLite WAL writer of tests/sqlite_writer.py (``--commits``, synchronous=full). The load
is printed beside every figure. Root (watch and the targets need it). The prepared target is
released even on Ctrl-C.

    .venv/bin/python bench/replay_fidelity.py [--workloads maildir,sqlite] [--recipe xfs-default]
        [--messages 1000] [--commits 1000] [--rounds 4] [--pace recorded[,wall,asap]] [--size 512M]
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
    p.add_argument("--rounds", type=int, default=4, help="capture, replay: this many times a workload")
    p.add_argument("--pace", default="recorded",
                   help="asap, recorded or wall; several (recorded,wall): each round replays its capture "
                        "once per pace, alternated, and the first pace is judged")
    p.add_argument("--size", default="512M")
    p.add_argument("--min-calls", type=int, default=100)
    benchlib.add_smoke(p, "50 messages and 50 commits, 2 rounds; logs and reports are not kept")
    args = p.parse_args()
    args.work = None
    benchlib.start()
    benchlib.smoke(args, messages=50, commits=50, rounds=2)
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


T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}  # two-sided t, 95 %


def geometric(ratios: list[float]) -> tuple[float, float, float]:
    """The geometric mean of ``ratios`` and its 95 % t-interval (lo, hi); (g, 0, inf) from one."""
    import numpy as np

    x = np.log(np.asarray([r for r in ratios if r > 0 and np.isfinite(r)], float))
    if not x.size:
        return float("nan"), 0.0, float("inf")
    g = float(np.exp(x.mean()))
    if x.size < 2:
        return g, 0.0, float("inf")
    half = T95.get(x.size - 1, 1.96) * x.std(ddof=1) / np.sqrt(x.size)
    return g, float(np.exp(x.mean() - half)), float(np.exp(x.mean() + half))


def judge(g: float, lo: float, hi: float, bound: float) -> str:
    """within | outside | undecided: outside only when the whole interval is."""
    if abs(g - 1) <= bound:
        return "within"
    return "outside" if hi < 1 - bound or lo > 1 + bound else "undecided"


def flag_key(c: dict) -> tuple:
    return c["event"], c["entries_before"], c["name_bytes"], c["predicted"], c["matches"]


def capture(args: argparse.Namespace, name: str, log: Path) -> dict | None:
    """Capture the workload on a fresh target; watch's report (its format changes)."""
    prepared = fsscope("prepare", "--recipe", args.recipe, "--ram", "--size", args.size)
    if prepared.returncode != 0:
        print(prepared.stderr.strip(), file=sys.stderr)
        return None
    mnt = prepared.stdout.strip().splitlines()[-1]
    out = log.with_suffix(".watch.json")
    try:
        watched = fsscope("watch", "--capture", str(log), "--json", str(out), "--",
                          *workload(name, args, mnt), cwd=mnt)
        if watched.returncode != 0:
            print(watched.stderr.strip()[-2000:], file=sys.stderr)
            return None
    finally:
        fsscope("release", mnt)
    return json.loads(out.read_text())


def replay(args: argparse.Namespace, log: Path, pace: str) -> dict | None:
    out = log.with_suffix(f".replay-{pace}.json")
    replayed = fsscope("replay", str(log), "--recipe", args.recipe, "--ram", "--size", args.size,
                       "--runs", "1", "--pace", pace, "--trace", "on", "--json", str(out))
    if replayed.returncode != 0:
        print(replayed.stderr.strip()[-2000:], file=sys.stderr)
        return None
    return json.loads(out.read_text())


def measure(args: argparse.Namespace, name: str) -> str | None:
    """Rounds of capture C_i then replay of C_i; per call type the replayed/captured ratios of
    the rounds, beside the captures' own C_{i+1}/C_i."""
    paces = args.pace.split(",")
    if not set(paces) <= {"asap", "recorded", "wall"}:
        print(f"--pace: {args.pace!r} is not asap, recorded or wall (or several of them)", file=sys.stderr)
        return None
    captured: list[tuple[dict, dict[str, dict]]] = []
    for i in range(args.rounds):
        log = args.work / f"{name}.{i}.oplog.gz"
        print(f"[{name}] round {i + 1}/{args.rounds}: capture on fresh {args.recipe} ({load()})", flush=True)
        watched = capture(args, name, log)
        if watched is None:
            return None
        replays = {}
        # alternated: the first pace first in even rounds, last in odd ones
        for pace in paces if i % 2 == 0 else paces[::-1]:
            print(f"[{name}] round {i + 1}/{args.rounds}: replay, pace {pace}, traced ({load()})", flush=True)
            report = replay(args, log, pace)
            if report is None:
                return None
            if not report.get("traced"):
                print(f"[{name}] the replay was not traced (root and tracefs are needed): not judged", file=sys.stderr)
                return None
            replays[pace] = report
        captured.append((watched, replays))
    verdicts = [table(args, name, pace, [(w, r[pace]) for w, r in captured]) for pace in paces]
    return verdicts[0]


def table(args: argparse.Namespace, name: str, pace: str, rounds: list[tuple[dict, dict]]) -> str:
    """One pace's table and verdict."""
    print(f"[{name}] pace {pace}, after ({load()}); per call type: replayed/captured of each round (the same calls, adjacent "
          f"in time), their geometric mean [95 % interval]; the workload against itself: C(i+1)/C(i)")
    print(f"{'op':10} {'calls':>6} {'p50 µs r/c':>17} {'p50 ratio [95 %]':>20} {'C/C':>5} "
          f"{'p99 µs r/c':>19} {'p99 ratio [95 %]':>20} {'C/C':>5}  verdict")
    met, judged, undecided = True, 0, 0
    first = rounds[0][1]
    for o in first["ops"]:
        op = o["op"]
        per = [next((x for x in r["ops"] if x["op"] == op), None) for _, r in rounds]
        if any(x is None for x in per):
            continue
        cells = []
        said = []
        for q, bound in (("p50", 0.10), ("p99", 0.25)):
            ratios = [x[f"{q}_us"] / x[f"captured_{q}_us"] if x[f"captured_{q}_us"] else float("nan") for x in per]
            g, lo, hi = geometric(ratios)
            selfs = [b[f"captured_{q}_us"] / a[f"captured_{q}_us"] for a, b in zip(per, per[1:], strict=False)
                     if a[f"captured_{q}_us"]]
            cc, _, _ = geometric(selfs) if selfs else (float("nan"), 0, 0)
            rep, cap = (sum(x[f"{q}_us"] for x in per) / len(per), sum(x[f"captured_{q}_us"] for x in per) / len(per))
            cells.append(f"{rep:8.1f}/{cap:8.1f} {g:6.2f} [{lo:4.2f}-{min(hi, 99):5.2f}] {cc:5.2f}")
            said.append(judge(g, lo, hi, bound))
        calls = min(x["captured_calls"] for x in per)
        if calls < args.min_calls:
            verdict = "too few calls to judge"
        elif "outside" in said:
            met, judged = False, judged + 1
            verdict = "outside bounds (" + ", ".join(f"{q} {w}" for q, w in zip(("p50", "p99"), said, strict=True)) + ")"
        elif "undecided" in said:
            undecided += 1
            verdict = ("inconclusive (" + ", ".join(f"{q} {w}" for q, w in zip(("p50", "p99"), said, strict=True))
                       + ": the interval straddles the bound; more rounds or a quieter machine decide)")
        else:
            judged += 1
            verdict = "within bounds"
        print(f"{op:10} {calls:6d} {cells[0]}  {cells[1]}  {verdict}")
    same = [sorted(map(flag_key, w.get("format_changes") or [])) == sorted(map(flag_key, r.get("format_changes") or []))
            for w, r in rounds]
    flags = [len(w.get("format_changes") or []) for w, _ in rounds]
    print(f"[{name}] structural flags (directory-format changes) the same as captured in {sum(same)} of "
          f"{len(same)} rounds (captured per round: {flags})")
    if not met or not all(same):
        verdict = "NOT met"
    elif undecided:
        verdict = f"inconclusive ({undecided} call type(s) undecided: more rounds or a quieter machine)"
    elif not judged:
        verdict = "inconclusive: no call type had --min-calls calls (a longer capture would decide)"
    else:
        verdict = "met"
    print(f"[{name}] pace {pace}: target (p50 within 10 %, p99 within 25 % per call type, the same flags): "
          f"{verdict}")
    return verdict


if __name__ == "__main__":
    sys.exit(main())
