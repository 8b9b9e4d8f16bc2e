"""The live screen's handlers of what the plan's workers post (:mod:`fsscope.tui.jobs`): a
job started, its phases, progress, samples, findings, log lines, its own data kinds (given to
its model), its end and its report (whose final flags replace the ones streamed while it ran),
and the plan's end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from textual import work

from fsscope.engine.events import Event, Phase
from fsscope.records import report_part
from fsscope.store import RunDir
from fsscope.telemetry.machine import busy, machine_line
from fsscope.tui import messages as msg
from fsscope.tui.model import LatencyMatrix, WindowStats, flag_from_event, flag_key, flags_from_report, with_withdrawn
from fsscope.tui.screens.live_telemetry import LiveTelemetry
from fsscope.tui.widgets.job_progress import JobProgress


class LiveStream(LiveTelemetry):
    plan_cancelled: bool
    plan_finished: bool

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
            runs = getattr(job.spec, "runs", None)
            why = f"noise after {runs} runs: the final test did not confirm it" if runs else \
                "the final test did not confirm it"
            self._replace_flags(message.index, with_withdrawn(view.flags, final, why))
        if view.data is not None:
            view.data.finish(message.report)
            failed = getattr(view.data, "fail", None)  # a report-only model (scan, frag): why there is none
            if message.report is None and message.status != "ok" and callable(failed):
                failed(message.error)
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
        machine = report_part(message.report, "machine")  # every report has it
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
        view.matrix = LatencyMatrix.from_array(np.asarray(message.array))
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

