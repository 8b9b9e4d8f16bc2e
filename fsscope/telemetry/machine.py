"""How busy the machine was while a job ran, kept in its run record.

A timing taken while other work fills the CPUs is noisy, and afterwards nothing in the numbers
says so. Every job (the engine's child) records, from start to end: the load averages at both
ends and the highest 1-minute load seen (sampled every second), and the share of all CPUs' time
that was busy -- split into this job's own processes (its cgroup's ``cpu.stat``) and the rest
of the machine. The load average counts this job's own runnable and D-state processes too, so
"others" is the part a reader can blame on the neighbours.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any


def cpu_times() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs since boot, from /proc/stat's first line (busy:
    all but idle and iowait; guest time is already inside user)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:9]]  # user .. steal
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def cgroup_usage_us(cgroup: Path | None) -> int | None:
    """CPU time of every process in a v2 cgroup so far (µs), or None."""
    if cgroup is None:
        return None
    try:
        for line in (Path(cgroup) / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def busy_pcts(busy_ticks: int, total_ticks: int, job_us: int | None, elapsed_s: float,
              ncpu: int) -> dict[str, float | None]:
    """CPU busy share of all CPUs over an interval (pure): all, this job's, the others'."""
    busy = 100.0 * busy_ticks / total_ticks if total_ticks > 0 else None
    job = (100.0 * job_us / 1e6 / (elapsed_s * ncpu) if job_us is not None and elapsed_s > 0 and ncpu else None)
    job = None if job is None else min(job, 100.0)
    others = None if busy is None or job is None else max(0.0, busy - job)
    return {"cpu_busy_pct": busy, "job_cpu_pct": job, "others_cpu_pct": others}


class MachineLoad:
    """Start before the measurement, stop after it; ``stop()`` returns the record (again on
    later calls)."""

    def __init__(self, cgroup: Path | None = None, interval_s: float = 1.0):
        self.cgroup = cgroup
        self.interval_s = interval_s
        self.ncpu = os.cpu_count() or 1
        self._done = threading.Event()
        self._record: dict[str, Any] | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> MachineLoad:
        self._t0 = time.monotonic()
        self._load0 = os.getloadavg()
        self._load1_max = self._load0[0]
        self._cpu0 = cpu_times()
        self._job0 = cgroup_usage_us(self.cgroup)
        self._thread = threading.Thread(target=self._sample, name="fsscope-machine-load", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._done.wait(self.interval_s):
            self._load1_max = max(self._load1_max, os.getloadavg()[0])

    def stop(self) -> dict[str, Any]:
        if self._record is not None:
            return self._record
        self._done.set()
        elapsed = time.monotonic() - self._t0
        load = os.getloadavg()
        cpu = cpu_times()
        job1 = cgroup_usage_us(self.cgroup)
        job = job1 - self._job0 if job1 is not None and self._job0 is not None else None
        self._record = {
            "ncpu": self.ncpu, "elapsed_s": round(elapsed, 3),
            "load1_start": round(self._load0[0], 2), "load5_start": round(self._load0[1], 2),
            "load1_end": round(load[0], 2), "load5_end": round(load[1], 2),
            "load1_max": round(max(self._load1_max, load[0]), 2),
            **{k: None if v is None else round(v, 1)
               for k, v in busy_pcts(cpu[0] - self._cpu0[0], cpu[1] - self._cpu0[1], job, elapsed,
                                     self.ncpu).items()},
        }
        self._record["busy"] = busy(self._record)
        return self._record


def busy(machine: dict[str, Any]) -> bool:
    """More runnable work than CPUs at some point of the run: its timings are noisy."""
    return max(machine.get("load1_start") or 0, machine.get("load1_end") or 0,
               machine.get("load1_max") or 0) > (machine.get("ncpu") or 1)


def machine_line(machine: dict[str, Any]) -> str:
    """One line saying how busy the machine was (the CLI prints it after every report)."""
    line = (f"machine: load {machine['load1_start']:.1f} → {machine['load1_end']:.1f} "
            f"(max {machine['load1_max']:.1f}) on {machine['ncpu']} CPUs")
    if machine.get("cpu_busy_pct") is not None:
        line += f", CPUs {machine['cpu_busy_pct']:.0f}% busy"
        if machine.get("others_cpu_pct") is not None:
            line += f" (this job {machine['job_cpu_pct']:.0f}%, other work {machine['others_cpu_pct']:.0f}%)"
    if busy(machine):
        line += " -- more runnable work than CPUs: timings from this run are noisy"
    return line
