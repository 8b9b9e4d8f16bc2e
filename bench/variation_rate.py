#!/usr/bin/env python3
"""Configurations per hour of ``fsscope study variation`` here, and where the time goes (#15).

Runs a real study through the command line (local worker, RAM images, the ``cao-small`` space
by default with fewer configurations so it takes minutes), then prints:

- treatments (configuration x file system x personality) per hour, as measured;
- the in-run reference: the same study if preparing cost nothing -- its measured seconds
  alone (runs x run length, exact) -- and the measured rate as a share of that ideal rate;
- the share of the time spent preparing (mkfs, populate, unmount + mount, drop caches) vs
  measuring, from the per-run timings the study records;
- what the full space's default plan (``--full-configurations``) would take at this rate,
  from the plan's exact cost.

Root only (loop devices). Example:
  sudo .venv/bin/python bench/variation_rate.py --configurations 2 --runs 3 --duration 5
  sudo .venv/bin/python bench/variation_rate.py --smoke   # 1 configuration, varmail, 2 runs of 1 s
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import benchlib  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--space", default="cao-small", help="configuration space (default cao-small)")
    parser.add_argument("--configurations", type=int, default=2, help="sampled configurations (default 2)")
    parser.add_argument("--full-configurations", type=int, default=12,
                        help="the plan to extrapolate to (default 12, the study's default)")
    parser.add_argument("--runs", type=int, help="runs per treatment (default: the space's)")
    parser.add_argument("--duration", type=float, help="seconds per run (default: the space's)")
    parser.add_argument("--personalities", help="e.g. varmail (default: the space's)")
    benchlib.add_smoke(parser, "1 configuration, varmail, 2 runs of 1 s")
    args = parser.parse_args()
    benchlib.start()
    benchlib.smoke(args, configurations=1, personalities="varmail", runs=2, duration=1.0)

    from fsscope.study import variation

    common = ["--space", args.space]
    for flag, value in (("--runs", args.runs), ("--duration", args.duration), ("--personalities", args.personalities)):
        if value is not None:
            common += [flag, str(value)]
    with tempfile.TemporaryDirectory(prefix="fsscope-variation-rate-") as tmp:
        out = Path(tmp) / "v.json"
        env = os.environ | {"FSSCOPE_HOME": os.environ.get("FSSCOPE_HOME", str(Path(tmp) / "home"))}
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "fsscope", "study", "variation", *common,
                               "--configurations", str(args.configurations), "--json", str(out)],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        wall_s = time.monotonic() - t0
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            return proc.returncode
        report = json.loads(out.read_text())

    done = report["completed"]
    elapsed_s = report["elapsed_s"]
    runs = [r for c in report["configurations"] for r in c["runs"]]
    measured_s = sum(r["elapsed_s"] for r in runs)
    timing = [r.get("timing_s", {}) for r in runs]
    prepare_s = sum(t.get("prepare_s", 0.0) for t in timing)
    measure_s = sum(t.get("measure_s", 0.0) for t in timing)
    rate = done / elapsed_s * 3600
    ideal = done / measured_s * 3600 if measured_s else float("nan")
    print(f"study: {done} treatments ({args.configurations} configurations of {args.space}, "
          f"{report['settings'].get('runs')} runs of {report['settings'].get('duration_s')} s) in {elapsed_s:.0f} s "
          f"({wall_s:.0f} s with the command's start and report); {benchlib.load()}")
    print(f"rate:  {rate:,.1f} treatments/hour measured; {ideal:,.1f}/hour if preparing cost nothing "
          f"(the runs' own {measured_s:.0f} s) -> {rate / ideal:.2f} of the ideal")
    if prepare_s + measure_s:
        print(f"time:  {prepare_s / (prepare_s + measure_s):.0%} preparing (mkfs, populate, remount, drop caches), "
              f"{measure_s / (prepare_s + measure_s):.0%} measuring (workers' start and stop included); "
              f"per run {prepare_s / len(runs):.1f} s preparing, {measure_s / len(runs):.1f} s measuring")
    full = variation.make_plan(variation.Spec(space=args.space, configurations=args.full_configurations,
                                              runs=args.runs or 0, duration_s=args.duration or 0.0,
                                              personalities=tuple((args.personalities or "").split(",")) if args.personalities else ()))
    cost = variation.cost(full)
    hours = cost.treatments / rate
    print(f"full:  {args.full_configurations} configurations of {args.space} = {cost.treatments} treatments: "
          f"about {hours:.2f} h here at this rate ({cost.measure_s / 3600:.2f} h of it measuring)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
