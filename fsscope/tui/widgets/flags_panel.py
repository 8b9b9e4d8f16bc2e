"""The flags found so far (repeatable outliers, series, level shifts, thresholds); moving the
highlight selects one: its files light up in the heatmap and its note shows below."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from fsscope.tui.messages import FlagSelected
from fsscope.tui.model import Flag

KIND_MARK = {"outlier": "!", "series": "⋮", "levelshift": "↕", "lineargrowth": "↗", "threshold": "◆",
             # bench variation flags
             "variation": "±", "warmup": "»", "periodic": "≈", "window_disagrees": "≠",
             # aging: why it stopped, and the report's notes
             "stop": "■", "note": "i"}


class FlagsPanel(OptionList):
    DEFAULT_CSS = """
    FlagsPanel { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.flags: list[Flag] = []

    @staticmethod
    def _prompt(flag: Flag) -> Text:
        text = Text()
        if flag.withdrawn:  # raised while it ran, not kept by the final test: struck, and why
            text.append(f"{KIND_MARK.get(flag.kind, '•')} ", style="dim")
            text.append(flag.title, style="dim strike")
            text.append(f"  withdrawn: {flag.withdrawn}", style="dim italic")
            return text
        text.append(f"{KIND_MARK.get(flag.kind, '•')} ", style="bold")
        text.append(flag.title)
        return text

    def add_flag(self, flag: Flag) -> None:
        self.flags.append(flag)
        self.add_option(Option(self._prompt(flag), id=f"flag-{len(self.flags) - 1}"))
        if len(self.flags) == 1:
            self.border_subtitle = "↑↓ select"
        self.border_title = f"Flags ({len(self.flags)})"

    def replace_flag(self, position: int, flag: Flag) -> None:
        """The same finding with new numbers (more runs); the highlight stays where it is."""
        self.flags[position] = flag
        self.replace_option_prompt_at_index(position, self._prompt(flag))

    def set_flags(self, flags: list[Flag]) -> None:
        self.clear_options()
        self.flags = []
        for flag in flags:
            self.add_flag(flag)
        withdrawn = sum(1 for f in self.flags if f.withdrawn)
        self.border_title = f"Flags ({len(self.flags) - withdrawn})" + (f" · {withdrawn} withdrawn" if withdrawn else "")

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self.post_message(FlagSelected(event.option_index))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(FlagSelected(event.option_index))
