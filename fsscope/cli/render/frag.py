"""The report of ``fsscope frag`` (and the fragmentation part of ``fsscope age``'s): free-space
extent histograms, a test file's fragments."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fsscope.format import format_bytes, format_pct
from fsscope.layout.summary import summary_rows


def format_p(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def _size(value) -> str:
    return format_bytes(value, "-")


def render_histograms(named: list[tuple[str, dict | None]], console: Console, title: str) -> None:
    """Free-extent histograms side by side on their shared power-of-two grid."""
    hists = [(name, (m or {}).get("free_space")) for name, m in named]
    if not any(h for _, h in hists):
        return
    lowers = sorted({lo for _, h in hists if h for lo in h.get("bucket_lower_bytes", [])})
    table = Table(title=title, title_justify="left")
    table.add_column("extent size", justify="right", no_wrap=True)
    for name, _ in hists:
        table.add_column(f"{name} n".strip(), justify="right", no_wrap=True)
        table.add_column(f"{name} bytes".strip(), justify="right", no_wrap=True)
    for lo in lowers:
        row = [f"{_size(lo)}–{_size(lo * 2)}"]
        for _, h in hists:
            if not h or lo not in h.get("bucket_lower_bytes", []):
                row += ["-", "-"]
                continue
            i = h["bucket_lower_bytes"].index(lo)
            row += [f"{h['bucket_extent_counts'][i]:,}", _size(h["bucket_free_bytes"][i])]
        table.add_row(*row)
    console.print(table)


def render_errors(label: str, m: dict | None, console: Console) -> None:
    for key in ("free_space_error", "test_file_error"):
        if m and m.get(key):
            console.print(f"[dim]{label} {key.replace('_error', '').replace('_', ' ')}: {m[key]}[/]",
                          highlight=False)


def render_frag(report: dict, console: Console) -> None:
    where = report.get("recipe") or report.get("fs") or "?"
    target = (report.get("target") or {}).get("describe", "")
    console.print(f"[bold]fragmentation[/] of {where} on {target}", highlight=False)
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
    for restore in report.get("restores") or []:
        console.print(f"[dim]restored {restore.get('snapshot')} ({restore.get('method')}): "
                      f"{restore.get('inodes_used')} inodes in use[/]", highlight=False)
