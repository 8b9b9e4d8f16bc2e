"""Which jobs to run (space toggles; they run one after another, each in its own process),
and the parameters of the highlighted one."""

from __future__ import annotations

from collections.abc import Callable

from rich.segment import Segment
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.strip import Strip
from textual.widgets import Checkbox, ContentSwitcher, SelectionList
from textual.widgets.option_list import OptionDoesNotExist

from fsscope.engine import registry
from fsscope.errors import FsscopeError
from fsscope.tui.config import JobRequest
from fsscope.tui.job_widgets import panel_for
from fsscope.tui.widgets.job_params import JobParams

BOX_CELLS = 4  # "▐✓▌ " before a job's name


class JobList(SelectionList[str]):
    """A SelectionList whose box says which jobs run: ✓ checked, blank not (colour alone
    told them apart before, and both showed an X)."""

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        segments = list(strip)
        if len(segments) < 4 or segments[1].text != Checkbox.BUTTON_INNER:
            return strip
        try:
            value = self.get_option_at_index(self.scroll_offset.y + y).value
        except OptionDoesNotExist:
            return strip
        segments[1] = Segment("✓" if value in self.selected else " ", segments[1].style)
        return Strip(segments, strip.cell_length)

    async def _on_click(self, event: events.Click) -> None:
        """A click on a job shows its parameters; only a click on its box ticks it (a click
        to read a job's fields also put it in the plan)."""
        clicked = event.style.meta.get("option")
        if clicked is None:
            return
        event.prevent_default()  # not OptionList's click, which selects (here: toggles)
        self.highlighted = clicked
        if event.x < BOX_CELLS:
            self._toggle_highlighted_selection()


class JobPicker(Vertical):
    DEFAULT_CSS = """
    JobPicker { height: auto; }
    JobPicker SelectionList { height: auto; max-height: 8; padding: 0; }
    JobPicker SelectionList, JobPicker SelectionList:focus { border: none; }
    JobPicker ContentSwitcher { height: auto; }
    """

    def __init__(self, jobs: list[str], defaults: dict[str, dict], selected: list[str], *, id: str | None = None):
        super().__init__(id=id)
        self.jobs = jobs
        self.defaults = defaults
        self.initially_selected = selected
        self.ready = False
        """Whether the first panels are mounted (when the picker is)."""
        self._when_ready: list[Callable[[], object]] = []

    def compose(self) -> ComposeResult:
        # its name and a short label (the summary, above its panel, was cut mid-word at 80 columns)
        yield JobList(*[(f"{job}  {registry.job(job).label}".rstrip(), job, job in self.initially_selected)
                                   for job in self.jobs], id="job-list")
        # The panels of the jobs that run (the first one shown), composed with the screen: one
        # styling, layout and paint of the whole Setup screen. Mounted after its first paint
        # instead, the screen was laid out and painted twice before it was whole, which took
        # longer (bench/startup.py). Another job's panel is mounted when it is first highlighted.
        first = self.initially_selected[0] if self.initially_selected else (self.jobs[0] if self.jobs else None)
        wanted = [job for job in self.jobs if job == first or job in self.initially_selected]
        with ContentSwitcher(id="job-panels", initial=f"params-{first}" if first else None):
            for job in wanted:
                yield panel_for(job, self.defaults.get(job))

    def on_mount(self) -> None:
        self.border_title = "3 · Jobs"
        self.border_subtitle = "space: run it or not"
        selection = self.query_one("#job-list", SelectionList)
        if self.initially_selected:
            selection.highlighted = self.jobs.index(self.initially_selected[0])
        self.ready = True
        for callback in self._when_ready:
            callback()
        self._when_ready.clear()

    def when_ready(self, callback: Callable[[], object]) -> None:
        """``callback()`` once the panels are mounted (now, if they are)."""
        if self.ready:
            callback()
        else:
            self._when_ready.append(callback)

    def on_selection_list_selection_highlighted(self, event: SelectionList.SelectionHighlighted) -> None:
        event.stop()
        if event.selection_index != event.selection_list.highlighted:
            # a highlight moved on since (the list highlights its first job when it is built,
            # before on_mount highlights the chosen one): mounting that job's panel cost the
            # Setup screen's first frame seven widgets nobody sees (bench/startup.py)
            return
        job = event.selection.value
        switcher = self.query_one("#job-panels", ContentSwitcher)
        if not switcher.query_children(f"#params-{job}"):
            # not awaited: a handler waiting here holds every message bubbling through (keys too)
            switcher.mount(panel_for(job, self.defaults.get(job)))
        switcher.current = f"params-{job}"

    def on_selection_list_selected_changed(self, event: SelectionList.SelectedChanged) -> None:
        event.stop()

    @property
    def selected(self) -> list[str]:
        chosen = set(self.query_one("#job-list", SelectionList).selected)
        return [job for job in self.jobs if job in chosen]

    def requests(self) -> tuple[JobRequest, ...]:
        jobs = self.selected
        if not jobs:
            raise FsscopeError("pick at least one job (space toggles a job in the list)")
        out, problems = [], []
        for job in jobs:
            panel = self.query_one(f"#params-{job}", JobParams)  # a job is highlighted before it is picked
            try:
                out.append(JobRequest(job, panel.validated()))
            except FsscopeError as exc:
                problems.append(str(exc))
        if problems:
            raise FsscopeError("\n".join(problems))
        return tuple(out)
