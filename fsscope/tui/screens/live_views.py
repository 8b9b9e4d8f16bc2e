"""The live screen's views: which job is shown, its main view, the flags beside it with their
notes, and the sparklines below (:class:`LiveViews`, the base of
:class:`~fsscope.tui.screens.live.LiveScreen`). Each job's data lives in a :class:`JobView`
(its model from :mod:`fsscope.tui.job_ui` in ``data``); the job's view widget draws it."""

from __future__ import annotations

from textual import on
from textual.widgets import ContentSwitcher

from fsscope.tui import messages as msg
from fsscope.tui.config import RunPlan
from fsscope.tui.job_ui import model_for
from fsscope.tui.job_widgets import view_class
from fsscope.tui.jobs import PlanControl
from fsscope.tui.model import Flag, JobState, JobView, LatencyMatrix, Series, WindowStats, flag_key, window_calls_for
from fsscope.tui.replay import RunRecord
from fsscope.tui.screens.base import AppScreen
from fsscope.tui.widgets.flags_panel import FlagsPanel
from fsscope.tui.widgets.heat_legend import HeatLegend
from fsscope.tui.widgets.heatmap import Heatmap
from fsscope.tui.widgets.job_progress import JobProgress
from fsscope.tui.widgets.live_view import LiveView
from fsscope.tui.widgets.log_panel import LogPanel
from fsscope.tui.widgets.notes_panel import NotesPanel
from fsscope.tui.widgets.spark_panel import SparkPanel


def _int(value: object, default: int) -> int:
    try:
        return int(value)  # type: ignore[call-overload]  # whatever a spec field holds
    except (TypeError, ValueError):
        return default


class LiveViews(AppScreen):
    """The state the live screen shows (set in LiveScreen.__init__) and how it is shown."""

    record: RunRecord | None  # a recorded run being replayed
    jobs: list[JobState]
    views: dict[int, JobView]
    shown: int | None
    plan: RunPlan | None
    control: PlanControl | None
    iops: Series
    bandwidth: Series
    cpu: Series

    _pending_plan: RunPlan | None  # a plan begun before the screen was mounted

    @property
    def running(self) -> bool:
        if self._pending_plan is not None:
            return True
        return self.control is not None and not self.control.done.is_set()

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
    def shown_job(self) -> JobState | None:
        return self.jobs[self.shown] if self.shown is not None and self.shown < len(self.jobs) else None

    # -- views -----------------------------------------------------------------------------
    def _view_for(self, index: int) -> JobView:
        view = self.views.get(index)
        if view is None:
            job = self.jobs[index] if index < len(self.jobs) else None
            spec = job.spec if job is not None else None
            files, runs = _int(getattr(spec, "files", 0), 0), _int(getattr(spec, "runs", 1), 1)  # a probe's matrix
            name = job.job if job is not None else ""
            view = JobView(LatencyMatrix(runs, files), WindowStats(window_calls_for(files, runs)),
                           data=model_for(name, job.spec_data if job is not None else {}), job=name)
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
        sparks.show_job_rows({key for key, *_ in rows})
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
