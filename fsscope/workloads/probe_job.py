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

import errno
import os
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.analysis import sequential
from fsscope.analysis.findings import Outlier
from fsscope.engine.events import Finding, finding_from_dict
from fsscope.errors import FsscopeError
from fsscope.explain.geometry import read_geometry
from fsscope.explain.match import explain
from fsscope.explain.names import plain as plain_words
from fsscope.explain.rules import limits, predict
from fsscope.records import plain, typed
from fsscope.trace.jobs import ProbeTrace
from fsscope.workloads.probe import ProbeRunError, ProbeSpec, measure_run, pin_cpu, sync_once
from fsscope.workloads.probe_loops import native_call
from fsscope.workloads.probe_records import GeometryData, KernelData, Report, Samples
from fsscope.workloads.probe_writers import Writers

Spec = ProbeSpec
DATA = (Samples, GeometryData, KernelData)
PROBE_DIR = "probe.d"


def _explainer(ctx, fs, probe_dir: Path, spec: ProbeSpec):
    """Predictions for this geometry, or None with a logged reason (never a crash)."""
    try:
        geometry = read_geometry(fs.fs, fs.device, fs.mountpoint, probe_dir=probe_dir,
                                 existing=fs.found is not None)
    except FsscopeError as exc:
        ctx.log(f"geometry not read: {exc}")
        return None, []
    for gap in geometry.unread:
        ctx.log(f"geometry: not read: {gap}")
    return geometry, predict(geometry, spec.op, spec.name_length, spec.files)


def _explain(findings: list, predictions: list) -> list[dict]:
    return [e.to_json() | {"flag": type(e.finding).__name__.lower()} for e in explain(findings, predictions)]


def _flag_title(flag: dict, finding) -> str:
    if isinstance(finding, Outlier):
        what = f"file {finding.index} slow in {finding.runs_flagged}/{finding.runs} runs ({finding.ratio:.1f}× typical)"
    elif hasattr(finding, "stride"):
        slow = len(finding.members) or finding.count - finding.missing
        what = f"every {finding.stride} files from {finding.start} ({slow} of {finding.count} slow)"
    elif hasattr(finding, "before_ns"):
        what = f"level shift at file {finding.index}: {finding.before_ns / 1e3:.1f} → {finding.after_ns / 1e3:.1f} µs"
    elif finding.slope_ns_per_file < 0:  # latency easing off file by file
        what = f"linear decrease over files {finding.start}–{finding.end}"
    else:
        what = f"linear growth over files {finding.start}–{finding.end}"
    structure = flag.get("structure")
    return f"{what} — {plain_words(structure)}" if structure else f"{what} — repeatable, unexplained"


def _findings(analysis) -> list:
    return [*analysis.outliers, *analysis.series, *analysis.level_shifts, *analysis.linear_growth]


def _key(finding) -> tuple:
    return (type(finding).__name__, getattr(finding, "index", None), getattr(finding, "start", None),
            getattr(finding, "stride", None))


def record_bytes(spec: ProbeSpec) -> int:
    """What the run record's arrays take (checked against free space before the run): latency,
    start and CPU wait per call, for as many runs as the probe may make."""
    return 3 * spec.run_cap * spec.files * 8


def probe_dir_of(ctx, fs, spec: ProbeSpec, name: str) -> Path:
    """Where a run's files go, made if needed: the root of the file system the run made
    (``in_root``) or a fresh subdirectory ``name`` (made outside the timed region)."""
    if spec.in_root:
        if ctx.target.spec.kind == "dir":  # defence: the CLI refuses this before starting
            raise FsscopeError("--in-root needs a file system fsscope makes (--ram, --image, "
                               "--device): a --dir target's root is not fsscope's to fill")
        return Path(fs.mountpoint)
    probe_dir = fs.workdir / name
    probe_dir.mkdir()
    return probe_dir


@dataclass
class _Explained:
    """What the first run's file system predicts (its geometry, the rules' predictions)."""

    geometry: Any = None
    predictions: list = field(default_factory=list)


