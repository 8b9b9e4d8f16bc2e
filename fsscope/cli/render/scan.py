"""``fsscope scan``: each directory's on-disk structure, checked against the file system's account."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsscope.format import format_bytes, visible
from fsscope.scan.job import Dir, Report


def render_scan(report: Report, console: Console) -> None:
    # the tree's names are someone else's: each goes in as Text, its control characters visible
    console.print(Text.assemble((visible(report.path), "bold"), f" on {visible(report.summary)}"))
    for gap in report.unread:
        console.print(Text.assemble("  ", ("not read:", "yellow"), f" {visible(gap)}"))
    counts = ", ".join(f"{n} {k}" for k, n in sorted(report.structures.items()))
    c = report.checked
    console.print(f"{report.directories} directories, {report.files} files: {counts}. "
                  f"Checked against the file system: {c.agree} agree, {c.disagree} differ, "
                  f"{c.not_checked} not checked. {report.read_only.note}.", highlight=False)

    def table(title: str, rows: list[Dir]) -> None:
        if not rows:
            return
        t = Table(title=title, title_justify="left")
        for col in ("directory", "entries", "structure", "next change", "file system says"):
            t.add_column(col, overflow="fold")
        for d in rows:
            ahead = d.creates_until_change
            nxt = (f"in {ahead.creates} create{'s' if ahead.creates > 1 else ''} → {ahead.becomes}"
                   if ahead else "-")
            t.add_row(Text(visible(d.path)), str(d.entries), d.structure_text, nxt, Text(visible(d.verdict)))
        console.print(t)

    table(f"within {report.near_entries} creates of a structural change (the next create pays it)",
          report.near_change)
    if report.near_change_more:
        more = sum(report.near_change_more.values())
        console.print(f"  and {more} smaller directories as near: " + ", ".join(
            f"{n} → {visible(k)}" for k, n in sorted(report.near_change_more.items(), key=lambda kv: -kv[1]))
            + " (every directory is in --json's dirs)", highlight=False)
    table("largest directories", report.largest)
    table("where the names and the file system disagree", report.disagreements[:20])
    fs = report.free_space
    if fs is not None:
        console.print(f"free space: {format_bytes(fs.total_free_bytes)} in {fs.free_extent_count} "
                      f"free extents, largest {format_bytes(fs.largest_free_extent_bytes)}, mean "
                      f"{format_bytes(int(fs.mean_free_extent_bytes or 0))} ({fs.source})", highlight=False)
    elif report.free_space_error:
        console.print(Text(f"free space: not read: {visible(report.free_space_error)}"))
    aging = report.aging
    if aging and aging.nearest:
        near = ", ".join(f"{visible(r.profile)} ({r.distance:.2f})" for r in aging.nearest[:4])
        console.print(Text(f"aging: this tree's profile is nearest to {near} "
                           "(distance: size W1 in log2 bytes + depth W1 + 4 x fullness)"))
    elif aging and aging.error:
        console.print(Text(f"aging: {visible(aging.error)}"))
    if report.errors_count:
        console.print(Text.assemble((f"{report.errors_count} entries could not be read", "yellow"),
                                    f" (first: {visible(report.errors[0])})"))
    for line in report.swapped:
        console.print(Text.assemble(("swapped, not followed: ", "bold red"), visible(line)))
    if report.swapped_count > len(report.swapped):
        console.print(f"… and {report.swapped_count - len(report.swapped)} more swapped directories", highlight=False)
