"""The ``check`` job: the audit, then short repeated runs of a personality, then a verdict.

Events (besides phase/progress/log), one kind :class:`CheckEvent` (``check``):

- ``{"finding": Finding}`` once per audit item, ranked
- ``{"calibration_run": CalibrationRun, "estimate": Estimate}`` after each calibration run: its
  cumulative throughput, its ops/s per second, and the runs needed as estimated from the runs
  so far (the live runs-needed curve)

The report is a :class:`Report` (verdict, headline, fix_first, findings, calibration…).

Calibration runs go on a fresh file system each (device/image/RAM targets: mkfs per run) or
in a fresh scratch subdirectory of ``--dir`` (removed afterwards). Their per-second counts are
saved as ``run{r}_counts.npy`` so the figures can be recomputed.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Any, ClassVar, Literal

import msgspec
import numpy as np

from fsscope.analysis import calibration as C
from fsscope.check import audit
from fsscope.check.findings import Finding
from fsscope.check.target import TargetInfo, locate
from fsscope.check.verdict import (
    Calibration,
    CalibrationRunFigures,
    Estimate,
    HistoryEntry,
    WindowPoint,
    Workload,
    decide,
)
from fsscope.engine.events import DataRecord
from fsscope.errors import FsscopeError
from fsscope.records import Record, ReportRecord, SpecRecord, plain
from fsscope.targets import ReportTarget
from fsscope.workloads import PERSONALITIES
from fsscope.workloads import personalities as P

BIN_S = 1.0
QUICK_BUDGET_S = 60.0
DEFAULT_BUDGET_S = 180.0
MIN_RUN_S = 5.0
STARTUP_S = 4.0   # the command's own start and the job process's, outside this function's clock
RUN_OVERHEAD_S = {True: 4.0, False: 2.0}  # first guess of formatting (True) + populating per run


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "check"

    personality: Literal["fileserver", "webserver", "varmail"] = "fileserver"
    precision: float = 0.05           # CI half-width, fraction of the mean
    confidence: float = 0.95
    budget_s: float = DEFAULT_BUDGET_S
    sample_s: float = 5.0             # how long the audit watches the device for other I/O
    dataset_bytes: int | None = None  # the data the user's benchmark will touch
    runs: int | None = None           # calibration runs (default from the budget)
    calibrate: bool = True

    def __post_init__(self) -> None:
        if self.personality not in PERSONALITIES:
            raise FsscopeError(f"check: unknown personality {self.personality!r} (choose from "
                               f"{', '.join(PERSONALITIES)})")
        if not 0 < self.precision < 1:
            raise FsscopeError(f"check: precision is a fraction of the mean (0.05 = ±5 %), got {self.precision!r}")
        if not 0.5 <= self.confidence < 1:
            raise FsscopeError(f"check: confidence must be in [0.5, 1), got {self.confidence!r}")
        if not self.budget_s > 0 or not self.sample_s > 0:
            raise FsscopeError("check: budget_s and sample_s must be positive")
        if self.runs is not None and (not isinstance(self.runs, int) or self.runs < 2):
            raise FsscopeError(f"check: runs must be a whole number >= 2, got {self.runs!r}")
        if self.dataset_bytes is not None and (not isinstance(self.dataset_bytes, int) or self.dataset_bytes < 1):
            raise FsscopeError(f"check: dataset_bytes must be a positive whole number, got {self.dataset_bytes!r}")



def least_s(spec: Spec, formats: bool = True) -> float:
    """The shortest this check can take, whatever its budget: start-up, the audit's watch and
    (calibrating) at least two runs of MIN_RUN_S, each on a fresh file system."""
    if not spec.calibrate:
        return STARTUP_S + spec.sample_s
    return STARTUP_S + spec.sample_s + (spec.runs or 2) * (MIN_RUN_S + RUN_OVERHEAD_S[formats])


def shortfall(spec: Spec, formats: bool = True) -> str | None:
    """Why this budget cannot hold the whole check, in words (None: it can). The job still runs
    and stops at the budget with what it has: the audit, and the calibration runs that fit."""
    floor = least_s(spec, formats)
    if spec.budget_s >= floor:
        return None
    runs = f" and {spec.runs or 2} calibration runs of at least {MIN_RUN_S:g} s, each on a fresh " \
           f"{'file system' if formats else 'directory'}" if spec.calibrate else ""
    return (f"its {spec.budget_s:g}-s budget is shorter than the least it takes, about {floor:.0f} s "
            f"(start-up, {spec.sample_s:g} s watching the device{runs})")


def plan(spec: Spec, left_s: float, overhead_s: float) -> tuple[int, float]:
    """(runs, seconds per run) that fit ``left_s``: several short runs beat few long ones for
    the CV, but each run needs MIN_RUN_S for the stabilisation test to mean anything."""
    runs = spec.runs or (4 if spec.budget_s <= 90 else 5 if spec.budget_s <= 300 else min(10, int(spec.budget_s // 60)))
    duration = (left_s - runs * overhead_s) / runs
    while duration < MIN_RUN_S and runs > 2 and spec.runs is None:
        runs -= 1
        duration = (left_s - runs * overhead_s) / runs
    return runs, max(MIN_RUN_S, math.floor(duration))


class CalibrationRun(Record, frozen=True, kw_only=True):
    """A calibration run as it ends: cumulative throughput, length, ops/s per 1-s bin."""

    run: int = 0
    ops_per_s: float | None = None
    elapsed_s: float | None = None
    series: list[float] = []


class CheckEvent(DataRecord, frozen=True, kw_only=True, tag="check"):
    """An audit item (``finding``), or a calibration run with the estimate after it."""

    finding: Finding | None = None
    calibration_run: CalibrationRun | None = None
    estimate: Estimate | None = None


DATA = (CheckEvent,)  # the check's own event kind (registry.decode_event reads it)


class Checked(Record, frozen=True, kw_only=True):
    """The file system the audit read and the disks behind it."""

    path: str = ""
    mountpoint: str = ""
    fs: str = ""
    source: str = ""
    disks: list[str] = []
    loop_backing: str | None = None


class Report(ReportRecord, frozen=True, kw_only=True):
    """The check's report: the verdict first, then what it rests on. ``flags`` are the verdict
    and each bad finding as the TUI's flag list shows them; ``counts`` findings per severity."""

    verdict: str = ""
    headline: str = ""
    fix_first: list[str] = []
    findings: list[Finding] = []
    calibration: Calibration | None = None
    target: ReportTarget | None = None
    checked: Checked | None = None
    recipe: str | None = None
    spec: Spec | None = None
    elapsed_s: float | None = None
    notes: list[str] = []
    flags: list[dict[str, Any]] = []
    counts: dict[str, int] = {}


