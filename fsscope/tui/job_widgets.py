"""Each job's widgets: its parameter panel on the setup screen and its main view on the live
screen (the view draws the job's model, :mod:`fsscope.tui.job_ui`).

A job without a panel of its own gets the generic panel built from its Spec; one without a
view, the heatmap of per-file latencies. The panels are imported here (all of them: 8
modules); the views on first use, since each imports its model (see job_ui: dask, scipy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsscope.tui.job_ui import JOBS
from fsscope.tui.widgets.age_params import AgeParams
from fsscope.tui.widgets.bench_params import BenchParams
from fsscope.tui.widgets.check_params import CheckParams
from fsscope.tui.widgets.explore_params import ExploreParams
from fsscope.tui.widgets.job_params import JobParams
from fsscope.tui.widgets.ladder_params import LadderParams
from fsscope.tui.widgets.probe_params import ProbeParams
from fsscope.tui.widgets.syncwrite_params import SyncWriteParams
from fsscope.tui.widgets.variation_params import VariationParams

if TYPE_CHECKING:
    from fsscope.tui.widgets.live_view import LiveView

PANELS: dict[str, type[JobParams]] = {
    "probe": ProbeParams, "bench": BenchParams, "syncwrite": SyncWriteParams, "age": AgeParams,
    "check": CheckParams, "variation": VariationParams, "ladder": LadderParams, "explore": ExploreParams}


def panel_class(job: str) -> type[JobParams]:
    return PANELS.get(job, JobParams)


def panel_for(job: str, initial: dict | None = None) -> JobParams:
    """The setup screen's parameter panel for ``job``."""
    return panel_class(job)(job, initial, id=f"params-{job}")


def view_class(job: str) -> type[LiveView]:
    """The live screen's main view of ``job``, imported now (see above)."""
    from fsscope.tui.widgets.heat_view import HeatView

    match job:
        case "bench":
            from fsscope.tui.widgets.bench_view import BenchView
            return BenchView
        case "syncwrite":
            from fsscope.tui.widgets.syncwrite_view import SyncWriteView
            return SyncWriteView
        case "age":
            from fsscope.tui.widgets.aging_view import AgingView
            return AgingView
        case "frag":
            from fsscope.tui.widgets.aging_view import FragView
            return FragView
        case "scan":
            from fsscope.tui.widgets.scan_view import ScanView
            return ScanView
        case "check":
            from fsscope.tui.widgets.check_view import CheckView
            return CheckView
        case "variation":
            from fsscope.tui.widgets.variation_view import VariationView
            return VariationView
        case "ladder":
            from fsscope.tui.widgets.ladder_view import LadderView
            return LadderView
        case "explore":
            from fsscope.tui.widgets.explore_view import ExploreView
            return ExploreView
    return HeatView


def view_classes() -> list[type[LiveView]]:
    """Every distinct view class, the heatmap first (the live screen mounts one of each)."""
    out: list[type[LiveView]] = [view_class("probe")]
    for job in JOBS:
        cls = view_class(job)
        if cls not in out:
            out.append(cls)
    return out