def run(ctx, spec: ProbeSpec) -> Report:
    if spec.in_root and ctx.target.spec.kind == "dir":
        raise FsscopeError("--in-root needs a file system fsscope makes (--ram, --image, "
                           "--device): a --dir target's root is not fsscope's to fill")
    previous_cpus = pin_cpu(spec.cpu)
    cap = spec.run_cap
    latency_ns = ctx.run_dir.open_array("latency_ns", (cap, spec.files))
    start_ns = ctx.run_dir.open_array("start_ns", (cap, spec.files))
    wait_ns = ctx.run_dir.open_array("wait_ns", (cap, spec.files))
    trace = ProbeTrace(ctx, spec.trace, spec.op)
    explained, emitted, writers = _Explained(), dict[tuple, tuple[str, str]](), Writers(trace=spec.trace != "off")
    error, stop_flag, r = None, None, 0
    settling = sequential.Settling(spec.runs, cap)
    try:
        for r in range(cap):
            if ctx.cancelled or settling.done:
                break
            _one_run(ctx, spec, r, trace, settling, explained, emitted, latency_ns, start_ns, wait_ns, writers)
        used = sum(1 for k in range(cap) if (latency_ns[k] >= 0).any())
        if spec.trace == "attribute" and trace.active and not ctx.cancelled:
            _attribution_run(ctx, spec, trace, used)
    except ProbeRunError as exc:  # ENOSPC & co: a normal stop, explained; what was measured is kept
        error = str(exc)
        stop_flag = _stop_flag(exc, r)
        ctx.emit(finding_from_dict(stop_flag))
    finally:
        latency_ns.flush()
        os.sched_setaffinity(0, previous_cpus)
    used = sum(1 for k in range(cap) if (latency_ns[k] >= 0).any())
    for name, array in (("latency_ns", latency_ns), ("start_ns", start_ns), ("wait_ns", wait_ns)):
        if used < cap:  # the record holds the runs made, not the cap
            ctx.run_dir.save_array(name, np.array(array[:used]))
    done_rows = [k for k in range(used) if (latency_ns[k] >= 0).any()]
    call, why = native_call()
    report = {"op": spec.op, "files": spec.files, "runs": spec.runs, "runs_completed": len(done_rows),
              "spec": plain(spec), "stopped_by": error, "sync": _sync_json(spec),
              "where": "root directory" if spec.in_root else "fresh subdirectory",
              "timed_in": "native" if call is not None else f"python ({why})"}  # see probe_calls.c
    findings: list = []
    if done_rows:
        analysis = settling.settled(settling.final_analysis(latency_ns, wait_ns, done_rows))
        report |= analysis.to_json()
        findings = _findings(analysis)
        flags = _explain(findings, explained.predictions)
        report["thresholds"] = [f for f in flags if f.get("structure")]
        report["flags"] = [f | {"title": _flag_title(f, finding)} for f, finding in zip(flags, findings)]
        report["decisions"] = settling.to_json(ctx.cancelled or error is not None)
    if stop_flag is not None:  # last, so the analysis flags stay aligned with their lists
        report["flags"] = [*report.get("flags", []), stop_flag]
    if (writer_flag := writers.flag()) is not None:
        report["flags"] = [*report.get("flags", []), writer_flag]
    report["writers"] = writers.to_json()
    report["writers_watched"] = writers.how()
    report["geometry"] = _geometry_json(explained.geometry) if explained.geometry else None
    report["predictions"] = plain(explained.predictions)
    report["not_predicted"] = limits(explained.geometry, spec.op) if explained.geometry else []
    trace.attribute(report, findings, report.get("flags", []))
    _kernel_on_decisions(report)
    if trace.results:
        _kernel_report(ctx, spec, trace, report, latency_ns, done_rows, used)
    return typed(report, Report, "probe report")  # built as the analysis and the tracer give it, typed once


