"""Synchronous-write buffer sweep: throughput vs latency per buffer size (Mingardi & Vieira).

Why: an application that must make every write durable (a Paxos log, a WAL) chooses how much
to batch per synchronous write. Small buffers keep latency at the device's minimum sync cost
but waste throughput; large buffers saturate the device but latency grows with size. The
sweep measures both for each buffer size on the file system under test.

Method (the paper's, with every write's latency kept): ``repeats`` repetitions (30 in the
paper); in each, every buffer size in a seeded random order (so a slow drift of the device
does not masquerade as a trend over sizes) writes a NEW file of ``file_size_bytes``
sequentially from one thread, every write synchronous, and removes it. Modes:

  osync / odsync            O_SYNC / O_DSYNC on open (iozone ``-o``; fio ``--sync=1``)
  fsync / fdatasync         write() then fsync()/fdatasync() (fio ``--fsync=1/--fdatasync=1``)
  direct+osync, +odsync,    the same with O_DIRECT (iozone ``-I -o``; fio ``--direct=1``),
  direct+fdatasync          page-aligned buffers (anonymous mmap) as O_DIRECT requires

Before its first write a point's file is preallocated (``fallocate`` through a plain descriptor,
untimed), as fio does by default and as logs such as etcd's WAL do; the file's creation and
allocation reach the journal with the first timed write, as in fio. ``preallocate=False``
appends to an unallocated file as iozone does. Measured against fio on ext4 (bench/syncwrite_fio.py), preallocation is worth
~10 µs per 4 KiB O_SYNC write: without it the sweep reads ~1.15x fio's latency.

A write's latency is from the write() call to the end of its sync (the sync is part of what
the application waits for). A point's throughput is its bytes over the time from its first
write's start to its last write's end.

Every latency goes straight into ``latency_ns`` (a memory-mapped array in a job) at an offset
fixed by :func:`plan`, so a killed sweep keeps every write it measured.
"""

from __future__ import annotations

import errno
import math
import mmap
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.errors import FsscopeError
from fsscope.records import Record

MODES = ("osync", "odsync", "fsync", "fdatasync", "direct+osync", "direct+odsync", "direct+fdatasync")
MAX_WRITE_BYTES = 0x7FFFF000        # Linux transfers at most this much in one write() call
DIRECT_ALIGN_BYTES = 4096           # O_DIRECT sizes must be multiples of the logical block size
DEFAULT_REPEATS = 30                # as in the paper
QUICK_REPEATS = 5
FILE_NAME = "fsscope-syncwrite.dat"

# points array: one row per (repetition, size) in plan order; measured columns stay NaN
# until the point ends ("ended" is 1 when it ended by rule, 0 when cut by cancel/ENOSPC).
POINT_COLUMNS = ("buffer_bytes", "repeat", "order", "offset", "planned_writes",
                 "writes", "bytes_written", "elapsed_s", "ended")
COL = {name: i for i, name in enumerate(POINT_COLUMNS)}


def _default_sizes() -> tuple[int, ...]:
    return tuple(4096 << k for k in range(13))          # 4 KiB .. 16 MiB, doubling


def is_direct(mode: str) -> bool:
    return mode.startswith("direct+")


class SyncWriteSpec(Record, frozen=True):
    buffer_sizes_bytes: tuple[int, ...] = _default_sizes()
    file_size_bytes: int = 16 << 20
    mode: str = "osync"
    repeats: int = DEFAULT_REPEATS
    min_writes: int = 1              # > 1: large buffers still get this many writes per point
    seed: int = 1                    # of the per-repetition size order
    preallocate: bool = True         # fallocate each file before writing it (fio's default)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise FsscopeError(f"syncwrite: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not self.buffer_sizes_bytes or min(self.buffer_sizes_bytes) < 1:
            raise FsscopeError("syncwrite: buffer sizes must be positive")
        if len(set(self.buffer_sizes_bytes)) != len(self.buffer_sizes_bytes):
            raise FsscopeError("syncwrite: a buffer size is named twice")
        too_big = [s for s in self.buffer_sizes_bytes if s > MAX_WRITE_BYTES]
        if too_big:
            raise FsscopeError(f"syncwrite: buffer size {too_big[0]} is above {MAX_WRITE_BYTES} bytes "
                               "(2 GiB - 4 KiB), the most Linux writes in one call")
        if is_direct(self.mode):
            odd = [s for s in self.buffer_sizes_bytes if s % DIRECT_ALIGN_BYTES]
            if odd:
                raise FsscopeError(f"syncwrite: mode {self.mode} (O_DIRECT) needs buffer sizes that are "
                                   f"multiples of {DIRECT_ALIGN_BYTES} bytes, not {odd[0]}")
        if self.repeats < 1 or self.min_writes < 1 or self.file_size_bytes < 1:
            raise FsscopeError("syncwrite: repeats, min_writes and file size must be >= 1")


