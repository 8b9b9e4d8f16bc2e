#!/usr/bin/env python3
"""How much does Python add to a probed creat()? The probe's loop against a C reference.

Target (issue 28): with a sync before each call (the probe's default), the probe's median
per-call latency <= 1.1x the C loop's. Without the sync the ratio is printed as evidence, with
no target of its own.

Builds a tiny C program (with ``cc``, in a temp dir) that runs the paper's loop --
``sync; clock_gettime(CLOCK_MONOTONIC); openat(dir, name, O_CREAT|O_WRONLY|O_TRUNC); clock_gettime();
close()`` over files "0000000".."N-1" -- and writes its latencies to a binary int64 file. Both
sides do the same sync (``--sync-scope``): ``fs`` (the probe's default) ``syncfs()`` of the
run directory's file system, ``global`` the machine-wide ``sync()`` of the papers. Then runs it and
``fsscope.workloads.probe.measure_run`` (op=creat) pinned to the same CPU, in fresh
directories on the same file system (tmpfs /dev/shm by default: the cheapest creat there is,
so the Python overhead is the largest share it can be), alternating (the order of the sides
rotates every repetition). Prints the median per-call latency of each, the load beside each
repetition, and the ratio, for ``--sync-before each`` and ``none``. Besides the probe as
shipped (its timed loop in C, ``probe_calls.c``) it times the probe's reference
loop with the timed region in Python (``timed_in_c=False``).

The machine-wide ``sync()`` (``--sync-scope global``) waits for every dirty page of every
file system: on a shared machine it measures the other tenants' writeback more than either
loop, and one can take minutes. ``syncfs()`` of the target's own file system (the default)
writes back only what the loops wrote. So one sync is timed first in a child process, bounded by
``--sync-limit-s``; if it does not finish, the sync mode is reported as not measurable and
skipped (the child is left to finish on its own). Otherwise each side of the sync mode stops
after ``--side-limit-s`` seconds (the calls done by then count), and the sides alternate
``--sync-reps`` times: what a sync costs after a call depends on what the other users of the
machine write, so short alternated windows compare like with like where long ones do not. The
verdict is the median over the repetitions of probe/C within each (its windows next to each
other in time); the ratio of the sides' medians over all repetitions is printed too, and moves
with the load's drift during the run (1.05-1.14 where the paired ratio stayed 1.04-1.06).
Stopping it (Ctrl-C, SIGTERM) removes its run directories.

    .venv/bin/python bench/probe_overhead.py [--files 20000] [--reps 5] [--dir /dev/shm]
        [--sync-before each|none|both] [--sync-scope fs|global] [--sync-limit-s 30]
        [--side-limit-s 3] [--sync-reps 12]
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

import benchlib  # noqa: E402

from fsscope.workloads.probe import ProbeSpec, measure_run, pin_cpu  # noqa: E402
from fsscope.workloads.probe_loops import native_call  # noqa: E402

TARGET = 1.1  # probe / C, median per-call creat latency, sync_before=each
SYNC_CODES = {"none": 0, "global": 1, "fs": 2}  # the C loop's SYNC argument

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

/* usage: creat_loop DIR N NAME_LEN SYNC(0 none|1 sync()|2 syncfs(DIR)) OUT.bin CPU LIMIT_S
   stops after LIMIT_S seconds; prints the calls done and the median of 100000 empty timed
   regions (two clock reads) in ns */
int main(int argc, char **argv) {
    if (argc != 8) { fprintf(stderr, "usage\n"); return 2; }
    long n = atol(argv[2]); int len = atoi(argv[3]); int do_sync = atoi(argv[4]);
    int64_t end_ns = now_ns() + (int64_t)(atof(argv[7]) * 1e9);
    cpu_set_t set; CPU_ZERO(&set); CPU_SET(atoi(argv[6]), &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) { perror("sched_setaffinity"); return 1; }
    int dfd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) { perror("open"); return 1; }
    char *names = malloc((size_t)n * (len + 1));
    int64_t *lat = malloc((size_t)n * sizeof *lat);
    for (long i = 0; i < n; i++) snprintf(names + i * (len + 1), len + 1, "%0*ld", len, i);
    long done = 0;
    for (long i = 0; i < n && (i == 0 || now_ns() < end_ns); i++, done++) {
        if (do_sync == 1) sync();
        else if (do_sync == 2 && syncfs(dfd) != 0) { perror("syncfs"); return 1; }
        int64_t t0 = now_ns();
        int fd = openat(dfd, names + i * (len + 1), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
        int64_t t1 = now_ns();
        if (fd < 0) { perror("creat"); return 1; }
        lat[i] = t1 - t0;
        close(fd);
    }
    FILE *out = fopen(argv[5], "wb");
    if (!out || fwrite(lat, sizeof *lat, done, out) != (size_t)done) { perror("write"); return 1; }
    fclose(out);
    enum { K = 100000 };
    static int64_t empty[K];
    for (int k = 0; k < K; k++) { int64_t a = now_ns(); int64_t b = now_ns(); empty[k] = b - a; }
    /* crude median: counting sort on small values */
    static long hist[4096]; for (int k = 0; k < K; k++) hist[empty[k] < 4095 ? empty[k] : 4095]++;
    long acc = 0; int med = 0; while (acc + hist[med] <= K / 2) acc += hist[med++];
    printf("%ld %d\n", done, med);
    return 0;
}
"""


