"""Reopen a recorded run: its manifest, events and arrays become the same model objects a
live job fills (no Textual here). The flags are the report's final list when there is one
(the findings in events.ndjson are the interim ones streamed while the job ran); a job with
its own view model (bench, syncwrite) gets it rebuilt from its arrays and report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from fsscope.engine import events, registry
from fsscope.engine.events import Error, Finding, Log, Phase, Progress, Result
from fsscope.errors import FsscopeError
from fsscope.store import Manifest, RunDir
from fsscope.targets import TargetSpec
from fsscope.tui.config import recipe_label
from fsscope.tui.job_ui import model_from_run
from fsscope.tui.model import Flag, JobState, LatencyMatrix, WindowStats, flag_from_event, flags_from_report


@dataclass
class RunRecord:
    """A recorded run as the views need it."""

    run: RunDir
    job: JobState
    matrix: LatencyMatrix | None
    windows: WindowStats | None
    flags: list[Flag] = field(default_factory=list)
    log_lines: list[str] = field(default_factory=list)
    target: str = ""
    recipe: str = ""
    data: Any = None
    """The job's own view model (BenchModel, SyncWriteModel…), None for probe-shaped jobs."""

    @property
    def title(self) -> str:
        return f"{self.run.id}  ({self.job.job}, {self.job.status})"


def describe_target(manifest: Manifest) -> str:
    return TargetSpec.describe_recorded(manifest.target_spec)  # as the live screen names it (one name per target)


SHORT_KINDS = {"ram": "RAM image", "image": "image", "device": "device", "dir": "dir"}


def short_target(manifest: Manifest) -> str:
    """The target in the words that tell it apart where its whole name does not fit (the runs
    table at 80 columns): its kind and the last part of its path ("image demo.img"); a RAM
    image's path is fsscope's choice and says nothing."""
    recorded = manifest.target_spec
    kind = str(recorded.get("kind", "?"))
    path = str(recorded.get("path") or "")
    name = "" if kind == "ram" else (PurePosixPath(path).name or path)
    return f"{SHORT_KINDS.get(kind, kind)} {name}".strip()


def describe_recipe(manifest: Manifest) -> str:
    """What the run ran with: a study's own recipes, else the target's recipe."""
    return recipe_label(manifest.job or "", manifest.spec or {}, manifest.recipe_name or "-")


def job_state(run: RunDir, manifest: Manifest) -> JobState:
    """The recorded job as the progress panel shows it: its Spec record when the recorded
    spec still decodes (else None, and the plain data the models read)."""
    name = manifest.job or "?"
    try:
        spec = registry.spec_from_data(name, manifest.spec or {}) if name in registry.JOBS else None
    except FsscopeError:
        spec = None
    return JobState(index=0, job=name, spec=spec, spec_data=dict(manifest.spec or {}),
                    run_id=run.id, run_path=str(run.path))


def load_run(run: RunDir) -> RunRecord:
    manifest = run.info()
    job = job_state(run, manifest)
    flags: list[Flag] = []
    log_lines: list[str] = []
    last_t = 0.0
    kinds = registry.data_kinds(job.job) if job.job in registry.JOBS else None
    for event in events.read_run(run, kinds):
        last_t = max(last_t, event.t)
        if isinstance(event, Phase):
            job.phase = event.name
        elif isinstance(event, Progress):
            job.done, job.total, job.unit = event.done, event.total, event.unit
        elif isinstance(event, Finding):
            flags.append(flag_from_event(event))
        elif isinstance(event, Log):
            log_lines.append(event.line)
            log_lines.extend("    " + ln for ln in event.stderr.splitlines())
        elif isinstance(event, Result):
            job.report = registry.report_from_data(job.job, event.report)  # the job's Report record
        elif isinstance(event, Error):
            job.error = event.message
    job.status = run.status()
    job.error = job.error or manifest.error
    job.report = job.report or registry.report_from_data(job.job, run.report())
    job.recorded_elapsed_s = last_t
    final = flags_from_report(job.report)
    if final is not None:
        flags = final
    data = model_from_run(job.job, run, job.spec_data, job.report)
    failed = getattr(data, "fail", None)  # a report-only model (scan, frag): why there is none
    if job.report is None and job.status != "ok" and callable(failed):
        failed(job.error)
    own = getattr(data, "final_flags", None)
    if final is None and callable(own) and (own_flags := own()) is not None:
        flags = own_flags  # a job whose report has no flags of its own (age: the stop reason)
    matrix = windows = None
    if data is None and "latency_ns" in run.arrays():
        try:
            matrix = LatencyMatrix.from_array(run.load_array("latency_ns", mmap=False))
            windows = WindowStats.from_matrix(matrix.values)
        except (OSError, ValueError):
            matrix = windows = None
    return RunRecord(run=run, job=job, matrix=matrix, windows=windows, flags=flags,
                     log_lines=log_lines, target=describe_target(manifest),
                     recipe=describe_recipe(manifest), data=data)
