"""The flags found so far (repeatable outliers, series, level shifts, thresholds); moving the
highlight selects one: its files light up in the heatmap and its note shows below. ``/``
filters them (:meth:`FlagsPanel.set_filter`): positions stay those of the full list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import BindingType
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from fsscope.format import visible
from fsscope.tui.messages import FlagSelected
from fsscope.tui.model import Flag
from fsscope.tui.widgets.table_export import CsvExport
from fsscope.tui.widgets.table_filter import matches

KIND_MARK = {"outlier": "!", "series": "⋮", "levelshift": "↕", "lineargrowth": "↗", "threshold": "◆",
             # bench variation flags
             "variation": "±", "warmup": "»", "periodic": "≈", "window_disagrees": "≠",
             # aging: why it stopped, and the report's notes
             "stop": "■", "note": "i"}


class FlagsPanel(CsvExport, OptionList):
    BINDINGS: ClassVar[list[BindingType]] = CsvExport.BINDINGS
    DEFAULT_CSS = """
    FlagsPanel { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.flags: list[Flag] = []
        self.shown: list[int] = []
        """The position in ``flags`` of each option listed (those the filter lets through)."""
        self.needle = ""

    @staticmethod
    def _prompt(flag: Flag) -> Text:
        text = Text()
        if flag.withdrawn:  # raised while it ran, not kept by the final test: struck, and why
            text.append(f"{KIND_MARK.get(flag.kind, '•')} ", style="dim")
            text.append(visible(flag.title), style="dim strike")
            text.append(f"  withdrawn: {flag.withdrawn}", style="dim italic")
            return text
        text.append(f"{KIND_MARK.get(flag.kind, '•')} ", style="bold")
        text.append(visible(flag.title))  # a title may quote a file's name: text, controls visible
        if flag.finding.provisional:  # from the runs so far, not yet held to its final test
            text.append("  provisional", style="dim italic")
        return text

    def _matches(self, flag: Flag) -> bool:
        return matches(self.needle, flag.title, flag.kind, flag.withdrawn or "", flag.finding.provisional)

    def csv_rows(self) -> tuple[Sequence[object], list[Sequence[object]]]:
        """The flags listed (the filter's), as the export and the notes panel word them."""
        return (("kind", "flag", "note", "withdrawn", "provisional"),
                [(f.kind, f.title, f.note, f.withdrawn or "", f.finding.provisional)
                 for f in (self.flags[i] for i in self.shown)])

    def csv_name(self) -> str:
        return "flags"

    @property
    def position(self) -> int | None:
        """The highlighted flag's position in ``flags`` (None: none highlighted)."""
        index = self.highlighted
        return self.shown[index] if index is not None and 0 <= index < len(self.shown) else None

    def select_position(self, position: int) -> None:
        if position in self.shown:
            self.highlighted = self.shown.index(position)

    def _title(self) -> None:
        if not self.flags:
            self.border_title = "Flags"  # none yet: no count at all, never the last job's
            return
        withdrawn = sum(1 for f in self.flags if f.withdrawn)
        title = f"Flags ({len(self.flags) - withdrawn})"
        if len(self.shown) < len(self.flags):  # short: beside the heatmap at 80×24 the panel has 26 cells
            title += f" · {len(self.shown)} with “{self.needle.strip()}”"
        elif withdrawn:
            title += f" · {withdrawn} withdrawn"
        self.border_title = title

    def add_flag(self, flag: Flag) -> None:
        self.flags.append(flag)
        if self._matches(flag):
            self.shown.append(len(self.flags) - 1)
            self.add_option(Option(self._prompt(flag), id=f"flag-{len(self.flags) - 1}"))
        if len(self.flags) == 1:
            self.border_subtitle = "↑↓ select · / filter"
        self._title()

    def replace_flag(self, position: int, flag: Flag) -> None:
        """The same finding with new numbers (more runs); the highlight stays where it is."""
        self.flags[position] = flag
        if position in self.shown:
            self.replace_option_prompt_at_index(self.shown.index(position), self._prompt(flag))

    def set_flags(self, flags: list[Flag]) -> None:
        self.clear_options()
        self.flags, self.shown = [], []
        self.border_subtitle = ""
        for flag in flags:
            self.add_flag(flag)
        self._title()  # an empty list too: never the count of the job shown before

    def set_filter(self, needle: str) -> None:
        """List only the flags containing ``needle``; the highlighted one stays if still listed."""
        position = self.position
        self.needle = needle
        self.set_flags(list(self.flags))
        if position is not None:
            self.select_position(position)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self.post_message(FlagSelected(self.shown[event.option_index]))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(FlagSelected(self.shown[event.option_index]))