def _finite(x: Any) -> float | None:
    """A figure for the report: None where the runs do not give one (NaN, infinity)."""
    return float(x) if x is not None and math.isfinite(x) else None


def calibration_figures(spec: Spec, counts: list[np.ndarray], elapsed: list[float], duration_s: float,
                        workload: Workload | None = None) -> Calibration:
    """The report's calibration from the runs' per-second op counts."""
    ops = [float(c.sum() / e) if e > 0 else math.nan for c, e in zip(counts, elapsed)]
    cv = _finite(C.coefficient_of_variation(ops)) if len(ops) >= 2 else None
    band = spec.precision / 2
    stable = [C.stable_after_s(c, BIN_S, band) for c in counts]
    curve = C.window_curve(counts, BIN_S)
    normal = C.runs_needed_normal(cv, spec.precision, spec.confidence) if cv is not None else None
    history = []
    for k in range(2, len(ops) + 1):
        cv_k = C.coefficient_of_variation(ops[:k])
        history.append(HistoryEntry(after_runs=k, cv=_finite(cv_k),
                                    runs_needed=C.runs_needed(cv_k, spec.precision, spec.confidence)))
    return Calibration(
        personality=spec.personality,
        runs=[CalibrationRunFigures(ops_per_s=_finite(o), elapsed_s=e, stable_after_s=s)
              for o, e, s in zip(ops, elapsed, stable)],
        cv=cv,
        cv_upper=_finite(C.cv_upper(cv, len(ops), spec.confidence)) if cv is not None else None,
        relative_range=_finite(C.cumulative_relative_range(ops)) if len(ops) >= 2 else None,
        precision=spec.precision,
        confidence=spec.confidence,
        runs_needed=C.runs_needed(cv, spec.precision, spec.confidence) if cv is not None else None,
        runs_needed_normal=normal,
        runs_needed_method=(f"Student-t, iterated: smallest n with n ≥ (t({spec.confidence:g}, n−1) · CV / "
                            f"{spec.precision:g})²; the normal approximation (z) would say "
                            f"{normal if normal is not None else '–'}"),
        runs_needed_history=history,
        ci_halfwidth_now=_finite(C.ci_relative_halfwidth(ops, spec.confidence)),
        duration_s_needed=None if any(s is None for s in stable) or not stable else max(s for s in stable if s is not None),
        window_s_needed=C.window_needed_s(curve, spec.precision),
        window_curve=[WindowPoint(window_s=w, median_relative_range=_finite(rr)) for w, rr in curve],
        criterion=C.criterion_text(band, BIN_S),
        window_criterion=("Throughput-N window: the smallest N from which on the median, over the windows, of the "
                          f"relative range (max−min)/mean across runs stays below {spec.precision:.0%}"),
        run_s=duration_s,
        workload=workload,
    )


