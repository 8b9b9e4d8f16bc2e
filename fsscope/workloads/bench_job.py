"""The ``bench`` job: R runs of one throughput personality, and how much they vary.

Per run (Cao et al., FAST'17 method): a fresh file system (same seed every run, so each run
starts from an identically prepared file system), the personality's file set populated, the
recipe's hygiene (:meth:`JobContext.after_populate`: remount or sync, drop caches), then the
workers run for ``duration_s`` while a telemetry sampler records the device, CPU and memory
beside them. Live numbers stream as events:

- ``samples``   :class:`WindowSample` (``{"run": r, "window": LiveSample}``) once per 1-s bin
- ``telemetry`` :class:`TelemetrySample` about once a second (device/CPU/memory deltas)
- ``kernel``    :class:`KernelCounts` when a traced run ends (kernel events per window)
- ``progress``  seconds measured of ``runs * duration_s``
- ``finding``   a variation flag as soon as the runs so far show it (title, note, flag=kind)

A run whose workers were CPU-bound while the device was idle is flagged ``generator_bound``
("this run measured the generator, not the file system") when the generator's own code took
most of their CPU, ``cpu_bound`` when the kernel did (:mod:`fsscope.analysis.generator`), with
the numbers behind the verdict in the run's ``generator`` entry. Each run's ``placement`` says
where its dataset landed (block groups / AGs, FIEMAP), and the report's ``placement`` lines it
up with the runs' throughput (the paper's Fig. 4).

Each finished run's arrays go to the run directory as ``run{r}_{counts,io_bytes,
latency_sum_ns,latency_hist,window_hist,errors,telemetry}.npy`` (see
:meth:`fsscope.workloads.personalities.RunResult.to_arrays`) and ``elapsed_s.npy`` holds the
measured seconds of every saved run, so the report can be recomputed from the arrays alone.
While a run measures, its counts, io_bytes, latency_sum_ns and latency_hist are memory-mapped
files that every aggregated 1-s bin is added to, so a killed job keeps what it measured (bins
beyond the last one measured stay 0).

The modules beside it: ``bench_spec`` (the spec and the workload it scales), ``bench_records``
(the event kinds and the :class:`Report`), ``bench_telemetry`` (the sampler beside a run),
``bench_flags`` (the flags and their titles).

The report is :func:`fsscope.analysis.variation.report.variation_report` over the completed runs plus
what ran where (recipe, target, workload), per-run extras (populate, telemetry summary,
cgroup, notes) and the telemetry's availability notes. A cancel stops the current run at the
workers' next op; its arrays are saved but it is left out of the variation numbers.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from fsscope.analysis import generator
from fsscope.analysis.variation.report import variation_report
from fsscope.analysis.variation.stats import pearson
from fsscope.engine.events import Error
from fsscope.errors import FsscopeError, os_error_line
from fsscope.format import format_bytes
from fsscope.layout.placement import Placement, dataset_placement
from fsscope.records import plain, typed
from fsscope.telemetry.columns import TELEMETRY_COLUMNS, telemetry_matrix
from fsscope.telemetry.sampler import dirty_writeback_intervals
from fsscope.telemetry.taskstats import delayacct_note
from fsscope.trace.attribute import annotate_dips
from fsscope.trace.jobs import BenchTrace
from fsscope.workloads import personalities as P
from fsscope.workloads.bench_flags import emit_new_flags, flag_title, full_flag, nothing_flag
from fsscope.workloads.bench_records import (
    DATA,
    BenchRun,
    Dip,
    Duration,
    KernelCounts,
    KernelWindows,
    PartialRun,
    PlacementVsThroughput,
    Report,
    TelemetryInfo,
    WindowSample,
    Writer,
)
from fsscope.workloads.bench_spec import BIN_S, Spec, number_list, personality_spec
from fsscope.workloads.bench_telemetry import block_disks, measure, telemetry_summary
from fsscope.workloads.probe_writers import Writers

# the job's contract (registry: Spec, DATA, Report) and what other modules take from here
__all__ = ["BIN_S", "DATA", "Report", "Spec", "WindowSample", "block_disks", "flag_title", "number_list",
           "personality_spec", "run"]


def _capacity_bytes(ctx, fs) -> int:
    size = int(ctx.target.spec.size_bytes)
    if ctx.target.spec.kind == "dir":  # a directory's room is what its file system has free
        try:
            size = min(size, shutil.disk_usage(fs.workdir).free)
        except OSError:
            pass
    return size



@dataclasses.dataclass
class _Runs:
    """What the runs so far measured (the report is made from it, complete or not)."""

    results: list[P.RunResult] = dataclasses.field(default_factory=list)
    extras: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # BenchRun fields per run
    kernel: dict[int, KernelWindows] = dataclasses.field(default_factory=dict)
    flags: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # full fs, no ops: beyond the variation
    notes: list[str] = dataclasses.field(default_factory=list)
    telemetry_notes: list[str] = dataclasses.field(default_factory=list)
    elapsed_s: list[float] = dataclasses.field(default_factory=list)
    emitted: dict[tuple, Any] = dataclasses.field(default_factory=dict)
    taskstats_available: bool | None = None
    pspec: P.PersonalitySpec | None = None
    partial: PartialRun | None = None
    fs_name: str | None = None
    stopped_by: str | None = None
    writers: Writers = dataclasses.field(default_factory=Writers)


def run(ctx, spec: Spec) -> Report:
    dirty = dirty_writeback_intervals()
    duration = Duration(auto=False, chosen_s=spec.duration_s)
    if spec.duration_auto:
        spec, duration = _calibrate_duration(ctx, spec)
    done = _Runs(writers=Writers(trace=spec.trace, competes="the bench's workers", fix="measure another device",
                                 pinned=False))
    trace = BenchTrace(ctx, spec.trace)
    try:
        for r in range(spec.runs):
            if ctx.cancelled or not _one_run(ctx, spec, r, trace, dirty, done):
                break
    except (FsscopeError, OSError) as exc:  # a later run failed (cgroup, mkfs...): keep the runs that finished
        if not done.results:
            raise
        done.stopped_by = os_error_line(exc) if isinstance(exc, OSError) else str(exc)
        ctx.emit(Error(message=done.stopped_by))
    return _report(ctx, spec, done, dirty, duration, trace.summary())


def _one_run(ctx, spec: Spec, r: int, trace: BenchTrace, dirty: dict, done: _Runs) -> bool:
    """Run ``r``: fresh file system, populate, hygiene, measure, save; False: no further run."""
    ctx.phase(f"run {r + 1} of {spec.runs}", run=r, runs=spec.runs)
    with ctx.run_fs(spec.fresh_fs) as fs:
        done.fs_name = fs.fs
        if done.pspec is None:
            done.pspec = personality_spec(spec, _capacity_bytes(ctx, fs))
            ctx.log(f"{done.pspec.name}: {done.pspec.nfiles} files of mean "
                    f"{done.pspec.mean_file_size_bytes} bytes, {done.pspec.workers} workers, "
                    f"{spec.duration_s:g} s per run")
        pspec, root = done.pspec, fs.workdir  # on a shared fs, populate replaces the previous run's file set
        ctx.phase(f"run {r + 1}/{spec.runs}: populate {pspec.nfiles} files", run=r)
        populated = P.populate(root, pspec, seed=spec.seed, evict_cache=True, cancelled=lambda: ctx.cancelled)
        ctx.after_populate()
        if ctx.cancelled:
            return False
        placed = _dataset_placement(fs, root, pspec)
        ctx.phase(f"run {r + 1}/{spec.runs}: {pspec.name} × {pspec.workers} workers", run=r)
        with trace.run(fs, r), done.writers.watch(ctx, fs, r) as own:
            result, samples = measure(ctx, spec, pspec, root, fs, r, spec.runs * spec.duration_s)
            own.update(result.worker_pids)  # theirs is the bench's own I/O
    window_s = min(spec.window_sizes_s)
    counted = trace.windows(r, result.start_ns, window_s, len(result.throughput(window_s)))
    if counted is not None:
        done.kernel[r] = typed(plain(counted), KernelWindows)
        ctx.emit(KernelCounts(run=r, windows=done.kernel[r]))
    done.taskstats_available = samples.taskstats_available
    done.telemetry_notes.extend(samples.notes)
    for name, array in result.to_arrays().items():
        ctx.run_dir.save_array(f"run{r}_{name}", array)
    ctx.run_dir.save_array(f"run{r}_telemetry", telemetry_matrix(samples))
    done.elapsed_s.append(result.elapsed_s)
    ctx.run_dir.save_array("elapsed_s", np.asarray(done.elapsed_s, dtype=np.float64))
    summary = result.summary()
    telemetry = telemetry_summary(samples)
    verdict = generator.generator_bound(
        workers=summary["workers"], elapsed_s=result.elapsed_s, cpu_user_s=result.worker_cpu_user_s,
        cpu_system_s=result.worker_cpu_system_s, runqueue_s=result.worker_runqueue_s,
        device_busy=telemetry.disk_busy_mean, total_ops=result.total_ops)
    extra = plain({"populate": dataclasses.asdict(populated), "workers": summary["workers"],
                   "worker_loop": summary["worker_loop"], "cgroup": summary["cgroup"], "notes": summary["notes"],
                   "telemetry": telemetry, "generator": verdict, "placement": placed})
    if result.cancelled or result.stopped_by:
        done.partial = typed({"run": r, "elapsed_s": result.elapsed_s, "ops_per_s": plain(result.ops_per_s),
                                **extra}, PartialRun)
        why = "was cancelled" if result.cancelled else f"stopped ({result.stopped_by})"
        done.notes.append(f"run {r + 1} {why} after {result.elapsed_s:.1f} s: its arrays are saved "
                          f"(run{r}_*.npy) but it is not in the variation numbers")
        if result.stopped_by:
            done.stopped_by = result.stopped_by
            done.flags.append(full_flag(r, result, pspec))
        return False
    if result.total_ops == 0:
        done.flags.append(nothing_flag(r, result))
    elif flag := generator.generator_flag(r, verdict):
        done.flags.append(flag)
    done.results.append(result)
    done.extras.append(extra)
    emit_new_flags(ctx, spec, done.results, dirty, done.emitted)
    return True


def _report(ctx, spec: Spec, done: _Runs, dirty: dict, duration: Duration, trace: dict) -> Report:
    """The variation numbers of the completed runs, each run's extras, and what ran where."""
    varied = variation_report(
        spec.personality, done.results, window_sizes_s=spec.window_sizes_s, threshold=spec.threshold,
        dirty_expire_centisecs=dirty.get("dirty_expire_centisecs"),
        dirty_writeback_centisecs=dirty.get("dirty_writeback_centisecs"))
    runs = [typed(plain(entry) | extra, BenchRun) for entry, extra in zip(varied.runs, done.extras)]
    runs = _add_kernel_windows(runs, done.results, done.kernel, spec.threshold, ctx)
    for flag in done.flags:
        ctx.finding(flag["kind"], flag["title"], flag["note"], run=flag["run"])
    flags = done.flags + [{**flag, "title": flag.get("title") or flag_title(flag)} for flag in varied.flags]
    if (writer := done.writers.flag()) is not None:  # streamed per run already (Finding): listed, not re-sent
        flags.append({"kind": writer.pop("flag"), **writer})
    recipe, pspec = ctx.recipe, done.pspec
    return Report(
        personality=varied.personality, runs=runs, variation=varied.variation, latency=varied.latency,
        flags=flags, placement=placement_vs_throughput(runs), trace=plain(trace),
        run_id=ctx.run_dir.id, recipe=recipe.name if recipe is not None else None, fs=done.fs_name,
        target=plain(ctx.target.spec) | {"describe": ctx.target.spec.describe()}, spec=spec, workload=pspec,
        bin_s=BIN_S, runs_requested=spec.runs, runs_completed=len(done.results), cancelled=bool(ctx.cancelled),
        partial_run=done.partial, stopped_by=done.stopped_by,
        telemetry=TelemetryInfo(taskstats_available=done.taskstats_available, delayacct=delayacct_note(),
                                columns=list(TELEMETRY_COLUMNS), notes=list(dict.fromkeys(done.telemetry_notes))),
        dirty_writeback=plain(dirty), duration=duration, notes=done.notes + _notes(ctx, spec, done),
        writers=[typed(w, Writer, "bench writer") for w in done.writers.to_json()], writers_watched=done.writers.how())


