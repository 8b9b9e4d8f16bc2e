#!/usr/bin/env python3
"""Observer effect of kernel tracing on the probe, and the event rate the reader sustains.

In ONE run, on fresh RAM images of the same recipe (mkfs per run, CPU pinned like the probe):

1. untraced and traced probe runs alternate (``--pairs`` of each, order rotated so drift
   hits both alike). Traced = what ``--trace all`` does to a run: the job's tracefs
   instance, the fs/block/sched events, the reader process. Printed: K-S distance between
   the pooled per-call latencies, and the ratio of the medians, traced / untraced
   (target: median <= 1.10x with --trace all).
2. the attribution pass: the wall time of one traced run including instance set-up, reader,
   decoding and attribution, against the wall time of one untraced run (target: the extra
   traced run of ``--trace attribute`` costs <= 1 run, i.e. ratio <= 2).
3. the reader under a firehose: every syscall entry and exit (raw_syscalls) of a getppid()
   loop, paced and flat out -- events/s read, and overrun + dropped (target: 0 lost at
   rates far above a probe's).

    .venv/bin/python bench/trace_overhead.py [--recipe xfs-default] [--files 2000] [--pairs 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib  # noqa: E402

from fsscope import recipes  # noqa: E402
from fsscope.targets import Target, TargetSpec  # noqa: E402
from fsscope.trace import attribute, catalog  # noqa: E402
from fsscope.trace.session import Tracer  # noqa: E402
from fsscope.workloads.probe import ProbeSpec, measure_run, pin_cpu  # noqa: E402


def ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import ks_2samp
    return float(ks_2samp(a, b).statistic)


def one_run(target: Target, spec: ProbeSpec, raw_dir: Path, *, traced: bool,
            events: tuple | None = None) -> tuple[np.ndarray, float, dict]:
    """(latency_ns, wall seconds of the run incl. tracing set-up/decode/attribution, trace info)."""
    mounted = target.format_and_mount()
    try:
        probe_dir = mounted.workdir / "probe.d"
        probe_dir.mkdir()
        os.sync()
        start_ns = np.full(spec.files, -1, dtype=np.int64)
        t0 = time.monotonic()
        if not traced:
            latency_ns = measure_run(probe_dir, spec, start_out=start_ns)
            return latency_ns, time.monotonic() - t0, {}
        with Tracer(raw_dir, fs=mounted.fs, job="probe", pid=os.getpid(), device=mounted.device,
                    avoid_cpu=next(iter(os.sched_getaffinity(0))), events=events) as tracer:
            latency_ns = measure_run(probe_dir, spec, start_out=start_ns)
        result = tracer.result
        attribute.attribute_run(result.events, result.names, start_ns, latency_ns,
                                pid=os.getpid(), comms=result.comms)
        info = {"events": len(result.events), "lost": result.lost,
                "events_per_s": result.events_per_s, "duration_s": result.duration_s}
        return latency_ns, time.monotonic() - t0, info
    finally:
        target.unmount()


def firehose(raw_dir: Path, seconds: float, syscalls_per_s: int | None) -> dict:
    """Trace every syscall entry/exit of this process while it calls getppid() for
    ``seconds`` (paced in 1 ms batches, or flat out): the event rate the reader keeps up
    with, and what the kernel lost."""
    events = tuple(catalog.CatalogEvent(f"raw_syscalls/{name}", "sched", "pid", "syscall",
                                        columns={"arg": "id"}) for name in ("sys_enter", "sys_exit"))
    batch = max(1, (syscalls_per_s or 0) // 1000)
    with Tracer(raw_dir, fs="", job="bench", pid=os.getpid(), device=None,
                avoid_cpu=next(iter(os.sched_getaffinity(0))), events=events) as tracer:
        end = time.monotonic() + seconds
        call, clock = os.getppid, time.monotonic
        while (now := clock()) < end:
            if syscalls_per_s is None:
                for _ in range(1000):
                    call()
                continue
            for _ in range(batch):
                call()
            while clock() < now + 0.001:
                pass
    result = tracer.result
    return {"events": len(result.events), "lost": result.lost, "events_per_s": result.events_per_s,
            "duration_s": result.duration_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="xfs-default")
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--size", type=int, default=512, help="RAM image MiB (default 512)")
    parser.add_argument("--firehose-s", type=float, default=2.0, help="seconds per firehose level")
    benchlib.add_smoke(parser, "200 files, 2 pairs, 0.3-s firehose levels")
    args = parser.parse_args()
    benchlib.start()
    benchlib.smoke(args, files=200, pairs=2, firehose_s=0.3)
    if os.geteuid() != 0:
        print("needs root (tracefs, loop images)", file=sys.stderr)
        return 2
    previous = pin_cpu(None)
    target = Target(TargetSpec("ram", size_bytes=args.size * 2**20), recipes.load(args.recipe))
    target.open()
    spec = ProbeSpec(op="creat", files=args.files)
    try:
        with tempfile.TemporaryDirectory(prefix="fsscope-trace-bench-") as tmp:
            raw = Path(tmp)
            lat = {False: [], True: []}
            wall = {False: [], True: []}
            infos = []
            for k in range(args.pairs):
                for traced in ((False, True) if k % 2 == 0 else (True, False)):
                    latency_ns, wall_s, info = one_run(target, spec, raw / f"r{k}{int(traced)}", traced=traced)
                    lat[traced].append(latency_ns)
                    wall[traced].append(wall_s)
                    if info:
                        infos.append(info)
            untraced, traced_all = np.concatenate(lat[False]), np.concatenate(lat[True])
            ratio = float(np.median(traced_all) / np.median(untraced))
            print(f"recipe {args.recipe}, creat x {args.files} files, {args.pairs} untraced + "
                  f"{args.pairs} traced runs, alternating, CPU {next(iter(os.sched_getaffinity(0)))}; {benchlib.load()}")
            print("\n1. observer effect (--trace all vs untraced)")
            print(f"   median per call: untraced {np.median(untraced) / 1e3:.1f} us, traced "
                  f"{np.median(traced_all) / 1e3:.1f} us -> ratio {ratio:.3f} (target <= 1.10: "
                  f"{'met' if ratio <= 1.10 else 'NOT met'})")
            per_pair = [float(np.median(t) / np.median(u)) for u, t in zip(lat[False], lat[True])]
            print(f"   per-pair median ratios: {' '.join(f'{r:.3f}' for r in per_pair)}")
            print(f"   K-S distance traced vs untraced: {ks_distance(untraced, traced_all):.3f} "
                  f"(reference: untraced run 1 vs run 2: {ks_distance(lat[False][0], lat[False][1]):.3f})")
            print(f"   events per traced run: {int(np.median([i['events'] for i in infos]))}, "
                  f"lost: {sum(i['lost'] for i in infos)}")
            wall_ratio = float(np.median(wall[True]) / np.median(wall[False]))
            print("\n2. attribution pass (one traced run incl. set-up, reader, decode, attribution)")
            print(f"   wall: untraced run {np.median(wall[False]):.2f} s, traced run "
                  f"{np.median(wall[True]):.2f} s -> the extra run costs {wall_ratio:.2f} runs "
                  f"(target <= 1 run of wall time: {'met' if wall_ratio <= 1.0 + 1.0 else 'NOT met'}; "
                  f"the measured runs themselves stay untraced)")
            print("\n3. reader under a firehose: raw_syscalls enter+exit of a getppid() loop")
            for rate in (100_000, 300_000, None):
                info = firehose(raw / f"firehose{rate}", args.firehose_s, rate)
                what = f"paced, {rate // 1000} calls per ms" if rate else "full speed"
                print(f"   {what:>28}: {info['events']:>8} events in {info['duration_s']:.2f} s = "
                      f"{info['events_per_s']:>9.0f} events/s read, lost (overrun + dropped): {info['lost']}")
    finally:
        target.close()
        os.sched_setaffinity(0, previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
