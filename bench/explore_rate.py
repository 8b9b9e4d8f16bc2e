"""Treatments per minute of ``fsscope explore`` here, and where a treatment's time goes.

Runs ``fsscope explore`` (a real study: LocalCluster workers, RAM images) on a plan of
chopper.toml's workload factors -- by default with DiskSize fixed at 1 GiB, UsedRatio and
FreeSpaceLayout as in the paper -- then prints:

- treatments per minute, against the issue's target (1,000 treatments in 10 minutes = 100/min);
- the mean time per step (state build amortised, clone, mount, play, sync, FIEMAP, release);
- the reference measured in the same run: a bare disk-state cycle (clone, attach, mount,
  unmount, detach, delete of the same base image, no writes), and each treatment's cost as a
  multiple of it -- what the player and the bookkeeping add to the unavoidable part.

Root only (loop devices). Example:
  sudo .venv/bin/python bench/explore_rate.py --treatments 1000 --recipes ext4-default
  sudo .venv/bin/python bench/explore_rate.py --smoke   # seconds: 4 treatments on 256 MiB disks
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
from pathlib import Path

import benchlib


def bare_cycle_s(recipe_name: str, disk: str, repeats: int) -> float:
    from fsscope import paths, recipes
    from fsscope.study import diskstate
    from fsscope.units import parse_size_bytes

    recipe = recipes.load(recipe_name)
    state = diskstate.DiskState(recipe, parse_size_bytes(disk), 0.0, 6)
    with tempfile.TemporaryDirectory(dir=paths.ram_dir()) as cache:
        base = diskstate.base_image(state, Path(cache))
        times = []
        for _ in range(repeats):
            t0 = time.monotonic()
            with diskstate.clone(base, recipe, {}):
                pass
            times.append(time.monotonic() - t0)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--treatments", type=int, default=200)
    p.add_argument("--recipes", default="ext4-default")
    p.add_argument("--space", default="chopper")
    p.add_argument("--factor", action="append", default=None, help="default: DiskSize=1G")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    p.add_argument("--json", default="", help="keep the explore report here")
    benchlib.add_smoke(p, "4 treatments on 256 MiB disks, 3 bare cycles")
    args = p.parse_args()
    benchlib.start()
    bare_repeats = 3 if args.smoke else 10
    benchlib.smoke(args, treatments=4, factor=["DiskSize=256M"])
    factors = args.factor if args.factor is not None else ["DiskSize=1G"]
    out = Path(args.json or tempfile.mktemp(suffix=".json", prefix="explore-rate-"))
    cmd = [sys.executable, "-m", "fsscope", "explore", "--space", args.space, "--treatments", str(args.treatments),
           "--recipes", args.recipes, "--workers", str(args.workers), "--json", str(out),
           *[f"--factor={f}" for f in factors]]
    print("$", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL)
    wall_s = time.monotonic() - t0
    if proc.returncode != 0:
        print(f"explore failed (exit {proc.returncode})")
        return 1
    report = json.loads(out.read_text())
    if not args.json:
        out.unlink()
    disk = next((f.split("=", 1)[1].split(",")[0] for f in factors if f.startswith("DiskSize=")), "1G")
    bare_s = bare_cycle_s(args.recipes.split(",")[0], disk, bare_repeats)
    done = report["completed"]
    rate = done / wall_s * 60
    print(f"{done} of {report['planned']} treatments on {args.recipes} in {wall_s:.0f} s wall "
          f"(study {report['elapsed_s']:.0f} s, {args.workers} workers): {rate:.1f} treatments/min "
          f"= {rate / 100:.2f}x the target (1,000 in 10 min)")
    steps = report.get("time_per_treatment_s", {})
    total = sum(steps.values())
    print("mean time per treatment, by step (in one worker):")
    for name, value in sorted(steps.items(), key=lambda kv: -kv[1]):
        print(f"  {name:10s} {value * 1000:8.1f} ms  {value / total * 100:5.1f}%")
    cycle = sum(steps.get(k, 0.0) for k in ("clone_s", "attach_s", "mount_s", "release_s"))
    print(f"reference: a bare clone+attach+mount+release cycle, alone on the machine, takes {bare_s * 1000:.0f} ms "
          f"(median of {bare_repeats}); in the study ({args.workers} workers sharing the CPUs) the same steps took "
          f"{cycle * 1000:.0f} ms ({cycle / bare_s:.2f}x) and the whole treatment {total / bare_s:.2f}x")
    print(f"top factors: {', '.join(p['factor'] for p in report['prioritization'][:3])}")
    for note in report.get("notes", [])[:4]:
        print(f"  note: {note}")
    print(benchlib.load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
