"""The ``bench`` job: R runs of one throughput personality, and how much they vary.

Per run (Cao et al., FAST'17 method): a fresh file system (same seed every run, so each run
starts from an identically prepared file system), the personality's file set populated, the
recipe's hygiene (:meth:`JobContext.after_populate`: remount or sync, drop caches), then the
workers run for ``duration_s`` while a telemetry sampler records the device, CPU and memory
beside them. Live numbers stream as events:

- ``samples``   :class:`WindowSample` (``{"run": r, "window": LiveSample}``) once per 1-s bin
- ``telemetry`` ``{"run": r, "sample": {...}}`` about once a second (device/CPU/memory deltas)
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

The report is :func:`fsscope.analysis.variation.report.variation_report` over the completed runs plus
what ran where (recipe, target, workload), per-run extras (populate, telemetry summary,
cgroup, notes) and the telemetry's availability notes. A cancel stops the current run at the
workers' next op; its arrays are saved but it is left out of the variation numbers.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec
import numpy as np

from fsscope.analysis import generator
from fsscope.analysis.variation.report import variation_report
from fsscope.analysis.variation.stats import pearson
from fsscope.engine.events import DataRecord, Error, Finding
from fsscope.errors import FsscopeError, os_error_line
from fsscope.format import format_bytes
from fsscope.layout.placement import dataset_placement
from fsscope.records import SpecRecord, force_setattr, plain
from fsscope.telemetry.columns import TELEMETRY_COLUMNS, named_columns, telemetry_matrix
from fsscope.telemetry.sampler import TelemetrySampler, dirty_writeback_intervals
from fsscope.telemetry.taskstats import delayacct_note
from fsscope.trace.attribute import annotate_dips
from fsscope.trace.jobs import BenchTrace
from fsscope.workloads import personalities as P

BIN_S = 1.0


class WindowSample(DataRecord, frozen=True, kw_only=True, tag="samples"):
    """One 1-s bin of run ``run`` as it is measured (the live view's bars and sparklines)."""

    run: int
    window: P.LiveSample


DATA = (WindowSample,)  # the bench's own event kinds (registry.decode_event reads them)


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "bench"
    parsers: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "window_sizes_s": lambda value: number_list(value, "window_sizes_s")}

    personality: Literal["fileserver", "webserver", "varmail"] = "fileserver"
    runs: int = 3
    duration_s: float = 30.0
    workers: int | None = None
    nfiles: int | None = None
    mean_file_size_bytes: int | None = None
    mem_limit_bytes: int | None = None
    window_sizes_s: tuple[float, ...] = ()  # () = automatic: 10 s, or the whole run if shorter
    threshold: float = 0.10
    seed: int = 1
    fresh_fs: bool = True
    duration_auto: bool = False  # calibrate the run length first; duration_s is then the cap
    trace: bool = True  # kernel events per window (root + tracefs; otherwise untraced)

    def __post_init__(self) -> None:
        if self.personality not in P.PERSONALITIES:
            raise FsscopeError(f"bench: unknown personality {self.personality!r} "
                               f"(choose from {', '.join(P.PERSONALITIES)})")
        if not isinstance(self.runs, int) or self.runs < 1:
            raise FsscopeError(f"bench: runs must be a whole number >= 1, got {self.runs!r}")
        if not self.duration_s > 0:
            raise FsscopeError(f"bench: duration_s must be positive, got {self.duration_s!r}")
        for name in ("workers", "nfiles", "mean_file_size_bytes", "mem_limit_bytes"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise FsscopeError(f"bench: {name} must be a whole number >= 1, got {value!r}")
        windows = tuple(self.window_sizes_s) or (float(max(1, min(10, math.floor(self.duration_s)))),)
        for w in windows:
            if not w > 0 or abs(w / BIN_S - round(w / BIN_S)) > 1e-9:
                raise FsscopeError(f"bench: window size {w!r} must be a positive whole number of seconds")
            if w > self.duration_s:
                raise FsscopeError(f"bench: a Throughput-{w:g} window does not fit in a {self.duration_s:g} s "
                                   f"run: pick windows no longer than the run (--window), or longer runs")
        force_setattr(self, "window_sizes_s", windows)
        if not isinstance(self.trace, bool):
            raise FsscopeError(f"bench: trace must be true or false, not {self.trace!r}")
        if not 0 <= self.threshold <= 10:
            raise FsscopeError(f"bench: threshold is a fraction (0.1 = 10 %), got {self.threshold!r}")



def number_list(value: Any, name: str) -> tuple[float, ...]:
    """A list of numbers from JSON (list or number) or from text such as "10, 30" or "(10,)"."""
    if isinstance(value, str):
        parts = [p for p in value.strip().strip("()[]").replace(",", " ").split() if p]
        try:
            value = [float(p) for p in parts]
        except ValueError:
            raise FsscopeError(f"bench: {name} must be numbers such as 10,30, not {value!r}") from None
    if isinstance(value, (int, float)):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, (int, float)) for v in value):
        raise FsscopeError(f"bench: {name} must be a list of numbers, not {value!r}")
    return tuple(int(v) if float(v).is_integer() else float(v) for v in value)


