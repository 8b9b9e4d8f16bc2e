"""The ``replay`` job's view: what was replayed where, then per call type the replayed latency
and throughput beside the captured ones; the flags (what repeats, format changes with watch's
explanations) are the live screen's flag list, as for every job."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.content import Content
from textual.widgets import DataTable, Static

from fsscope.tui.model import JobView
from fsscope.tui.replay_model import COLUMNS, ReplayModel
from fsscope.tui.widgets.live_view import LiveView
from fsscope.tui.widgets.table_export import Table


class ReplayView(LiveView):
    VIEW_ID = "replay-view"

    DEFAULT_CSS = """
    ReplayView #replay-summary { height: auto; border: round $panel; padding: 0 1; }
    ReplayView #replay-ops { height: 1fr; border: round $panel; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="replay-summary")
        yield Table(id="replay-ops", show_cursor=False, zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#replay-ops", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        table.border_title = "Calls per type, every run (captured: the same calls as watched)"
        self.query_one("#replay-summary", Static).border_title = "Replay"

    def show(self, view: JobView, live: bool = True) -> None:
        model = view.data if view is not None and isinstance(view.data, ReplayModel) else None
        # the log's names are text, never markup (the model made their control characters visible)
        self.query_one("#replay-summary", Static).update(Content(model.summary() if model else "replaying…"))
        table = self.query_one("#replay-ops", DataTable)
        table.clear()
        for row in model.rows() if model else []:
            table.add_row(*(Text(cell) for cell in row))
