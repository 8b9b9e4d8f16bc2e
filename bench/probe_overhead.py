#!/usr/bin/env python3
"""How much does Python add to a probed creat()? The probe's loop against a C reference.

Builds a tiny C program (with ``cc``, in a temp dir) that runs the paper's loop --
``sync(); clock_gettime(CLOCK_MONOTONIC); creat(name); clock_gettime(); close()`` over files
"0000000".."N-1" -- and writes its latencies to a binary int64 file. Then runs it and
``fsscope.workloads.probe.measure_run`` (op=creat) pinned to the same CPU, in fresh
directories on the same file system (tmpfs /dev/shm by default: the cheapest creat there is,
so the Python overhead is the largest share it can be), alternating several repetitions so
drift hits both alike. Prints the median per-call latency of each and the ratio (target:
Python/C <= 1.2), for ``--sync-before each`` and ``none``.

Besides the probe as shipped it times two variants, to show what is and is not reducible:
``py perf_counter_ns`` (the other ns clock) and ``py path, no dir_fd`` (chdir + a plain
relative path: no keyword argument to parse). And it measures the floor -- an empty timed
region, two clock reads back to back -- in C and in Python.

    .venv/bin/python bench/probe_overhead.py [--files 20000] [--reps 5] [--dir /dev/shm]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fsscope.workloads import probe  # noqa: E402
from fsscope.workloads.probe import ProbeSpec, measure_run, pin_cpu  # noqa: E402

C_SOURCE = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* usage: creat_loop DIR N NAME_LEN SYNC(0|1) OUT.bin CPU
   prints the median of 100000 empty timed regions (two clock reads) in ns */
int main(int argc, char **argv) {
    if (argc != 7) { fprintf(stderr, "usage\n"); return 2; }
    long n = atol(argv[2]); int len = atoi(argv[3]); int do_sync = atoi(argv[4]);
    cpu_set_t set; CPU_ZERO(&set); CPU_SET(atoi(argv[6]), &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) { perror("sched_setaffinity"); return 1; }
    if (chdir(argv[1]) != 0) { perror("chdir"); return 1; }
    char *names = malloc((size_t)n * (len + 1));
    int64_t *lat = malloc((size_t)n * sizeof *lat);
    for (long i = 0; i < n; i++) snprintf(names + i * (len + 1), len + 1, "%0*ld", len, i);
    for (long i = 0; i < n; i++) {
        if (do_sync) sync();
        int64_t t0 = now_ns();
        int fd = creat(names + i * (len + 1), 0644);
        int64_t t1 = now_ns();
        if (fd < 0) { perror("creat"); return 1; }
        lat[i] = t1 - t0;
        close(fd);
    }
    FILE *out = fopen(argv[5], "wb");
    if (!out || fwrite(lat, sizeof *lat, n, out) != (size_t)n) { perror("write"); return 1; }
    fclose(out);
    enum { K = 100000 };
    static int64_t empty[K];
    for (int k = 0; k < K; k++) { int64_t a = now_ns(); int64_t b = now_ns(); empty[k] = b - a; }
    /* crude median: counting sort on small values */
    static long hist[4096]; for (int k = 0; k < K; k++) hist[empty[k] < 4095 ? empty[k] : 4095]++;
    long acc = 0; int med = 0; while (acc + hist[med] <= K / 2) acc += hist[med++];
    printf("%d\n", med);
    return 0;
}
"""


def build_c(workdir: Path) -> Path:
    source = workdir / "creat_loop.c"
    binary = workdir / "creat_loop"
    source.write_text(C_SOURCE)
    subprocess.run(["cc", "-O2", "-o", str(binary), str(source)], check=True)
    return binary


def run_c(binary: Path, run_dir: Path, files: int, do_sync: bool, cpu: int,
          out_path: Path) -> tuple[np.ndarray, int]:
    """C loop's latencies and its empty-region median (ns)."""
    proc = subprocess.run([str(binary), str(run_dir), str(files), "7", str(int(do_sync)),
                           str(out_path), str(cpu)], check=True, capture_output=True, text=True)
    return np.fromfile(out_path, dtype=np.int64), int(proc.stdout.strip())


def run_python(run_dir: Path, files: int, sync_before: str) -> np.ndarray:
    return measure_run(run_dir, ProbeSpec(op="creat", files=files, sync_before=sync_before))


def run_python_perf_counter(run_dir: Path, files: int, sync_before: str) -> np.ndarray:
    saved = probe._clock_ns
    probe._clock_ns = time.perf_counter_ns
    try:
        return run_python(run_dir, files, sync_before)
    finally:
        probe._clock_ns = saved


