"""The report of ``fsscope watch``: per-operation latencies, the slow calls and why, the
directories' format changes with their arithmetic, what repeats, and what was lost."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fsscope.watch.records import Report


def shown(name: str | None, missing: str = "(not named)") -> str:
    """A path or command as text: never markup, never a terminal control character."""
    if name is None:
        return missing
    return escape("".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in name))


def render_watch(report: Report, console: Console) -> None:
    console.print(f"[bold]watch[/] {shown(report.watched)}: {report.calls:,} file-system calls in "
                  f"{report.duration_s:.1f} s on {shown(report.fs)} {shown(report.device or '')} "
                  f"(tree {shown(report.tree)})", highlight=False)
    if report.exit_status is not None:
        console.print(f"the command exited with status {report.exit_status}", highlight=False)
    _ops(report, console)
    _slow(report, console)
    _format_changes(report, console)
    for r in report.repeats:
        console.print(f"[bold]repeats:[/] {shown(r.title)} ({r.slow} of {r.calls} slow; {r.hits} gaps of "
                      f"{r.stride})", highlight=False)
    _lost(report, console)
    for note in report.notes:
        console.print(f"[dim]note: {shown(note)}[/]", highlight=False)


def _ops(report: Report, console: Console) -> None:
    if not report.ops:
        console.print("no watched call was recorded", highlight=False)
        return
    t = Table(title="calls", title_justify="left")
    for col in ("op", "calls", "p50 µs", "p99 µs", "max µs", "slow", "bytes", "not named"):
        t.add_column(col, justify="left" if col == "op" else "right", no_wrap=True)
    for o in report.ops:
        t.add_row(o.op, f"{o.calls:,}", f"{o.p50_us:,.1f}", f"{o.p99_us:,.1f}", f"{o.max_us:,.1f}",
                  f"{o.slow:,}", f"{o.bytes:,}", f"{o.unnamed:,}")
    console.print(t)


def _slow(report: Report, console: Console) -> None:
    if not report.slow_total:
        console.print("no call was slow against its own kind on its file or directory", highlight=False)
        return
    by_kind = ", ".join(f"{n} {kind}" for kind, n in report.causes.items())
    console.print(f"[bold]{report.slow_total} slow call(s)[/] (causes: {by_kind}); the slowest "
                  f"{len(report.slow)}:", highlight=False)
    t = Table(show_lines=False)
    for col in ("at s", "thread", "op", "µs", "baseline", "file or directory", "why"):
        t.add_column(col, overflow="fold", no_wrap=col in ("at s", "µs", "baseline"))
    for s in report.slow:
        where = shown(s.file) if s.file else shown(s.dir, "(not named)") + ("/" if s.dir else "")
        t.add_row(f"{s.start_s:.3f}", f"{s.tid} {shown(s.comm)}", s.op, f"{s.duration_us:,.0f}",
                  f"{s.baseline_us:,.0f}" + ("" if s.local_baseline else " (op)"), where,
                  "\n".join(shown(c.text) for c in s.causes))
    console.print(t)


def _format_changes(report: Report, console: Console) -> None:
    if report.format_changes:
        render_format_changes(report.format_changes, console)


def render_format_changes(changes: list, console: Console,
                          heading: str = "directory format changes the kernel marked") -> None:
    """Each change with the arithmetic beside it (watch's and replay's)."""
    console.print(f"[bold]{heading}[/] ({len(changes)}):", highlight=False)
    for c in changes:
        verdict = {True: "as the arithmetic predicts", False: f"the arithmetic predicts {c.predicted}",
                   None: "no exact prediction"}[c.matches]
        names = f"{c.entries_before} names" if c.entries_before >= 0 else "names not known"
        console.print(f"  {shown(c.dir, 'a directory')}: {c.event} in {c.op} (call #{c.call}) with {names} of "
                      f"~{c.name_bytes} B ({c.duration_us:,.0f} µs{', slow' if c.slow else ''}): {verdict}",
                      highlight=False)
        console.print(f"    [dim]{shown(c.arithmetic)}[/]", highlight=False)


def _lost(report: Report, console: Console) -> None:
    parts = ", ".join(f"{x.instance}: overrun {x.overrun}, dropped {x.dropped}, pages marked {x.pages_with_loss}"
                      for x in report.lost)
    style = "yellow" if report.lost_total else "dim"
    console.print(f"[{style}]events lost by the ring buffer: {report.lost_total} ({parts})[/]", highlight=False)
