"""The ``replay`` job's view: what was replayed where, then per call type the replayed latency
and throughput beside the captured ones; the flags (what repeats, format changes with watch's
explanations) are the live screen's flag list, as for every job."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.content import Content
from textual.widgets import DataTable, Static

from fsscope.tui.model import JobView, WindowStats
from fsscope.tui.replay_model import COLUMNS, ReplayModel
from fsscope.tui.widgets.live_view import LiveView, SparkRow
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

    def spark_rows(self, view: JobView, live: bool = True) -> list[SparkRow]:
        """The busiest call type's p50 and p99 run after run (log-scaled: one slow run must not
        flatten the others), and the calls' rate per run."""
        model = view.data if view is not None and isinstance(view.data, ReplayModel) else None
        if model is None or not model.played:
            return []
        op, p50_us, p99_us, per_s = model.series()
        return [("p50", f"{op} p50/run", WindowStats.log_series(p50_us), f"{p50_us[-1]:,.1f} µs"),
                ("p99", f"{op} p99/run", WindowStats.log_series(p99_us), f"{p99_us[-1]:,.1f} µs"),
                ("rate", "calls/s /run", per_s, f"{per_s[-1]:,.0f}/s")]
