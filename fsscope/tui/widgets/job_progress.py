"""Progress of each job of the plan: phase (format, populate, run k of R…), a bar,
elapsed and remaining time, status."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.widget import Widget

from fsscope.format import format_duration, visible
from fsscope.tui.model import JobState

STATUS_STYLE = {"running": "bold", "ok": "green", "failed": "bold red", "cancelled": "yellow",
                "interrupted": "red", "waiting": "dim", "cancelling…": "bold yellow", "killing…": "bold red"}
STOPPING = {"cancelling": "cancelling… it stops, unmounts and keeps what it measured",
            "killing": "killing… fsscope undoes what it left mounted or attached"}
BAR_WIDTH = 24
ENDED = {"ok": "finished", "failed": "failed", "cancelled": "cancelled: kept what it measured",
         "interrupted": "interrupted: kept what it measured"}


def bar(fraction: float | None, width: int = BAR_WIDTH) -> Text:
    if fraction is None:
        return Text("·" * width, style="dim")
    full = int(round(fraction * width))
    text = Text("█" * full, style="bold")
    text.append("░" * (width - full), style="dim")
    return text


class JobProgress(Widget):
    DEFAULT_CSS = """
    JobProgress { height: auto; max-height: 8; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.jobs: list[JobState] = []
        self.headline = "No job yet: pick a target, recipe and job on the setup screen (F2), then Start."
        self.frozen_now: float | None = None  # replay / tests: a fixed clock

    def set_jobs(self, jobs: list[JobState], headline: str = "") -> None:
        self.jobs = jobs
        self.headline = headline
        self.refresh(layout=True)

    def get_content_height(self, container, viewport, width) -> int:
        return 1 + max(1, len(self.jobs))

    def render(self) -> Group:
        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column(width=10, no_wrap=True)
        table.add_column(ratio=2, no_wrap=True, overflow="ellipsis")
        table.add_column(width=BAR_WIDTH + 6, no_wrap=True)
        table.add_column(width=26, no_wrap=True)
        table.add_column(width=12, no_wrap=True)
        for job in self.jobs:
            frac = job.fraction
            if job.status == "ok":
                frac = 1.0  # a job that ended well is done (aging's bar stopped at 80 %: measuring came after)
            pct = f" {frac * 100:3.0f}%" if frac is not None else ""
            # a finished job says how it ended, not the phase it was last in (the first
            # phase of a probe's last run read as if it were still formatting)
            phase = ENDED.get(job.status, job.phase) if job.finished else job.phase
            status = job.status
            if job.stopping and not job.finished:  # asked to stop: no more counting down
                phase = STOPPING[job.stopping] if job.status == "running" else "not started: the plan was cancelled"
                status = f"{job.stopping}…" if job.status == "running" else job.status
            if job.error:
                phase = f"{phase}: {job.error}"
            elapsed = format_duration(job.elapsed_s(self.frozen_now))
            remaining = job.remaining_s(self.frozen_now)
            if job.finished:
                times = f"{elapsed} in all"
            elif job.status == "waiting":
                times = "will not start" if job.stopping else "not started"
            elif job.stopping:
                times = f"{elapsed} elapsed, stopping"
            elif remaining is None:  # no progress reported yet: no estimate, not "– left"
                times = f"{elapsed} elapsed, estimating"
            elif remaining <= 0.0:
                times = f"{elapsed} elapsed, overdue"  # past the estimate, still running
            else:
                times = f"{elapsed} elapsed, {format_duration(remaining)} left"
            table.add_row(Text(job.job, style="bold"), Text(visible(phase), overflow="ellipsis", no_wrap=True),
                          bar(frac) + Text(pct),
                          Text(times, style="dim"),
                          Text(status, style=STATUS_STYLE.get(status, "")))
        headline = Text(visible(self.headline), style="dim", overflow="ellipsis", no_wrap=True)
        return Group(headline, table) if self.jobs else Group(headline)