def _notes(ctx, spec: Spec, done: _Runs) -> list[str]:
    """What the reader should know about how far these runs can be trusted."""
    notes = []
    short = [w for w in spec.window_sizes_s if w > spec.duration_s]
    if short:
        notes.append(f"Throughput-{'/'.join(f'{w:g}' for w in short)} needs runs longer than "
                     f"{spec.duration_s:g} s: no complete window, so no band for it")
    if len(done.results) < 2:
        notes.append("one run cannot show run-to-run variation: use --runs 3 or more")
    elif len(done.results) < 3:
        notes.append("with 2 runs the relative range and RSD are rough; Cao et al. used 10+ runs")
    if ctx.target.spec.kind == "dir" or done.fs_name == "tmpfs":
        notes.append("the target is not a formatted file system of fsscope's: runs are not on an identically "
                     "prepared file system (only the file set is)")
    if done.pspec is not None and done.pspec.log_limit_bytes:
        notes.append(f"the webserver log is truncated whenever it passes {format_bytes(done.pspec.log_limit_bytes)} "
                     "(a quarter of the target, like logrotate); Filebench lets it grow until the disk is full")
    if spec.mem_limit_bytes is None:
        notes.append("no --mem-limit: a file set that fits in RAM is served from the page cache, so the device "
                     "may be barely exercised (Cao et al. limited RAM to 4 GiB)")
    return notes


