#!/usr/bin/env python3
"""Does the probe's analysis keep up with its measuring at 1,000,000 files x 10 runs?

Measures a real probe on a RAM target (a tmpfs directory under /dev/shm by default): ``--runs``
runs of ``measure_run`` (op=creat, a sync of the file system before each call as the probe
does by default, pinned to one CPU, each run in a fresh directory), written into memory-mapped
``latency_ns.npy`` / ``wait_ns.npy`` like a run directory's. Real tmpfs data, not a synthetic
matrix: on this shared machine ~8-20 % of its files are series candidates, which is what made
the old series search explode.

Then, in a child process each (fresh interpreter, its own peak RSS: VmHWM), the
analysis exactly as the probe job runs it: after every run from the second, ``analyze`` of the
runs so far, the sequential decisions (``Settling.after_run``) and ``settled``; at the end the
report's analysis. Timed as CPU seconds of the child (the measurement as wall seconds of the
timed loops' runs). ``--reference-up-to N``: also with today's series search replaced by the
old one (``fsscope.analysis.outliers_reference``) at N files and below, in the same run, and
the findings of both compared one for one. A child that passes ``--child-timeout`` is stopped
and reported unfinished.

Target (#38): analysis CPU <= 2 x measurement wall time and peak RSS <= 150 MiB at 1,000,000
files x 10 runs. The statistic is that ratio, per size; the load is printed beside each.

    .venv/bin/python bench/probe_scale.py [--files 10000 30000 100000 1000000] [--runs 10]
    .venv/bin/python bench/probe_scale.py --smoke     # seconds: 2,000 files x 3 runs
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

RATIO_TARGET = 2.0
RSS_LIMIT_MIB = 150


def measure(workdir: Path, files: int, runs: int, sync_before: str) -> float:
    """``runs`` real probe runs of ``files`` files into ``workdir``'s .npy files; wall seconds."""
    from fsscope.workloads.probe import ProbeSpec, measure_run, pin_cpu

    spec = ProbeSpec(op="creat", files=files, runs=runs, sync_before=sync_before)
    latency = np.lib.format.open_memmap(workdir / "latency_ns.npy", "w+", np.int64, (runs, files))
    wait = np.lib.format.open_memmap(workdir / "wait_ns.npy", "w+", np.int64, (runs, files))
    previous = pin_cpu(None)
    seconds = 0.0
    try:
        for r in range(runs):
            probe_dir = Path(tempfile.mkdtemp(prefix="probe.", dir=workdir))
            row, wait_row = np.full(files, -1, dtype=np.int64), np.zeros(files, dtype=np.int64)
            started = time.monotonic()
            measure_run(probe_dir, spec, out=row, wait_out=wait_row)
            seconds += time.monotonic() - started
            latency[r], wait[r] = row, wait_row
            shutil.rmtree(probe_dir)
    finally:
        os.sched_setaffinity(0, previous)
        latency.flush()
        wait.flush()
    return seconds


def replay_job_analysis(latency, wait, marks: dict | None = None) -> tuple:
    """The probe job's analysis calls on ``runs`` x files (``probe_job._one_run`` after every
    run from the second, then the report's): (settled final analysis, settling)."""
    from fsscope.analysis import sequential

    runs = latency.shape[0]
    settling = sequential.Settling(runs, runs)  # --max-runs = --runs: a fixed number of runs
    for r in range(1 if runs > 1 else 0, runs):
        analysis = settling.analyze(latency[: r + 1], wait[: r + 1])  # as the probe: the final one is gated
        settling.after_run(r, analysis, latency[: r + 1], wait[: r + 1])
        settling.settled(analysis)
    if marks is not None:  # the peak of the analyses after each run, before the report's
        marks["runs_peak_rss_mib"] = peak_rss_mib()
    rows = list(range(runs))
    return settling.settled(settling.final_analysis(latency, wait, rows)), settling


def findings(analysis, settling) -> dict:
    payload = analysis.to_json()
    return {key: payload[key] for key in ("outliers", "noise_count", "weak_outliers", "series", "level_shifts",
                                          "linear_growth")} | {"decisions": settling.to_json()["candidates"]}


def child(workdir: Path, impl: str) -> None:
    """Run in a fresh interpreter: analyse ``workdir``'s matrices; print one JSON line."""
    if impl == "reference":
        from fsscope.analysis import outliers, outliers_reference

        outliers.periodic_series = outliers_reference.periodic_series  # the old series search
    import fsscope.analysis.sequential  # noqa: F401  (imports are not the analysis)

    latency = np.load(workdir / "latency_ns.npy", mmap_mode="r")
    wait = np.load(workdir / "wait_ns.npy", mmap_mode="r")
    before_mib = peak_rss_mib()
    started = time.process_time()
    marks: dict = {}
    analysis, settling = replay_job_analysis(latency, wait, marks)
    cpu_s = time.process_time() - started
    print(json.dumps({"cpu_s": cpu_s, "peak_rss_mib": peak_rss_mib(), "rss_before_mib": before_mib, **marks,
                      "findings": findings(analysis, settling)}))


