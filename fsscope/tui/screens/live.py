"""The live screen: progress of each job, the job's main view, sparklines, flags with their
notes, and the log of every external command. The same screen replays a recorded run
(``LiveScreen(record=...)``): the views are filled from the run directory instead of a job's
event stream.

The main view depends on the job (:mod:`fsscope.tui.job_widgets`): the per-file latency
heatmap for the probe, throughput over the band of earlier runs for a bench, throughput vs
latency per buffer size for a sync-write sweep. The screen is built in layers, one concern
each: :mod:`.live_views` (which job is shown, its view, flags, notes, sparklines),
:mod:`.live_telemetry` (device and CPU sparklines), :mod:`.live_stream` (what the job workers
post); here the layout, starting and cancelling a plan, a replay and the flags' export.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import ContentSwitcher, Header, Input

from fsscope.tui import exports
from fsscope.tui.config import RunPlan, recipe_label
from fsscope.tui.job_widgets import view_classes
from fsscope.tui.jobs import PlanControl, follow_plan, sample_telemetry
from fsscope.tui.model import JobState, JobView, LatencyMatrix, Series, WindowStats, spec_words
from fsscope.tui.replay import RunRecord
from fsscope.tui.screens.live_stream import LiveStream
from fsscope.tui.widgets.fit_footer import FitFooter
from fsscope.tui.widgets.flags_panel import FlagsPanel
from fsscope.tui.widgets.job_progress import JobProgress
from fsscope.tui.widgets.log_panel import LogPanel
from fsscope.tui.widgets.notes_panel import NotesPanel
from fsscope.tui.widgets.spark_panel import SparkPanel
from fsscope.tui.widgets.table_filter import TableFilter

__all__ = ["JobView", "LiveScreen"]


class LiveScreen(LiveStream):
    """Jobs run in background child processes; this screen only listens."""

    BINDINGS = [
        Binding("c", "cancel_job", "Cancel job"),
        Binding("m", "export_flags", "Flags→MD"),
        Binding("j", "next_job", "Next job", show=False),
        Binding("slash", "filter_flags", "Filter flags", show=False),  # the flags' subtitle says so
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, record: RunRecord | None = None, *, name: str | None = None, id: str | None = None):
        super().__init__(name=name, id=id)
        self.record = record
        self.jobs: list[JobState] = []
        self.views: dict[int, JobView] = {}
        self.shown: int | None = None
        self.plan: RunPlan | None = None
        self.control: PlanControl | None = None
        self.iops, self.bandwidth, self.cpu = Series(), Series(), Series()
        self.plan_cancelled = False
        self.plan_finished = False
        self._job_telemetry_s: float | None = None  # when the job last sent its own counters
        self._last_job_telemetry: dict[int, float] = {}  # run -> its last sample's t_s
        self._pending_plan: RunPlan | None = None
        self._ready = False  # on_mount has run (is_mounted turns True only after it)

    # -- layout ----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield JobProgress(id="progress")
        with Horizontal(id="live-main"):
            classes = view_classes()
            with ContentSwitcher(initial=classes[0].VIEW_ID, id="job-view"):
                for cls in classes:
                    yield cls(id=cls.VIEW_ID)
            with Vertical(id="side"):
                yield TableFilter("flags", id="flags-filter")
                yield FlagsPanel(id="flags")
                yield NotesPanel(id="notes")
        with Horizontal(id="live-bottom"):
            yield SparkPanel(id="sparks")
            yield LogPanel(id="log")
        yield FitFooter()

    def on_mount(self) -> None:
        self._ready = True
        self.query_one("#flags").border_title = "Flags"
        self.query_one("#notes").border_title = "Note"
        self.query_one("#sparks").border_title = "Live"
        self.query_one("#log").border_title = "Commands and log"
        if self.record is not None:
            self._load_record(self.record)
        self.set_interval(1.0, self._tick)
        if self._pending_plan is not None:
            plan, self._pending_plan = self._pending_plan, None
            self.begin(plan)

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "cancel_job":
            return self.running  # a finished job or a replay has nothing to cancel: not offered
        if action == "back":
            return self.record is not None
        if action == "next_job":
            return len(self.views) > 1
        return True

    # -- starting ---------------------------------------------------------------------------
    def begin(self, plan: RunPlan) -> bool:
        """Run ``plan`` (False if a plan is still running here). Before the screen is mounted
        the plan waits for ``on_mount``."""
        if self.running:
            return False
        if not self._ready:
            self._pending_plan = plan
            return True
        self._pending_plan = None
        self.plan = plan
        self.plan_cancelled = False
        self.plan_finished = False
        self.control = control = PlanControl()
        self.fs_app.plan_controls.append(control)
        self.jobs = [JobState(i, req.job, req.spec) for i, req in enumerate(plan.jobs)]
        self.views = {}
        self.shown = None
        self._job_telemetry_s = None
        recipe = plan.recipe_label()
        self.query_one("#progress", JobProgress).set_jobs(self.jobs, f"{plan.where()} · {recipe}")
        # A new plan starts from a clean view: nothing of the last job's matrix, scale, cursor,
        # sparklines or flags stays on screen (its first job's empty view is shown at once).
        self.iops, self.bandwidth, self.cpu = Series(), Series(), Series()
        self.query_one("#sparks", SparkPanel).clear()
        self.heatmap.set_matrix(None)
        if self.jobs:
            self._show(0)
        self.flags_panel.set_flags([])
        self.notes.show(None)
        self.log_panel.note(f"── plan: {', '.join(r.job for r in plan.jobs)} on {plan.where()} "
                            f"with {recipe}", style="bold")
        self.app.run_worker(partial(follow_plan, plan, self, control, runs_root=self.fs_app.config.runs_root),
                            thread=True, group="plan", exit_on_error=False, name="plan",
                            description="following the plan's job processes")
        self.app.run_worker(partial(sample_telemetry, plan, self, control), thread=True, group="telemetry",
                            exit_on_error=False, name="telemetry", description="sampling device counters")
        self.refresh_bindings()
        return True

    # -- actions ----------------------------------------------------------------------------
    def action_cancel_job(self) -> None:
        if not self.running or self.control is None:
            self.notify("No job is running.", timeout=3)
            return
        if self.control.cancel_requested.is_set():
            self.control.kill()
            self.mark_stopping("killing")
            self.log_panel.note("kill requested: the job process is killed; fsscope undoes what its "
                                "journal says it left mounted or attached", style="bold red")
            return
        self.control.cancel()
        self.mark_stopping("cancelling")
        self.log_panel.note("cancel requested: the job stops, unmounts, detaches and keeps what it "
                            "measured (press c again to kill it)", style="bold yellow")
        self.notify("Cancelling: the job stops and cleans up. Press c again to kill it.", timeout=4)

    def mark_stopping(self, how: str) -> list[str]:
        """Say on the rows, at once, that the plan's jobs are being cancelled (or killed): the
        running one stops and cleans up, the waiting ones will not start. What is running, as
        "JOB (run ID)"."""
        running = []
        for job in self.jobs:
            if not job.finished:
                job.stopping = how
                if job.status == "running":
                    running.append(f"{job.job} (run {job.run_id})" if job.run_id else job.job)
        self.query_one("#progress", JobProgress).refresh()
        self.refresh_bindings()
        return running

    def action_back(self) -> None:
        if self.record is not None:
            self.dismiss()

    def action_filter_flags(self) -> None:
        self.query_one("#flags-filter", TableFilter).open()

    @on(Input.Changed, "#flags-filter")
    def flags_filter_changed(self, event: Input.Changed) -> None:
        self.flags_panel.set_filter(event.value)

    def action_next_job(self) -> None:
        if len(self.views) > 1 and self.shown is not None:
            keys = sorted(self.views)
            self._show(keys[(keys.index(self.shown) + 1) % len(keys)])

    def action_export_flags(self) -> Path | None:
        job = self.shown_job
        view = self.views.get(self.shown) if self.shown is not None else None
        if job is None or view is None:
            self.notify("Nothing to export yet: no job has run on this screen.", timeout=3)
            return None
        context = [f"run: {job.run_id or '-'}", f"job: {job.job} ({spec_words(job.spec_data)})", f"status: {job.status}"]
        if self.plan is not None:
            context.insert(1, f"target: {self.plan.target.describe()}")
            context.insert(2, f"recipe: {recipe_label(job.job, job.spec_data, self.plan.recipe.name if self.plan.recipe else '-')}")
        elif self.record is not None:
            context.insert(1, f"target: {self.record.target}")
            context.insert(2, f"recipe: {self.record.recipe}")
        path = exports.write_flags(view.flags, job.run_id or job.job, context,
                                   error=job.error if job.status == "failed" else None)
        self.notify(f"Flags written to {path}", title="Exported", timeout=6)
        self.log_panel.note(f"exported flags to {path}")
        return path

    # -- replay ----------------------------------------------------------------------------
    def _load_record(self, record: RunRecord) -> None:
        self.jobs = [record.job]
        matrix = record.matrix or LatencyMatrix(1, 0)
        windows = record.windows or WindowStats()
        self.views = {0: JobView(matrix, windows, list(record.flags), data=record.data, job=record.job.job)}
        progress = self.query_one("#progress", JobProgress)
        progress.set_jobs(self.jobs, f"replay of {record.run.id} · {record.target} · {record.recipe}")
        self._show(0, live=False)
        if callable(getattr(record.data, "final_flags", None)) and record.flags:
            self.notes.show(record.flags[0])  # a job's own final flag (the ager's stop reason)
        sparks = self.query_one("#sparks", SparkPanel)
        recorded = getattr(record.data, "telemetry", None) or []
        if recorded:
            iops, bps, cpu = (list(column) for column in zip(*recorded))
            sparks.show("iops", iops, f"{iops[-1]:,.0f} recorded"[:14])
            sparks.show("bw", [b / 1e6 for b in bps], f"{bps[-1] / 1e6:,.1f} MB/s")
            sparks.show("cpu", cpu, f"{cpu[-1]:.0f} %")
        else:
            for key in ("iops", "bw", "cpu"):
                sparks.show(key, [], "live only")
        for line in record.log_lines:
            if line.startswith("    "):
                self.log_panel.note(line)
            else:
                self.log_panel.command(line)
        for note in getattr(record.data, "notes", None) or []:
            self.log_panel.note(f"note: {note}", style="yellow")
        if record.job.error:
            self.log_panel.note(f"error: {record.job.error}", style="bold red")
        self.title = "fsscope — replay"