def personality_spec(spec: Spec, capacity_bytes: int | None, cpu_count: int | None = None) -> P.PersonalitySpec:
    """The workload the bench runs: Filebench defaults scaled to the capacity, with overrides;
    refused (one line) when its workers cannot live under --mem-limit or its file set cannot
    fit the target, since such a run measures nothing."""
    overrides: dict[str, Any] = {"duration_s": float(spec.duration_s), "seed": spec.seed, "bin_s": BIN_S}
    for ours, theirs in (("workers", "workers"), ("nfiles", "nfiles"),
                         ("mean_file_size_bytes", "mean_file_size_bytes")):
        if getattr(spec, ours) is not None:
            overrides[theirs] = getattr(spec, ours)
    # latency histograms per window: the smallest Throughput-N window that fits the run
    overrides["latency_window_s"] = float(min(spec.window_sizes_s))
    pspec = P.default_spec(spec.personality, capacity_bytes=capacity_bytes, cpu_count=cpu_count, **overrides)
    if spec.mem_limit_bytes is not None:
        # each worker's two io_size buffers (8 workers: OOM kills under 4 MiB in all, none at 16 MiB)
        need = pspec.workers * 2 * pspec.io_size_bytes
        if spec.mem_limit_bytes < need:
            raise FsscopeError(
                f"bench: --mem-limit {format_bytes(spec.mem_limit_bytes)} is below the minimum "
                f"{format_bytes(need)}: each of the {pspec.workers} workers needs about "
                f"{format_bytes(need // pspec.workers)} of its own (two {format_bytes(pspec.io_size_bytes)} I/O "
                "buffers) before any page cache, or the OOM killer ends it and nothing is measured")
    populated = pspec.fileset_bytes * pspec.prealloc_pct // 100
    if capacity_bytes and populated > capacity_bytes * 0.8:
        raise FsscopeError(
            f"bench: the file set ({pspec.nfiles:,} files of mean {format_bytes(pspec.mean_file_size_bytes)}, "
            f"{format_bytes(populated)} populated) does not fit the target's {format_bytes(capacity_bytes)} "
            "with room to run: use fewer --files, a smaller --mean-file-size or a larger --size")
    return pspec


def block_disks(fs) -> tuple[str, ...]:
    """Block device names (as /proc/diskstats spells them) behind a mounted file system: the
    loop/real device for formatted targets, the device holding the directory otherwise, none
    for tmpfs-like file systems."""
    if fs.device:
        return (os.path.basename(os.path.realpath(fs.device)),)
    try:
        st = os.stat(fs.workdir)
    except OSError:
        return ()
    link = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if not link.exists():
        return ()
    return (os.path.basename(os.path.realpath(link)),)


def _capacity_bytes(ctx, fs) -> int:
    size = int(ctx.target.spec.size_bytes)
    if ctx.target.spec.kind == "dir":  # a directory's room is what its file system has free
        try:
            size = min(size, shutil.disk_usage(fs.workdir).free)
        except OSError:
            pass
    return size


