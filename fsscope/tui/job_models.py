"""Which data model each job's live view fills (no Textual: replay uses it too).

A job with an entry here gets its own model object in ``JobView.data``: the live screen feeds
it the job's events (``feed(event) -> changed``), hands it the report when the job ends
(``finish(report)``), and a replay builds it from the run directory
(``from_run(run_dir, spec, report)``). Jobs without an entry (probe, smoke) are shown
through the latency matrix alone. Its widget is chosen in :mod:`fsscope.tui.live_views`.
"""

from __future__ import annotations

from typing import Any, Protocol

from fsscope.tui.aging_model import AgingModel, FragModel
from fsscope.tui.bench_model import BenchModel
from fsscope.tui.check_model import CheckModel
from fsscope.tui.syncwrite_model import SyncWriteModel


class JobModel(Protocol):
    version: int
    notes: list[str]
    telemetry: list[tuple[float, float, float]]

    def feed(self, event: dict) -> bool: ...

    def finish(self, report: dict | None) -> None: ...


MODELS: dict[str, Any] = {
    "bench": BenchModel,
    "syncwrite": SyncWriteModel,
    "age": AgingModel,
    "frag": FragModel,
    "check": CheckModel,
}


def register_model(job: str, model: Any) -> None:
    MODELS[job] = model


def model_for(job: str, spec: dict | None = None) -> JobModel | None:
    cls = MODELS.get(job)
    return cls(spec or {}) if cls is not None else None


def model_from_run(job: str, run_dir, spec: dict, report: dict | None) -> JobModel | None:
    cls = MODELS.get(job)
    return cls.from_run(run_dir, spec, report) if cls is not None else None