def run(ctx: Any, spec: Spec) -> Report:
    t_start = time.monotonic()
    # the budget bounds the whole check's wall time, the command's start-up included
    deadline = t_start + spec.budget_s - STARTUP_S
    kind = ctx.target.spec.kind
    notes: list[str] = []
    short = shortfall(spec, kind != "dir")
    if short:
        ctx.log(f"check: {short}; it stops at the budget with what it has")
        notes.append(f"{short}: stopped at the budget with what it had")
    ctx.phase("audit")
    with ctx.fresh_fs() as fs:
        info = locate(str(fs.workdir), formatted_by_fsscope=kind != "dir")
        if kind == "dir":
            info = dataclasses.replace(info, path=ctx.target.spec.path)
        notes += info.notes   # what the mount account adds: an overlay judged by its upper, …
        findings = audit.run_audit(info, sample_s=spec.sample_s, dataset_bytes=spec.dataset_bytes,
                                   progress=lambda what: ctx.phase(f"audit: {what}"))
        capacity = int(ctx.target.spec.size_bytes)
        if kind == "dir":
            capacity = min(capacity, os.statvfs(fs.workdir).f_bavail * os.statvfs(fs.workdir).f_frsize)
    for f in findings:
        ctx.emit(CheckEvent(finding=f))

    counts: list[np.ndarray] = []
    elapsed: list[float] = []
    calibration = None
    duration_s = 0.0
    if spec.calibrate and not ctx.cancelled:
        left = deadline - time.monotonic()
        overhead = RUN_OVERHEAD_S[kind != "dir"]
        runs, duration_s = plan(spec, left, overhead)
        # a small file set: populating it must not eat the budget (the report names it)
        pspec = P.default_spec(spec.personality, capacity_bytes=min(capacity, 256 << 20 if spec.budget_s > 90 else 96 << 20),
                               duration_s=float(duration_s), seed=1, bin_s=BIN_S,
                               latency_window_s=float(duration_s))
        workload = Workload(personality=pspec.name, nfiles=pspec.nfiles, workers=pspec.workers,
                            mean_file_size_bytes=pspec.mean_file_size_bytes, duration_s=duration_s, runs=runs)
        ctx.log(f"calibration: {runs} runs × {duration_s:g} s of {pspec.name} "
                f"({pspec.nfiles} files, {pspec.workers} workers), fresh {'directory' if kind == 'dir' else 'file system'} each")
        try:
            _calibrate(ctx, spec, pspec, runs, duration_s, overhead, deadline, counts, elapsed, notes)
        except FsscopeError as exc:  # a run failed (no space, mkfs…): judge from the runs that finished
            notes.append(f"calibration stopped after {len(counts)} run(s): {exc}")
            ctx.log(f"calibration stopped: {exc}")
        calibration = calibration_figures(spec, counts, elapsed, duration_s, workload)
        if kind == "dir" or ctx.recipe is None:
            notes.append("--dir: each calibration run used a fresh scratch subdirectory, not a fresh file system "
                         "(the file system's age and layout carry over between runs)")
    return _report(ctx, spec, findings, calibration, info, notes, t_start)