def _telemetry_summary(samples) -> dict[str, Any]:
    """What the device, CPUs and memory did during one run, in a few numbers."""
    n = len(samples)
    if n == 0:
        return {"samples": 0}
    span_s = max(float(samples.t_s[-1]), samples.interval_s)
    m = telemetry_matrix(samples)
    col = named_columns(m)
    busy = col["disk_busy_ms"] / (samples.interval_s * 1000.0)
    return {"samples": n, "disks": list(samples.disks),
            "disk_read_bytes_per_s": float(col["disk_read_bytes"].sum() / span_s),
            "disk_write_bytes_per_s": float(col["disk_write_bytes"].sum() / span_s),
            "disk_iops": float((col["disk_read_ops"].sum() + col["disk_write_ops"].sum()) / span_s),
            "disk_busy_mean": float(busy.mean()) if samples.disks else None,
            "disk_busy_max": float(busy.max()) if samples.disks else None,
            "cpu_user_pct_mean": float(np.nanmean(col["cpu_user_pct"])),
            "cpu_system_pct_mean": float(np.nanmean(col["cpu_system_pct"])),
            "cpu_iowait_pct_mean": float(np.nanmean(col["cpu_iowait_pct"])),
            "mem_dirty_bytes_max": int(col["mem_dirty_bytes"].max()),
            "mem_writeback_bytes_max": int(col["mem_writeback_bytes"].max()),
            "workers_read_bytes": int(col["proc_read_bytes"].sum()),
            "workers_write_bytes": int(col["proc_write_bytes"].sum()),
            "blkio_delay_s": float(col["blkio_delay_ns"].sum() / 1e9) if samples.taskstats_available else None,
            "cpu_delay_s": float(col["cpu_delay_ns"].sum() / 1e9) if samples.taskstats_available else None}


def flag_title(flag: dict[str, Any]) -> str:
    """One short line for a variation flag (the note says the rest)."""
    kind = flag.get("kind")
    if kind == "variation":
        return f"throughput varies {flag.get('relative_range', 0):.0%} across runs (relative range)"
    if kind == "warmup":
        return f"warm-up ({flag.get('direction', '')}): settles after {flag.get('warmup_s', 0):g} s"
    if kind == "periodic":
        match = flag.get("matches")
        why = {"dirty_expire": " — dirty-page expiry", "dirty_writeback": " — flusher wake-ups"}.get(match, "")
        return (f"Throughput-{flag.get('window_s', 0):g} {flag.get('shape', 'varies')} every "
                f"{flag.get('period_s', 0):g} s{why}")
    if kind == "window_disagrees":
        return (f"Throughput-{flag.get('window_s', 0):g} windows disagree with the cumulative verdict "
                f"({flag.get('fraction_windows_above', 0):.0%} of windows above threshold)")
    return str(kind)


def _full_flag(r: int, result: P.RunResult, pspec: P.PersonalitySpec) -> dict[str, Any]:
    log = (f" (webserver's log rotates at {format_bytes(pspec.log_limit_bytes)})"
           if pspec.log_limit_bytes else "")
    return {"kind": "fs_full", "run": r, "elapsed_s": result.elapsed_s,
            "title": f"the file system filled up {result.elapsed_s:.1f} s into run {r + 1}: the job stopped there",
            "note": f"{result.stopped_by}. The workers stopped at once and the numbers of the "
                    f"{result.elapsed_s:.1f} s measured are kept, but a full file system is not the one the "
                    f"later runs would have measured, so no further runs were made{log}. Give a larger "
                    "--size, fewer --files or a shorter --duration."}


def _nothing_flag(r: int, result: P.RunResult) -> dict[str, Any]:
    why = "; ".join(result.notes) or "no worker completed an operation"
    return {"kind": "nothing_measured", "run": r, "elapsed_s": result.elapsed_s,
            "title": f"run {r + 1} measured nothing: 0 operations in {result.elapsed_s:.1f} s",
            "note": f"Its throughput of 0 ops/s is not a result of the file system. Why: {why}"}


def _flag_key(flag: dict[str, Any]) -> tuple:
    return (flag.get("kind"), flag.get("window_s"))



