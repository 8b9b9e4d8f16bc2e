#!/usr/bin/env python3
"""How fast do the personalities run, and does the engine's write path keep up with fio?

1. ops/s of fileserver, webserver and varmail (default specs scaled to ``--capacity``) for
   ``--duration`` seconds each, on a tmpfs directory (/dev/shm) and on a directory of the root
   disk (/var/tmp), in one run. Also prints the aggregating parent's CPU time as a share of the
   run (it must stay small: the parent shares the CPUs with the workers).
   A loop-image variant (ext4/xfs/btrfs on a RAM or file image) belongs here once the job
   wiring uses ``fsscope.targets``; the personalities only need a mounted directory.
2. Sequential write, same bytes and block size in the same directory: the workers' own write
   path (``personalities.write_sequential``) against fio (``--rw=write --ioengine=psync``),
   buffered and with a final fsync, repetitions alternated so drift hits both alike. Prints
   the median MB/s of each and the ratio engine/fio (target: >= 0.9 at 1 MiB blocks; at 4 KiB
   blocks Python's per-call cost shows, and the ratio is printed for information).

    .venv/bin/python bench/workload_rate.py [--duration 10] [--capacity 1G] [--seq-size 512M]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fsscope.workloads import personalities as P  # noqa: E402
from fsscope.workloads.cgroup import parse_size_bytes  # noqa: E402

TARGET_SEQ_RATIO = 0.9


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def personality_rates(where: str, base: Path, duration_s: float, capacity_bytes: int) -> None:
    for name in P.PERSONALITIES:
        workdir = Path(tempfile.mkdtemp(prefix="fsscope-bench-", dir=base))
        try:
            spec = P.default_spec(name, capacity_bytes=capacity_bytes, duration_s=duration_s)
            populated = P.populate(workdir, spec, seed=1)
            cpu0, t0 = self_cpu_s(), time.monotonic()
            result = P.run(workdir, spec)
            wall_s, parent_cpu_s = time.monotonic() - t0, self_cpu_s() - cpu0
            tn = result.throughput(1.0)
            busiest = max(result.op_names, key=result.op_count)
            print(f"{where:8s} {name:10s} files={spec.nfiles:6d} ({populated.bytes_written / 2**20:6.0f} MiB) "
                  f"workers={spec.workers:2d}  {result.ops_per_s:10.0f} ops/s  "
                  f"Throughput-1 min/max {tn.min():9.0f}/{tn.max():9.0f}  "
                  f"{busiest} p99 {result.percentile_ns(busiest, 99) / 1e3:8.1f} us  "
                  f"parent CPU {100 * parent_cpu_s / wall_s:4.1f}%  errors {int(result.errors.sum())}")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)


def fio_write_mb_s(directory: Path, size_bytes: int, block_bytes: int, fsync: bool) -> float:
    path = directory / "fio.dat"
    cmd = ["fio", "--name=seq", f"--filename={path}", "--rw=write", f"--bs={block_bytes}",
           f"--size={size_bytes}", "--ioengine=psync", "--numjobs=1", "--output-format=json",
           f"--end_fsync={1 if fsync else 0}", "--create_on_open=1", "--unlink=1",
           "--fallocate=none"]  # the engine does not preallocate either
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    # fio's runtime excludes file creation; with end_fsync the fsync is inside it
    return job["write"]["io_bytes"] / (job["job_runtime"] / 1000) / 1e6


def engine_write_mb_s(directory: Path, size_bytes: int, block_bytes: int, fsync: bool) -> float:
    path = directory / "engine.dat"
    try:
        seconds = P.write_sequential(path, size_bytes, block_bytes, fsync=fsync)
    finally:
        path.unlink(missing_ok=True)
    return size_bytes / seconds / 1e6


def sequential_write(where: str, base: Path, size_bytes: int, reps: int) -> list[float]:
    if shutil.which("fio") is None:
        print(f"{where}: fio not installed (scripts/setup installs it): sequential comparison skipped")
        return []
    ratios = []
    directory = Path(tempfile.mkdtemp(prefix="fsscope-bench-", dir=base))
    try:
        for block_bytes in (1 << 20, 4096):
            for fsync in (False, True):
                engine, fio = [], []
                for _ in range(reps):
                    engine.append(engine_write_mb_s(directory, size_bytes, block_bytes, fsync))
                    fio.append(fio_write_mb_s(directory, size_bytes, block_bytes, fsync))
                ratio = statistics.median(engine) / statistics.median(fio)
                verdict = ""
                if block_bytes == 1 << 20:
                    ratios.append(ratio)
                    verdict = "ok" if ratio >= TARGET_SEQ_RATIO else f"BELOW target {TARGET_SEQ_RATIO}"
                print(f"{where:8s} seq write {size_bytes >> 20} MiB bs={block_bytes:>7d} "
                      f"{'end fsync' if fsync else 'buffered '}  engine {statistics.median(engine):8.0f} MB/s  "
                      f"fio {statistics.median(fio):8.0f} MB/s  ratio {ratio:5.2f} {verdict}")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return ratios


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per personality run")
    ap.add_argument("--capacity", default="1G", help="capacity the default specs are scaled to")
    ap.add_argument("--seq-size", default="512M", help="bytes per sequential-write measurement")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    places = [("tmpfs", Path("/dev/shm")), ("rootdisk", Path("/var/tmp"))]
    print(f"cpus={os.cpu_count()}  duration={args.duration:g}s  capacity={args.capacity}")
    for where, base in places:
        personality_rates(where, base, args.duration, parse_size_bytes(args.capacity))
    ratios = []
    for where, base in places:
        ratios += sequential_write(where, base, parse_size_bytes(args.seq_size), args.reps)
    if ratios:
        print(f"sequential write engine/fio at 1 MiB blocks: min ratio {min(ratios):.2f} "
              f"(target >= {TARGET_SEQ_RATIO})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
