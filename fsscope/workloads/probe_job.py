"""The ``probe`` job: the latency probe as the engine runs it.

Per run: a fresh file system (or a fresh directory), an empty probe directory ``probe.d``
made outside the timed region, then :func:`fsscope.workloads.probe.measure_run` writing
straight into row ``run`` of the memory-mapped ``latency_ns.npy`` (runs × files), so a killed
job keeps every measured value. The geometry is read from the first fresh file system with
the probe directory in place; after each run the matrix so far is analysed and new findings
are streamed with their explanations; the final report holds stats, outliers, series, level
shifts and the explained thresholds.
"""

from __future__ import annotations

import os
from pathlib import Path

from fsscope.analysis.findings import Outlier
from fsscope.analysis.outliers import analyze
from fsscope.engine.events import Finding, Samples
from fsscope.errors import FsscopeError
from fsscope.explain.names import plain as plain_words
from fsscope.jsonsafe import plain
from fsscope.workloads.probe import ProbeRunError, ProbeSpec, measure_run, pin_cpu

Spec = ProbeSpec
PROBE_DIR = "probe.d"


def _explainer(ctx, fs, probe_dir: Path, spec: ProbeSpec):
    """Predictions for this geometry, or None with a logged reason (never a crash)."""
    try:
        from fsscope.explain.geometry import read_geometry
        from fsscope.explain.rules import predict
    except ImportError:
        return None, []
    try:
        geometry = read_geometry(fs.fs, fs.device, fs.mountpoint, probe_dir=probe_dir)
    except FsscopeError as exc:
        ctx.emit("log", line=f"geometry not read: {exc}")
        return None, []
    return geometry, predict(geometry, spec.op, spec.name_length, spec.files)


def _explain(findings: list, predictions: list) -> list[dict]:
    try:
        from fsscope.explain.match import explain
    except ImportError:
        return [{"index": getattr(f, "index", getattr(f, "start", None)), "predicted_index": None,
                 "structure": None, "note": "repeatable, unexplained", "flag": type(f).__name__.lower()}
                for f in findings]
    return [e.to_json() | {"flag": type(e.finding).__name__.lower()} for e in explain(findings, predictions)]


def _flag_title(flag: dict, finding) -> str:
    if isinstance(finding, Outlier):
        what = f"file {finding.index} slow in {finding.runs_flagged}/{finding.runs} runs ({finding.ratio:.1f}× typical)"
    elif hasattr(finding, "stride"):
        what = f"every {finding.stride} files from {finding.start} ({finding.count}×)"
    elif hasattr(finding, "before_ns"):
        what = f"level shift at file {finding.index}: {finding.before_ns / 1e3:.1f} → {finding.after_ns / 1e3:.1f} µs"
    else:
        what = f"linear growth over files {finding.start}–{finding.end}"
    structure = flag.get("structure")
    return f"{what} — {plain_words(structure)}" if structure else f"{what} — repeatable, unexplained"


def _findings(analysis) -> list:
    return [*analysis.outliers, *analysis.series, *analysis.level_shifts, *analysis.linear_growth]


def _key(finding) -> tuple:
    return (type(finding).__name__, getattr(finding, "index", None), getattr(finding, "start", None),
            getattr(finding, "stride", None))


def run(ctx, spec: ProbeSpec) -> dict:
    previous_cpus = pin_cpu(spec.cpu)
    latency_ns = ctx.run_dir.open_array("latency_ns", (spec.runs, spec.files))
    geometry, predictions, emitted = None, [], {}
    error = None
    try:
        for r in range(spec.runs):
            if ctx.cancelled:
                break
            ctx.emit("phase", name=f"run {r + 1} of {spec.runs}", run=r, runs=spec.runs)
            with ctx.run_fs(spec.fresh_fs) as fs:
                probe_dir = fs.workdir / (PROBE_DIR if spec.fresh_fs else f"{PROBE_DIR}.{r}")
                probe_dir.mkdir()
                os.sync()
                if r == 0:
                    geometry, predictions = _explainer(ctx, fs, probe_dir, spec)
                    if geometry is not None:
                        ctx.emit("geometry", geometry=_geometry_json(geometry),
                                 predictions=plain(predictions))
                _measure(ctx, spec, r, probe_dir, latency_ns[r])
            latency_ns.flush()  # a shared mapping survives a kill anyway; this survives power loss
            if r == 0 and spec.runs > 1:
                continue  # one run cannot tell structure from noise: flag from the second on
            _emit_new_findings(ctx, analyze(latency_ns[: r + 1]), predictions, emitted)
    except ProbeRunError as exc:  # ENOSPC & co: keep what was measured, say what stopped it
        error = str(exc)
        ctx.emit("error", message=error)
    finally:
        latency_ns.flush()
        os.sched_setaffinity(0, previous_cpus)
    done_rows = [r for r in range(spec.runs) if (latency_ns[r] >= 0).any()]
    report = {"op": spec.op, "files": spec.files, "runs": spec.runs, "runs_completed": len(done_rows),
              "spec": spec.to_dict(), "stopped_by": error}
    if done_rows:
        analysis = analyze(latency_ns[done_rows])
        report |= analysis.to_json()
        flags = _explain(_findings(analysis), predictions)
        report["thresholds"] = [f for f in flags if f.get("structure")]
        report["flags"] = [f | {"title": _flag_title(f, finding)} for f, finding in zip(flags, _findings(analysis))]
    report["geometry"] = _geometry_json(geometry) if geometry else None
    report["predictions"] = plain(predictions)
    return report


def _measure(ctx, spec: ProbeSpec, r: int, probe_dir: Path, row) -> None:
    """One run into ``row`` (a row of the memory-mapped matrix), streaming batches live."""
    total = spec.runs * spec.files

    def on_batch(start: int, batch) -> None:
        ctx.emit(Samples(run=r, start=start, latency_ns=batch.tolist()))
        ctx.progress(r * spec.files + start + len(batch), total, info=f"run {r + 1}/{spec.runs}")

    ctx.emit("phase", name=f"run {r + 1} of {spec.runs}: {spec.op} × {spec.files}", run=r)
    measure_run(probe_dir, spec, on_batch=on_batch, cancelled=lambda: ctx.cancelled, out=row)


def _emit_new_findings(ctx, analysis, predictions: list, emitted: dict) -> None:
    """Stream each finding as soon as the runs so far show it, with its explanation, and again
    whenever its title changes with more runs ('slow in 2/2 runs' → '5/5'): consumers replace
    a finding with the same key. ``emitted``: finding key → the title last sent."""
    findings = _findings(analysis)
    for finding, flag in zip(findings, _explain(findings, predictions)):
        title = _flag_title(flag, finding)
        if emitted.get(_key(finding)) != title:
            emitted[_key(finding)] = title
            fields = {**{k: v for k, v in vars(finding).items() if k not in flag}, **flag}
            kind, note = fields.pop("flag"), fields.pop("note", "")
            ctx.emit(Finding(flag=kind, title=title, note=note, fields=fields))


def _geometry_json(geometry) -> dict:
    return {k: v for k, v in geometry.to_dict().items() if k != "raw"}