def run(ctx, spec: Spec) -> dict:
    dirty = dirty_writeback_intervals()
    calibration = None
    if spec.duration_auto:
        spec, calibration = _calibrate_duration(ctx, spec)
    total_s = spec.runs * spec.duration_s
    results: list[P.RunResult] = []
    extras: list[dict[str, Any]] = []
    elapsed: list[float] = []
    notes: list[str] = []
    telemetry_notes: list[str] = []
    taskstats_available: bool | None = None
    emitted: set[tuple] = set()
    pspec: P.PersonalitySpec | None = None
    partial: dict[str, Any] | None = None
    fs_name = None

    stopped_by = None
    trace = BenchTrace(ctx, spec.trace)
    kernel_windows: dict[int, dict] = {}
    extra_flags: list[dict[str, Any]] = []  # what the variation analysis cannot see: full fs, no ops
    try:
        for r in range(spec.runs):
            if ctx.cancelled:
                break
            ctx.phase(f"run {r + 1} of {spec.runs}", run=r, runs=spec.runs)
            with ctx.run_fs(spec.fresh_fs) as fs:
                fs_name = fs.fs
                if pspec is None:
                    pspec = personality_spec(spec, _capacity_bytes(ctx, fs))
                    ctx.log(f"{pspec.name}: {pspec.nfiles} files of mean "
                            f"{pspec.mean_file_size_bytes} bytes, {pspec.workers} workers, "
                            f"{spec.duration_s:g} s per run")
                root = fs.workdir  # on a shared fs, populate replaces the previous run's file set
                ctx.phase(f"run {r + 1}/{spec.runs}: populate {pspec.nfiles} files", run=r)
                populated = P.populate(root, pspec, seed=spec.seed, evict_cache=True, cancelled=lambda: ctx.cancelled)
                ctx.after_populate()
                if ctx.cancelled:
                    break
                placed = _dataset_placement(fs, root, pspec)
                ctx.phase(f"run {r + 1}/{spec.runs}: {pspec.name} × {pspec.workers} workers", run=r)
                with trace.run(fs, r):
                    result, samples = _measure(ctx, spec, pspec, root, fs, r, total_s)
            window_s = min(spec.window_sizes_s)
            counted = trace.windows(r, result.start_ns, window_s, len(result.throughput(window_s)))
            if counted is not None:
                kernel_windows[r] = counted
                ctx.data("kernel", run=r, windows=counted)
            taskstats_available = samples.taskstats_available
            telemetry_notes.extend(samples.notes)
            for name, array in result.to_arrays().items():
                ctx.run_dir.save_array(f"run{r}_{name}", array)
            ctx.run_dir.save_array(f"run{r}_telemetry", telemetry_matrix(samples))
            elapsed.append(result.elapsed_s)
            ctx.run_dir.save_array("elapsed_s", np.asarray(elapsed, dtype=np.float64))
            summary = result.summary()
            telemetry = _telemetry_summary(samples)
            verdict = generator.generator_bound(
                workers=summary["workers"], elapsed_s=result.elapsed_s, cpu_user_s=result.worker_cpu_user_s,
                cpu_system_s=result.worker_cpu_system_s, runqueue_s=result.worker_runqueue_s,
                device_busy=telemetry.get("disk_busy_mean"), total_ops=result.total_ops)
            extra = {"populate": dataclasses.asdict(populated), "workers": summary["workers"],
                     "worker_loop": summary["worker_loop"],
                     "cgroup": summary["cgroup"], "notes": summary["notes"],
                     "telemetry": telemetry, "generator": verdict, "placement": placed}
            if result.cancelled or result.stopped_by:
                partial = {"run": r, "elapsed_s": result.elapsed_s, "ops_per_s": result.ops_per_s, **extra}
                why = "was cancelled" if result.cancelled else f"stopped ({result.stopped_by})"
                notes.append(f"run {r + 1} {why} after {result.elapsed_s:.1f} s: its arrays are saved "
                             f"(run{r}_*.npy) but it is not in the variation numbers")
                if result.stopped_by:
                    stopped_by = result.stopped_by
                    extra_flags.append(_full_flag(r, result, pspec))
                break
            if result.total_ops == 0:
                extra_flags.append(_nothing_flag(r, result))
            elif flag := generator.generator_flag(r, verdict):
                extra_flags.append(flag)
            results.append(result)
            extras.append(extra)
            _emit_new_flags(ctx, spec, results, dirty, emitted)
    except (FsscopeError, OSError) as exc:  # a later run failed (cgroup, mkfs...): keep the runs that finished
        if not results:
            raise
        stopped_by = os_error_line(exc) if isinstance(exc, OSError) else str(exc)
        ctx.emit(Error(message=stopped_by))

    report = variation_report(
        spec.personality, results, window_sizes_s=spec.window_sizes_s, threshold=spec.threshold,
        dirty_expire_centisecs=dirty.get("dirty_expire_centisecs"),
        dirty_writeback_centisecs=dirty.get("dirty_writeback_centisecs"))
    for entry, extra in zip(report["runs"], extras):
        entry.update(plain(extra))
    _add_kernel_windows(report, results, kernel_windows, spec.threshold, ctx)
    report["placement"] = placement_vs_throughput(report["runs"])
    report["trace"] = trace.summary()
    for flag in report["flags"]:
        flag.setdefault("title", flag_title(flag))
    for flag in extra_flags:
        ctx.finding(flag["kind"], flag["title"], flag["note"], run=flag["run"])
    report["flags"] = extra_flags + report["flags"]
    short = [w for w in spec.window_sizes_s if w > spec.duration_s]
    if short:
        notes.append(f"Throughput-{'/'.join(f'{w:g}' for w in short)} needs runs longer than "
                     f"{spec.duration_s:g} s: no complete window, so no band for it")
    if len(results) < 2:
        notes.append("one run cannot show run-to-run variation: use --runs 3 or more")
    elif len(results) < 3:
        notes.append("with 2 runs the relative range and RSD are rough; Cao et al. used 10+ runs")
    if ctx.target.spec.kind == "dir" or fs_name == "tmpfs":
        notes.append("the target is not a formatted file system of fsscope's: runs are not on an identically "
                     "prepared file system (only the file set is)")
    if pspec is not None and pspec.log_limit_bytes:
        notes.append(f"the webserver log is truncated whenever it passes {format_bytes(pspec.log_limit_bytes)} "
                     "(a quarter of the target, like logrotate); Filebench lets it grow until the disk is full")
    if spec.mem_limit_bytes is None:
        notes.append("no --mem-limit: a file set that fits in RAM is served from the page cache, so the device "
                     "may be barely exercised (Cao et al. limited RAM to 4 GiB)")
    delay_note = delayacct_note()
    recipe = ctx.recipe
    report.update(plain({
        "run_id": ctx.run_dir.id,
        "recipe": recipe.name if recipe is not None else None,
        "fs": fs_name,
        "target": plain(ctx.target.spec) | {"describe": ctx.target.spec.describe()},
        "spec": plain(spec),
        "workload": plain(pspec) if pspec is not None else None,
        "bin_s": BIN_S,
        "runs_requested": spec.runs,
        "runs_completed": len(results),
        "cancelled": bool(ctx.cancelled),
        "partial_run": partial,
        "stopped_by": stopped_by,
        "telemetry": {"taskstats_available": taskstats_available,
                      "delayacct": delay_note,
                      "columns": list(TELEMETRY_COLUMNS),
                      "notes": list(dict.fromkeys(telemetry_notes))},
        "dirty_writeback": dirty,
        "duration": calibration or {"auto": False, "chosen_s": spec.duration_s},
        "notes": notes,
    }))
    return report


