"""Each job's face in the TUI, declared in one place: its parameter panel on the setup screen,
its main view on the live screen, and the data model that view draws.

    register("syncwrite", panel="fsscope.tui.widgets.syncwrite_params:SyncWriteParams",
             view="fsscope.tui.widgets.syncwrite_view:SyncWriteView",
             model="fsscope.tui.syncwrite_model:SyncWriteModel")

Any part may be left out: the generic panel built from the job's Spec dataclass, the heatmap
view (per-file latencies) and no model (the latency matrix alone) are the defaults. Parts are
given as "module:Class" (imported on first use, so this module and the models stay free of
Textual: replay and the CLI use the models without it) or as the class itself.

A model has ``version``, ``notes``, ``telemetry``, ``feed(event: Event) -> changed`` (the job's
events as records: its own DataRecord kinds, or Data), ``finish(report)`` and a classmethod ``from_run(run_dir, spec, report)``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from typing import Any, Protocol

from fsscope.engine.events import Event

DEFAULT_PANEL = "fsscope.tui.widgets.job_params:JobParams"
DEFAULT_VIEW = "fsscope.tui.widgets.heat_view:HeatView"


class JobModel(Protocol):
    version: int
    notes: list[str]
    telemetry: list[tuple[float, float, float]]

    def feed(self, event: Event) -> bool: ...

    def finish(self, report: dict | None) -> None: ...


@dataclass(frozen=True)
class JobUI:
    panel: str | type | None = None
    view: str | type | None = None
    model: str | type | None = None


JOBS: dict[str, JobUI] = {}


def register(job: str, *, panel: str | type | None = None, view: str | type | None = None,
             model: str | type | None = None) -> None:
    """Declare (or change) parts of a job's UI; parts not given stay as they were."""
    given = {k: v for k, v in (("panel", panel), ("view", view), ("model", model)) if v is not None}
    JOBS[job] = replace(JOBS.get(job, JobUI()), **given)


register("probe", panel="fsscope.tui.widgets.probe_params:ProbeParams", view=DEFAULT_VIEW)
register("smoke", view=DEFAULT_VIEW)
register("bench", panel="fsscope.tui.widgets.bench_params:BenchParams",
         view="fsscope.tui.widgets.bench_view:BenchView", model="fsscope.tui.bench_model:BenchModel")
register("syncwrite", panel="fsscope.tui.widgets.syncwrite_params:SyncWriteParams",
         view="fsscope.tui.widgets.syncwrite_view:SyncWriteView",
         model="fsscope.tui.syncwrite_model:SyncWriteModel")
register("age", panel="fsscope.tui.widgets.age_params:AgeParams",
         view="fsscope.tui.widgets.aging_view:AgingView", model="fsscope.tui.aging_model:AgingModel")
register("scan", view="fsscope.tui.widgets.scan_view:ScanView", model="fsscope.tui.scan_model:ScanModel")
register("frag", view="fsscope.tui.widgets.aging_view:FragView", model="fsscope.tui.aging_model:FragModel")
register("check", panel="fsscope.tui.widgets.check_params:CheckParams",
         view="fsscope.tui.widgets.check_view:CheckView", model="fsscope.tui.check_model:CheckModel")
register("variation", panel="fsscope.tui.widgets.variation_params:VariationParams",
         view="fsscope.tui.widgets.variation_view:VariationView",
         model="fsscope.tui.variation_model:VariationModel")
register("ladder", panel="fsscope.tui.widgets.ladder_params:LadderParams", view="fsscope.tui.widgets.ladder_view:LadderView", model="fsscope.tui.ladder_model:LadderModel")
register("explore", panel="fsscope.tui.widgets.explore_params:ExploreParams",
         view="fsscope.tui.widgets.explore_view:ExploreView", model="fsscope.tui.explore_model:ExploreModel")


def _resolve(part: str | type) -> type:
    if not isinstance(part, str):
        return part
    module, _, name = part.partition(":")
    return getattr(importlib.import_module(module), name)


def panel_class(job: str) -> type:
    return _resolve(JOBS.get(job, JobUI()).panel or DEFAULT_PANEL)


def panel_for(job: str, initial: dict | None = None):
    """The setup screen's parameter panel for ``job``."""
    return panel_class(job)(job, initial, id=f"params-{job}")


def view_class(job: str) -> type:
    return _resolve(JOBS.get(job, JobUI()).view or DEFAULT_VIEW)


def view_classes() -> list[type]:
    """Every distinct view class, the default first (the live screen mounts one of each)."""
    out = [_resolve(DEFAULT_VIEW)]
    for ui in JOBS.values():
        cls = _resolve(ui.view) if ui.view is not None else None
        if cls is not None and cls not in out:
            out.append(cls)
    return out


def model_class(job: str) -> Any:
    part = JOBS.get(job, JobUI()).model
    return _resolve(part) if part is not None else None


def model_for(job: str, spec: dict | None = None) -> JobModel | None:
    cls = model_class(job)
    return cls(spec or {}) if cls is not None else None


def model_from_run(job: str, run_dir, spec: dict, report: dict | None) -> JobModel | None:
    cls = model_class(job)
    return cls.from_run(run_dir, spec, report) if cls is not None else None
