"""``fsscope compare``: two runs' comparison sections as tables of A, B and B / A."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsscope.format import format_cell, ratio_cell, visible


def render_compare(doc: dict, out: Console) -> None:
    head = Table(title=f"{doc['job']} runs compared (ratios are B / A)", title_justify="left")
    for col in ("", "run", "status", "recipe", "target"):
        head.add_column(col, overflow="fold")
    for label in ("a", "b"):
        r = doc[label]
        head.add_row(label.upper(), *(Text(visible(r[key])) for key in ("id", "status", "recipe", "target")))
    out.print(head)
    for section in doc["sections"]:
        if not section.rows:
            continue
        table = Table(title=section.title, title_justify="left")
        table.add_column("", no_wrap=True)
        table.add_column(f"A {doc['a']['id']}", justify="right", overflow="fold")
        table.add_column(f"B {doc['b']['id']}", justify="right", overflow="fold")
        table.add_column("B / A", justify="right", no_wrap=True)
        for row in section.rows:
            table.add_row(row.metric, format_cell(row.a, row.kind), format_cell(row.b, row.kind), ratio_cell(row))
        out.print(table)