def _dataset_placement(fs, root: Path, pspec: P.PersonalitySpec) -> dict[str, Any] | None:
    """Where the populated dataset's files start (block groups / AGs), as the run begins."""
    if not fs.device:                      # a directory or tmpfs: no device to place it on
        return None

    return dataset_placement(P.fileset_paths(root, pspec), fs.fs, fs.device, fs.mountpoint)


def placement_vs_throughput(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The paper's Fig. 4 as numbers: per run, where the dataset starts (median first byte of
    its files) beside the run's throughput, and their Pearson r across runs (nan: fewer than
    3 runs, or no spread)."""
    points = [(r["placement"]["first_byte_median"], r["ops_per_s"]) for r in runs
              if (r.get("placement") or {}).get("available")]
    if not points:
        return None
    r = pearson([x for x, _ in points], [y for _, y in points])
    groups = [tuple(g for g, _ in run["placement"]["groups"]) for run in runs
              if (run.get("placement") or {}).get("available")]
    return {"runs": len(points), "first_byte_median": [x for x, _ in points],
            "ops_per_s": [y for _, y in points], "pcc": None if math.isnan(r) else r,
            "same_groups_every_run": len(set(groups)) == 1}


def _calibrate_duration(ctx, spec: Spec) -> tuple[Spec, dict[str, Any]]:
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
    info = {"auto": True, "chosen_s": chosen, "settled": bool(settled), "cap_s": spec.duration_s,
            "criterion": runlength.criterion(), "calibration_ops_per_s": per_bin}
    ctx.log(f"run length: {chosen:g} s ({'cumulative throughput settled' if settled else 'never settled: the cap'})")
    return msgspec.structs.replace(spec, duration_s=float(chosen), duration_auto=False,
                               window_sizes_s=windows if len(windows) == len(spec.window_sizes_s) else ()), info


def _add_kernel_windows(report: dict, results: list, kernel_windows: dict[int, dict],
                        threshold: float, ctx) -> None:
    """Per run: the kernel's counts per Throughput-N window (the smallest N) and every dip
    annotated with what the kernel did in it."""
    for r, (entry, result) in enumerate(zip(report["runs"], results)):
        counted = kernel_windows.get(r)
        if counted is None:
            continue
        entry["kernel_windows"] = counted
        tracked = {k: v for k, v in counted.items() if isinstance(v, list)}
        entry["dips"] = annotate_dips(result.throughput(counted["window_s"]), tracked,
                                      counted["window_s"], threshold=threshold)
        for dip in entry["dips"]:
            ctx.log(f"run {r + 1} dip {dip['note']}")


def _measure(ctx, spec: Spec, pspec: P.PersonalitySpec, root: Path, fs, r: int, total_s: float):
    """One timed run with the telemetry sampler beside it."""

    def on_sample(sample: dict[str, Any]) -> None:
        ctx.data("telemetry", run=r, sample=sample)

    def on_window(sample: P.LiveSample) -> None:
        ctx.emit(WindowSample(run=r, window=sample))
        done = r * spec.duration_s + min(sample.t_s, spec.duration_s)
        ctx.progress(round(done, 3), total_s, unit="s",
                     info=f"run {r + 1}/{spec.runs}  {sample.ops_per_s:,.0f} ops/s")

    sampler = TelemetrySampler(interval_s=1.0, disks=block_disks(fs), on_sample=on_sample)
    sampler.start()
    try:
        # bins land in the run record as they are aggregated: a killed job keeps them
        result = P.run(root, pspec, P.RunOptions(
            on_window=on_window, cancelled=lambda: ctx.cancelled,
            mem_limit_bytes=spec.mem_limit_bytes, on_start=sampler.watch,
            alloc=lambda name, shape: ctx.run_dir.open_array(f"run{r}_{name}", shape, fill=0)))
    finally:
        samples = sampler.stop()
    return result, samples


def _emit_new_flags(ctx, spec: Spec, results: list, dirty: dict, emitted: set) -> None:
    """Flags the runs so far show (from the second run on), each streamed once."""
    if len(results) < 2 and spec.runs > 1:
        return
    partial = variation_report(
        spec.personality, results, window_sizes_s=spec.window_sizes_s, threshold=spec.threshold,
        dirty_expire_centisecs=dirty.get("dirty_expire_centisecs"),
        dirty_writeback_centisecs=dirty.get("dirty_writeback_centisecs"))
    for flag in partial["flags"]:
        key = _flag_key(flag)
        if key in emitted:
            continue
        emitted.add(key)
        details = {k: v for k, v in flag.items() if k not in ("kind", "note")}
        ctx.emit(Finding(flag=flag["kind"], title=flag_title(flag), note=flag["note"],
                         fields={"after_runs": len(results), **details}))


