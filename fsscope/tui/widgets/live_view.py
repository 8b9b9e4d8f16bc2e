"""The base of a job's main view on the live screen (the big area left of the flags).

The live screen holds one instance of each view class (see :mod:`fsscope.tui.job_widgets`)
and shows the one for the job on screen. It calls, always on the app thread:

- ``show(view, live)``         draw everything from the JobView (job switched, replay, end)
- ``update_view(view)``        the job's model took a new event (cheap: called ~1/s)
- ``samples_added(view, …)``   a batch of per-file latencies arrived (latency-matrix jobs)
- ``mark_flags(view)`` / ``select_flag(view, flag)``  the flags changed / one was picked
- ``spark_rows(view, live)``   what the first rows of the sparkline panel show for this job
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from fsscope.tui.model import Flag, JobView

SparkRow = tuple[str, str, list[float], str]  # key, label, values (plain list), latest in words


class LiveView(Vertical):
    VIEW_ID: ClassVar[str] = "job-view-generic"
    """The widget id on the live screen (one instance per class)."""

    DEFAULT_CSS = """
    LiveView { height: 1fr; width: 1fr; }
    """

    def show(self, view: JobView, live: bool = True) -> None:
        raise NotImplementedError

    def update_view(self, view: JobView) -> None:
        self.show(view, live=True)

    def samples_added(self, view: JobView, run: int, start: int, stop: int) -> None:
        pass

    def mark_flags(self, view: JobView) -> None:
        pass

    def select_flag(self, view: JobView, flag: Flag | None) -> None:
        pass

    def spark_rows(self, view: JobView, live: bool = True) -> list[SparkRow]:
        return []

    def focus_main(self) -> bool:
        """Focus the view's first focusable widget; False if it has none."""
        for widget in self.query("*"):
            # not a hidden one: check's closed filter took the focus, and with it the keys typed
            if widget.can_focus and not widget.disabled and widget.display:
                widget.focus()
                return True
        return False


class ModelView(LiveView):
    """A view drawn from its job's own model (``MODEL``), redrawn only when the model's
    ``version`` changed: subclasses implement ``draw(model)``."""

    MODEL: ClassVar[type | None] = None

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self._drawn: tuple | None = None
        self._view: JobView | None = None

    @classmethod
    def model_of(cls, view: JobView | None):
        return view.data if view is not None and cls.MODEL is not None and isinstance(view.data, cls.MODEL) else None

    def show(self, view: JobView, live: bool = True) -> None:
        self._drawn = None
        self.update_view(view)

    def update_view(self, view: JobView) -> None:
        self._view = view
        model = self.model_of(view)
        if model is None:
            self.draw_empty()
            return
        if self._drawn == (id(model), model.version):
            return
        self._drawn = (id(model), model.version)
        self.draw(model)

    def draw(self, model) -> None:
        raise NotImplementedError

    def draw_empty(self) -> None:
        """The job on screen has no model of this view's kind: by default, keep what is drawn."""


class TextModelView(ModelView):
    """A model view that is one scrolling text (``render_model(model)``) in a panel titled
    ``TITLE``; its parts are ``#PART-body`` and ``#PART-text``."""

    PART: ClassVar[str] = "text"
    TITLE: ClassVar[str] = ""

    DEFAULT_CSS = """
    TextModelView > VerticalScroll { height: 1fr; border: round $panel; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll(id=f"{self.PART}-body"):
            yield Static("", id=f"{self.PART}-text")

    def on_mount(self) -> None:
        self.query_one(f"#{self.PART}-body").border_title = self.TITLE

    def draw(self, model: Any) -> None:
        self.query_one(f"#{self.PART}-text", Static).update(self.render_model(model))

    @staticmethod
    def render_model(model: Any) -> Text:
        raise NotImplementedError
