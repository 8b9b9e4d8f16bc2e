"""The live screen: progress of each job, the job's main view, sparklines, flags with their
notes, and the log of every external command. The same screen replays a recorded run
(``LiveScreen(record=...)``): the views are filled from the run directory instead of a job's
event stream.

The main view depends on the job (:mod:`fsscope.tui.job_widgets`): the per-file latency
heatmap for the probe, throughput over the band of earlier runs for a bench, throughput vs
latency per buffer size for a sync-write sweep. Each job's data lives in a :class:`JobView`
(its model from :mod:`fsscope.tui.job_ui` in ``data``); the view widget draws it.
When a job's report arrives, its final flags replace the ones streamed while it ran.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Header, Input

from fsscope.engine.events import Event, Phase
from fsscope.records import plain, report_part
from fsscope.store import RunDir
from fsscope.telemetry.columns import cpu_busy_pct, device_rates
from fsscope.telemetry.machine import busy, machine_line
from fsscope.tui import exports
from fsscope.tui import messages as msg
from fsscope.tui.config import RunPlan, recipe_label
from fsscope.tui.job_ui import model_for
from fsscope.tui.job_widgets import view_class, view_classes
from fsscope.tui.jobs import PlanControl, follow_plan, sample_telemetry
from fsscope.tui.model import (
    Flag,
    JobState,
    JobView,
    LatencyMatrix,
    Series,
    WindowStats,
    flag_from_event,
    flag_key,
    flags_from_report,
    spec_words,
    window_calls_for,
    with_withdrawn,
)
from fsscope.tui.replay import RunRecord
from fsscope.tui.widgets.flags_panel import FlagsPanel
from fsscope.tui.widgets.heat_legend import HeatLegend
from fsscope.tui.widgets.heatmap import Heatmap
from fsscope.tui.widgets.job_progress import JobProgress
from fsscope.tui.widgets.live_view import LiveView
from fsscope.tui.widgets.log_panel import LogPanel
from fsscope.tui.widgets.notes_panel import NotesPanel
from fsscope.tui.widgets.spark_panel import SparkPanel
from fsscope.tui.widgets.table_filter import TableFilter

JOB_TELEMETRY_FRESH_S = 3.0  # the job's own counters win over the UI's sampler this long

__all__ = ["JobView", "LiveScreen"]


def _int(value, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


class LiveScreen(Screen):
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
        yield Footer()

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

    @property
    def heatmap(self) -> Heatmap:
        return self.query_one("#heatmap", Heatmap)

    @property
    def job_view(self) -> LiveView:
        """The main view on screen (the shown job's kind)."""
        switcher = self.query_one("#job-view", ContentSwitcher)
        return self.query_one(f"#{switcher.current}", LiveView)

    def view_widget(self, index: int) -> LiveView:
        job = self.jobs[index].job if index < len(self.jobs) else ""
        return self.query_one(f"#{view_class(job).VIEW_ID}", LiveView)

    @property
    def flags_panel(self) -> FlagsPanel:
        return self.query_one("#flags", FlagsPanel)

    @property
    def notes(self) -> NotesPanel:
        return self.query_one("#notes", NotesPanel)

    @property
    def log_panel(self) -> LogPanel:
        return self.query_one("#log", LogPanel)

    @property
    def running(self) -> bool:
        if self._pending_plan is not None:
            return True
        return self.control is not None and not self.control.done.is_set()

    @property
    def shown_job(self) -> JobState | None:
        return self.jobs[self.shown] if self.shown is not None and self.shown < len(self.jobs) else None

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "cancel_job":
            return True if self.running else (None if self.record is None else False)
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
        self.app.plan_controls.append(control)
        self.jobs = [JobState(i, req.job, plain(req.spec)) for i, req in enumerate(plan.jobs)]
        self.views = {}
        self.shown = None
        self._job_telemetry_s = None
        recipe = plan.recipe_label()
        self.query_one("#progress", JobProgress).set_jobs(self.jobs, f"{plan.target.describe()} · {recipe}")
        # A new plan starts from a clean view: nothing of the last job's matrix, scale, cursor,
        # sparklines or flags stays on screen (its first job's empty view is shown at once).
        self.iops, self.bandwidth, self.cpu = Series(), Series(), Series()
        self.query_one("#sparks", SparkPanel).clear()
        self.heatmap.set_matrix(None)
        if self.jobs:
            self._show(0)
        self.flags_panel.set_flags([])
        self.notes.show(None)
        self.log_panel.note(f"── plan: {', '.join(r.job for r in plan.jobs)} on {plan.target.describe()} "
                            f"with {recipe}", style="bold")
        self.app.run_worker(partial(follow_plan, plan, self, control, runs_root=self.app.config.runs_root),
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
            self.log_panel.note("kill requested: the job process is killed; fsscope undoes what its "
                                "journal says it left mounted or attached", style="bold red")
            return
        self.control.cancel()
        self.log_panel.note("cancel requested: the job stops, unmounts, detaches and keeps what it "
                            "measured (press c again to kill it)", style="bold yellow")
        self.notify("Cancelling: the job stops and cleans up. Press c again to kill it.", timeout=4)

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
        context = [f"run: {job.run_id or '-'}", f"job: {job.job} ({spec_words(job.spec)})", f"status: {job.status}"]
        if self.plan is not None:
            context.insert(1, f"target: {self.plan.target.describe()}")
            context.insert(2, f"recipe: {recipe_label(job.job, job.spec, self.plan.recipe.name if self.plan.recipe else '-')}")
        elif self.record is not None:
            context.insert(1, f"target: {self.record.target}")
            context.insert(2, f"recipe: {self.record.recipe}")
        path = exports.write_flags(view.flags, job.run_id or job.job, context,
                                   error=job.error if job.status == "failed" else None)
        self.notify(f"Flags written to {path}", title="Exported", timeout=6)
        self.log_panel.note(f"exported flags to {path}")
        return path

    # -- views -----------------------------------------------------------------------------
    def _view_for(self, index: int) -> JobView:
        view = self.views.get(index)
        if view is None:
            job = self.jobs[index] if index < len(self.jobs) else None
            spec = job.spec if job is not None else {}
            files, runs = _int(spec.get("files"), 0), _int(spec.get("runs"), 1)
            name = job.job if job is not None else ""
            view = JobView(LatencyMatrix(runs, files), WindowStats(window_calls_for(files, runs)),
                           data=model_for(name, spec), job=name)
            self.views[index] = view
        return view

    def _show(self, index: int, live: bool = True) -> None:
        view = self._view_for(index)
        self.shown = index
        widget = self.view_widget(index)
        switcher = self.query_one("#job-view", ContentSwitcher)
        if switcher.current != widget.id:
            switcher.current = widget.id
            focused = self.focused
            # the focus was in the view just hidden: move it to the one shown
            if (focused is not None and focused is not widget and switcher in focused.ancestors
                    and not widget.focus_main()):
                self.flags_panel.focus()
        widget.show(view, live=live)
        self.flags_panel.set_flags(view.flags)
        self.notes.show(None)
        self._show_sparks(view, live)
        job = self.jobs[index]
        self.sub_title = f"{job.job} · {job.run_id}" if job.run_id else job.job
        self.refresh_bindings()

    def _show_sparks(self, view: JobView, live: bool = True) -> None:
        sparks = self.query_one("#sparks", SparkPanel)
        widget = self.job_view
        rows = widget.spark_rows(view, live)
        sparks.clear(exclude={key for key, *_ in rows}, job_rows_only=True)  # no stale readings
        for key, label, values, text in rows:
            sparks.show(key, values, text, label)

    def _replace_flags(self, index: int, flags: list[Flag]) -> None:
        """The report's final flags replace the streamed ones; the selected flag stays
        selected if the final list still has it (its title and numbers may have changed)."""
        view = self._view_for(index)
        selected = None
        if index == self.shown:
            position = self.flags_panel.position
            if position is not None and 0 <= position < len(view.flags):
                selected = flag_key(view.flags[position])
        view.flags = list(flags)
        if index != self.shown:
            return
        widget = self.job_view
        self.flags_panel.set_flags(view.flags)
        widget.mark_flags(view)
        keys = [flag_key(f) for f in view.flags]
        if selected is not None and selected in keys:
            self.flags_panel.select_position(keys.index(selected))
            self.notes.show(view.flags[keys.index(selected)])
            widget.select_flag(view, view.flags[keys.index(selected)])
        else:
            self.notes.show(None)
            widget.select_flag(view, None)

    def _tick(self) -> None:
        if self.running:
            self.query_one("#progress", JobProgress).refresh()

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

    # -- messages from the workers -------------------------------------------------------------
    def on_job_started(self, message: msg.JobStarted) -> None:
        job = self.jobs[message.index]
        job.start()
        job.run_id, job.run_path = message.run_id, message.run_path
        self._last_job_telemetry = {}
        self._show(message.index)
        self.log_panel.note(f"── {message.job} started (pid {message.pid}), recording in {message.run_path}",
                            style="bold")
        self.query_one("#progress", JobProgress).refresh()

    def on_phase_changed(self, message: msg.PhaseChanged) -> None:
        job = self.jobs[message.index]
        job.phase = message.name
        self.log_panel.note(f"[{message.t:7.2f} s] {job.job}: {message.name}")
        self.query_one("#progress", JobProgress).refresh()
        if message.run is not None:
            self._feed(message.index, Phase(t=message.t, name=message.name, run=message.run))

    def _feed(self, index: int, event: Event) -> None:
        """Give an event to the job's own model; redraw its view if it changed."""
        view = self._view_for(index)
        if view.data is None or not view.data.feed(event):
            return
        estimate = getattr(view.data, "remaining_s", None)  # a model that knows the time left itself
        if callable(estimate) and (left := estimate()) is not None:
            self.jobs[index].set_estimate(left)
        live_flags = getattr(view.data, "live_flags", None)  # a model that flags as data arrives
        if callable(live_flags) and (flags := live_flags()) is not None:
            self._replace_flags(index, flags)
        if index == self.shown:
            self.job_view.update_view(view)
            self._show_sparks(view)

    def on_job_event(self, message: msg.JobEvent) -> None:
        if message.kind == "telemetry":
            self._job_telemetry(message.event)
        self._feed(message.index, message.event)

    def on_progress_updated(self, message: msg.ProgressUpdated) -> None:
        job = self.jobs[message.index]
        job.set_progress(message.done, message.total, message.unit)
        self.query_one("#progress", JobProgress).refresh()

    def on_samples_arrived(self, message: msg.SamplesArrived) -> None:
        view = self._view_for(message.index)
        run, start, stop = view.matrix.put(message.run, message.start, message.latency_ns)
        view.windows.add(view.matrix.values[run, start:stop], run=run, t_s=message.t)
        if message.index == self.shown:
            self.job_view.samples_added(view, run, start, stop)
            self._show_sparks(view)

    def on_finding_arrived(self, message: msg.FindingArrived) -> None:
        """An interim finding (from the runs so far); the report's list replaces them all."""
        view = self._view_for(message.index)
        flag = flag_from_event(message.finding)
        keys = [flag_key(f) for f in view.flags]
        if flag_key(flag) in keys:  # the same finding seen in more runs: its new title replaces it
            view.flags[keys.index(flag_key(flag))] = flag
            position = keys.index(flag_key(flag))
            if message.index == self.shown:
                self.flags_panel.replace_flag(position, flag)
                if self.flags_panel.position == position:
                    self.notes.show(flag)
            return
        view.flags.append(flag)
        if message.index == self.shown:
            self.flags_panel.add_flag(flag)
            self.job_view.mark_flags(view)

    def on_log_line(self, message: msg.LogLine) -> None:
        self.log_panel.command(message.line, message.stderr)

    def on_job_finished(self, message: msg.JobFinished) -> None:
        job = self.jobs[message.index]
        job.finish(message.status)
        job.error = message.error
        job.report = message.report
        view = self._view_for(message.index)
        final = flags_from_report(message.report)
        if final is not None:
            runs = job.spec.get("runs")
            why = f"noise after {runs} runs: the final test did not confirm it" if runs else \
                "the final test did not confirm it"
            self._replace_flags(message.index, with_withdrawn(view.flags, final, why))
        if view.data is not None:
            view.data.finish(message.report)
            own = getattr(view.data, "final_flags", None)
            if final is None and callable(own) and (flags := own()) is not None:
                self._replace_flags(message.index, flags)  # e.g. the ager's stop reason and its note
                if message.index == self.shown and flags and self.flags_panel.position is None:
                    self.notes.show(flags[0])  # why it stopped, without having to pick the flag
            if message.index == self.shown:
                self.job_view.update_view(view)
                self._show_sparks(view)
        if view.matrix.measured == 0 and job.run_path and view.data is None:
            self._load_recorded_array(message.index, job.run_path)
        self.log_panel.note(f"── {job.job} ended: {message.status}"
                            + (f" — {message.error}" if message.error else ""),
                            style="bold red" if message.status == "failed" else "bold")
        for note in getattr(view.data, "notes", None) or []:
            self.log_panel.note(f"note: {note}", style="yellow")
        machine = report_part(message.report, "machine")
        if machine:  # how busy the machine was while the job ran: a noisy result says so
            self.log_panel.note(machine_line(machine), style="yellow" if busy(machine) else "dim")
        for line in message.leftovers:
            self.log_panel.note(f"cleaned up after the killed job: {line}", style="yellow")
        self.query_one("#progress", JobProgress).refresh()
        if message.error:
            # the toast says what the record says: failed, interrupted (killed) or cancelled
            self.notify(message.error, title=f"{job.job} {message.status}",
                        severity="error" if message.status == "failed" else "warning", timeout=8)

    @work(thread=True, group="recorded-array", description="reading a recorded latency array")
    def _load_recorded_array(self, index: int, run_path: str) -> None:
        """A job that streams no samples (smoke) still recorded latency_ns: show it."""

        run = RunDir(Path(run_path))
        if "latency_ns" not in run.arrays():
            return
        try:
            array = run.load_array("latency_ns", mmap=False)
        except (OSError, ValueError):
            return
        self.post_message(msg.RecordedArrayLoaded(index, array))

    def on_recorded_array_loaded(self, message: msg.RecordedArrayLoaded) -> None:
        view = self._view_for(message.index)
        view.matrix = LatencyMatrix.from_array(message.array)
        view.windows = WindowStats.from_matrix(view.matrix.values)
        if message.index == self.shown:
            self._show(message.index)

    def on_plan_finished(self, message: msg.PlanFinished) -> None:
        self.plan_cancelled = message.cancelled
        self.plan_finished = True  # every job's end has been handled before this message
        for job in self.jobs:
            if job.status == "waiting":
                job.finish("cancelled" if message.cancelled else "waiting")
                job.phase = "not started"
        self.query_one("#progress", JobProgress).refresh()
        self.refresh_bindings()
        self.notify("Plan cancelled; everything it made is cleaned up." if message.cancelled
                    else "All jobs finished.", timeout=5)

    def on_telemetry_tick(self, message: msg.TelemetryTick) -> None:
        """The UI's own sampler (psutil, once a second); a job that sends its own counters
        (bench) is measured beside its workers, so those win while they keep coming."""
        last = self._job_telemetry_s
        if last is None or time.monotonic() - last >= JOB_TELEMETRY_FRESH_S:
            self._add_telemetry(message.iops, message.bytes_per_s, message.cpu_percent, message.device)

    def _job_telemetry(self, event: Event) -> None:
        """A bench's ``telemetry`` event: disk deltas per device since its last sample."""
        from fsscope.workloads.bench_records import TelemetrySample  # loaded with the bench's model

        if not isinstance(event, TelemetrySample):
            return
        sample = event.sample
        last = self._last_job_telemetry.get(event.run, 0.0)
        self._last_job_telemetry[event.run] = sample.t_s
        dt = sample.t_s - last if sample.t_s > last else 1.0
        device = ",".join(sample.disk_read_count) or "no device"
        iops, bps = device_rates(dt, sum(sample.disk_read_count.values()) + sum(sample.disk_write_count.values()),
                                 sum(sample.disk_read_bytes.values()) + sum(sample.disk_write_bytes.values()))
        idle = sample.cpu_idle_pct
        cpu = float(cpu_busy_pct(idle if idle is not None else 100.0))
        self._job_telemetry_s = time.monotonic()
        self._add_telemetry(iops, bps, cpu, device)

    def _add_telemetry(self, iops: float, bytes_per_s: float, cpu_percent: float, device: str) -> None:
        self.iops.add(iops)
        self.bandwidth.add(bytes_per_s / 1e6)
        self.cpu.add(cpu_percent)
        sparks = self.query_one("#sparks", SparkPanel)
        where = device or "all disks"
        sparks.show("iops", list(self.iops.values), f"{iops:,.0f} {where}"[:14])
        sparks.show("bw", list(self.bandwidth.values), f"{bytes_per_s / 1e6:,.1f} MB/s")
        sparks.show("cpu", list(self.cpu.values), f"{cpu_percent:.0f} %")

    @on(msg.FlagSelected)
    def select_flag(self, message: msg.FlagSelected) -> None:
        view = self.views.get(self.shown) if self.shown is not None else None
        if view is None or message.position is None or not 0 <= message.position < len(view.flags):
            self.notes.show(None)
            return
        flag = view.flags[message.position]
        self.job_view.select_flag(view, flag)
        self.notes.show(flag)

    def on_heat_cursor_moved(self, message: msg.HeatCursorMoved) -> None:
        self.query_one("#legend", HeatLegend).set_cursor(message.run, message.first, message.last,
                                                         message.latency_ns, message.aggregate)
