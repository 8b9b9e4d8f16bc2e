"""``fsscope replicate``: a paper's findings with the paper's number, today's arithmetic, the measurement and a verdict."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fsscope.format import format_measure
from fsscope.replicate.base import Result

STYLE = {"agree": "green", "disagree": "red", "inconclusive": "yellow"}


def render_replicate(result: Result, console: Console) -> None:
    console.print(f"[bold]{result.title}[/]  ({'quick' if result.quick else 'full'})")
    for line in result.setup:
        console.print(f"  [dim]{line}[/]", highlight=False)
    table = Table(title_justify="left")
    for col in ("finding", "paper", "today's arithmetic", "measured", "verdict"):
        table.add_column(col, overflow="fold")
    for f in result.findings:
        table.add_row(f.id, format_measure(f.paper), format_measure(f.expected_today), format_measure(f.measured),
                      f"[{STYLE[f.verdict]}]{f.verdict}[/]")
    console.print(table)
    for f in result.findings:
        console.print(f"[{STYLE[f.verdict]}]{f.verdict}[/] [bold]{f.id}[/] ({f.setup}): {f.why}", highlight=False)