def _one_run(ctx, spec: ProbeSpec, r: int, trace, settling, explained: _Explained, emitted: dict,
             latency_ns, start_ns, wait_ns, writers: Writers) -> None:
    """Measured run ``r`` on its file system (the first also reads the geometry and predicts),
    watching who else moves bytes on its device meanwhile, then the sequential decisions on the
    runs so far."""
    ctx.phase(f"run {r + 1} of {runs_words(spec)}" + (" (deciding)" if r >= spec.runs else ""), run=r,
              runs=max(spec.runs, r + 1))
    with ctx.run_fs(spec.fresh_fs) as fs:
        probe_dir = probe_dir_of(ctx, fs, spec, PROBE_DIR if spec.fresh_fs else f"{PROBE_DIR}.{r}")
        _sync_dir(spec, probe_dir)
        if r == 0:
            explained.geometry, explained.predictions = _explainer(ctx, fs, probe_dir, spec)
            settling.predict(explained.predictions, spec.files)
            if explained.geometry is not None:
                ctx.emit(typed({"geometry": _geometry_json(explained.geometry),
                                  "predictions": plain(explained.predictions)}, GeometryData))
        with trace.run_calls(fs, r, latency_ns[r], start_ns[r]) if spec.trace == "all" else nullcontext(), \
                writers.watch(ctx, fs, r):
            _measure(ctx, spec, r, probe_dir, latency_ns[r], start_ns[r], wait_ns[r])
    if (blocked := trace.waited_on_others_ns(r)) is not None:  # --trace all: the kernel saw it
        wait_ns[r] += blocked  # blocked on another process: a disturbance like a CPU wait
    latency_ns.flush()  # a shared mapping survives a kill anyway; this survives power loss
    if r == 0 and spec.runs > 1:
        return  # one run cannot tell structure from noise: flag from the second on
    # the live analysis is provisional (its outliers feed the sequential test); the report's is
    # held to the permuted null worlds (Settling.final_analysis): 19 more series searches a run
    # would double the analysis at a million files. Incremental: runs 0..r-1 are folded in already
    analysis = settling.analyze(latency_ns[: r + 1], wait_ns[: r + 1])
    settling.after_run(r, analysis, latency_ns[: r + 1], wait_ns[: r + 1])
    _emit_new_findings(ctx, settling.settled(analysis), explained.predictions, emitted, _provisional(settling, r + 1 >= settling.cap))


def _kernel_report(ctx, spec: ProbeSpec, trace, report: dict, latency_ns, done_rows: list[int],
                   used: int) -> None:
    """The thresholds (explained flags and kernel-marked predictions, with evidence), the traced
    run's own observer effect, and the kernel's view for the live screen."""
    report["thresholds"] = trace.thresholds(report["flags"], report["structures"],
                                            latency_ns[done_rows] if done_rows else np.empty((0, spec.files)))
    if spec.trace == "attribute" and done_rows:  # the traced run's own observer effect
        traced = np.asarray(trace.rows[used][0])
        measured = latency_ns[done_rows]
        if (traced >= 0).any() and (measured >= 0).any():
            report["trace"]["median_ratio_vs_untraced"] = round(
                float(np.median(traced[traced >= 0]) / np.median(measured[measured >= 0])), 3)
    kernel = {"flags": [{"index": f.get("index"), "flag": f.get("flag"), "kernel": f.get("kernel"),
                         "note": f.get("note")} for f in report.get("flags", [])],
              "structures": report["structures"], "noise": report["noise"]}
    ctx.emit(typed(kernel, KernelData))


def _attribution_run(ctx, spec: ProbeSpec, trace, run: int) -> None:
    """One extra run (number ``run``, after the measured ones), traced, on a fresh file system
    like the measured ones: the kernel's account of every call without touching the measured
    runs' latencies."""
    latency_row = ctx.run_dir.open_array("trace_latency_ns", (1, spec.files))
    start_row = ctx.run_dir.open_array("trace_start_ns", (1, spec.files))
    ctx.phase("traced run (kernel attribution)", run=run)
    with ctx.run_fs(spec.fresh_fs) as fs:
        probe_dir = probe_dir_of(ctx, fs, spec, PROBE_DIR if spec.fresh_fs else f"{PROBE_DIR}.traced")
        _sync_dir(spec, probe_dir)
        with trace.run_calls(fs, run, latency_row[0], start_row[0]):
            measure_run(probe_dir, spec, cancelled=lambda: ctx.cancelled, out=latency_row[0],
                        start_out=start_row[0])
    latency_row.flush()
    start_row.flush()


def _stop_flag(exc: ProbeRunError, run: int) -> dict:
    """The flag for a run that a failing syscall ended: where, why, and what to change."""
    if exc.errno == errno.ENOSPC:
        why = ("The file system ran out of space or of inodes (ext4 fixes its inode count at mkfs: "
               "give more with --mkfs-opts \"-N COUNT\" or \"-i BYTES-PER-INODE\", or fewer --files).")
    else:
        why = "The syscall failed, so the probe could not go on with this file set."
    return {"flag": "stopped", "title": f"run {run + 1} stopped at file {exc.index}: {exc.strerror}",
            "index": exc.index, "run": run, "errno": exc.errno, "structure": None,
            "note": f"{exc}. {why} Later runs were not made; the report covers the files measured."}


def runs_words(spec: ProbeSpec) -> str:
    """The runs a probe makes, as its row says them: "5", or "5–15" when its sequential test
    may add runs until every candidate file is decided (run 8 of 5 read as a miscount)."""
    return f"{spec.runs}–{spec.run_cap}" if spec.run_cap > spec.runs else f"{spec.runs}"


