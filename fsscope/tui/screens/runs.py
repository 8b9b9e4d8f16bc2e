"""Recorded runs: open one to replay it in the live views, or mark two and compare them.

Reading run directories (manifests, events, arrays) happens in thread workers that post
messages; the handlers fill the table or open the screens, so a slow disk never freezes the UI."""

from __future__ import annotations

import msgspec
from rich.cells import cell_len
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Header, Input, Static
from textual.widgets.data_table import ColumnKey
from textual.worker import get_current_worker

from fsscope import store
from fsscope.errors import FsscopeError
from fsscope.format import visible
from fsscope.records import loads
from fsscope.tui import exports
from fsscope.tui import messages as msg
from fsscope.tui.replay import describe_recipe, describe_target, load_run, short_target
from fsscope.tui.screens.base import AppScreen
from fsscope.tui.screens.compare import CompareScreen
from fsscope.tui.screens.live import LiveScreen
from fsscope.tui.widgets.fit_footer import FitFooter
from fsscope.tui.widgets.table_export import Table
from fsscope.tui.widgets.table_filter import TableFilter, matches

COLUMNS = ("run", "job", "status", "recipe", "started", "target")
"""The target last: the longest, it takes what room is left (at 80 columns a path ran off the
side with the columns after it); "started" goes first when the table is narrow (the run's id
says when it started). A row holds one cell more: the target's short form (its kind and the
last part of its path), shown where the whole does not fit; the opened run names it whole."""


