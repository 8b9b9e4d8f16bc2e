"""Each job's data model in the TUI (its panel and view: :mod:`fsscope.tui.job_widgets`), the
part its descriptor names (``Job.model`` in :mod:`fsscope.engine.jobs`).

A job without a model (probe, smoke) is shown through the per-file latency matrix alone.
The model classes are imported on first use: the study jobs' models import dask and scipy
(all the models: ~620 more modules, 3-4 s at a load of 15 on 2 CPUs), which neither the
TUI's start nor the replay of another job needs. This module stays free of Textual: replay
and the CLI use the models without it.

A model has ``version``, ``notes``, ``telemetry``, ``feed(event: Event) -> changed`` (the job's
events as records: its own DataRecord kinds, or Data), ``finish(report)`` and a classmethod
``from_run(run_dir, spec, report)``.
"""

from __future__ import annotations

from typing import Any, Protocol

from fsscope.engine import jobs
from fsscope.engine.events import Event


class JobModel(Protocol):
    version: int
    notes: list[str]
    telemetry: list[tuple[float, float, float]]

    def feed(self, event: Event) -> bool: ...

    def finish(self, report: dict | None) -> None: ...


def model_class(job: str) -> Any:
    """The model class of ``job`` (None: the latency matrix alone), imported now (see above):
    the part its descriptor names (:mod:`fsscope.engine.jobs`)."""
    ref = jobs.JOBS[job].model if job in jobs.JOBS else ""
    return jobs.resolve(ref) if ref else None


def model_for(job: str, spec: dict | None = None) -> JobModel | None:
    cls = model_class(job)
    return cls(spec or {}) if cls is not None else None


def model_from_run(job: str, run_dir, spec: dict, report: dict | None) -> JobModel | None:
    cls = model_class(job)
    return cls.from_run(run_dir, spec, report) if cls is not None else None
