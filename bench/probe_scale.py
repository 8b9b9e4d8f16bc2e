#!/usr/bin/env python3
"""Does the probe scale to 1,000,000 files in one run without growing per-file memory?

Runs ``measure_run`` (op=creat, one run) for ``--files`` files in a fresh directory on a RAM
target (a tmpfs directory under /dev/shm by default), pinned to one CPU, with a cheap
``on_batch`` consumer like a live view's. Prints the elapsed time, the share of it spent
inside timed regions, latency percentiles, and the process's peak RSS (target: under
300 MiB -- the result itself is an 8 MB int64 array, so anything near the limit means
per-file Python objects are being kept). If ``fsscope.analysis.outliers.analyze`` is
available it also times the analysis of the result. The files are removed afterwards
(streamed by name, no listing held in memory).

``--sync-before none`` is the default: on tmpfs ``sync()`` writes nothing back for the
target, but it is a global call whose cost depends on every other file system's dirty data
(50-150 us on the shared development VM: ``each`` turned a 9 s run into 157 s); pass
``--sync-before each`` to measure that too.

    .venv/bin/python bench/probe_scale.py [--files 1000000] [--sync-before none|each]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fsscope.workloads.probe import ProbeSpec, measure_run, pin_cpu  # noqa: E402

RSS_LIMIT_MIB = 300


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def current_rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def remove_probe_files(workdir: Path, files: int, name_length: int) -> None:
    """Unlink by name (no directory listing of a million entries held in memory)."""
    dfd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fmt = b"%0" + str(name_length).encode() + b"d"
        for index in range(files):
            try:
                os.unlink(fmt % index, dir_fd=dfd)
            except FileNotFoundError:
                pass
    finally:
        os.close(dfd)
    os.rmdir(workdir)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm"))
    parser.add_argument("--sync-before", choices=["none", "each"], default="none")
    parser.add_argument("--op", default="creat")
    parser.add_argument("--cpu", type=int, default=None, help="default: the last CPU")
    parser.add_argument("--no-analysis", action="store_true")
    args = parser.parse_args()

    previous_affinity = pin_cpu(args.cpu)
    cpu = next(iter(os.sched_getaffinity(0)))
    spec = ProbeSpec(op=args.op, files=args.files, runs=1, sync_before=args.sync_before)
    fs_type = subprocess.run(["stat", "-f", "-c", "%T", str(args.dir)], capture_output=True,
                             text=True).stdout.strip()
    print(f"target: {args.dir} ({fs_type}), op={spec.op}, files={spec.files}, runs=1, "
          f"sync_before={spec.sync_before}, cpu={cpu}")
    baseline_peak_mib = peak_rss_mib()
    print(f"peak RSS before the run (interpreter + numpy): {baseline_peak_mib:.1f} MiB")

    batches = 0
    slowest_ns = 0

    def on_batch(start: int, latency_ns: np.ndarray) -> None:
        nonlocal batches, slowest_ns
        batches += 1
        slowest_ns = max(slowest_ns, int(latency_ns.max()))

    workdir = Path(tempfile.mkdtemp(prefix="fsscope-scale-", dir=args.dir))
    try:
        t0 = time.monotonic()
        latency_ns = measure_run(workdir, spec, on_batch=on_batch)
        elapsed_s = time.monotonic() - t0
        probe_peak_mib = peak_rss_mib()
        timed_s = latency_ns.sum() / 1e9
        p50, p99, p999 = np.percentile(latency_ns, [50, 99, 99.9])
        print(f"probe: {elapsed_s:.2f} s elapsed, {elapsed_s / spec.files * 1e6:.2f} us per file, "
              f"{timed_s:.2f} s ({timed_s / elapsed_s:.0%}) inside timed regions, "
              f"{batches} batches")
        print(f"latency: median {p50:.0f} ns, p99 {p99:.0f} ns, p99.9 {p999:.0f} ns, "
              f"max {latency_ns.max()} ns, all > 0: {bool((latency_ns > 0).all())}, "
              f"batch max agrees: {slowest_ns == latency_ns.max()}")
        print(f"peak RSS after the probe: {probe_peak_mib:.1f} MiB (+{probe_peak_mib - baseline_peak_mib:.1f}"
              f" MiB over baseline; current {current_rss_mib():.1f} MiB; result array "
              f"{latency_ns.nbytes / 2**20:.1f} MiB); limit {RSS_LIMIT_MIB} MiB: "
              f"{'met' if probe_peak_mib < RSS_LIMIT_MIB else 'MISSED'}")
    finally:
        t_rm = time.monotonic()
        remove_probe_files(workdir, spec.files, spec.name_length)
        print(f"cleanup: {time.monotonic() - t_rm:.2f} s to remove {spec.files} files")

    if not args.no_analysis:
        try:
            from fsscope.analysis.outliers import analyze
        except ImportError as exc:
            print(f"analysis: skipped (fsscope.analysis.outliers.analyze not available: {exc})")
        else:
            t_an = time.monotonic()
            result = analyze(latency_ns[np.newaxis, :])
            analysis_s = time.monotonic() - t_an
            print(f"analysis (outliers.analyze, 1 x {spec.files}): {analysis_s:.2f} s, "
                  f"{len(result.outliers)} outliers, {len(result.series)} series, "
                  f"{len(result.level_shifts)} level shifts; peak RSS now {peak_rss_mib():.1f} MiB")
    os.sched_setaffinity(0, previous_affinity)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
