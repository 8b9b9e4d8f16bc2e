"""Which main view the live screen shows for each job (chosen by the job's name). A job
without an entry gets the heatmap view (it shows whatever per-file latencies the job records).

To give a new job its own view: write a :class:`~fsscope.tui.widgets.live_view.LiveView`
subclass (one widget file), a data model with ``feed``/``finish``/``from_run`` registered in
:mod:`fsscope.tui.job_models`, and add a line here."""

from __future__ import annotations

from fsscope.tui.widgets.aging_view import AgingView, FragView
from fsscope.tui.widgets.bench_view import BenchView
from fsscope.tui.widgets.check_view import CheckView
from fsscope.tui.widgets.heat_view import HeatView
from fsscope.tui.widgets.live_view import LiveView
from fsscope.tui.widgets.syncwrite_view import SyncWriteView

DEFAULT_VIEW: type[LiveView] = HeatView

VIEWS: dict[str, type[LiveView]] = {
    "probe": HeatView,
    "smoke": HeatView,
    "bench": BenchView,
    "syncwrite": SyncWriteView,
    "age": AgingView,
    "frag": FragView,
    "check": CheckView,
}


def register_view(job: str, view: type[LiveView]) -> None:
    VIEWS[job] = view


def view_class(job: str) -> type[LiveView]:
    return VIEWS.get(job, DEFAULT_VIEW)


def view_classes() -> list[type[LiveView]]:
    """Every distinct view class, the default first (the live screen mounts one of each)."""
    out: list[type[LiveView]] = [DEFAULT_VIEW]
    for cls in VIEWS.values():
        if cls not in out:
            out.append(cls)
    return out
