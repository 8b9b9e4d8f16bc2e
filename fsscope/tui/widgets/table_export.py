"""Any table copied or saved as CSV: ``y`` copies the rows shown (a filter's hidden rows left
out) to the clipboard, ``s`` saves them to the exports folder (``tui/exports.py``, where every
export goes), named after the table and the run on screen. :class:`Table` is the DataTable
every view uses; other lists (the flags) mix in :class:`CsvExport` with their own rows."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from fsscope.format import csv_cell


def csv_text(header: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    """The rows as CSV, each cell as it reads on screen (Rich text as its plain text), guarded
    so a spreadsheet reads a name as text, never as a formula (``format.csv_cell``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in (header, *rows):
        writer.writerow([csv_cell(cell.plain if isinstance(cell, Text) else "" if cell is None else str(cell))
                         for cell in row])
    return out.getvalue()


class CsvExport:
    """``y`` copy as CSV, ``s`` save as CSV; the widget says what its rows are."""

    BINDINGS: ClassVar[list[BindingType]] = [  # in ?, not the footer
        Binding("y", "copy_csv", "Copy CSV", show=False), Binding("s", "save_csv", "Save CSV", show=False)]

    def csv_rows(self) -> tuple[Sequence[object], list[Sequence[object]]]:
        raise NotImplementedError

    def csv_name(self) -> str:
        return str(getattr(self, "id", None) or "table")

    def action_copy_csv(self) -> None:
        header, rows = self.csv_rows()
        self.app.copy_to_clipboard(csv_text(header, rows))  # type: ignore[attr-defined]
        self.app.notify(f"{len(rows)} row{'' if len(rows) == 1 else 's'} copied as CSV", timeout=3)  # type: ignore[attr-defined]

    def action_save_csv(self) -> None:
        from fsscope.tui import exports

        header, rows = self.csv_rows()
        job = getattr(self.screen, "shown_job", None)  # type: ignore[attr-defined]
        path = exports.write_csv(self.csv_name(), getattr(job, "run_id", "") or "", csv_text(header, rows))
        self.app.notify(f"{len(rows)} rows saved to {path}", title="Exported", timeout=6)  # type: ignore[attr-defined]


class Table(CsvExport, DataTable):
    """A DataTable whose shown rows copy and save as CSV."""

    BINDINGS: ClassVar[list[BindingType]] = CsvExport.BINDINGS

    def csv_rows(self) -> tuple[Sequence[object], list[Sequence[object]]]:
        header = [column.label for column in self.ordered_columns]
        return header, [self.get_row_at(r) for r in range(self.row_count)]
