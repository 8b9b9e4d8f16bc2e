"""The look of a form's rows (a label of fixed width, then the field), shared by the Setup
screen's pickers and every job's parameter panel."""

from __future__ import annotations


def rows_css(widget: str, label_width: int) -> str:
    """DEFAULT_CSS rules for ``widget``'s ``.field-row`` rows and its checkboxes."""
    return f"""
    {widget} .field-row {{ height: auto; }}
    {widget} .field-row Label {{ width: {label_width}; padding: 0; }}
    {widget} .field-row Input, {widget} .field-row Select {{ width: 1fr; }}
    {widget} Checkbox {{ border: none; padding: 0; height: 1; }}
    """
