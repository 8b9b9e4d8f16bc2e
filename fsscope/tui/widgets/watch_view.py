"""The ``watch`` job's view: what is watched and for how long, then the report's tables (the
CLI's per-operation latencies, the slowest calls and why); the flags (repeats, format
changes, lost events) are in the flags panel beside it, with their notes."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.content import Content
from textual.widgets import DataTable, Static

from fsscope.tui.model import JobView
from fsscope.tui.watch_model import WatchModel
from fsscope.tui.widgets.live_view import ModelView, SparkRow
from fsscope.tui.widgets.table_export import Table

OP_COLUMNS = ("op", "calls", "p50 µs", "p99 µs", "max µs", "slow", "bytes", "not named", "p50 over time",
              "p99 over time")
SLOW_COLUMNS = ("at s", "thread", "op", "µs", "baseline", "file or directory", "why")


class WatchView(ModelView):
    VIEW_ID = "watch-view"
    MODEL = WatchModel

    DEFAULT_CSS = """
    WatchView #watch-summary { height: auto; border: round $panel; padding: 0 1; }
    WatchView #watch-ops { height: auto; max-height: 50%; border: round $panel; }
    WatchView #watch-slow { height: 1fr; border: round $panel; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="watch-summary")
        yield Table(id="watch-ops", show_cursor=False, zebra_stripes=True)
        yield Table(id="watch-slow", show_cursor=False, zebra_stripes=True)

    def on_mount(self) -> None:
        for table_id, columns, title in (("#watch-ops", OP_COLUMNS, "Calls per operation"),
                                         ("#watch-slow", SLOW_COLUMNS, "The slowest calls, and why")):
            table = self.query_one(table_id, DataTable)
            for column in columns:
                table.add_column(column, key=column)
            table.border_title = title
        self.query_one("#watch-summary", Static).border_title = "Watch"

    def draw(self, model: WatchModel) -> None:
        # paths and commands are the watched program's: text, never markup (the model made
        # their control characters visible)
        self.query_one("#watch-summary", Static).update(Content(model.summary()))
        for table_id, rows in (("#watch-ops", model.op_rows()), ("#watch-slow", model.slow_rows())):
            table = self.query_one(table_id, DataTable)
            table.clear()
            for row in rows:
                table.add_row(*(Text(cell) for cell in row))

    def spark_rows(self, view: JobView, live: bool = True) -> list[SparkRow]:
        """While watching, the kernel events recorded per second; once the calls are decoded,
        the busiest op's p50 and p99 and every call per second, window by window."""
        model = self.model_of(view)
        if model is None:
            return []
        op = model.busiest()
        if op is None:
            rates = model.events_kib_per_s
            return [("rate", "events KiB/s", list(rates), f"{rates[-1]:,.0f} KiB/s")] if rates else []
        # log10 values: one slow window must not flatten the rest (None: no call then -> 0)
        p50 = [math.log10(max(v or 1.0, 1.0)) for v in op.p50_us_by_window]
        p99 = [math.log10(max(v or 1.0, 1.0)) for v in op.p99_us_by_window]
        rate = model.calls_per_s()
        return [("p50", f"p50 {op.op}", p50, f"{op.p50_us:,.1f} µs"),
                ("p99", f"p99 {op.op}", p99, f"{op.p99_us:,.1f} µs"),
                ("rate", "calls/s", rate, f"{max(rate):,.0f}/s peak" if rate else "–")]
