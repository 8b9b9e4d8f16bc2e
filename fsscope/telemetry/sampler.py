"""Device, CPU, memory and per-worker counters sampled at a fixed interval beside a job.

Why beside the workload: a dip in Throughput-N means little until it is lined up with what
the device did (bytes, busy time), whether the CPU was the limit, how much dirty data was
waiting for writeback (the flusher's periodic bursts), and whether the workers were blocked
on I/O (taskstats). Each sample is a per-interval delta, so it lines up with the workload's
bins when both use the same interval.

The sampler is a thread of the job process (the workload's I/O runs in separate worker
processes, so it does not compete with them for a GIL). ``on_sample`` is called from that
thread; the callback must be thread-safe.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from fsscope.telemetry.taskstats import TaskStatsReader

_DISK_FIELDS = ("read_bytes", "write_bytes", "read_count", "write_count", "read_time", "write_time",
                "busy_time")
_MEMINFO_FIELDS = {"MemAvailable": "mem_available_bytes", "Cached": "mem_cached_bytes",
                   "Dirty": "mem_dirty_bytes", "Writeback": "mem_writeback_bytes"}


def default_disks() -> list[str]:
    """Whole block devices with a non-zero size, except RAM disks (loop devices included:
    fsscope's image targets live on them)."""
    names = []
    for entry in sorted(Path("/sys/block").iterdir()):
        if entry.name.startswith(("ram", "zram")):
            continue
        try:
            if int((entry / "size").read_text()) > 0:
                names.append(entry.name)
        except (OSError, ValueError):
            continue
    return names


def read_meminfo() -> dict[str, int]:
    """Selected /proc/meminfo values in bytes (psutil does not expose Dirty/Writeback)."""
    out = {}
    with open("/proc/meminfo") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in _MEMINFO_FIELDS:
                out[_MEMINFO_FIELDS[key]] = int(rest.split()[0]) * 1024
    return out


@dataclass(frozen=True)
class TelemetrySamples:
    """Per-interval deltas (counters) or levels (memory), one row per sample.

    Disk arrays are [n_samples, n_disks] int64; times are ms as the kernel reports them."""

    interval_s: float
    t_s: np.ndarray                       # end of each interval, seconds since start()
    disks: tuple[str, ...]
    disk_read_bytes: np.ndarray
    disk_write_bytes: np.ndarray
    disk_read_ops: np.ndarray
    disk_write_ops: np.ndarray
    disk_read_time_ms: np.ndarray
    disk_write_time_ms: np.ndarray
    disk_busy_ms: np.ndarray
    cpu_user_pct: np.ndarray
    cpu_system_pct: np.ndarray
    cpu_iowait_pct: np.ndarray
    cpu_idle_pct: np.ndarray
    mem_available_bytes: np.ndarray
    mem_cached_bytes: np.ndarray
    mem_dirty_bytes: np.ndarray
    mem_writeback_bytes: np.ndarray
    proc_read_bytes: np.ndarray           # watched pids, from /proc/PID/io (exact)
    proc_write_bytes: np.ndarray
    blkio_delay_ns: np.ndarray            # watched pids, taskstats (0 without delay accounting)
    cpu_delay_ns: np.ndarray
    taskstats_available: bool
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.t_s.size)

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {name: value for name, value in self.__dict__.items() if isinstance(value, np.ndarray)}