def run_c(binary: Path, run_dir: Path, files: int, sync: str, cpu: int,
          out_path: Path, limit_s: float) -> tuple[np.ndarray, int]:
    """C loop's latencies (the calls done within ``limit_s``) and its empty-region median (ns).
    ``sync``: "none", or the scope of the sync before each call ("fs", "global")."""
    proc = subprocess.run([str(binary), str(run_dir), str(files), "7", str(SYNC_CODES[sync]),
                           str(out_path), str(cpu), str(min(limit_s, 1e6))], check=True, capture_output=True, text=True)
    done, empty = proc.stdout.split()
    return np.fromfile(out_path, dtype=np.int64)[: int(done)], int(empty)


def run_probe(run_dir: Path, files: int, sync_before: str, sync_scope: str, limit_s: float,
              timed_in_c: bool) -> np.ndarray:
    """The probe's latencies: the calls done within ``limit_s`` (it checks at its batch edges)."""
    end = time.monotonic() + limit_s
    latency_ns = measure_run(run_dir, ProbeSpec(op="creat", files=files, sync_before=sync_before,
                                                sync_scope=sync_scope),  # the C loop's sync
                             batch_s=0.05, cancelled=lambda: time.monotonic() >= end, timed_in_c=timed_in_c)
    return latency_ns[latency_ns >= 0]


def one_sync_s(limit_s: float, scope: str, target: Path) -> float | None:
    """Seconds one sync of ``scope`` takes now (in a child process: ``sync -f TARGET`` is
    syncfs of its file system, bare ``sync`` the machine's), or None past ``limit_s``."""
    t0 = time.monotonic()
    proc = subprocess.Popen(["sync", "-f", str(target)] if scope == "fs" else ["sync"])
    try:
        proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        proc.kill()  # delivered once its sync returns; not waited for
        return None
    return time.monotonic() - t0


