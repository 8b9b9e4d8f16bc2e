"""Which parameter panel each job gets on the setup screen. A job without an entry gets the
generic panel built from its Spec dataclass; add a line here when a job brings its own."""

from __future__ import annotations

from fsscope.tui.widgets.age_params import AgeParams
from fsscope.tui.widgets.bench_params import BenchParams
from fsscope.tui.widgets.check_params import CheckParams
from fsscope.tui.widgets.job_params import JobParams
from fsscope.tui.widgets.probe_params import ProbeParams
from fsscope.tui.widgets.syncwrite_params import SyncWriteParams

PANELS: dict[str, type[JobParams]] = {
    "probe": ProbeParams,
    "bench": BenchParams,
    "syncwrite": SyncWriteParams,
    "age": AgeParams,
    "check": CheckParams,
}


def register_panel(job: str, panel: type[JobParams]) -> None:
    PANELS[job] = panel


def panel_for(job: str, initial: dict | None = None) -> JobParams:
    return PANELS.get(job, JobParams)(job, initial, id=f"params-{job}")
