#!/usr/bin/env python3
"""How fast do the personalities run, and does the engine's write path keep up with fio?

1. ops/s of fileserver, webserver and varmail (default specs scaled to ``--capacity``) for
   ``--duration`` seconds each, in one run, on: a tmpfs directory (/dev/shm), a directory of
   the root disk (/var/tmp), and (as root) a RAM-backed loop image with ext4 made through
   ``fsscope.targets`` (fresh mkfs per personality, ``ext4-default`` recipe). Also prints the
   aggregating parent's CPU time as a share of the run (it must stay small: the parent shares
   the CPUs with the workers), then per personality the slowdown of each device against tmpfs:
   a ratio well below 1 means the storage path limits throughput; a ratio near 1 on a device
   that should be slower would mean the workers' own overhead (the engine) is the ceiling.
   Finally the same loop-image run through the engine (``bench`` job in its child process,
   telemetry sampler and event stream beside it) against the direct call: job/direct should
   be about 1 (the job wiring must not cost throughput). With ``--mem-limit`` the loop image
   runs once more with the workers in a memory cgroup, so cached workloads reach the device.
2. Sequential write, same bytes and block size in the same directory: the workers' own write
   path (``personalities.write_sequential``) against fio (``--rw=write --ioengine=psync``),
   buffered and with a final fsync, repetitions alternated so drift hits both alike. Prints
   the median MB/s of each and the ratio engine/fio (target: >= 0.9 at 1 MiB blocks; at 4 KiB
   blocks Python's per-call cost shows, and the ratio is printed for information).

    .venv/bin/python bench/workload_rate.py [--duration 10] [--capacity 1G] [--seq-size 512M]
                                            [--no-seq] [--no-job] [--mem-limit 64M] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib  # noqa: E402

from fsscope.units import parse_size_bytes  # noqa: E402
from fsscope.workloads import personalities as P  # noqa: E402

TARGET_SEQ_RATIO = 0.9
LOOP_RECIPE = "ext4-default"
LOOP_PLACE = "loop-ext4"


def self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def plain_dir(base: Path) -> Iterator[Path]:
    workdir = Path(tempfile.mkdtemp(prefix="fsscope-bench-", dir=base))
    try:
        yield workdir
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def loop_image(capacity_bytes: int, recipe_name: str = LOOP_RECIPE) -> Iterator[Callable[[], Path]]:
    """A RAM-backed image on a loop device; the factory formats and mounts a fresh file system
    (fsscope.targets: journal, mkfs, mount) and returns its directory. Undone on exit."""
    from fsscope import recipes
    from fsscope.targets import Target, TargetSpec

    with Target(TargetSpec("ram", size_bytes=capacity_bytes), recipes.load(recipe_name)) as target:
        yield lambda: target.format_and_mount().workdir


def personality_rates(where: str, fresh_dir: Callable[[], Any], duration_s: float,
                      capacity_bytes: int, mem_limit_bytes: int | None = None) -> dict[str, float]:
    """ops/s per personality, each on a fresh directory from ``fresh_dir()`` (a context manager
    or a plain path-returning call)."""
    rates = {}
    for name in P.PERSONALITIES:
        made = fresh_dir()
        cm = nullcontext(made) if isinstance(made, Path) else made
        with cm as workdir:
            spec = P.default_spec(name, capacity_bytes=capacity_bytes, duration_s=duration_s, seed=1)
            populated = P.populate(workdir, spec, seed=1)
            cpu0, t0 = self_cpu_s(), time.monotonic()
            result = P.run(workdir, spec, P.RunOptions(mem_limit_bytes=mem_limit_bytes))
            wall_s, parent_cpu_s = time.monotonic() - t0, self_cpu_s() - cpu0
            tn = result.throughput(1.0)
            busiest = max(result.op_names, key=result.op_count)
            rates[name] = result.ops_per_s
            print(f"{where:9s} {name:10s} files={spec.nfiles:6d} ({populated.bytes_written / 2**20:6.0f} MiB) "
                  f"workers={spec.workers:2d}  {result.ops_per_s:10.0f} ops/s  "
                  f"Throughput-1 min/max {tn.min():9.0f}/{tn.max():9.0f}  "
                  f"{busiest} p99 {result.percentile_ns(busiest, 99) / 1e3:8.1f} us  "
                  f"parent CPU {100 * parent_cpu_s / wall_s:4.1f}%  errors {int(result.errors.sum())}",
                  flush=True)
    return rates


def job_rates(duration_s: float, capacity_bytes: int, recipe_name: str = LOOP_RECIPE) -> dict[str, float]:
    """The same loop-image runs through the engine: the ``bench`` job in its child process."""
    from fsscope import recipes
    from fsscope.engine import runner
    from fsscope.engine.registry import spec_from_data
    from fsscope.targets import TargetSpec

    rates = {}
    runs_root = Path(tempfile.mkdtemp(prefix="fsscope-bench-runs-"))
    try:
        for name in P.PERSONALITIES:
            spec = {"personality": name, "runs": 1, "duration_s": duration_s,
                    # a 10-s window, or the whole run where shorter (a window must fit in the run)
                    "window_sizes_s": [max(1, min(10, math.floor(duration_s)))], "seed": 1}
            handle = runner.start("bench", spec_from_data("bench", spec), TargetSpec("ram", size_bytes=capacity_bytes),
                                  recipes.load(recipe_name), runs_root=runs_root)
            samples = 0
            for event in handle.records():
                samples += event.kind == "samples"
            report = handle.run_dir.report() or {}
            if handle.run_dir.status() != "ok" or not report.get("runs"):
                print(f"job       {name:10s} failed: {handle.run_dir.info().error}")
                continue
            rates[name] = report["runs"][0]["ops_per_s"]
            print(f"job       {name:10s} {rates[name]:10.0f} ops/s  ({samples} live samples streamed)", flush=True)
    finally:
        shutil.rmtree(runs_root, ignore_errors=True)
    return rates


def print_ratios(rates: dict[str, dict[str, float]], job: dict[str, float]) -> None:
    """ops/s per place, the slowdown of each place against tmpfs, and job/direct on the loop."""
    places = [p for p in rates if p != "tmpfs"]
    cols = [(f"{p} ops/s", lambda n, p=p: f"{rates[p].get(n, math.nan):.0f}") for p in rates]
    for p in places:
        cols.append((f"{p}/tmpfs", lambda n, p=p: _ratio(rates[p].get(n), rates.get("tmpfs", {}).get(n))))
    if job:
        cols.append(("job/direct (loop)", lambda n: _ratio(job.get(n), rates.get(LOOP_PLACE, {}).get(n))))
    widths = [max(len(title), 8) for title, _ in cols]
    print(f"{'personality':11s} " + " ".join(f"{t:>{w}s}" for (t, _), w in zip(cols, widths)))
    for name in P.PERSONALITIES:
        print(f"{name:11s} " + " ".join(f"{cell(name):>{w}s}" for (_, cell), w in zip(cols, widths)))


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


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
        benchlib.skipped(f"{where}: sequential comparison with fio", "fio is not installed (scripts/setup installs it)")
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
    ap.add_argument("--capacity", default="1G", help="capacity the default specs are scaled to "
                    "(also the loop image's size)")
    ap.add_argument("--seq-size", default="512M", help="bytes per sequential-write measurement")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-seq", action="store_true", help="skip the sequential-write comparison with fio")
    ap.add_argument("--no-job", action="store_true", help="skip the loop-image run through the engine")
    ap.add_argument("--mem-limit", help="also run the loop image with the workers in a memory cgroup of this "
                    "size (e.g. 64M), so reads miss the page cache and reach the device")
    benchlib.add_smoke(ap, "1-s runs at 256 MiB capacity, 8 MiB sequential writes, 1 rep")
    args = ap.parse_args()
    benchlib.start()
    benchlib.smoke(args, duration=1.0, capacity="256M", seq_size="8M", reps=1)
    capacity = parse_size_bytes(args.capacity)
    places = [("tmpfs", Path("/dev/shm")), ("rootdisk", Path("/var/tmp"))]
    print(f"duration={args.duration:g}s  capacity={args.capacity}; {benchlib.load()}")
    rates: dict[str, dict[str, float]] = {}
    for where, base in places:
        rates[where] = personality_rates(where, lambda base=base: plain_dir(base), args.duration, capacity)
    job: dict[str, float] = {}
    if os.geteuid() == 0 and os.path.exists("/dev/loop-control"):
        with loop_image(capacity) as fresh_fs:
            rates[LOOP_PLACE] = personality_rates(LOOP_PLACE, fresh_fs, args.duration, capacity)
            if args.mem_limit:
                where = f"{LOOP_PLACE}+{args.mem_limit}"
                rates[where] = personality_rates(where, fresh_fs, args.duration, capacity,
                                                 parse_size_bytes(args.mem_limit))
        if not args.no_job:
            job = job_rates(args.duration, capacity)
    else:
        print(f"{LOOP_PLACE}: needs root and loop devices: loop-image variant skipped")
    print()
    print_ratios(rates, job)
    if args.no_seq:
        return 0
    ratios = []
    for where, base in places:
        ratios += sequential_write(where, base, parse_size_bytes(args.seq_size), args.reps)
    if ratios:
        print(f"sequential write engine/fio at 1 MiB blocks: min ratio {min(ratios):.2f} "
              f"(target >= {TARGET_SEQ_RATIO})")
    print(benchlib.load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