def empty_region_ns(clock: Callable[[], int], samples: int = 100_000) -> int:
    """Median of two back-to-back clock reads, as a Python-timed loop does them."""
    empty = np.empty(samples, dtype=np.int64)
    sink = memoryview(empty)
    for k in range(samples):
        t0 = clock()
        t1 = clock()
        sink[k] = t1 - t0
    return int(np.median(empty))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm"),
                        help="where the run directories go (default: tmpfs /dev/shm)")
    parser.add_argument("--sync-before", choices=["each", "none", "both"], default="both")
    parser.add_argument("--sync-scope", choices=["fs", "global"], default="fs",
                        help="the sync before each call, on both sides: syncfs() of the target's file "
                             "system (default, the probe's default) or the machine-wide sync()")
    parser.add_argument("--cpu", type=int, default=None, help="default: the last CPU")
    parser.add_argument("--sync-limit-s", type=float, default=30.0,
                        help="give up on the sync mode if one sync() takes longer (default 30)")
    parser.add_argument("--side-limit-s", type=float, default=3.0,
                        help="each side of the sync mode stops after this long (default 3)")
    parser.add_argument("--sync-reps", type=int, default=12,
                        help="repetitions of the sync mode (default 12; --reps is for the other)")
    benchlib.add_smoke(parser, "500 files, 2 repetitions a mode, 0.5-s sides")
    args = parser.parse_args()
    benchlib.start()
    benchlib.smoke(args, files=500, reps=2, sync_reps=2, side_limit_s=0.5, sync_limit_s=10.0)

    previous_affinity = pin_cpu(args.cpu)
    cpu = next(iter(os.sched_getaffinity(0)))
    modes = ["each", "none"] if args.sync_before == "both" else [args.sync_before]
    sync_name = "syncfs()" if args.sync_scope == "fs" else "sync()"
    fs_type = subprocess.run(["stat", "-f", "-c", "%T", str(args.dir)], capture_output=True,
                             text=True).stdout.strip()
    timed = native_call()[1]
    print(f"target: {args.dir} ({fs_type}), files={args.files}, reps={args.reps}, cpu={cpu}, "
          f"python {sys.version.split()[0]}, probe's timed region: {timed}; {benchlib.load()}; "
          f"sync before each call: {'syncfs() of ' + str(args.dir) if args.sync_scope == 'fs' else 'sync()'} "
          f"on both sides; target: probe/C <= {TARGET} with sync_before=each")
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="fsscope-bench-") as build_dir:
        binary = benchlib.build_c(C_SOURCE, Path(build_dir), "creat_loop")
        out_path = Path(build_dir) / "lat.bin"
        c_empty: list[int] = []
        sides = ["C", "probe (timed loop in C)", "probe, Python-timed (reference)"]
        for mode in modes:
            limit_s = float("inf") if mode == "none" else args.side_limit_s
            if mode == "each":
                sync_s = one_sync_s(args.sync_limit_s, args.sync_scope, args.dir)
                if sync_s is None:
                    print(f"\nsync_before=each: NOT measurable now: one {sync_name} did not finish within "
                          f"{args.sync_limit_s:g} s ({benchlib.load()}); skipped")
                    verdicts.append(("each", None))
                    continue
                print(f"\nsync_before=each: one {sync_name} takes {sync_s * 1e3:.1f} ms now; each side stops "
                      f"after {limit_s:g} s")
            medians: dict[str, list[float]] = {name: [] for name in sides}
            reps = args.sync_reps if mode == "each" else args.reps
            for rep in range(reps):
                order = sides[rep % len(sides):] + sides[:rep % len(sides)]  # rotate: no fixed order
                load = benchlib.load_value()
                calls = []
                for name in order:
                    run_dir = Path(tempfile.mkdtemp(prefix="probe-", dir=args.dir))
                    try:
                        if name == "C":
                            latency_ns, empty_ns = run_c(binary, run_dir, args.files,
                                                         args.sync_scope if mode == "each" else "none", cpu,
                                                         out_path, limit_s)
                            c_empty.append(empty_ns)
                        else:
                            latency_ns = run_probe(run_dir, args.files, mode, args.sync_scope, limit_s,
                                                   "loop in C" in name)
                    finally:
                        shutil.rmtree(run_dir)
                    assert latency_ns.size and (latency_ns > 0).all()
                    medians[name].append(float(np.median(latency_ns)))
                    calls.append(f"{name.split(' ')[0] if name == 'C' else name}: {latency_ns.size} calls")
                print(f"  rep {rep + 1} (load {load:.1f}/{os.cpu_count()}): " + ", ".join(
                    f"{name} {medians[name][-1]:.0f} ns" for name in order))
            c_ns = statistics.median(medians["C"])
            print(f"sync_before={mode}: median per-call creat latency (median over {reps} reps)")
            for name, per_rep in medians.items():
                med = statistics.median(per_rep)
                ratio = ""
                if name != "C":
                    paired = statistics.median(p / c for p, c in zip(per_rep, medians["C"]))
                    ratio = f"  ratio {med / c_ns:.3f} (+{med - c_ns:.0f} ns), per-rep paired {paired:.3f}"
                print(f"  {name:<34} {med:8.0f} ns{ratio}")
            probe = medians["probe (timed loop in C)"]
            verdicts.append((mode, statistics.median(p / c for p, c in zip(probe, medians["C"]))))

    print("\nempty timed region (two clock reads back to back, median):")
    print(f"  C clock_gettime(CLOCK_MONOTONIC)  {statistics.median(c_empty) if c_empty else float('nan'):6.0f} ns")
    print(f"  py time.monotonic_ns              {empty_region_ns(time.monotonic_ns):6d} ns")
    for mode, ratio in verdicts:  # median over the repetitions of probe / C within each
        if mode == "none":
            print(f"sync_before=none (no target): probe/C paired {ratio:.3f}; {benchlib.load()}")
            continue
        verdict = "not measurable (sync too slow)" if ratio is None else \
            f"{'met' if ratio <= TARGET else 'NOT met'} (paired {ratio:.3f})"
        print(f"target probe/C <= {TARGET} with sync_before={mode} ({sync_name} on both sides): {verdict}; "
              f"{benchlib.load()}")
    os.sched_setaffinity(0, previous_affinity)
    if args.smoke:
        return 0  # the smoke run proves the bench runs to the end, not the target
    return 0 if all(r is not None and r <= TARGET for m, r in verdicts if m == "each") else 1


if __name__ == "__main__":
    raise SystemExit(main())
