"""The Check view: the audit as a table of traffic lights (worst first) with the evidence,
effect and fix of the selected row below it, and the calibration filling in live — the
throughput of each run as a strip of bars and the runs-needed estimate after each run as a
curve. The verdict arrives as the job's first flag (with what to fix first as its note)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Input, Static

from fsscope.check.findings import Finding
from fsscope.format import spark
from fsscope.tui.check_model import CheckModel
from fsscope.tui.model import JobView
from fsscope.tui.widgets.live_view import ModelView, SparkRow
from fsscope.tui.widgets.table_export import Table
from fsscope.tui.widgets.table_filter import TableFilter, matches

# a mark per verdict that reads without colour (ok and bad were both "●", told apart by colour)
LIGHT = {"ok": ("✓", "green"), "warn": ("!", "yellow"), "bad": ("✗", "bold red"), "unknown": ("?", "dim")}


NARROW_BELOW = 70  # table columns under which the item column gives its room to the finding


def item_words(item_id: str) -> str:
    """An audit item as people read it: page-cache-fit → page cache fit."""
    return item_id.replace("-", " ").replace("_", " ")


class CheckView(ModelView):
    VIEW_ID = "check-view"
    MODEL = CheckModel
    BINDINGS = [Binding("slash", "filter", "Filter items")]

    DEFAULT_CSS = """
    CheckView #check-table { height: 1fr; border: round $panel; }
    CheckView #check-detail { height: auto; max-height: 12; padding: 0 1; border: round $panel; }
    CheckView #check-cal { height: auto; padding: 0 1; border: round $panel; }
    """

    def compose(self) -> ComposeResult:
        yield TableFilter("check-table", id="check-filter")
        yield Table(id="check-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="check-detail")
        yield Static("", id="check-cal")

    def on_mount(self) -> None:
        table = self.table
        for key, label in (("light", ""), ("id", "item"), ("title", "finding")):
            table.add_column(label, key=key)
        table.border_title = "Check: what will distort a benchmark here"
        self.query_one("#check-detail", Static).border_title = "evidence · effect · fix"
        self.query_one("#check-cal", Static).border_title = "calibration"

    @property
    def table(self) -> DataTable:
        return self.query_one("#check-table", DataTable)

    def draw_empty(self) -> None:
        self.table.clear()

    def action_filter(self) -> None:
        self.query_one("#check-filter", TableFilter).open()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "check-filter":
            event.stop()
            model = self.model_of(self._view)
            if model is not None:
                self.draw(model)

    def shown_rows(self, model: CheckModel) -> list[Finding]:
        """The items the filter lets through (any of mark, words, verdict, title, item id)."""
        needle = self.query_one("#check-filter", TableFilter).value
        return [f for f in model.rows() if matches(needle, f.severity, item_words(f.id), f.title, f.id)]

    def draw(self, model: CheckModel) -> None:
        table = self.table
        row = table.cursor_row
        rows = self.shown_rows(model)
        width = table.scrollable_content_region.width or table.size.width
        # narrow (80 columns): the finding alone, its item named in the detail below
        with_item = not 0 < width < NARROW_BELOW
        # the finding ends in … where it would scroll the table sideways (the detail below
        # and the CSV have it whole): 1 cell of padding each side of each column, the mark, the item
        longest = max((len(item_words(f.id)) for f in rows), default=0) if with_item else -2
        room = max(12, width - 6 - 1 - longest) if width else None
        table.clear(columns=True)  # (clear() alone keeps the widest cell ever drawn)
        for key, label in (("light", ""), ("id", "item"), ("title", "finding")):
            if key != "id" or with_item:
                table.add_column(label, key=key, width=room if key == "title" else None)
        for f in rows:
            mark, style = LIGHT.get(f.severity, ("?", ""))
            title = Text(f.title, style=style, no_wrap=True, overflow="ellipsis")
            cells = [Text(mark, style=style), item_words(f.id), title] if with_item else [Text(mark, style=style), title]
            table.add_row(*cells, key=f.id)
        if table.row_count:
            table.move_cursor(row=min(max(row, 0), table.row_count - 1))
        self._show_detail(model, table.cursor_row)
        self._show_calibration(model)

    def on_resize(self) -> None:
        model = self.model_of(self._view)
        if model is not None:
            self.draw(model)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        model = self.model_of(self._view)
        if model is not None:
            self._show_detail(model, event.cursor_row)

    def _show_detail(self, model: CheckModel, row: int) -> None:
        rows = self.shown_rows(model)
        detail = self.query_one("#check-detail", Static)
        if not rows or not 0 <= row < len(rows):
            detail.update(Text("waiting for the audit…", style="dim"))
            return
        f = rows[row]
        mark, style = LIGHT.get(f.severity, ("?", ""))
        text = Text.assemble((f"{mark} {item_words(f.id)} ({f.severity}): ", style), f.title)
        text.append(f"\nevidence: {f.evidence}")
        text.append(f"\neffect:   {f.effect}", style="dim")
        if f.fix:
            text.append(f"\nfix:      {f.fix}", style="bold")
        detail.update(text)

    def _show_calibration(self, model: CheckModel) -> None:
        text = Text()
        verdict = model.verdict
        style = {"fit": "bold green", "caution": "bold yellow", "unfit": "bold red"}.get(verdict or "", "bold")
        short = self.screen.has_class("-short")  # 80×24: the verdict alone, its series are the Live panel's rows
        text.append(model.headline + ("" if short else "\n"), style=style)
        if short:  # with the recommendations on one line: they are what the check is for
            text.append("\n" + " · ".join(model.short_summary()), style="dim")
            self.query_one("#check-cal", Static).update(text)
            return
        ops = model.run_ops_per_s
        if ops:
            text.append("throughput per run  ")
            text.append(spark(ops, 0.0), style="cyan")
            text.append("  " + ", ".join(f"{v:,.0f}" for v in ops) + " ops/s\n")
        if model.runs_needed:
            text.append("runs needed after each run  ")
            text.append(spark([float(v) if v is not None else None for v in model.runs_needed], 0.0), style="magenta")
            text.append("  " + " → ".join("–" if v is None else str(v) for v in model.runs_needed) + "\n")
        for line in model.summary_lines():
            text.append(line + "\n", style="dim")
        self.query_one("#check-cal", Static).update(text)

    def spark_rows(self, view: JobView, live: bool = True) -> list[SparkRow]:
        model = self.model_of(view)
        if model is None:
            return []
        # the panel's three job rows (keys p50/p99/rate) carry the calibration here
        need = [float(v) for v in model.runs_needed if v is not None]
        last = model.run_series[-1] if model.run_series else []
        return [("p50", "ops/s a run", list(model.run_ops_per_s),
                 f"{model.run_ops_per_s[-1]:,.0f}" if model.run_ops_per_s else "–"),
                ("p99", "runs needed", need, str(int(need[-1])) if need else "–"),
                ("rate", "last run/s", list(last), f"{last[-1]:,.0f}" if last else "–")]
