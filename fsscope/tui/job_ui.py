"""Each job's data model in the TUI (its panel and view: :mod:`fsscope.tui.job_widgets`).

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

from fsscope.engine.events import Event

#: Every job the TUI shows (tests check each engine job is here).
JOBS = ("probe", "smoke", "bench", "syncwrite", "age", "scan", "frag", "check", "variation", "ladder", "explore",
        "watch", "replay")


class JobModel(Protocol):
    version: int
    notes: list[str]
    telemetry: list[tuple[float, float, float]]

    def feed(self, event: Event) -> bool: ...

    def finish(self, report: dict | None) -> None: ...


def model_class(job: str) -> Any:
    """The model class of ``job`` (None: the latency matrix alone), imported now (see above)."""
    match job:
        case "bench":
            from fsscope.tui.bench_model import BenchModel
            return BenchModel
        case "syncwrite":
            from fsscope.tui.syncwrite_model import SyncWriteModel
            return SyncWriteModel
        case "age":
            from fsscope.tui.aging_model import AgingModel
            return AgingModel
        case "frag":
            from fsscope.tui.aging_model import FragModel
            return FragModel
        case "scan":
            from fsscope.tui.scan_model import ScanModel
            return ScanModel
        case "check":
            from fsscope.tui.check_model import CheckModel
            return CheckModel
        case "variation":
            from fsscope.tui.variation_model import VariationModel
            return VariationModel
        case "ladder":
            from fsscope.tui.ladder_model import LadderModel
            return LadderModel
        case "explore":
            from fsscope.tui.explore_model import ExploreModel
            return ExploreModel
    return None


def model_for(job: str, spec: dict | None = None) -> JobModel | None:
    cls = model_class(job)
    return cls(spec or {}) if cls is not None else None


def model_from_run(job: str, run_dir, spec: dict, report: dict | None) -> JobModel | None:
    cls = model_class(job)
    return cls.from_run(run_dir, spec, report) if cls is not None else None
