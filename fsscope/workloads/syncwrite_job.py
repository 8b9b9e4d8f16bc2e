"""The ``syncwrite`` job: the synchronous-write buffer sweep on one fresh file system.

``repeats`` repetitions (30, as in the paper) of every buffer size in a seeded random order,
each point a new file (see :mod:`fsscope.workloads.syncwrite`). A point ends after
``file_size_bytes`` or, when ``duration_s`` is set, after that many seconds.

Arrays, written as measured (memory-mapped: a killed job keeps every write it measured):
``latency_ns.npy`` (int64, every write's latency, -1 = not measured, laid out by
:func:`fsscope.workloads.syncwrite.plan`) and ``points.npy`` (float64 rows, columns
:data:`~fsscope.workloads.syncwrite.POINT_COLUMNS`, NaN until the point ends).
With ``trace`` (root + tracefs): also ``start_ns.npy`` (each write's start, CLOCK_MONOTONIC)
and, per write, what reached the device inside it -- ``write_io.npy`` (int64 rows, columns
:data:`WRITE_IO_COLUMNS`: block requests, bytes, FLUSH and FUA requests, journal commits) --
summed per point (``raw_points[i]["kernel"]``) and per buffer size (``kernel_by_size``).
Events: :class:`PointSample` (``samples`` with ``{"point": Point}``) per finished point,
``progress`` in points. The :class:`Report` (:func:`report_from_arrays`, also for a killed
run's arrays): per buffer size the
throughput and latency statistics, both knees with a confidence statement, the phases, the
best-ratio recommendation; a full file system stops the sweep with an ``enospc`` flag.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from fsscope.analysis import efficiency
from fsscope.errors import FsscopeError
from fsscope.records import convert, plain, typed
from fsscope.store import RunDir
from fsscope.trace.attribute import per_call_io
from fsscope.trace.jobs import JobTrace
from fsscope.workloads import syncwrite as sw
from fsscope.workloads.bench_job import block_disks
from fsscope.workloads.syncwrite_records import DATA, Point, PointSample, Report, Spec, size_list

__all__ = ["DATA", "Report", "Spec", "partial_report", "report_from_arrays", "run", "size_list"]

POINT_COLUMNS = sw.POINT_COLUMNS
WRITE_IO_COLUMNS = ("requests", "bytes", "flush", "fua", "commits")


def report_from_arrays(points: np.ndarray, latency: np.ndarray, *, resamples: int = efficiency.BOOTSTRAP,
                       seed: int = 1) -> dict[str, Any]:
    """Everything the report computes, from the two arrays alone (so a killed run's arrays
    give the same tables): per-size statistics, knees, phases, recommendation."""
    measured = sw.measured_points(points, latency)
    by_size = sw.samples_by_size(measured)
    stats = [efficiency.size_stats(size, s["throughput_bps"], s["latency_ns"]) for size, s in by_size.items()]
    analysis = efficiency.analyze(stats, resamples=resamples, seed=seed)
    raw = [{k: v for k, v in p.items() if k != "latency_ns"} for p in measured]
    return {
        "throughput_unit": "bytes/s",
        "sizes": [s.to_dict() for s in stats],
        "knees": efficiency.knees_dict(analysis),
        "phases": {k: v for k, v in analysis.phases.items()},
        "recommended_bytes": analysis.size_at(analysis.best_ratio),
        "recommendation": efficiency.recommendation(analysis),
        "best_ratio_buffer_bytes": analysis.size_at(analysis.best_ratio),
        "raw_points": raw,
        "point_columns": list(POINT_COLUMNS),
        "writes_measured": int((np.asarray(latency) >= 0).sum()),
    }


def run(ctx: Any, spec: Spec) -> Report:
    sweep_spec = spec.sweep_spec()
    latency, points = sw.new_arrays(sweep_spec, lambda name, shape, dtype, fill:
                                    ctx.run_dir.open_array(name, shape, dtype=dtype, fill=fill))
    total = points.shape[0]
    done = [0]
    trace = JobTrace(ctx, spec.trace, "syncwrite", pid=os.getpid())
    start_ns = (ctx.run_dir.open_array("start_ns", latency.shape, dtype=np.int64, fill=-1)
                if trace.active else None)

    def on_point(row: int, lat: np.ndarray) -> None:
        done[0] += 1
        point = typed(sw.point_dict(points, row, lat), Point)
        ctx.emit(PointSample(point=point))
        rate = point.bytes_per_s or 0.0
        ctx.progress(done[0], total, unit="points",
                     info=f"rep {point.repeat + 1}, {point.buffer_bytes >> 10} KiB: {rate / 1e6:.1f} MB/s")

    fs_name: str | None = None
    disks: tuple[str, ...] = ()
    end = sw.SweepEnd(0, None)
    with ctx.fresh_fs() as fs:
        fs_name, disks = fs.fs, block_disks(fs)
        refused = sw.refused_mode(fs.workdir, spec.mode)
        if refused:
            raise FsscopeError(refused)
        ctx.after_populate()  # nothing to populate: sync + drop caches so the sweep starts clean
        ctx.phase(f"sync-write sweep ({spec.mode}), {len(spec.buffer_sizes_bytes)} sizes "
                  f"× {spec.repeats} repetitions")
        with trace.run(fs, 0):
            end = sw.sweep(fs.workdir, sweep_spec, latency, points, on_point=on_point,
                           cancelled=lambda: ctx.cancelled, point_limit_s=spec.duration_s, start_ns=start_ns)
    for array in (latency, points):
        if isinstance(array, np.memmap):
            array.flush()

    report = report_from_arrays(points, latency, seed=spec.seed)
    report["trace"] = trace.summary()
    if trace.results and start_ns is not None:
        result = trace.results[0][1]
        ctx.run_dir.save_array("trace_events", result.events)
        io = write_io(result.events, result.names, start_ns, latency)
        ctx.run_dir.save_array("write_io", io)
        add_kernel(report, points, io)
    notes, flags = [file_setup(spec.preallocate)["note"]], []
    if spec.duration_s is not None:
        cut = [p for p in report["raw_points"] if p["ended"] and (p["bytes_written"] or 0) < spec.file_size_bytes]
        if cut:
            notes.append(f"{len(cut)} of {len(report['raw_points'])} points stopped at the {spec.duration_s:g} s "
                         "limit before writing the whole file")
    if end.stop == "enospc":
        flags.append({"kind": "enospc", "title": "file system full: sweep stopped", "note": end.note})
    if ctx.cancelled:
        notes.append(f"cancelled after {end.points_done} of {total} points")
    if not disks:
        notes.append("no block device under this file system (tmpfs?): synchronous writes cost nothing here")
    recipe = ctx.recipe
    report.update({
        "run_id": ctx.run_dir.id,
        "mode": spec.mode,
        "recipe": recipe.name if recipe is not None else None,
        "fs": fs_name,
        "target": plain(ctx.target.spec) | {"describe": ctx.target.spec.describe()},
        "spec": plain(spec),
        "file_setup": file_setup(spec.preallocate),
        "points_completed": end.points_done,
        "points_requested": total,
        "cancelled": bool(ctx.cancelled),
        "stopped": end.stop,
        "flags": flags,
        "notes": notes,
    })
    return typed(plain(report), Report, "syncwrite report")


def file_setup(preallocate: bool) -> dict[str, Any]:
    """How each point's file was made, said in the report: the paper's iozone wrote a fresh,
    unallocated file; fsscope preallocates by default, as fio does."""
    if preallocate:
        note = ("each point's file was preallocated (fallocate, untimed), as fio does by default; the paper's "
                "iozone wrote a fresh, unallocated file, so its writes also allocated blocks (~10 µs more per "
                "4 KiB O_SYNC write on ext4): --no-preallocate sweeps the paper's way")
    else:
        note = ("each point wrote a fresh, unallocated file, as the paper's iozone did: block allocation is "
                "part of every write's latency")
    return {"preallocate": bool(preallocate), "as_paper": not preallocate, "note": note}


def write_io(events: np.ndarray, names: list[str], start_ns: np.ndarray, latency: np.ndarray) -> np.ndarray:
    """Per write (rows laid out as ``latency``), columns :data:`WRITE_IO_COLUMNS`: what
    reached the device while that write ran."""
    io = per_call_io(events, names, np.asarray(start_ns), np.asarray(latency))
    return np.stack([io[c] for c in WRITE_IO_COLUMNS], axis=1)


def _io_summary(rows: np.ndarray, writes: int) -> dict[str, Any]:
    totals = {c: int(rows[:, k].sum()) for k, c in enumerate(WRITE_IO_COLUMNS)}
    return totals | {"writes": writes} | {f"{c}_per_write": (totals[c] / writes if writes else None)
                                          for c in WRITE_IO_COLUMNS}


def add_kernel(report: dict[str, Any], points: np.ndarray, io: np.ndarray) -> None:
    """Per point (``raw_points[i]["kernel"]``) and per buffer size (``kernel_by_size``): the
    block requests, bytes, FLUSH/FUA requests and journal commits inside its measured writes;
    ``device_bytes_per_byte`` is what reached the device per byte the application wrote."""
    col = sw.COL
    by_size: dict[int, list[np.ndarray]] = {}
    rows_of_point: dict[tuple[int, int], np.ndarray] = {}
    for row in range(points.shape[0]):
        r = points[row]
        written = r[col["writes"]]
        if not np.isfinite(written) or written < 1:
            continue
        off = int(r[col["offset"]])
        rows = io[off:off + int(written)]
        rows_of_point[(int(r[col["repeat"]]), int(r[col["buffer_bytes"]]))] = rows
        by_size.setdefault(int(r[col["buffer_bytes"]]), []).append(rows)
    for point in report["raw_points"]:
        kept = rows_of_point.get((point["repeat"], point["buffer_bytes"]))
        if kept is not None:
            point["kernel"] = _io_summary(kept, len(kept))
    out = []
    for size, parts in sorted(by_size.items()):
        rows = np.concatenate(parts)
        entry = {"buffer_bytes": size} | _io_summary(rows, len(rows))
        entry["device_bytes_per_byte"] = entry["bytes"] / (size * len(rows)) if len(rows) else None
        out.append(entry)
    report["kernel_by_size"] = out


def partial_report(run_dir: RunDir) -> Report | None:
    """The report of a run that did not finish (killed), from the arrays it kept."""
    names = run_dir.arrays()
    if "points" not in names or "latency_ns" not in names:
        return None
    spec = convert(run_dir.manifest().get("spec") or {}, Spec)
    report = report_from_arrays(run_dir.load_array("points", mmap=False), run_dir.load_array("latency_ns", mmap=False),
                                seed=spec.seed)
    setup = file_setup(spec.preallocate)
    report.update({"run_id": run_dir.id, "mode": spec.mode, "spec": spec, "partial": True,
                   "points_completed": sum(1 for p in report["raw_points"] if p["ended"]),
                   "points_requested": int(run_dir.load_array("points").shape[0]),
                   "file_setup": setup,
                   "notes": [f"the job did not finish: {report['writes_measured']} writes measured before it "
                             "stopped, rebuilt from its arrays", setup["note"]]})
    return typed(plain(report), Report, "syncwrite report")
