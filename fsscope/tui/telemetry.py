"""Device and CPU counters sampled beside a running job (psutil; no Textual).

The job's device is the loop device its image is attached to (found through the state
journal: the entries the job child wrote), or the block device it formats. Without one (a
directory target) the counters are the sum over all disks.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from fsscope.targets import Journal
from fsscope.targets.journal import loops_backing
from fsscope.telemetry.columns import device_rates


@dataclass(frozen=True)
class Tick:
    """One sample: rates since the previous one."""

    device: str  # "" = all disks
    iops: float
    bytes_per_s: float
    cpu_percent: float


def job_device(owner_pid: int | None, target_kind: str, target_path: str, journal: Journal | None = None) -> str:
    """Kernel name of the device the job measures ('' if unknown or a directory target)."""
    if target_kind == "device" and target_path:
        return Path(os.path.realpath(target_path)).name
    if target_kind == "dir" or owner_pid is None:
        return ""
    try:
        entries = (journal or Journal()).entries()
    except OSError:
        return ""
    for entry in entries:
        if entry.kind == "loop" and entry.owner_pid == owner_pid:
            devices = loops_backing(entry.fields.get("image", ""))
            if devices:
                return Path(devices[0]).name
    return ""


class Sampler:
    """Rates between calls of :meth:`sample` (the first call primes the counters)."""

    def __init__(self) -> None:
        self._last: tuple[float, int, int] | None = None
        self._device: str | None = None
        psutil.cpu_percent(interval=None)

    def sample(self, device: str = "") -> Tick | None:
        now = time.monotonic()
        counters = None
        if device:
            counters = psutil.disk_io_counters(perdisk=True, nowrap=True).get(device)
        if counters is None:
            device = ""
            counters = psutil.disk_io_counters(perdisk=False, nowrap=True)
        cpu = psutil.cpu_percent(interval=None)
        if counters is None:
            return None
        ops = counters.read_count + counters.write_count
        nbytes = counters.read_bytes + counters.write_bytes
        last, self._last = self._last, (now, ops, nbytes)
        if last is None or self._device != device:
            self._device = device
            return None
        dt = max(1e-6, now - last[0])
        iops, bytes_per_s = device_rates(dt, max(0, ops - last[1]), max(0, nbytes - last[2]))
        return Tick(device=device, iops=iops, bytes_per_s=bytes_per_s, cpu_percent=cpu)
