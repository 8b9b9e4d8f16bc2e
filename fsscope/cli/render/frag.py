"""The report of ``fsscope frag`` (and the fragmentation part of ``fsscope age``'s): free-space
extent histograms, a test file's fragments."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsscope.format import format_bytes, format_pct, visible
from fsscope.layout.job import Report
from fsscope.layout.records import Measurement
from fsscope.layout.summary import summary_rows


def format_p(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def _size(value: float | None) -> str:
    return format_bytes(value, "-")


def render_histograms(named: list[tuple[str, Measurement | None]], console: Console, title: str) -> None:
    """Free-extent histograms side by side on their shared power-of-two grid."""
    hists = [(name, {lo: (n, free) for lo, n, free in m.free_space.buckets()} if m and m.free_space else None)
             for name, m in named]
    if not any(h for _, h in hists):
        return
    lowers = sorted({lo for _, h in hists if h for lo in h})
    table = Table(title=title, title_justify="left")
    table.add_column("extent size", justify="right", no_wrap=True)
    for name, _ in hists:
        table.add_column(f"{name} n".strip(), justify="right", no_wrap=True)
        table.add_column(f"{name} bytes".strip(), justify="right", no_wrap=True)
    for lo in lowers:
        row = [f"{_size(lo)}–{_size(lo * 2)}"]
        for _, h in hists:
            n, free = h.get(lo, (None, None)) if h else (None, None)
            row += ["-", "-"] if n is None else [f"{n:,}", _size(free)]
        table.add_row(*row)
    console.print(table)


def render_errors(label: str, m: Measurement | None, console: Console) -> None:
    for what, error in m.errors() if m else []:
        console.print(Text(visible(f"{label} {what}: {error}"), style="dim"))


def render_frag(report: Report, console: Console) -> None:
    where = report.recipe or report.fs or "?"
    target = report.target.describe if report.target else ""
    console.print(Text.assemble(("fragmentation", "bold"), f" of {visible(where)} on {visible(target)}"))
    rows = summary_rows(report)
    table = Table(show_header=False)
    table.add_column(justify="right")
    table.add_column(justify="right")
    size = _size
    table.add_row("fullness", format_pct(rows["fullness"], "-"))
    table.add_row("free space", size(rows["free_bytes"]))
    table.add_row("free extents", "-" if rows["free_extents"] is None else f"{rows['free_extents']:,}")
    table.add_row("largest free extent", size(rows["largest_free_extent_bytes"]))
    table.add_row("mean free extent", size(rows["mean_free_extent_bytes"]))
    table.add_row(f"test file ({size(rows['test_file_bytes'])}) fragments",
                  "-" if rows["test_file_fragments"] is None else f"{rows['test_file_fragments']:,}")
    table.add_row("test file d-span", size(rows["test_file_d_span_bytes"]))
    table.add_row("test file layout index", format_p(rows["test_file_layout_index"]))
    console.print(table)
    render_histograms([("", report)], console, "free-space extent histogram")
    render_errors("", report, console)
    for restore in report.restores:
        console.print(Text(f"restored {visible(restore.snapshot)} ({restore.method}): "
                           f"{restore.inodes_used} inodes in use", style="dim"))
