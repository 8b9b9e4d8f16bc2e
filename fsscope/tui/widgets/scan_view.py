"""The ``scan`` job's view: what the tree is on, then the directories near a structural change
and the largest ones, each with the file system's own account."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.content import Content
from textual.widgets import DataTable, Static

from fsscope.tui.model import JobView
from fsscope.tui.scan_model import ScanModel
from fsscope.tui.widgets.live_view import LiveView
from fsscope.tui.widgets.table_export import Table


class ScanView(LiveView):
    VIEW_ID = "scan-view"

    DEFAULT_CSS = """
    ScanView #scan-summary { height: auto; border: round $panel; padding: 0 1; }
    ScanView #scan-dirs { height: 1fr; border: round $panel; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="scan-summary")
        yield Table(id="scan-dirs", show_cursor=False, zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#scan-dirs", DataTable)
        for key, label in (("section", ""), ("dir", "directory"), ("n", "entries"), ("s", "structure"),
                           ("next", "next change"), ("said", "file system says")):
            table.add_column(label, key=key)
        table.border_title = "Directories near a structural change, then the largest"
        self.query_one("#scan-summary", Static).border_title = "Read-only scan"

    def show(self, view: JobView, live: bool = True) -> None:
        model = view.data if view is not None and isinstance(view.data, ScanModel) else None
        # the tree's names are text, never markup (the model made their control characters visible)
        self.query_one("#scan-summary", Static).update(Content(model.summary() if model else "scanning…"))
        table = self.query_one("#scan-dirs", DataTable)
        table.clear()
        for row in model.rows() if model else []:
            table.add_row(*(Text(cell) for cell in row))
