"""The look of a form's rows (a label of fixed width, then the field), shared by the Setup
screen's pickers and every job's parameter panel."""

from __future__ import annotations

from textual.containers import Horizontal
from textual.content import Content


class FieldRow(Horizontal):
    """A form's row: its label, drawn by the row itself, then its field (a margin of the
    label's width: :func:`rows_css`). A Label widget in each row was ten of the Setup screen's
    widgets, each styled, laid out and painted before its first frame (bench/startup.py)."""

    def __init__(self, label: str, *, id: str | None = None):
        super().__init__(id=id, classes="field-row")
        self.label = label

    def render(self) -> Content:
        return Content(self.label)  # text, never markup


def rows_css(widget: str, label_width: int) -> str:
    """DEFAULT_CSS rules for ``widget``'s ``.field-row`` rows and its checkboxes."""
    return f"""
    {widget} .field-row {{ height: auto; }}
    {widget} .field-row > Input, {widget} .field-row > Select {{ width: 1fr; margin-left: {label_width}; }}
    {widget} Checkbox {{ border: none; padding: 0; height: 1; }}
    """