def _measure(ctx, spec: ProbeSpec, r: int, probe_dir: Path, row, start_row, wait_row) -> None:
    """One run into ``row`` (a row of the memory-mapped matrix), streaming batches live."""
    runs = max(spec.runs, r + 1)
    total = runs * spec.files

    def on_batch(start: int, batch) -> None:
        ctx.emit(Samples(run=r, start=start, latency_ns=batch.tolist()))
        ctx.progress(r * spec.files + start + len(batch), total, info=f"run {r + 1}/{runs}")

    ctx.phase(f"run {r + 1} of {runs_words(spec)}: {spec.op} × {spec.files}", run=r)
    measure_run(probe_dir, spec, on_batch=on_batch, cancelled=lambda: ctx.cancelled, out=row,
                start_out=start_row, wait_out=wait_row)


def _kernel_on_decisions(report: dict) -> None:
    """The kernel's independent word on each decided candidate: the structure-changing events
    the traced run(s) saw inside that very call."""
    seen: dict[int, dict[str, int]] = {}
    for event in report.get("structural_events") or []:
        seen.setdefault(event["index"], {})[event["event"]] = event["runs"]
    decisions = report.get("decisions") or {}
    if not report.get("trace", {}).get("active"):
        return
    for candidate in decisions.get("candidates", []):
        candidate["kernel"] = seen.get(candidate["index"], {})
    backed = [c["index"] for c in decisions.get("candidates", []) if c["verdict"] != "slow" and c["kernel"]
              and any(not name.startswith("block_") for name in c["kernel"])]
    if backed:  # the kernel changed a structure there, the latency did not settle it
        decisions["why"] += (f"; the kernel changed a structure inside files {', '.join(map(str, backed[:8]))}, "
                             f"which the latency did not decide slow")


def _sync_dir(spec: ProbeSpec, directory: Path) -> None:
    """The probe's sync (its scope) once, e.g. after making the probe directory."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        sync_once(spec, fd)
    finally:
        os.close(fd)


def _sync_json(spec: ProbeSpec) -> dict:
    what = ("syncfs(2) of the measured file system" if spec.sync_scope == "fs"
            else "sync(2) of every file system on the machine (the papers' method)")
    return {"before_each_call": spec.sync_before == "each", "scope": spec.sync_scope,
            "note": f"before each call: {what}" if spec.sync_before == "each" else "no sync before the calls"}


#: why a streamed series, shift or ramp may not stand: the per-run analysis is not gated
NOT_GATED = "not yet tried against null worlds: the report's analysis holds it to permuted ones"


def _provisional(settling, last_run: bool) -> Callable[[Any], str]:
    """Per streamed finding, why it may not stand in the report (empty: it will, as it is).
    Series, shifts and ramps: the analysis after a run is not held to the null worlds (the
    report's is, and drops what a permuted world matches). An outlier: final once the
    sequential test decided it slow (the report keeps those), or after the last of a fixed
    number of runs (the report's outliers are that analysis'); else the runs to come decide it."""
    slow = {d.index for d in settling.decisions if d.verdict == "slow"}

    def why(finding) -> str:
        if not isinstance(finding, Outlier):
            return NOT_GATED
        if (finding.index in slow) if settling.sequential else last_run:
            return ""
        return ("not yet decided by the sequential test: the runs to come decide it" if settling.sequential
                else "from the runs so far: the analysis of every run decides it")
    return why


def _emit_new_findings(ctx, analysis, predictions: list, emitted: dict,
                       provisional: Callable[[Any], str] = lambda finding: "") -> None:
    """Stream each finding as soon as the runs so far show it, with its explanation, and again
    whenever its title (or why it is provisional) changes with more runs ('slow in 2/2 runs' →
    '5/5'): consumers replace a finding with the same key. ``emitted``: finding key → what was
    last sent."""
    findings = _findings(analysis)
    for finding, flag in zip(findings, _explain(findings, predictions)):
        title, unsure = _flag_title(flag, finding), provisional(finding)
        if emitted.get(_key(finding)) != (title, unsure):
            emitted[_key(finding)] = (title, unsure)
            fields = {**{k: v for k, v in asdict(finding).items() if k not in flag}, **flag}
            kind, note = fields.pop("flag"), fields.pop("note", "")
            ctx.emit(Finding(flag=kind, title=title, note=note, provisional=unsure, fields=fields))


def _geometry_json(geometry) -> dict:
    return {k: v for k, v in geometry.to_dict().items() if k != "raw"}

