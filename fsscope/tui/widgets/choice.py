"""A Select that costs two widgets until it is opened.

Textual's Select is six: its current value is a row of three Statics (the label and two
arrows, one hidden), and its list of options (an OptionList overlay) is built and filled when
it mounts, opened or not. The Setup screen has five of them, 30 of its ~100 widgets, and
styling those widgets is most of the screen's start-up (bench/startup.py). ``Choice`` draws its
value and arrow as one line and mounts its list the first time it opens. It is a Select in
every other way: its keys, clicks, type-to-search, ``value``, ``Select.Changed`` and CSS.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.content import Content
from textual.widgets import Select
from textual.widgets._select import NoSelection, SelectCurrent, SelectOverlay


class ChoiceCurrent(SelectCurrent):
    """The current value and the arrow, drawn as one line (SelectCurrent's own three Statics'
    look: the placeholder dimmed, the arrow dimmed, ▲ while the list is open)."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"choice--arrow", "choice--placeholder"}
    DEFAULT_CSS = """
    ChoiceCurrent > .choice--arrow { color: $foreground 50%; }
    ChoiceCurrent > .choice--placeholder { color: $foreground 50%; }
    """

    def compose(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.update(self.label)

    def get_content_height(self, container: Any, viewport: Any, width: int) -> int:
        return 1  # a line (a Horizontal without children would be none)

    def update(self, label: Any) -> None:
        self.label = label
        self.has_value = not isinstance(label, NoSelection)
        self.refresh()

    def render(self) -> Content:
        placeholder = isinstance(self.label, NoSelection)
        label = self.placeholder if placeholder else self.label
        text = Content.from_rich_text(label) if isinstance(label, Text) else Content(str(label))
        width = max(0, self.content_size.width - 2)  # the arrow and the space before it
        text = text.truncate(width).pad_right(max(0, width - text.cell_length))
        if placeholder:
            text = text.stylize(self.get_visual_style("choice--placeholder"))
        expanded = isinstance(self.parent, Select) and self.parent.expanded
        arrow = Content.styled("▲" if expanded else "▼", self.get_visual_style("choice--arrow"))
        return Content.assemble(text, " ", arrow)


class Choice(Select):
    """A Select whose current value is one widget and whose list is mounted when first opened."""

    def compose(self) -> ComposeResult:
        current = ChoiceCurrent(self.prompt)
        # born showing the value it will show once mounted (Select's _on_mount sets it): set
        # then, the "-has-value" class restyled it, a second time (bench/startup.py)
        for prompt, value in self._options:
            if value == self._value and value != self.NULL:
                current.label = prompt
                current.set_reactive(SelectCurrent.has_value, True)
                current.add_class("-has-value")
                # and the value it was made with: setting it when mounted (Select's _on_mount)
                # then changes nothing, which posted a Changed that went up through every
                # parent of the five Choices before the Setup screen's first frame
                self.set_reactive(Select.value, value)  # type: ignore[misc]  # the descriptor, as SelectCurrent.has_value above
                break
        yield current

    def _overlay(self) -> SelectOverlay | None:
        overlays = self.query_children(SelectOverlay)
        return overlays.first() if overlays else None

    def _ensure_overlay(self) -> SelectOverlay:
        overlay = self._overlay()
        if overlay is None:
            overlay = SelectOverlay(type_to_search=self._type_to_search)
            overlay.compact = self.compact
            self.mount(overlay)  # in the DOM at once; its Mount comes after
            super()._setup_options_renderables()
        return overlay

    def _setup_options_renderables(self) -> None:
        if self._overlay() is not None:  # else built when the list first opens
            super()._setup_options_renderables()

    def _watch_value(self, value: Any) -> None:
        """Select's, without the list while it is not mounted."""
        self._value = value
        currents = self.query_children(SelectCurrent)
        if not currents:
            return
        current = currents.first()
        if value == self.NULL:
            current.update(self.NULL)
        else:
            for index, (prompt, option_value) in enumerate(self._options):
                if option_value == value:
                    if (overlay := self._overlay()) is not None:
                        overlay.highlighted = index
                    current.update(prompt)
                    break
        self.post_message(self.Changed(self, value))

    def _watch_expanded(self, expanded: bool) -> None:
        if expanded:
            self._ensure_overlay()
        super()._watch_expanded(expanded)
        for current in self.query_children(ChoiceCurrent):
            current.refresh()  # its arrow

    def action_show_overlay(self) -> None:
        self._ensure_overlay()
        super().action_show_overlay()

    def _watch_prompt(self, prompt: str) -> None:
        if self._overlay() is not None:
            super()._watch_prompt(prompt)
        elif self.is_mounted:
            current = self.query_children(SelectCurrent).first()
            current.placeholder = prompt
            current.refresh()
