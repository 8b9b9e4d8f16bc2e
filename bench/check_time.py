#!/usr/bin/env python3
"""Wall time of ``fsscope check --quick`` (issue #17: <= 90 s) on a RAM image with a recipe and
on a directory, against the audit alone on the same target in the same run (the fixed cost:
two process start-ups, a fresh file system, the counter sample) and against the 60-s budget
that --quick plans for. Prints the verdict and runs-needed each run reached, so a slow run can
be told apart from a noisy machine.

    .venv/bin/python bench/check_time.py [--dir /var/tmp] [--recipe ext4-default] [--repeat 1] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib

TARGET_S = 90.0
BUDGET_S = 60.0


def timed(args: list[str], extra: list[str]) -> tuple[float, dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        t0 = time.monotonic()
        run = subprocess.run([sys.executable, "-m", "fsscope", "check", *args, *extra, "--json", out.name],
                             capture_output=True, text=True)
        wall = time.monotonic() - t0
        if run.returncode not in (0, 1, 2) or not os.path.getsize(out.name):
            sys.exit(f"check failed ({run.returncode}): {run.stderr.strip()[-500:]}")
        return wall, json.load(open(out.name))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp", help="directory target (default /var/tmp)")
    ap.add_argument("--recipe", default="ext4-default", help="recipe of the RAM target (default ext4-default)")
    ap.add_argument("--repeat", type=int, default=1, help="repetitions per target (default 1)")
    benchlib.add_smoke(ap, "a 15-s budget, 2 runs, a 0.5-s audit sample")
    a = ap.parse_args()
    benchlib.start()
    benchlib.smoke(a, repeat=1)
    # --quick (a 60-s budget) is what the full run times; the smoke mode gives the same
    # calibration a 15-s budget and 2 runs (check takes --quick or --budget) and the audit a shorter sample
    calibrate = ["--budget", "15", "--runs", "2"] if a.smoke else ["--quick"]
    extra = ["--sample", "0.5"] if a.smoke else []
    scratch = tempfile.mkdtemp(prefix="fsscope-check-time-", dir=a.dir)
    targets = [("dir", ["--dir", scratch])]
    if os.geteuid() == 0:
        targets.insert(0, (f"ram {a.recipe}", ["--ram", "--recipe", a.recipe]))
    try:
        for name, target in targets:
            audit = [timed([*target, "--audit-only", "--sample", "2"], extra)[0] for _ in range(a.repeat)]
            quick = [timed([*target, *calibrate], extra) for _ in range(a.repeat)]
            wall = statistics.median(w for w, _ in quick)
            last = quick[-1][1]
            cal = last.get("calibration") or {}
            print(f"{name:22s} --quick {wall:6.1f} s  = {wall / TARGET_S:.2f} of the 90-s target, "
                  f"{wall / BUDGET_S:.2f} of the budget; audit alone {statistics.median(audit):5.1f} s "
                  f"(quick/audit {wall / statistics.median(audit):.1f}); {last['verdict']}, "
                  f"{len(cal.get('runs') or [])} runs, CV {cal.get('cv') or 0:.1%}, runs needed {cal.get('runs_needed')}")
        print(f"{benchlib.load()} now")
    finally:
        os.rmdir(scratch)


if __name__ == "__main__":
    main()
