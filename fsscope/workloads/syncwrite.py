"""Synchronous-write buffer sweep: throughput vs latency per buffer size (Mingardi & Vieira).

Why: an application that must make every write durable (a Paxos log, a WAL) chooses how much
to batch per synchronous write. Small buffers keep latency at the device's minimum sync cost
but waste throughput; large buffers saturate the device but latency grows with size. The
sweep measures both for each buffer size on the file system under test, and the
throughput/latency ratio whose maximum is the paper's "best balance" buffer size.

Method (as in the paper, with per-write latencies kept): for each buffer size a new file of
``file_size_bytes`` is written sequentially by one thread, each write synchronous (O_SYNC,
O_DSYNC, or write followed by fsync/fdatasync), ``repeats`` times; the file is removed after
each repeat. Sync writes are slow, so raw per-write latencies (int64 ns) are kept.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.errors import FsscopeError

MODES = ("osync", "odsync", "fsync", "fdatasync")


def _default_sizes() -> tuple[int, ...]:
    return tuple(4096 << k for k in range(13))          # 4 KiB .. 16 MiB, doubling


@dataclass(frozen=True)
class SyncWriteSpec:
    buffer_sizes_bytes: tuple[int, ...] = _default_sizes()
    file_size_bytes: int = 16 << 20
    mode: str = "osync"
    repeats: int = 3
    min_writes: int = 8              # large buffers still get this many writes per repeat

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise FsscopeError(f"syncwrite spec: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not self.buffer_sizes_bytes or min(self.buffer_sizes_bytes) < 1:
            raise FsscopeError("syncwrite spec: buffer_sizes_bytes must be positive sizes")
        if self.repeats < 1 or self.min_writes < 1 or self.file_size_bytes < 1:
            raise FsscopeError("syncwrite spec: repeats, min_writes and file_size_bytes must be >= 1")


@dataclass(frozen=True)
class SyncWritePoint:
    """One repeat at one buffer size."""

    buffer_bytes: int
    repeat: int
    bytes_written: int
    elapsed_s: float
    latency_ns: np.ndarray           # int64, one per synchronous write

    @property
    def writes(self) -> int:
        return int(self.latency_ns.size)

    @property
    def bytes_per_s(self) -> float:
        return self.bytes_written / self.elapsed_s if self.elapsed_s > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        lat = self.latency_ns
        return {"buffer_bytes": self.buffer_bytes, "repeat": self.repeat, "writes": self.writes,
                "bytes_per_s": self.bytes_per_s,
                "mean_ns": float(lat.mean()) if lat.size else None,
                "p50_ns": float(np.percentile(lat, 50)) if lat.size else None,
                "p99_ns": float(np.percentile(lat, 99)) if lat.size else None}


def _open_flags(mode: str) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    if mode == "osync":
        flags |= os.O_SYNC
    elif mode == "odsync":
        flags |= os.O_DSYNC
    return flags


def write_file_sync(path: str | os.PathLike, file_size_bytes: int, buffer_bytes: int, mode: str,
                    min_writes: int = 1, cancelled: Callable[[], bool] | None = None
                    ) -> tuple[int, float, np.ndarray]:
    """Write a new file with synchronous writes of ``buffer_bytes``;
    returns (bytes written, seconds, per-write latency ns)."""
    n_writes = max(min_writes, math.ceil(file_size_bytes / buffer_bytes))
    buf = memoryview(bytearray(random.Random(buffer_bytes).randbytes(buffer_bytes)))
    sync = os.fsync if mode == "fsync" else os.fdatasync if mode == "fdatasync" else None
    latency = np.zeros(n_writes, dtype=np.int64)
    written = 0
    fd = os.open(path, _open_flags(mode), 0o644)
    t_start = time.perf_counter()
    try:
        done = 0
        for i in range(n_writes):
            if cancelled is not None and i % 16 == 0 and cancelled():
                break
            t0 = time.monotonic_ns()
            n = os.write(fd, buf)
            if sync is not None:
                sync(fd)
            latency[i] = time.monotonic_ns() - t0
            written += n
            done = i + 1
    finally:
        elapsed = time.perf_counter() - t_start
        os.close(fd)
    return written, elapsed, latency[:done]


def sweep(root: str | os.PathLike, spec: SyncWriteSpec = SyncWriteSpec(),
          on_point: Callable[[SyncWritePoint], None] | None = None,
          cancelled: Callable[[], bool] | None = None) -> list[SyncWritePoint]:
    """Run the sweep in ``root``; sizes are interleaved per repeat (all sizes, then again) so a
    slow drift of the device does not masquerade as an effect of the buffer size."""
    path = Path(root) / "fsscope-syncwrite.dat"
    points: list[SyncWritePoint] = []
    try:
        for repeat in range(spec.repeats):
            for size in spec.buffer_sizes_bytes:
                if cancelled is not None and cancelled():
                    return points
                written, elapsed, latency = write_file_sync(
                    path, spec.file_size_bytes, size, spec.mode, spec.min_writes, cancelled)
                os.unlink(path)
                point = SyncWritePoint(size, repeat, written, elapsed, latency)
                points.append(point)
                if on_point is not None:
                    on_point(point)
    finally:
        if path.exists():
            path.unlink()
    return points


@dataclass(frozen=True)
class SweepSummary:
    """Per buffer size across repeats (arrays ordered by buffer size)."""

    buffer_bytes: np.ndarray
    bytes_per_s_mean: np.ndarray
    bytes_per_s_std: np.ndarray
    latency_mean_ns: np.ndarray
    latency_p99_ns: np.ndarray
    ratio: np.ndarray                # throughput / latency: (bytes/s) per second of mean latency
    best_ratio_buffer_bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        rows = []
        for i, size in enumerate(self.buffer_bytes.tolist()):
            rows.append({"buffer_bytes": int(size), "bytes_per_s": float(self.bytes_per_s_mean[i]),
                         "bytes_per_s_std": float(self.bytes_per_s_std[i]),
                         "latency_mean_ns": float(self.latency_mean_ns[i]),
                         "latency_p99_ns": float(self.latency_p99_ns[i]), "ratio": float(self.ratio[i])})
        return {"points": rows, "best_ratio_buffer_bytes": self.best_ratio_buffer_bytes}


def summarize(points: Sequence[SyncWritePoint]) -> SweepSummary:
    """Means over repeats per buffer size, and the buffer size with the best throughput per
    unit of latency (the knee after which more batching costs more latency than it gains)."""
    sizes = sorted({p.buffer_bytes for p in points})
    tput_mean, tput_std, lat_mean, lat_p99 = [], [], [], []
    for size in sizes:
        mine = [p for p in points if p.buffer_bytes == size]
        tput = np.array([p.bytes_per_s for p in mine])
        lat = np.concatenate([p.latency_ns for p in mine]) if mine else np.empty(0)
        tput_mean.append(tput.mean())
        tput_std.append(tput.std(ddof=1) if tput.size > 1 else 0.0)
        lat_mean.append(lat.mean() if lat.size else math.nan)
        lat_p99.append(np.percentile(lat, 99) if lat.size else math.nan)
    tm, lm = np.array(tput_mean), np.array(lat_mean)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = tm / (lm / 1e9)
    best = int(sizes[int(np.nanargmax(ratio))]) if np.isfinite(ratio).any() else None
    return SweepSummary(np.array(sizes, dtype=np.int64), tm, np.array(tput_std), lm,
                        np.array(lat_p99), ratio, best)