def peak_rss_mib() -> float:
    """This process's own peak RSS (VmHWM): ``getrusage``'s ru_maxrss after a (v)fork and exec
    also holds the parent's peak, here the memory-mapped matrices the measurement filled."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(workdir: Path, impl: str, timeout_s: float) -> dict | None:
    try:
        done = subprocess.run([sys.executable, __file__, "--child", str(workdir), "--impl", impl],
                              capture_output=True, text=True, timeout=timeout_s, check=True)
    except subprocess.TimeoutExpired:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def count(f: dict) -> str:
    return (f"{len(f['outliers'])} outliers, {len(f['series'])} series, {len(f['level_shifts'])} shifts, "
            f"{len(f['decisions'])} decisions")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog=f"Target: analysis CPU <= {RATIO_TARGET:g} x measurement and peak "
                                            f"RSS <= {RSS_LIMIT_MIB} MiB at 1,000,000 files x 10 runs.")
    parser.add_argument("--files", type=int, nargs="+", default=[10_000, 30_000, 100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm"))
    parser.add_argument("--sync-before", choices=["none", "each"], default="each")
    parser.add_argument("--reference-up-to", type=int, default=30_000,
                        help="also time the old series search at this many files and below (default 30000)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="keep each size's measured matrices (and the measurement's seconds) in DIR/FILESxRUNS")
    parser.add_argument("--reuse", type=Path, metavar="DIR",
                        help="analyse matrices kept by --keep in DIR instead of measuring again (their recorded "
                             "measurement time is the reference: use it to iterate, not to judge)")
    parser.add_argument("--child-timeout", type=float, default=600.0, help="seconds per analysis child")
    parser.add_argument("--smoke", action="store_true", help="seconds: 2,000 files x 3 runs, reference included")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--impl", choices=["new", "reference"], default="new", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.impl)
        return 0
    benchlib.start()
    if args.smoke:
        args.files, args.runs, args.reference_up_to = [2_000], 3, 2_000
    print(f"target: analysis CPU <= {RATIO_TARGET:g} x measurement, peak RSS <= {RSS_LIMIT_MIB} MiB "
          f"(1,000,000 files x 10 runs); {args.runs} runs, sync before each call: {args.sync_before}, "
          f"on {args.dir}; {benchlib.load()}")
    verdicts = []
    for files in args.files:
        kept = (args.reuse or args.keep or Path()) / f"{files}x{args.runs}"
        workdir = kept if args.reuse else Path(tempfile.mkdtemp(prefix="fsscope-scale-", dir=args.dir))
        try:
            if args.reuse:
                measure_s = float((kept / "measure_s").read_text())
            else:
                measure_s = measure(workdir, files, args.runs, args.sync_before)
                if args.keep:
                    kept.mkdir(parents=True, exist_ok=True)
                    for name in ("latency_ns.npy", "wait_ns.npy"):
                        shutil.copyfile(workdir / name, kept / name)
                    (kept / "measure_s").write_text(f"{measure_s!r}\n")
            print(f"{files:>9,} files x {args.runs}: {'recorded' if args.reuse else 'measured'} in {measure_s:.2f} s "
                  f"({measure_s / files / args.runs * 1e6:.1f} us per call); {benchlib.load()}")
            new = run_child(workdir, "new", args.child_timeout)
            if new is None:
                print(f"    analysis: unfinished after {args.child_timeout:.0f} s of wall time; {benchlib.load()}")
                verdicts.append(False)
                continue
            ratio = new["cpu_s"] / measure_s
            print(f"    analysis: {new['cpu_s']:.2f} s CPU = {ratio:.2f} x measurement, peak RSS "
                  f"{new['peak_rss_mib']:.0f} MiB ({new['rss_before_mib']:.0f} before analysing, "
                  f"{new['runs_peak_rss_mib']:.0f} until the report's analysis held to the null worlds); "
                  f"{count(new['findings'])}; {benchlib.load()}")
            if files == 1_000_000 or files == max(args.files):
                verdicts.append(ratio <= RATIO_TARGET and new["peak_rss_mib"] <= RSS_LIMIT_MIB)
            if files <= args.reference_up_to:
                old = run_child(workdir, "reference", args.child_timeout)
                if old is None:
                    print(f"    reference (old series search): unfinished after {args.child_timeout:.0f} s; "
                          f"{benchlib.load()}")
                else:
                    same = old["findings"] == new["findings"]
                    print(f"    reference (old series search): {old['cpu_s']:.2f} s CPU = "
                          f"{old['cpu_s'] / measure_s:.2f} x measurement, peak RSS {old['peak_rss_mib']:.0f} MiB; "
                          f"new/old CPU {new['cpu_s'] / old['cpu_s']:.3f}; findings "
                          f"{'identical' if same else 'DIFFER'}; {benchlib.load()}")
                    verdicts.append(same)
        finally:
            if not args.reuse:
                shutil.rmtree(workdir, ignore_errors=True)
    print(f"verdict: {'met' if all(verdicts) else 'MISSED'} (largest size: analysis/measurement <= "
          f"{RATIO_TARGET:g} and peak RSS <= {RSS_LIMIT_MIB} MiB; reference findings identical)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
