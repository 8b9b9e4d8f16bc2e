"""The report of ``fsscope replay``: per call type the replayed latency distribution and
throughput beside the captured one, the files that took the most time, what repeats, and the
recipes compared per call type."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fsscope.cli.render.watch import render_format_changes, shown
from fsscope.replay.compare import ReplayComparison
from fsscope.replay.records import PACE_WORDS, Report


def _num(value: float | None, fmt: str = ",.1f") -> str:
    return "-" if value is None else format(value, fmt)


def render_replay(report: Report, console: Console) -> None:
    source = "an anonymized capture" if report.anonymized else shown(report.source or "a capture")
    console.print(f"[bold]replay[/] of {source} ({report.calls:,} calls, {report.threads} thread(s), captured on "
                  f"{shown(report.captured_fs or '?')}) on {shown(report.fs)}"
                  f"{' restored from the aged snapshot ' + shown(report.snapshot) if report.snapshot else ''}, "
                  f"{len(report.runs)} run(s) "
                  f"{PACE_WORDS.get(report.pace, report.pace)}; starting tree "
                  f"{report.tree_entries:,} entries, {report.tree_bytes:,} bytes", highlight=False)
    t = Table(title="calls per type, µs (every run; captured: the same calls as watched)", title_justify="left")
    for col in ("op", "calls", "p50", "p99", "calls/s", "MB/s", "slow", "captured p50", "p99"):
        t.add_column(col, justify="left" if col == "op" else "right", no_wrap=True)
    for o in report.ops:
        t.add_row(o.op, f"{o.calls:,}", _num(o.p50_us), _num(o.p99_us), _num(o.calls_per_s, ",.0f"),
                  _num(o.mb_per_s, ".2f") if o.bytes else "-", f"{o.slow:,}",
                  _num(o.captured_p50_us), _num(o.captured_p99_us))
    console.print(t)
    failed = ", ".join(f"{o.failed:,} {o.op}" for o in report.ops if o.failed)
    if failed:
        console.print(f"failed calls: {failed}", highlight=False)
    if report.files:
        f = Table(title="files and directories by time spent", title_justify="left")
        for col in ("path", "calls", "total ms", "p50 µs", "p99 µs"):
            f.add_column(col, justify="left" if col == "path" else "right", overflow="fold")
        for row in report.files:
            f.add_row(shown(row.path), f"{row.calls:,}", _num(row.total_ms, ",.2f"), _num(row.p50_us), _num(row.p99_us))
        console.print(f)
    runs = ", ".join(f"run {r.run}: {r.played:,} calls in {r.elapsed_s:.2f} s" for r in report.runs)
    console.print(runs, highlight=False)
    for r in report.repeats:
        console.print(f"[bold]repeats:[/] {r.op} calls on {shown(r.where)} are slow every {r.stride} calls "
                      f"({r.slow} of {r.calls} slow; {r.hits} gaps of {r.stride})"
                      + (f" — {shown(r.cause)}" if r.cause else ""), highlight=False)
    if report.format_changes:
        render_format_changes(report.format_changes, console, "directory format changes (first run; call: the "
                                                               "op's number in the log)")
    if report.causes:
        console.print("slow calls' causes: " + ", ".join(f"{n:,} {shown(k)}" for k, n in report.causes.items()),
                      highlight=False)
    if report.anonymized or report.dropped:
        console.print(f"[dim]the log dropped: {shown('; '.join(report.dropped))}[/]", highlight=False)
    for note in report.notes:
        console.print(f"[dim]note: {shown(note)}[/]", highlight=False)


def render_replay_comparison(comparison: ReplayComparison, console: Console) -> None:
    for a, b in dict.fromkeys((p.a, p.b) for p in comparison.pairs):
        t = Table(title=f"recipes compared per call type: a = {shown(a)}, b = {shown(b)} (Welch on the runs' "
                        f"mean latency; a winner only when p < {comparison.alpha:g})", title_justify="left")
        for col in ("op", "mean a µs", "mean b µs", "median a µs", "median b µs", "t", "p", "verdict"):
            t.add_column(col, justify="left" if col == "op" else "right", no_wrap=col != "verdict")
        for p in comparison.pairs:
            if (p.a, p.b) == (a, b):
                t.add_row(p.op, _num(p.mean_a_us, ",.1f"), _num(p.mean_b_us, ",.1f"), _num(p.median_a_us, ",.1f"),
                          _num(p.median_b_us, ",.1f"), _num(p.t, ".2f"), _num(p.p, ".3g"),
                          f"[bold green]{shown(p.winner)} faster[/]" if p.winner else f"[dim]{shown(p.verdict)}[/]")
        console.print(t)