def _calibrate(ctx: Any, spec: Spec, pspec: P.PersonalitySpec, runs: int, duration_s: float, overhead: float,
               deadline: float,
               counts: list[np.ndarray], elapsed: list[float], notes: list[str]) -> None:
    """The calibration runs that fit before ``deadline``; appends each finished run's counts
    and length as it goes. A run the deadline cuts short is left out (a partial run would
    bias the CV)."""

    for r in range(runs):
        if ctx.cancelled:
            break
        # a run that no longer fits whole is shortened to what is left, down to MIN_RUN_S: the
        # plan split the budget with a guessed overhead, and a loaded machine formats slower
        run_s = min(duration_s, math.floor(deadline - time.monotonic() - overhead))
        if run_s < MIN_RUN_S:
            notes.append(f"budget reached after {r} calibration run(s)")
            ctx.log(f"calibration: budget reached after {r} run(s)")
            break
        if run_s < duration_s:
            notes.append(f"calibration run {r + 1} shortened to {run_s:g} s to end within the budget")
        ctx.phase(f"calibration run {r + 1} of {runs}", run=r, runs=runs)
        run_start = time.monotonic()
        with ctx.run_fs(True) as fs:
            P.populate(fs.workdir, pspec, seed=1, evict_cache=True)
            ctx.after_populate()
            overhead = time.monotonic() - run_start  # what formatting + populating really costs here

            def on_window(sample, r=r):
                ctx.progress(r * duration_s + min(sample.t_s, duration_s), runs * duration_s, unit="s",
                             info=f"run {r + 1}/{runs}  {sample.ops_per_s:,.0f} ops/s")

            result = P.run(fs.workdir, pspec, P.RunOptions(
                duration_s=float(run_s), on_window=on_window,
                cancelled=lambda: ctx.cancelled or time.monotonic() > deadline))
        if result.cancelled:
            if not ctx.cancelled:
                notes.append(f"budget reached during calibration run {r + 1} (left out)")
                ctx.log(f"calibration: budget reached during run {r + 1}; it is left out")
            break
        c = result.counts.sum(axis=0)
        counts.append(c)
        elapsed.append(result.elapsed_s)
        ctx.run_dir.save_array(f"run{r}_counts", result.counts)
        figures = calibration_figures(spec, counts, elapsed, duration_s)
        done = CalibrationRun(run=r, ops_per_s=_finite(result.ops_per_s), elapsed_s=result.elapsed_s,
                              series=[float(x) / BIN_S for x in c])
        ctx.emit(CheckEvent(calibration_run=done, estimate=figures.estimate()))


def _report(ctx: Any, spec: Spec, findings: list[Finding], calibration: Calibration | None, info: TargetInfo,
            notes: list[str], t_start: float) -> Report:
    verdict = decide(findings, calibration)
    flags = [{"kind": "verdict", "flag": "verdict", "title": verdict.headline,
              "note": "\n".join(verdict.fix_first) or "nothing to fix"}]
    flags += [{"kind": f.id, "flag": f.id, "title": f"{f.severity}: {f.title}",
               "note": f"{f.evidence}\n{f.effect}" + (f"\nfix: {f.fix}" if f.fix else "")}
              for f in findings if f.severity == "bad"]
    return Report(
        verdict=verdict.verdict, headline=verdict.headline, fix_first=list(verdict.fix_first),
        findings=[msgspec.structs.replace(f, values=plain(f.values)) for f in findings],
        calibration=calibration,
        target=ctx.target.spec.reported(),
        checked=Checked(path=info.path, mountpoint=info.mountpoint, fs=info.fs, source=info.source,
                        disks=list(info.disks), loop_backing=info.loop_backing),
        recipe=ctx.recipe.name if ctx.recipe is not None else None,
        spec=spec, elapsed_s=time.monotonic() - t_start, notes=notes, flags=flags,
        counts={s: sum(1 for f in findings if f.severity == s) for s in ("bad", "warn", "unknown", "ok")})
