"""The note of the selected flag: what was found, where, and what it means."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from fsscope.tui.model import Flag

PLACEHOLDER = "Select a flag (↑↓ in the flags list) to read its note here."


class NotesPanel(VerticalScroll):
    DEFAULT_CSS = """
    NotesPanel { height: 1fr; }
    NotesPanel > Static { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static(PLACEHOLDER, id="note-text")

    @property
    def text(self) -> str:
        return str(self.query_one("#note-text", Static).content)

    def show(self, flag: Flag | None) -> None:
        static = self.query_one("#note-text", Static)
        if flag is None:
            static.update(PLACEHOLDER)
            return
        body = Text()
        body.append(flag.title + "\n", style="bold")
        detail = [part for part in (flag.kind, flag.raw.get("structure"), flag.where) if part]
        if flag.where:  # the structure's id for searching docs and code; the title says it in words
            body.append(" · ".join(str(part) for part in detail) + "\n\n", style="dim")
        body.append(flag.note or "(no note)")
        static.update(body)
        self.scroll_home(animate=False)
