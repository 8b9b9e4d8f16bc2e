"""The bench's telemetry: which disks a run's file system sits on, the sampler beside every
measured run (streamed as :class:`TelemetrySample` events), and a run's summary of it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.records import plain, typed
from fsscope.telemetry.columns import named_columns, telemetry_matrix
from fsscope.telemetry.sampler import TelemetrySampler, TelemetrySamples
from fsscope.workloads import personalities as P
from fsscope.workloads.bench_records import RunTelemetry, TelemetryRow, TelemetrySample, WindowSample
from fsscope.workloads.bench_spec import Spec


def block_disks(fs) -> tuple[str, ...]:
    """Block device names (as /proc/diskstats spells them) behind a mounted file system: the
    loop/real device for formatted targets, the device holding the directory otherwise, none
    for tmpfs-like file systems."""
    if fs.device:
        return (os.path.basename(os.path.realpath(fs.device)),)
    try:
        st = os.stat(fs.workdir)
    except OSError:
        return ()
    link = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if not link.exists():
        return ()
    return (os.path.basename(os.path.realpath(link)),)


def telemetry_summary(samples: TelemetrySamples) -> RunTelemetry:
    """What the device, CPUs and memory did during one run, in a few numbers."""
    n = len(samples)
    if n == 0:
        return RunTelemetry()
    span_s = max(float(samples.t_s[-1]), samples.interval_s)
    m = telemetry_matrix(samples)  # type: ignore[arg-type]  # TelemetrySamples: sized and indexable
    col = named_columns(m)
    busy = col["disk_busy_ms"] / (samples.interval_s * 1000.0)
    return RunTelemetry(
        samples=n, disks=list(samples.disks),
        disk_read_bytes_per_s=float(col["disk_read_bytes"].sum() / span_s),
        disk_write_bytes_per_s=float(col["disk_write_bytes"].sum() / span_s),
        disk_iops=float((col["disk_read_ops"].sum() + col["disk_write_ops"].sum()) / span_s),
        disk_busy_mean=float(busy.mean()) if samples.disks else None,
        disk_busy_max=float(busy.max()) if samples.disks else None,
        cpu_user_pct_mean=float(np.nanmean(col["cpu_user_pct"])),
        cpu_system_pct_mean=float(np.nanmean(col["cpu_system_pct"])),
        cpu_iowait_pct_mean=float(np.nanmean(col["cpu_iowait_pct"])),
        mem_dirty_bytes_max=int(col["mem_dirty_bytes"].max()),
        mem_writeback_bytes_max=int(col["mem_writeback_bytes"].max()),
        workers_read_bytes=int(col["proc_read_bytes"].sum()),
        workers_write_bytes=int(col["proc_write_bytes"].sum()),
        blkio_delay_s=float(col["blkio_delay_ns"].sum() / 1e9) if samples.taskstats_available else None,
        cpu_delay_s=float(col["cpu_delay_ns"].sum() / 1e9) if samples.taskstats_available else None)


def measure(ctx, spec: Spec, pspec: P.PersonalitySpec, root: Path, fs, r: int, total_s: float):
    """One timed run with the telemetry sampler beside it."""

    def on_sample(sample: dict[str, Any]) -> None:
        ctx.emit(TelemetrySample(run=r, sample=typed(plain(sample), TelemetryRow)))

    def on_window(sample: P.LiveSample) -> None:
        ctx.emit(WindowSample(run=r, window=sample))
        done = r * spec.duration_s + min(sample.t_s, spec.duration_s)
        ctx.progress(round(done, 3), total_s, unit="s",
                     info=f"run {r + 1}/{spec.runs}  {sample.ops_per_s:,.0f} ops/s")

    sampler = TelemetrySampler(interval_s=1.0, disks=block_disks(fs), on_sample=on_sample)
    sampler.start()
    try:
        # bins land in the run record as they are aggregated: a killed job keeps them
        result = P.run(root, pspec, P.RunOptions(
            on_window=on_window, cancelled=lambda: ctx.cancelled,
            mem_limit_bytes=spec.mem_limit_bytes, on_start=sampler.watch,
            alloc=lambda name, shape: ctx.run_dir.open_array(f"run{r}_{name}", shape, fill=0)))
    finally:
        samples = sampler.stop()
    return result, samples
