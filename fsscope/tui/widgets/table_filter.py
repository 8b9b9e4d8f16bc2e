"""``/`` on a long table or list: a one-line field above it; rows not containing the text
(any column, any case) hide as you type, Enter goes back to the rows keeping the filter,
Escape clears it. The screen owning the rows applies it (on ``Input.Changed`` from this field)."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input


def matches(needle: str, *cells: object) -> bool:
    """Whether any cell contains ``needle`` (case-insensitive); an empty needle matches all."""
    needle = needle.strip().casefold()
    return not needle or any(needle in str(cell).casefold() for cell in cells)


class TableFilter(Input):
    """Hidden until :meth:`open`; filters the widget ``#for_id`` (and gives it focus back)."""

    BINDINGS = [Binding("escape", "clear", "Clear filter")]
    DEFAULT_CSS = """
    TableFilter { display: none; }
    TableFilter.-open { display: block; }
    """

    def __init__(self, for_id: str, *, id: str | None = None):
        # short, and saying what it is first: beside the flags (28 columns at 80×24) the longer
        # prompts were cut before they said how to leave
        super().__init__(placeholder="filter: ⏎ keep, Esc clear", id=id, compact=True)
        self.for_id = for_id

    def open(self) -> None:
        self.add_class("-open")
        self.focus()

    def _back(self) -> None:
        self.screen.query_one(f"#{self.for_id}").focus()

    def action_clear(self) -> None:
        self.value = ""
        self.remove_class("-open")
        self._back()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not self.value.strip():
            self.remove_class("-open")
        self._back()