@dataclass(frozen=True)
class PlannedPoint:
    repeat: int
    order: int                       # position of this size in its repetition
    buffer_bytes: int
    writes: int                      # writes that fill the file
    offset: int                      # first index of its latencies in the flat latency array


def writes_per_point(spec: SyncWriteSpec, buffer_bytes: int) -> int:
    return max(spec.min_writes, math.ceil(spec.file_size_bytes / buffer_bytes))


def size_order(spec: SyncWriteSpec, repeat: int) -> list[int]:
    """The buffer sizes of one repetition in its seeded random order."""
    perm = np.random.default_rng([spec.seed, repeat]).permutation(len(spec.buffer_sizes_bytes))
    return [spec.buffer_sizes_bytes[i] for i in perm]


def plan(spec: SyncWriteSpec) -> list[PlannedPoint]:
    out, offset = [], 0
    for repeat in range(spec.repeats):
        for order, size in enumerate(size_order(spec, repeat)):
            n = writes_per_point(spec, size)
            out.append(PlannedPoint(repeat, order, size, n, offset))
            offset += n
    return out


def new_arrays(spec: SyncWriteSpec, make: Callable[..., np.ndarray] | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
    """(latency_ns, points) laid out by :func:`plan`; ``make(name, shape, dtype, fill)`` lets
    a job put them in memory-mapped files (RunDir.open_array)."""
    points = plan(spec)
    total = points[-1].offset + points[-1].writes
    if make is None:
        def make(name, shape, dtype, fill):
            return np.full(shape, fill, dtype=dtype)
    latency = make("latency_ns", (total,), np.int64, -1)
    table = make("points", (len(points), len(POINT_COLUMNS)), np.float64, np.nan)
    for i, p in enumerate(points):
        table[i, :5] = (p.buffer_bytes, p.repeat, p.order, p.offset, p.writes)
    return latency, table


def aligned_buffer(size: int) -> mmap.mmap:
    """A page-aligned buffer (O_DIRECT needs alignment) of incompressible bytes: a 1 MiB random
    block repeated (filling 1 GiB from a generator would take seconds)."""
    buf = mmap.mmap(-1, size)
    block = np.random.default_rng(size).integers(0, 256, min(size, 1 << 20), dtype=np.uint8).tobytes()
    for off in range(0, size, len(block)):
        buf[off:off + len(block)] = block[:size - off]
    return buf


def _open_flags(mode: str) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    if mode.endswith("osync"):
        flags |= os.O_SYNC
    elif mode.endswith("odsync"):
        flags |= os.O_DSYNC
    if is_direct(mode):
        flags |= os.O_DIRECT
    return flags


def refused_mode(path: str | os.PathLike, mode: str) -> str | None:
    """Why the file system holding directory ``path`` refuses ``mode`` (None: it accepts it).
    tmpfs, for one, refuses O_DIRECT with EINVAL at open."""
    if not is_direct(mode):
        return None
    probe = Path(path) / ".fsscope-direct-probe"
    try:
        os.close(os.open(probe, _open_flags(mode), 0o644))
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return (f"the file system at {path} refuses O_DIRECT (mode {mode}); "
                    "use osync, odsync, fsync or fdatasync there")
        raise
    finally:
        probe.unlink(missing_ok=True)  # ramfs creates the file before refusing O_DIRECT
    return None


@dataclass(frozen=True)
class PointResult:
    writes: int
    bytes_written: int
    elapsed_s: float
    full: bool                       # stopped by ENOSPC


def write_file_sync(path: str | os.PathLike, planned: PlannedPoint, mode: str, buf: mmap.mmap,
                    latency_out: np.ndarray, cancelled: Callable[[], bool] | None = None,
                    preallocate: bool = True, start_out: np.ndarray | None = None) -> PointResult:
    """Write a new file with ``planned.writes`` synchronous writes of ``buf``, each latency into
    ``latency_out[i]`` as soon as it is measured, and (``start_out``) its start in
    CLOCK_MONOTONIC ns, the clock of kernel trace events, stored after the timed region."""
    sync = os.fdatasync if mode.endswith("fdatasync") else os.fsync if mode == "fsync" else None
    view = memoryview(buf)
    size = len(buf)
    flags = _open_flags(mode)
    if preallocate:
        # Through a plain descriptor, closed before the timed one opens: ext4 commits its journal
        # at once in an fallocate through an O_SYNC/O_DSYNC descriptor (~1 ms, measured), which
        # took the new file's creation and allocation out of the first timed write. fio
        # preallocates through a plain descriptor and iozone allocates as it writes: in both the
        # first synchronous write commits them.
        pre = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        full = False
        try:
            os.posix_fallocate(pre, 0, planned.writes * size)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            full = True
        finally:
            os.close(pre)
        if full:                     # the partial preallocation would only hold the space
            Path(path).unlink(missing_ok=True)
            return PointResult(0, 0, 0.0, True)
        flags &= ~os.O_TRUNC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if preallocate:
            Path(path).unlink(missing_ok=True)
        if exc.errno == errno.EINVAL and is_direct(mode):
            raise FsscopeError(refused_mode(Path(path).parent, mode) or str(exc)) from None
        raise
    written = done = 0
    full = False
    first = last = time.monotonic_ns()
    try:
        for i in range(planned.writes):
            if cancelled is not None and i % 16 == 0 and i and cancelled():
                break
            t0 = time.monotonic_ns()
            if i == 0:
                first = t0
            try:
                n = os.write(fd, view)
                while n < size:          # a short write (nearly full): finish or hit ENOSPC
                    n += os.write(fd, view[n:])
                if sync is not None:
                    sync(fd)
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    full = True
                    break
                if exc.errno == errno.EINVAL and is_direct(mode):
                    raise FsscopeError(f"an O_DIRECT write of {size} bytes was refused (EINVAL): the "
                                       "buffer size must be a multiple of the device's logical block size") from None
                raise
            last = time.monotonic_ns()
            latency_out[i] = last - t0
            if start_out is not None:
                start_out[i] = t0
            written += n
            done = i + 1
    finally:
        os.close(fd)
    return PointResult(done, written, (last - first) / 1e9 if done else 0.0, full)


@dataclass(frozen=True)
class SweepEnd:
    points_done: int
    stop: str | None                 # None (all done), "cancelled" or "enospc"
    note: str = ""


def sweep(root: str | os.PathLike, spec: SyncWriteSpec, latency: np.ndarray, points: np.ndarray,
          on_point: Callable[[int, np.ndarray], None] | None = None,
          cancelled: Callable[[], bool] | None = None, point_limit_s: float | None = None,
          start_ns: np.ndarray | None = None) -> SweepEnd:
    """Run the plan in ``root``, filling ``latency``/``points`` (from :func:`new_arrays`) and
    ``start_ns`` (laid out as ``latency``; each write's start, for trace attribution) as it
    goes; ``on_point(row_index, latencies)`` after each point. A point also ends after
    ``point_limit_s`` (a normal end); a full file system ends the sweep cleanly with what was
    measured, as does ``cancelled()``."""
    path = Path(root) / FILE_NAME
    buffers: dict[int, mmap.mmap] = {}
    done = 0
    try:
        for row, planned in enumerate(plan(spec)):
            if cancelled is not None and cancelled():
                return SweepEnd(done, "cancelled")
            if planned.buffer_bytes not in buffers:
                buffers[planned.buffer_bytes] = aligned_buffer(planned.buffer_bytes)
            out = latency[planned.offset:planned.offset + planned.writes]
            limit = math.inf if point_limit_s is None else time.monotonic() + point_limit_s

            def stop(limit: float = limit) -> bool:
                return (cancelled is not None and cancelled()) or time.monotonic() > limit

            starts = None if start_ns is None else start_ns[planned.offset:planned.offset + planned.writes]
            result = write_file_sync(path, planned, spec.mode, buffers[planned.buffer_bytes], out, stop,
                                     spec.preallocate, starts)
            path.unlink(missing_ok=True)  # gone already where preallocating it found the disk full
            cut = result.full or (cancelled is not None and result.writes < planned.writes and cancelled())
            points[row, COL["writes"]:] = (result.writes, result.bytes_written, result.elapsed_s, 0 if cut else 1)
            if hasattr(points, "flush"):
                points.flush()
            done += 1
            if on_point is not None:
                on_point(row, out[:result.writes])
            if result.full:
                what = "writing" if result.writes else "preallocating a file for"
                return SweepEnd(done, "enospc", (
                    f"the file system filled up (ENOSPC) {what} {planned.buffer_bytes}-byte buffers in "
                    f"repetition {planned.repeat + 1}: stopped after {int(np.sum(latency >= 0))} measured "
                    "writes, all kept"))
            if cut:
                return SweepEnd(done, "cancelled")
    finally:
        path.unlink(missing_ok=True)
        for buf in buffers.values():
            buf.close()
    return SweepEnd(done, None)


def point_dict(points: np.ndarray, row: int, latency_ns: np.ndarray) -> dict[str, Any]:
    """One measured point for events and reports."""
    r = points[row]
    elapsed = float(r[COL["elapsed_s"]])
    written = float(r[COL["bytes_written"]])
    timed = math.isfinite(elapsed) and elapsed > 0 and math.isfinite(written)   # NaN: cut by a kill
    lat = latency_ns[latency_ns >= 0]
    return {"buffer_bytes": int(r[COL["buffer_bytes"]]), "repeat": int(r[COL["repeat"]]),
            "order": int(r[COL["order"]]), "writes": int(r[COL["writes"]]),
            "bytes_written": int(written) if math.isfinite(written) else None,
            "elapsed_s": elapsed if math.isfinite(elapsed) else None,
            "ended": bool(r[COL["ended"]] == 1),
            "bytes_per_s": written / elapsed if timed else None,
            "mean_ns": float(lat.mean()) if lat.size else None,
            "p50_ns": float(np.percentile(lat, 50)) if lat.size else None,
            "p99_ns": float(np.percentile(lat, 99)) if lat.size else None}


def measured_points(points: np.ndarray, latency: np.ndarray) -> list[dict[str, Any]]:
    """Every point with measured writes, from the arrays alone (also those of a killed run:
    a point cut by the kill has NaN columns; its latencies still count, its throughput not)."""
    out = []
    for row in range(points.shape[0]):
        r = points[row]
        off, n = int(r[COL["offset"]]), int(r[COL["planned_writes"]])
        lat = np.asarray(latency[off:off + n])
        if np.isnan(r[COL["writes"]]):          # cut by a kill: only its latencies are known
            if not (lat >= 0).any():
                continue
            cut = np.array(r, dtype=np.float64)
            cut[COL["writes"]:] = ((lat >= 0).sum(), np.nan, np.nan, 0)
            point = point_dict(cut[None, :], 0, lat)
        else:
            point = point_dict(points, row, lat[:int(r[COL["writes"]])])
        out.append(point | {"latency_ns": lat[lat >= 0]})
    return out


def samples_by_size(points: Sequence[dict[str, Any]], latency_of: Callable[[dict], np.ndarray | None] | None = None
                    ) -> dict[int, dict[str, list]]:
    """Per buffer size: throughput of each point that ended by rule, and per-write latency
    arrays of every point (also cut ones: each write's latency is a real measurement)."""
    out: dict[int, dict[str, list]] = {}
    for p in points:
        entry = out.setdefault(p["buffer_bytes"], {"throughput_bps": [], "latency_ns": []})
        if p.get("ended") and p.get("bytes_per_s"):
            entry["throughput_bps"].append(p["bytes_per_s"])
        lat = p.get("latency_ns") if latency_of is None else latency_of(p)
        if lat is not None and len(lat):
            entry["latency_ns"].append(np.asarray(lat, dtype=np.int64))
    return dict(sorted(out.items()))