def run_python_path(run_dir: Path, files: int, sync_before: str) -> np.ndarray:
    """The same loop with chdir + plain relative names: no dir_fd keyword to parse."""
    names = [b"%07d" % i for i in range(files)]
    latency_ns = np.empty(files, dtype=np.int64)
    sink = memoryview(latency_ns)
    open_, close, sync, clock = os.open, os.close, os.sync, time.monotonic_ns
    flags, do_sync = probe.CREATE_FLAGS, sync_before == "each"
    cwd = os.getcwd()
    os.chdir(run_dir)
    try:
        i = 0
        for name in names:
            if do_sync:
                sync()
            t0 = clock()
            fd = open_(name, flags, 0o644)
            t1 = clock()
            sink[i] = t1 - t0
            close(fd)
            i += 1
    finally:
        os.chdir(cwd)
    return latency_ns


def empty_region_ns(clock: Callable[[], int], samples: int = 100_000) -> int:
    """Median of two back-to-back clock reads, as the probe's loop does them."""
    empty = np.empty(samples, dtype=np.int64)
    sink = memoryview(empty)
    for k in range(samples):
        t0 = clock()
        t1 = clock()
        sink[k] = t1 - t0
    return int(np.median(empty))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm"),
                        help="where the run directories go (default: tmpfs /dev/shm)")
    parser.add_argument("--sync-before", choices=["each", "none", "both"], default="both")
    parser.add_argument("--cpu", type=int, default=None, help="default: the last CPU")
    args = parser.parse_args()

    previous_affinity = pin_cpu(args.cpu)
    cpu = next(iter(os.sched_getaffinity(0)))
    modes = ["each", "none"] if args.sync_before == "both" else [args.sync_before]
    fs_type = subprocess.run(["stat", "-f", "-c", "%T", str(args.dir)], capture_output=True,
                             text=True).stdout.strip()
    print(f"target: {args.dir} ({fs_type}), files={args.files}, reps={args.reps}, cpu={cpu}, "
          f"python {sys.version.split()[0]}")

    with tempfile.TemporaryDirectory(prefix="fsscope-bench-") as build_dir:
        binary = build_c(Path(build_dir))
        out_path = Path(build_dir) / "lat.bin"
        c_empty: list[int] = []
        variants: dict[str, Callable[[Path, int, str], np.ndarray]] = {
            "py probe (monotonic_ns, dir_fd)": run_python,
            "py perf_counter_ns": run_python_perf_counter,
            "py path, no dir_fd": run_python_path,
        }
        for mode in modes:
            medians: dict[str, list[float]] = {"C": [], **{name: [] for name in variants}}
            for rep in range(args.reps):
                order = ["C", *variants]
                order = order[rep % len(order):] + order[:rep % len(order)]  # rotate: no fixed order
                for name in order:
                    run_dir = Path(tempfile.mkdtemp(prefix="probe-", dir=args.dir))
                    try:
                        if name == "C":
                            latency_ns, empty_ns = run_c(binary, run_dir, args.files,
                                                         mode == "each", cpu, out_path)
                            c_empty.append(empty_ns)
                        else:
                            latency_ns = variants[name](run_dir, args.files, mode)
                    finally:
                        shutil.rmtree(run_dir)
                    assert (latency_ns > 0).all()
                    medians[name].append(float(np.median(latency_ns)))
            c_ns = statistics.median(medians["C"])
            print(f"\nsync_before={mode}: median per-call creat latency (median over {args.reps} reps)")
            for name, per_rep in medians.items():
                med = statistics.median(per_rep)
                reps_text = " ".join(f"{v:.0f}" for v in per_rep)
                ratio = ""
                if name != "C":
                    paired = statistics.median(p / c for p, c in zip(per_rep, medians["C"]))
                    ratio = (f"  ratio {med / c_ns:.3f} (+{med - c_ns:.0f} ns), "
                             f"per-rep paired {paired:.3f}")
                print(f"  {name:<32} {med:8.0f} ns{ratio}   reps: {reps_text}")
            ratio = statistics.median(medians["py probe (monotonic_ns, dir_fd)"]) / c_ns
            verdict = "met" if ratio <= 1.2 else "MISSED"
            print(f"  target python/C <= 1.2: {verdict} ({ratio:.3f})")

    print("\nempty timed region (two clock reads back to back, median):")
    print(f"  C clock_gettime(CLOCK_MONOTONIC)  {statistics.median(c_empty):6.0f} ns")
    print(f"  py time.monotonic_ns              {empty_region_ns(time.monotonic_ns):6d} ns")
    print(f"  py time.perf_counter_ns           {empty_region_ns(time.perf_counter_ns):6d} ns")
    os.sched_setaffinity(0, previous_affinity)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