class RunsScreen(AppScreen):
    BINDINGS = [
        Binding("enter,o", "open_run", "Open"),
        Binding("space", "mark", "Mark"),
        Binding("c", "compare", "Compare 2"),
        Binding("r", "reload", "Reload"),
        Binding("m", "export_flags", "Flags→MD"),
        Binding("slash", "filter", "Filter"),
        Binding("home", "first_row", "First", show=False, priority=True),
        Binding("end", "last_row", "Last", show=False, priority=True),
    ]

    def __init__(self, *, name: str | None = None, id: str | None = None):
        super().__init__(name=name, id=id)
        self.listing: list[tuple[store.RunDir, tuple[str, ...]]] = []
        """Every run directory read, with its table row; ``runs`` is what the filter lets show."""
        self.runs: list[store.RunDir] = []
        self.marked: list[str] = []
        self.listed = False  # the table shows the run directories as the last listing read them

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static("Every job records a run directory. Enter replays one in the live views; "
                     "space marks up to two runs and c compares them side by side.", id="runs-help")
        yield TableFilter("runs-table", id="runs-filter")
        yield Table(id="runs-table", cursor_type="row", zebra_stripes=True)
        yield FitFooter()

    def on_mount(self) -> None:
        self.sub_title = "recorded runs"
        table = self.query_one("#runs-table", DataTable)
        self._columns(table, [])
        table.focus()

    def on_screen_resume(self) -> None:  # also when first shown: the listing starts here
        self.action_reload()

    def action_reload(self) -> None:
        self.listed = False
        self._list_runs()

    @work(thread=True, exclusive=True, group="runs-list", description="reading the run directories")
    def _list_runs(self) -> None:
        runs = list(reversed(store.list_runs(self.fs_app.config.runs_root)))
        rows: list[tuple[str, ...]] = []
        for run in runs:
            m = self._manifest(run)
            # a run's record may quote names someone else chose (a directory target): visible
            rows.append(tuple(visible(cell) for cell in (run.id, m.job or "?", run.status(), describe_recipe(m),
                                                         m.started or "-", describe_target(m), short_target(m))))
        if not get_current_worker().is_cancelled:  # a newer listing replaced this one
            self.post_message(msg.RunsListed(runs, rows))

    def _columns(self, table: DataTable, rows: list[tuple[str, ...]]) -> list[int]:
        """Columns as wide as what they hold, the target's cut to the room left (and "started"
        left out when that room is small); the indexes of the row's cells shown. (Widths the
        table measures itself arrive one idle later, and a render in between stays cached at the
        labels' widths.)"""
        table.clear(columns=True)
        table.add_column(" ", key="mark", width=1)
        widths = [max([cell_len(key), *(cell_len(str(r[i])) for r in rows)]) for i, key in enumerate(COLUMNS)]
        room = (table.size.width or self.app.size.width) - 2 - 3  # the border; the mark and its padding
        shown = list(range(len(COLUMNS)))
        if sum(w + 2 for w in widths) > room:  # 2: a column's padding
            shown.remove(COLUMNS.index("started"))
        target = COLUMNS.index("target")
        rest = room - sum(widths[i] + 2 for i in shown if i != target) - 2
        widths[target] = max(min(widths[target], rest), cell_len("target"))
        for i in shown:
            table.add_column(COLUMNS[i], key=COLUMNS[i], width=widths[i])
        return shown

    def on_resize(self) -> None:
        if self.listed:
            self._show_rows()

    def on_runs_listed(self, message: msg.RunsListed) -> None:
        self.listing = list(zip(message.runs, message.rows))
        self._show_rows()
        self.listed = True

    def _show_rows(self) -> None:
        """The rows the filter lets through; the cursor stays on its run if still shown."""
        table = self.query_one("#runs-table", DataTable)
        needle = self.query_one("#runs-filter", TableFilter).value
        current, cursor = self._current(), table.cursor_row
        shown = [(run, row) for run, row in self.listing if matches(needle, *row)]
        self.runs = [run for run, _row in shown]
        cells = self._columns(table, [row for _run, row in self.listing])  # widths do not jump as you type
        target, room = COLUMNS.index("target"), table.columns[ColumnKey("target")].width
        for _run, row in shown:  # text, not markup; a short target still too long ends in "…"
            words = [row[-1] if i == target and cell_len(row[i]) > room else row[i] for i in cells]
            table.add_row(self._mark_text(row[0]), *(Text(visible(cell), overflow="ellipsis", no_wrap=True)
                                                     for cell in words), key=row[0])
        ids = [run.id for run in self.runs]
        if self.runs:
            table.move_cursor(row=ids.index(current.id) if current is not None and current.id in ids
                              else min(max(cursor, 0), len(self.runs) - 1))
        table.border_title = f"Runs ({len(self.runs)})" if len(shown) == len(self.listing) else \
            f"Runs ({len(self.runs)} of {len(self.listing)} containing “{needle.strip()}”)"

    def action_filter(self) -> None:
        self.query_one("#runs-filter", TableFilter).open()

    @on(Input.Changed, "#runs-filter")
    def filter_changed(self) -> None:
        self._show_rows()

    @staticmethod
    def _manifest(run: store.RunDir) -> store.Manifest:
        """The run's manifest (an empty one when unreadable: its status says so); a manifest
        without its target takes the one job.json names."""
        try:
            m = run.info()
        except FsscopeError:
            return store.Manifest()
        if m.target is None:
            try:  # job.json holds the same keys
                m = msgspec.structs.replace(m, target=store.decode_manifest(loads((run.path / "job.json").read_bytes())).target)
            except (FsscopeError, OSError, ValueError):  # msgspec.DecodeError is a ValueError
                pass
        return m

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
        self._load([run])

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
        try:
            with store.reading(f"the record of run {run.check().id}"):
                path = exports.write_record_flags(load_run(run))
        except FsscopeError as exc:
            self.notify(visible(exc), title="Unreadable run record", severity="error", timeout=8, markup=False)
            return
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
        by_id = {r.id: r for r, _row in self.listing}  # a marked run may be filtered out
        self._load([by_id[chosen[0]], by_id[chosen[1]]])

    @work(thread=True, exclusive=True, group="runs-load", description="reading recorded runs")
    def _load(self, runs: list[store.RunDir]) -> None:
        try:  # a record another hand wrote may be of any shape: one line, never a traceback
            records = []
            for run in runs:
                with store.reading(f"the record of run {run.check().id}"):
                    records.append(load_run(run))
        except FsscopeError as exc:
            self.app.call_from_thread(self.notify, str(exc), title="Unreadable run record", severity="error",
                                      timeout=8)
            return
        self.post_message(msg.RunsLoaded(records))

    def on_runs_loaded(self, message: msg.RunsLoaded) -> None:
        if self.app.screen is not self:  # the user went elsewhere meanwhile
            return
        if len(message.records) == 1:
            self.app.push_screen(LiveScreen(record=message.records[0]))
        else:
            self.app.push_screen(CompareScreen(*message.records))
