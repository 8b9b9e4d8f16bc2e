"""The ``syncwrite`` job: the synchronous-write buffer sweep on one fresh file system.

For each buffer size (interleaved per repeat, see :func:`fsscope.workloads.syncwrite.sweep`)
a new file is written with synchronous writes; a point ends after ``file_size_bytes`` or,
when ``duration_s`` is set, after that many seconds, whichever comes first (so 4 KiB
O_SYNC writes on a slow disk do not take minutes per point).

Events: ``samples`` with ``{"point": SyncWritePoint.to_dict()}`` per finished point,
``progress`` in points. Arrays: ``latency_ns.npy`` (every write's latency, points
concatenated in order) and ``points.npy`` (float64 rows: buffer_bytes, repeat, writes,
bytes_written, elapsed_s), so every number in the report can be recomputed.
Report: :func:`fsscope.workloads.syncwrite.summarize` (per buffer size: throughput,
latency, throughput/latency ratio and the best-ratio size) plus the raw points.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fsscope.engine.specs import checked_fields
from fsscope.errors import FsscopeError
from fsscope.workloads.bench_job import block_disks
from fsscope.workloads.syncwrite import SyncWritePoint, SyncWriteSpec, summarize, sweep

_DEFAULTS = SyncWriteSpec()
POINT_COLUMNS = ("buffer_bytes", "repeat", "writes", "bytes_written", "elapsed_s")


@dataclass(frozen=True)
class Spec:
    buffer_sizes_bytes: tuple[int, ...] = _DEFAULTS.buffer_sizes_bytes
    file_size_bytes: int = _DEFAULTS.file_size_bytes
    mode: Literal["osync", "odsync", "fsync", "fdatasync"] = _DEFAULTS.mode
    repeats: int = _DEFAULTS.repeats
    min_writes: int = _DEFAULTS.min_writes
    duration_s: float | None = None        # per point; None: bounded by file_size_bytes only

    def __post_init__(self) -> None:
        object.__setattr__(self, "buffer_sizes_bytes", tuple(int(s) for s in self.buffer_sizes_bytes))
        if self.duration_s is not None and not self.duration_s > 0:
            raise FsscopeError(f"syncwrite: duration_s must be positive, got {self.duration_s!r}")
        self.sweep_spec()  # the workload's own checks (mode, sizes, counts)

    def sweep_spec(self) -> SyncWriteSpec:
        return SyncWriteSpec(buffer_sizes_bytes=self.buffer_sizes_bytes, file_size_bytes=self.file_size_bytes,
                             mode=self.mode, repeats=self.repeats, min_writes=self.min_writes)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["buffer_sizes_bytes"] = list(self.buffer_sizes_bytes)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Spec:
        data = checked_fields(cls, data, "syncwrite")
        if "buffer_sizes_bytes" in data:
            data["buffer_sizes_bytes"] = size_list(data["buffer_sizes_bytes"])
        return cls(**data)


def size_list(value: Any) -> tuple[int, ...]:
    """Buffer sizes from JSON (list or number) or text such as "4K,64K,1M" or "(4096, 8192)"."""
    from fsscope.workloads.cgroup import parse_size_bytes

    if isinstance(value, str):
        parts = [p for p in value.strip().strip("()[]").replace(",", " ").split() if p]
        try:
            return tuple(parse_size_bytes(p) for p in parts)
        except FsscopeError:
            raise FsscopeError(f"syncwrite: buffer sizes must be sizes such as 4K,64K,1M, not {value!r}") from None
    if isinstance(value, int):
        return (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) for v in value):
        raise FsscopeError(f"syncwrite: buffer_sizes_bytes must be a list of byte counts, not {value!r}")
    return tuple(value)


def run(ctx, spec: Spec) -> dict:
    sweep_spec = spec.sweep_spec()
    total = sweep_spec.repeats * len(sweep_spec.buffer_sizes_bytes)
    points: list[SyncWritePoint] = []
    deadline = [float("inf")]

    def restart_clock() -> None:
        if spec.duration_s is not None:
            deadline[0] = time.monotonic() + spec.duration_s

    def stop() -> bool:
        # sweep() asks between points (only a real cancel ends the sweep: the clock was just
        # restarted) and write_file_sync every 16 writes (the per-point time limit).
        return ctx.cancelled or time.monotonic() > deadline[0]

    def on_point(point: SyncWritePoint) -> None:
        points.append(point)
        ctx.emit("samples", point=point.to_dict())
        ctx.progress(len(points), total, unit="points",
                     info=f"{point.buffer_bytes >> 10} KiB: {point.bytes_per_s / 1e6:.1f} MB/s")
        restart_clock()

    fs_name, disks = None, ()
    with ctx.fresh_fs() as fs:
        fs_name, disks = fs.fs, block_disks(fs)
        ctx.after_populate()  # nothing to populate: sync + drop caches so the sweep starts clean
        ctx.emit("phase", name=f"sync-write sweep ({spec.mode}), {len(spec.buffer_sizes_bytes)} sizes "
                 f"× {spec.repeats}")
        restart_clock()
        sweep(fs.workdir, sweep_spec, on_point=on_point, cancelled=stop)

    if points:
        ctx.run_dir.save_array("latency_ns", np.concatenate([p.latency_ns for p in points]).astype(np.int64))
    else:
        ctx.run_dir.save_array("latency_ns", np.zeros(0, dtype=np.int64))
    ctx.run_dir.save_array("points", np.array(
        [[p.buffer_bytes, p.repeat, p.writes, p.bytes_written, p.elapsed_s] for p in points],
        dtype=np.float64).reshape(-1, len(POINT_COLUMNS)))
    report: dict[str, Any] = summarize(points).to_dict() if points else {"points": [], "best_ratio_buffer_bytes": None}
    notes = []
    if spec.duration_s is not None:
        cut = [p for p in points if p.bytes_written < spec.file_size_bytes]
        if cut:
            notes.append(f"{len(cut)} of {len(points)} points stopped at the {spec.duration_s:g} s limit "
                         "before writing the whole file")
    if ctx.cancelled:
        notes.append(f"cancelled after {len(points)} of {total} points")
    if not disks:
        notes.append("no block device under this file system (tmpfs?): synchronous writes cost nothing here")
    recipe = ctx.recipe
    report.update({
        "run_id": ctx.run_dir.id,
        "mode": spec.mode,
        "recipe": recipe.name if recipe is not None else None,
        "fs": fs_name,
        "target": ctx.target.spec.to_dict() | {"describe": ctx.target.spec.describe()},
        "spec": spec.to_dict(),
        "points_completed": len(points),
        "points_requested": total,
        "cancelled": bool(ctx.cancelled),
        "raw_points": [p.to_dict() for p in points],
        "point_columns": list(POINT_COLUMNS),
        "notes": notes,
    })
    return _finite(report)


def _finite(value):
    """NaN/inf (a size with no measured writes) become null in JSON."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value
