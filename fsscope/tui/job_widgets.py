"""Each job's widgets: its parameter panel on the setup screen and its main view on the live
screen (the view draws the job's model, :mod:`fsscope.tui.job_ui`): the parts its descriptor
names (``Job.panel``, ``Job.view`` in :mod:`fsscope.engine.jobs`).

A job without a panel of its own gets the generic panel built from its Spec; one without a
view, the heatmap of per-file latencies. Both are imported on first use: a panel when its job
is first shown on the Setup screen (it imports the job's Spec), a view when the live screen
is built (each imports its model: see job_ui, dask, scipy).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsscope.engine import jobs

if TYPE_CHECKING:
    from fsscope.tui.widgets.job_params import JobParams
    from fsscope.tui.widgets.live_view import LiveView


def panel_class(job: str) -> type[JobParams]:
    """The setup screen's parameter panel class of ``job``, imported now."""
    return jobs.resolve(jobs.job(job).panel or jobs.GENERIC_PANEL)


def panel_for(job: str, initial: dict | None = None) -> JobParams:
    """The setup screen's parameter panel for ``job``."""
    return panel_class(job)(job, initial, id=f"params-{job}")


def view_class(job: str) -> type[LiveView]:
    """The live screen's main view of ``job``, imported now (see above)."""
    ref = jobs.JOBS[job].view if job in jobs.JOBS else ""
    return jobs.resolve(ref or jobs.HEAT_VIEW)


def view_classes() -> list[type[LiveView]]:
    """Every distinct view class, the heatmap first (the live screen mounts one of each)."""
    out: list[type[LiveView]] = [jobs.resolve(jobs.HEAT_VIEW)]
    for job in jobs.JOBS:
        cls = view_class(job)
        if cls not in out:
            out.append(cls)
    return out
