"""Recorded runs: open one to replay it in the live views, or mark two and compare them."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from fsscope import store
from fsscope.tui import exports
from fsscope.tui.replay import describe_recipe, describe_target, load_run
from fsscope.tui.screens.compare import CompareScreen
from fsscope.tui.screens.live import LiveScreen


class RunsScreen(Screen):
    BINDINGS = [
        Binding("enter,o", "open_run", "Open"),
        Binding("space", "mark", "Mark"),
        Binding("c", "compare", "Compare 2"),
        Binding("r", "reload", "Reload"),
        Binding("m", "export_flags", "Flags→MD"),
        Binding("home", "first_row", "First", show=False, priority=True),
        Binding("end", "last_row", "Last", show=False, priority=True),
    ]

    def __init__(self, *, name: str | None = None, id: str | None = None):
        super().__init__(name=name, id=id)
        self.runs: list[store.RunDir] = []
        self.marked: list[str] = []

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static("Every job records a run directory. Enter replays one in the live views; "
                     "space marks up to two runs and c compares them side by side.", id="runs-help")
        yield DataTable(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "recorded runs"
        table = self.query_one("#runs-table", DataTable)
        table.add_column(" ", key="mark", width=1)
        for key in ("run", "job", "status", "target", "recipe", "started"):
            table.add_column(key, key=key)
        self.action_reload()
        table.focus()

    def on_screen_resume(self) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        table = self.query_one("#runs-table", DataTable)
        self.runs = list(reversed(store.list_runs(self.app.config.runs_root)))
        cursor = table.cursor_row
        table.clear()
        for run in self.runs:
            m = run.manifest()
            if not m.get("target"):
                m = m | {"target": self._job_file(run).get("target")}
            table.add_row(self._mark_text(run.id), run.id, m.get("job", "?"), run.status(),
                          describe_target(m), describe_recipe(m), m.get("started", "-"), key=run.id)
        if self.runs:
            table.move_cursor(row=min(cursor, len(self.runs) - 1))
        self.query_one("#runs-table").border_title = f"Runs ({len(self.runs)})"

    @staticmethod
    def _job_file(run: store.RunDir) -> dict:
        import json

        try:
            return json.loads((run.path / "job.json").read_text())
        except (OSError, ValueError):
            return {}

    def _mark_text(self, run_id: str) -> Text:
        return Text("●", style="bold") if run_id in self.marked else Text(" ")

    def _current(self) -> store.RunDir | None:
        table = self.query_one("#runs-table", DataTable)
        if not self.runs or table.cursor_row < 0 or table.cursor_row >= len(self.runs):
            return None
        return self.runs[table.cursor_row]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_run()

    def action_open_run(self) -> None:
        run = self._current()
        if run is None:
            self.notify("No run recorded yet.", timeout=3)
            return
        self.app.push_screen(LiveScreen(record=load_run(run)))

    def action_first_row(self) -> None:
        self.query_one("#runs-table", DataTable).move_cursor(row=0)

    def action_last_row(self) -> None:
        self.query_one("#runs-table", DataTable).move_cursor(row=max(0, len(self.runs) - 1))

    def action_export_flags(self) -> None:
        """The highlighted run's flags (not the last live run's)."""
        run = self._current()
        if run is None:
            self.notify("No run recorded yet.", timeout=3)
            return
        path = exports.write_record_flags(load_run(run))
        self.notify(f"Flags of {run.id} written to {path}", title="Exported", timeout=6)

    def action_mark(self) -> None:
        run = self._current()
        if run is None:
            return
        if run.id in self.marked:
            self.marked.remove(run.id)
        else:
            self.marked.append(run.id)
            self.marked = self.marked[-2:]
        table = self.query_one("#runs-table", DataTable)
        for r in self.runs:
            table.update_cell(r.id, "mark", self._mark_text(r.id))

    def action_compare(self) -> None:
        chosen = list(self.marked)
        current = self._current()
        if len(chosen) < 2 and current is not None and current.id not in chosen:
            chosen.append(current.id)
        if len(chosen) < 2:
            self.notify("Mark two runs with space (or mark one and put the cursor on the other).", timeout=4)
            return
        by_id = {r.id: r for r in self.runs}
        self.app.push_screen(CompareScreen(load_run(by_id[chosen[0]]), load_run(by_id[chosen[1]])))
