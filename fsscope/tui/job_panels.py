"""Which parameter panel each job gets on the setup screen. A job without an entry gets the
generic panel built from its Spec dataclass; add a line here when a job brings its own."""

from __future__ import annotations

from fsscope.tui.widgets.job_params import JobParams
from fsscope.tui.widgets.probe_params import ProbeParams

PANELS: dict[str, type[JobParams]] = {
    "probe": ProbeParams,
}


def register_panel(job: str, panel: type[JobParams]) -> None:
    PANELS[job] = panel


def panel_for(job: str, initial: dict | None = None) -> JobParams:
    return PANELS.get(job, JobParams)(job, initial, id=f"params-{job}")