class TelemetrySampler:
    """Samples every ``interval_s`` in a thread between start() and stop().

    ``watch(pids)`` adds processes (e.g. a workload's workers) whose I/O bytes and taskstats
    delays are summed per interval; processes that exit keep their last reading."""

    def __init__(self, interval_s: float = 1.0, disks: Sequence[str] | None = None,
                 on_sample: Callable[[dict[str, Any]], None] | None = None,
                 taskstats: bool = True):
        if interval_s <= 0:
            raise ValueError("interval_s must be positive")
        self.interval_s = float(interval_s)
        self.disks = tuple(disks) if disks is not None else tuple(default_disks())
        self.on_sample = on_sample
        self._want_taskstats = taskstats
        self._pids: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._rows: list[dict[str, Any]] = []
        self._notes: list[str] = []
        self._ts: TaskStatsReader | None = None
        self._proc_last: dict[int, tuple[int, int]] = {}
        self._delay_last: dict[int, tuple[int, int]] = {}
        self._ts_available = False

    # -- control ------------------------------------------------------------------------------
    def watch(self, pids: Iterable[int]) -> None:
        """Add processes; their counters count from now (earlier I/O is not theirs to report)."""
        for pid in (int(p) for p in pids):
            try:
                io = psutil.Process(pid).io_counters()
                baseline = (io.read_bytes, io.write_bytes)
            except (psutil.Error, OSError):
                baseline = (0, 0)
            with self._lock:
                self._proc_last.setdefault(pid, baseline)
                self._pids.add(pid)

    def start(self) -> TelemetrySampler:
        """Open taskstats and take the baseline readings now, so the first interval starts
        when this returns; then sample in a thread."""
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        missing = [d for d in self.disks if d not in (psutil.disk_io_counters(perdisk=True) or {})]
        if missing:
            self._notes.append(f"no I/O counters for {', '.join(missing)}: reported as 0")
        if self._want_taskstats:
            self._ts = TaskStatsReader().open()
            self._ts_available = self._ts.available
            self._notes.extend(self._ts.notes)
        self._t0 = time.monotonic()
        self._last_disk = self._disk_now()
        self._last_cpu = psutil.cpu_times()
        self._proc_io()
        self._delays()
        self._thread = threading.Thread(target=self._run, name="fsscope-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> TelemetrySamples:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 3 * self.interval_s))
        return self._samples()

    def __enter__(self) -> TelemetrySampler:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        if not self._stop.is_set():
            self.stop()

    # -- sampling -----------------------------------------------------------------------------
    def _disk_now(self) -> np.ndarray:
        counters = psutil.disk_io_counters(perdisk=True, nowrap=True) or {}
        out = np.zeros((len(_DISK_FIELDS), len(self.disks)), dtype=np.int64)
        for j, name in enumerate(self.disks):
            c = counters.get(name)
            if c is not None:
                out[:, j] = [getattr(c, f, 0) for f in _DISK_FIELDS]
        return out

    def _proc_io(self) -> tuple[int, int]:
        """Read/write byte deltas of the watched pids since the previous sample."""
        with self._lock:
            pids = list(self._pids)
        d_read = d_write = 0
        for pid in pids:
            try:
                io = psutil.Process(pid).io_counters()
            except (psutil.Error, OSError):
                continue
            with self._lock:
                last = self._proc_last.get(pid, (0, 0))
            d_read += io.read_bytes - last[0]
            d_write += io.write_bytes - last[1]
            with self._lock:
                self._proc_last[pid] = (io.read_bytes, io.write_bytes)
        return d_read, d_write

    def _delays(self) -> tuple[int, int]:
        if self._ts is None or not self._ts.available:
            return 0, 0
        with self._lock:
            pids = list(self._pids)
        d_blkio = d_cpu = 0
        for pid in pids:
            delays = self._ts.read_process(pid)
            if delays is None:
                continue
            last = self._delay_last.setdefault(pid, (delays.blkio_delay_ns, delays.cpu_delay_ns))
            d_blkio += delays.blkio_delay_ns - last[0]
            d_cpu += delays.cpu_delay_ns - last[1]
            self._delay_last[pid] = (delays.blkio_delay_ns, delays.cpu_delay_ns)
        return d_blkio, d_cpu

    def _run(self) -> None:
        t0 = self._t0
        try:
            k = 1
            while not self._stop.wait(max(0.0, t0 + k * self.interval_s - time.monotonic())):
                self._sample(t0)
                k = max(k + 1, int((time.monotonic() - t0) / self.interval_s) + 1)
            # one last partial sample so the end of the job is covered
            if time.monotonic() - (t0 + (k - 1) * self.interval_s) > 0.2 * self.interval_s:
                self._sample(t0)
        except Exception as exc:                       # never take the job down
            self._notes.append(f"telemetry stopped early: {exc!r}")
        finally:
            if self._ts is not None:
                self._ts.close()

    def _sample(self, t0: float) -> None:
        disk_prev, cpu_prev = self._last_disk, self._last_cpu
        now = time.monotonic()
        disk = self._disk_now()
        cpu = psutil.cpu_times()
        deltas = {f: getattr(cpu, f, 0.0) - getattr(cpu_prev, f, 0.0) for f in cpu._fields}
        total = sum(max(v, 0.0) for v in deltas.values()) or math.nan
        d_disk = disk - disk_prev
        d_read, d_write = self._proc_io()
        d_blkio, d_cpu_delay = self._delays()
        row: dict[str, Any] = {
            "t_s": now - t0,
            **{f"disk_{f}": d_disk[i].copy() for i, f in enumerate(_DISK_FIELDS)},
            "cpu_user_pct": 100.0 * (deltas.get("user", 0) + deltas.get("nice", 0)) / total,
            "cpu_system_pct": 100.0 * (deltas.get("system", 0) + deltas.get("irq", 0)
                                       + deltas.get("softirq", 0)) / total,
            "cpu_iowait_pct": 100.0 * deltas.get("iowait", 0) / total,
            "cpu_idle_pct": 100.0 * deltas.get("idle", 0) / total,
            **read_meminfo(),
            "proc_read_bytes": d_read, "proc_write_bytes": d_write,
            "blkio_delay_ns": d_blkio, "cpu_delay_ns": d_cpu_delay,
        }
        self._rows.append(row)
        self._last_disk, self._last_cpu = disk, cpu
        if self.on_sample is not None:
            try:
                self.on_sample(self._live(row))
            except Exception as exc:
                self._notes.append(f"on_sample callback failed: {exc!r}")
                self.on_sample = None

    def _live(self, row: dict[str, Any]) -> dict[str, Any]:
        """Plain-JSON view of one sample (lists, not numpy arrays) for the event stream."""
        out: dict[str, Any] = {}
        for key, value in row.items():
            if isinstance(value, np.ndarray):
                out[key] = dict(zip(self.disks, (int(v) for v in value)))
            else:
                out[key] = value
        return out

    def _samples(self) -> TelemetrySamples:
        rows = self._rows
        n, nd = len(rows), len(self.disks)

        def col(key: str, dtype: Any) -> np.ndarray:
            return np.array([r.get(key, 0) for r in rows], dtype=dtype)

        def disk(field_name: str) -> np.ndarray:
            if n == 0:
                return np.zeros((0, nd), dtype=np.int64)
            return np.vstack([r[f"disk_{field_name}"] for r in rows]).astype(np.int64)

        return TelemetrySamples(
            interval_s=self.interval_s, t_s=col("t_s", np.float64), disks=self.disks,
            disk_read_bytes=disk("read_bytes"), disk_write_bytes=disk("write_bytes"),
            disk_read_ops=disk("read_count"), disk_write_ops=disk("write_count"),
            disk_read_time_ms=disk("read_time"), disk_write_time_ms=disk("write_time"),
            disk_busy_ms=disk("busy_time"),
            cpu_user_pct=col("cpu_user_pct", np.float64), cpu_system_pct=col("cpu_system_pct", np.float64),
            cpu_iowait_pct=col("cpu_iowait_pct", np.float64), cpu_idle_pct=col("cpu_idle_pct", np.float64),
            mem_available_bytes=col("mem_available_bytes", np.int64),
            mem_cached_bytes=col("mem_cached_bytes", np.int64),
            mem_dirty_bytes=col("mem_dirty_bytes", np.int64),
            mem_writeback_bytes=col("mem_writeback_bytes", np.int64),
            proc_read_bytes=col("proc_read_bytes", np.int64), proc_write_bytes=col("proc_write_bytes", np.int64),
            blkio_delay_ns=col("blkio_delay_ns", np.int64), cpu_delay_ns=col("cpu_delay_ns", np.int64),
            taskstats_available=self._ts_available,
            notes=tuple(dict.fromkeys(self._notes)))


def dirty_writeback_intervals() -> dict[str, int | None]:
    """The kernel's writeback timing, for ``variation.detect_periodic``'s note:
    ``{"dirty_expire_centisecs": 3000, "dirty_writeback_centisecs": 500}`` (None if unreadable)."""
    out: dict[str, int | None] = {}
    for name in ("dirty_expire_centisecs", "dirty_writeback_centisecs"):
        try:
            out[name] = int(Path(f"/proc/sys/vm/{name}").read_text().strip())
        except (OSError, ValueError):
            out[name] = None
    return out
