"""Do the predicted structural indices show up in the timing? (needs root)

Runs the real probe (``fsscope probe``: fresh RAM-backed image per run, sync + timed call per
file) on several geometries and prints, for every prediction of fsscope.explain, how slow the
predicted file is relative to its neighbours -- the per-index median over runs divided by
the median of the 10 files on each side (series: the mean over its members; level shift:
median of the 20 files after / the 20 before; window: the slowest file inside it) -- and
whether the analysis flagged and matched it. Flags no rule explains are listed after.

    .venv/bin/python bench/explain_timing.py                  # all configurations
    .venv/bin/python bench/explain_timing.py --runs 10 --only xfs
    .venv/bin/python bench/explain_timing.py --smoke          # seconds: one ext4, 200 files x 2
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import benchlib
import numpy as np

CONFIGS: list[tuple[str, str, int, int]] = [  # recipe, extra mkfs options, name length, files
    ("xfs-default", "", 7, 1024),
    ("xfs-default", "", 20, 1024),
    ("xfs-default", "-i size=1024", 7, 1024),
    ("xfs-default", "-n size=8192", 7, 1024),
    ("ext4-default", "", 7, 1024),
    ("ext4-default", "-O ^metadata_csum", 7, 1024),
    ("ext4-default", "-b 1024", 7, 512),
    ("ext4-default", "-O ^dir_index", 7, 1024),
    ("btrfs-default", "", 7, 300),
    ("btrfs-default", "-n 4096", 7, 300),
]

NEIGHBOURS = 10


def probe(recipe: str, mkfs_opts: str, length: int, files: int,
          runs: int) -> tuple[dict, np.ndarray]:
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.json"
        argv = [sys.executable, "-m", "fsscope", "probe", "--ram", "--size", "512M",
                "--recipe", recipe, "--name-length", str(length), "--files", str(files),
                "--runs", str(runs), "--json", str(report_path)]
        if mkfs_opts:
            argv += [f"--mkfs-opts={mkfs_opts}"]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr or done.stdout}")
        run_dir = re.search(r"recorded in (\S+)", done.stdout + done.stderr).group(1)
        return json.loads(report_path.read_text()), np.load(Path(run_dir) / "latency_ns.npy")


def ratio_at(median_ns: np.ndarray, i: int) -> float:
    lo, hi = max(0, i - NEIGHBOURS), min(median_ns.size, i + NEIGHBOURS + 1)
    around = np.concatenate([median_ns[lo:i], median_ns[i + 1:hi]])
    return float(median_ns[i] / np.median(around)) if around.size else float("nan")


def describe(p: dict, median_ns: np.ndarray) -> tuple[str, str]:
    files = median_ns.size
    if p["kind"] == "series":
        members = [p["index"] + k * p["stride"] for k in range(p["count"])]
        members = [m for m in members if m < files]
        ratios = [ratio_at(median_ns, m) for m in members]
        return (f"{p['index']}+{p['stride']}k ({len(members)})",
                f"{np.mean(ratios):.2f}x mean, min {min(ratios):.2f}x" if ratios else "-")
    if p["kind"] == "level_shift" and p["index"] is not None:
        i = p["index"]
        before, after = median_ns[max(0, i - 20):i], median_ns[i:i + 20]
        return str(i), f"level {np.median(after) / np.median(before):.2f}x"
    if p["kind"] == "linear":
        end = min(p["end"], files)
        x = np.arange(p["index"], end)
        slope = np.polyfit(x, median_ns[p["index"]:end], 1)[0]
        return f"{p['index']}..{end - 1}", f"slope {slope:.1f} ns/file"
    if p["index"] is None:
        lo, hi = p["index_low"], min(p["index_high"], files - 1)
        if lo >= files:
            return f"{lo}..{p['index_high']}", "-"
        ratios = [ratio_at(median_ns, i) for i in range(lo, hi + 1)]
        k = int(np.argmax(ratios))
        return f"{lo}..{p['index_high']}", f"max {ratios[k]:.2f}x at {lo + k}"
    return str(p["index"]), f"{ratio_at(median_ns, p['index']):.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", default="", help="only recipes containing this text")
    benchlib.add_smoke(parser, "one ext4 image, 200 files x 2 runs")
    args = parser.parse_args()
    benchlib.start()
    configs = CONFIGS
    if args.smoke:
        configs = [("ext4-default", "", 7, 200)]
    benchlib.smoke(args, runs=2, only="")
    for recipe, mkfs_opts, length, files in configs:
        if args.only not in recipe:
            continue
        report, latency_ns = probe(recipe, mkfs_opts, length, files, args.runs)
        median_ns = np.median(latency_ns, axis=0)
        print(f"\n== {recipe} {mkfs_opts or '(defaults)'}  names {length}  {files} files x "
              f"{args.runs} runs  typical {np.median(median_ns) / 1e3:.1f} us  ({benchlib.load()})")
        matched = {}
        for flag in report.get("flags", []):
            if flag.get("structure"):
                matched.setdefault(flag["structure"], []).append(
                    f"{flag['flag']}@{flag['index']}")
        for p in report["predictions"]:
            where, timing = describe(p, median_ns)
            flagged = ", ".join(matched.get(p["structure"], [])) or "not flagged"
            cond = "  [assumption]" if p.get("condition") else ""
            print(f"  {p['structure']:30s} {where:>18s}  {timing:28s} {flagged}{cond}")
        for flag in report.get("flags", []):
            if not flag.get("structure"):
                print(f"  unexplained: {flag['flag']} at {flag['index']}")


if __name__ == "__main__":
    main()