def _dataset_placement(fs, root: Path, pspec: P.PersonalitySpec) -> Placement | None:
    """Where the populated dataset's files start (block groups / AGs), as the run begins."""
    if not fs.device:                      # a directory or tmpfs: no device to place it on
        return None

    return dataset_placement(P.fileset_paths(root, pspec), fs.fs, fs.device, fs.mountpoint)


def placement_vs_throughput(runs: list[BenchRun]) -> PlacementVsThroughput | None:
    """The paper's Fig. 4 as numbers: per run, where the dataset starts (median first byte of
    its files) beside the run's throughput, and their Pearson r across runs (None: fewer than
    3 runs, or no spread)."""
    placed = [(run.placement, run.ops_per_s) for run in runs if run.placement is not None and run.placement.available]
    if not placed:
        return None
    x = [float(p.first_byte_median or 0.0) for p, _ in placed]
    y = [ops for _, ops in placed]
    r = pearson(x, [math.nan if v is None else v for v in y])
    groups = {tuple(g for g, _ in p.groups or ()) for p, _ in placed}
    return PlacementVsThroughput(runs=len(placed), first_byte_median=x, ops_per_s=y,
                                 pcc=None if math.isnan(r) else r, same_groups_every_run=len(groups) == 1)


def _calibrate_duration(ctx, spec: Spec) -> tuple[Spec, Duration]:
    """``--duration auto``: one calibration run on a fresh, populated file system that stops as
    soon as its cumulative throughput has settled (:mod:`fsscope.analysis.runlength`), at the
    latest after ``duration_s``; the measured runs then last that long."""
    from fsscope.analysis import runlength  # scipy.stats (~1.5 s): only when a run is calibrated

    per_bin: list[float] = []
    settled: list[float] = []

    def on_window(sample: P.LiveSample) -> None:
        per_bin.append(sample.ops_per_s * BIN_S)
        if not settled:
            t = runlength.settled_at_s(np.asarray(per_bin), BIN_S)
            if t is not None:
                settled.append(t)
        ctx.progress(round(sample.t_s, 3), spec.duration_s, unit="s",
                     info=f"calibrating the run length  {sample.ops_per_s:,.0f} ops/s")

    ctx.phase("calibrating the run length (until cumulative throughput settles)")
    with ctx.run_fs(True) as fs:
        pspec = personality_spec(spec, _capacity_bytes(ctx, fs))
        P.populate(fs.workdir, pspec, seed=spec.seed, evict_cache=True)
        ctx.after_populate()
        P.run(fs.workdir, pspec, P.RunOptions(
            on_window=on_window, cancelled=lambda: ctx.cancelled or bool(settled),
            mem_limit_bytes=spec.mem_limit_bytes))
    chosen = settled[0] if settled else spec.duration_s
    windows = tuple(w for w in spec.window_sizes_s if w <= chosen)
    info = Duration(auto=True, chosen_s=chosen, settled=bool(settled), cap_s=spec.duration_s,
                    criterion=runlength.criterion(), calibration_ops_per_s=per_bin)
    ctx.log(f"run length: {chosen:g} s ({'cumulative throughput settled' if settled else 'never settled: the cap'})")
    return msgspec.structs.replace(spec, duration_s=float(chosen), duration_auto=False,
                               window_sizes_s=windows if len(windows) == len(spec.window_sizes_s) else ()), info


def _add_kernel_windows(runs: list[BenchRun], results: list[P.RunResult], kernel: dict[int, KernelWindows],
                        threshold: float, ctx) -> list[BenchRun]:
    """Per run: the kernel's counts per Throughput-N window (the smallest N) and every dip
    annotated with what the kernel did in it."""
    out = []
    for r, (entry, result) in enumerate(zip(runs, results)):
        counted = kernel.get(r)
        if counted is not None:
            dips = typed(plain(annotate_dips(result.throughput(counted.window_s), counted.tracked(),
                                               counted.window_s, threshold=threshold)), list[Dip])
            for dip in dips:
                ctx.log(f"run {r + 1} dip {dip.note}")
            entry = msgspec.structs.replace(entry, kernel_windows=counted, dips=dips)
        out.append(entry)
    return out
