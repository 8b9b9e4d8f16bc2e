"""The report of ``fsscope syncwrite``: per buffer size, the knees, the kernel trace, recipe tests."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from fsscope.format import format_bytes


def _size_label(n) -> str:
    return format_bytes(n, missing="-")


def _ms(ns) -> str:
    if ns is None or (isinstance(ns, float) and not math.isfinite(ns)):
        return "-"
    return f"{ns / 1e6:,.3f}" if ns < 1e9 else f"{ns / 1e6:,.0f}"


def _mb(bps) -> str:
    return "-" if bps is None else f"{bps / 1e6:,.1f}"


def _phase_of(report: dict, size: int) -> str:
    for phase, sizes in (report.get("phases") or {}).items():
        if size in sizes:
            return phase
    return "-"


def render_syncwrite(report: dict, console: Console) -> None:
    where = report.get("recipe") or report.get("fs") or "?"
    target = (report.get("target") or {}).get("describe", "")
    knees = report.get("knees") or {}
    rise, sat = knees.get("latency_rise_bytes"), knees.get("throughput_saturation_bytes")
    best = report.get("recommended_bytes")
    reps = (report.get("spec") or {}).get("repeats")
    title = (f"synchronous writes ({report.get('mode')}) on {where} ({target}): "
             f"{report.get('points_completed', 0)} of {report.get('points_requested', 0)} points"
             + (f", {reps} repetitions" if reps else ""))
    table = Table(title=title, title_justify="left")
    for col in ("buffer", "n", "MB/s ±95%", "ms/write ±95%", "p50 ms", "p99 ms", "MB/s per ms", "phase", ""):
        table.add_column(col, justify="right", no_wrap=True)
    for row in report.get("sizes") or []:
        size = row["buffer_bytes"]
        marks = [mark for mark, at in (("[bold green]◀ best[/]", best), ("[yellow]rise after[/]", rise),
                                       ("[cyan]saturated[/]", sat)) if size == at]
        ratio = row.get("ratio")
        table.add_row(_size_label(size), str(row.get("repeats", "")),
                      f"{_mb(row.get('throughput_mean'))} ±{_mb(row.get('throughput_ci95'))}",
                      f"{_ms(row.get('latency_mean_ns'))} ±{_ms(row.get('latency_ci95_ns'))}",
                      _ms(row.get("latency_p50_ns")), _ms(row.get("latency_p99_ns")),
                      "-" if ratio is None else f"{ratio / 1e9:,.3g}", _phase_of(report, size), " ".join(marks))
    console.print(table)
    for key in ("latency_rise", "throughput_saturation"):
        note = (knees.get(key) or {}).get("note")
        if note:
            console.print(f"{key.replace('_', ' ')}: {note}", highlight=False)
    if report.get("recommendation"):
        console.print(f"[bold]{report['recommendation']}[/]", highlight=False)
    for choice in report.get("choices") or []:
        style = "bold green" if choice.get("buffer_bytes") else "bold red"
        console.print(f"[{style}]{choice['note']}[/]", highlight=False)
    render_kernel(report, console)
    for flag in report.get("flags") or []:
        console.print(f"[bold yellow]▲[/] [bold]{flag.get('title')}[/]: {flag.get('note')}", highlight=False)
    for note in report.get("notes") or []:
        console.print(f"[dim]note: {note}[/]", highlight=False)


def render_kernel(report: dict, console: Console) -> None:
    """--trace: per buffer size, what reached the device per synchronous write."""
    rows = report.get("kernel_by_size")
    trace = report.get("trace") or {}
    if not rows:
        if trace.get("reason") and trace["reason"] != "tracing off":
            console.print(f"[dim]kernel tracing off: {trace['reason']}[/]", highlight=False)
        return
    table = Table(title="per synchronous write, what reached the device (kernel trace)", title_justify="left")
    for col in ("buffer", "writes", "requests", "KiB", "device B / B", "FLUSH", "FUA", "journal commits"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in rows:
        amp = row.get("device_bytes_per_byte")
        table.add_row(_size_label(row["buffer_bytes"]), f"{row['writes']:,}", f"{row['requests_per_write']:.2f}",
                      f"{row['bytes_per_write'] / 1024:,.1f}", "-" if amp is None else f"{amp:.2f}",
                      f"{row['flush_per_write']:.2f}", f"{row['fua_per_write']:.2f}", f"{row['commits_per_write']:.2f}")
    console.print(table)
    if not trace.get("complete", True):
        console.print("[yellow]the trace lost events: the counts are lower bounds[/]", highlight=False)


def render_tests(tests: list[dict], console: Console) -> None:
    table = Table(title="recipes compared per buffer size: Welch t-test on throughput (a difference counts at "
                  "p < 0.001)", title_justify="left")
    for col in ("buffer", "a vs b", "MB/s a", "MB/s b", "b / a", "p", "verdict"):
        table.add_column(col, justify="right", no_wrap=True)
    for t in tests:
        ratio = t["mean_b"] / t["mean_a"] if t.get("mean_a") and t.get("mean_b") else None
        p = t.get("p")
        verdict = t["verdict"]
        table.add_row(_size_label(t["buffer_bytes"]), f"{t['a']} vs {t['b']}", _mb(t.get("mean_a")),
                      _mb(t.get("mean_b")), "-" if ratio is None else f"{ratio:.2f}",
                      "-" if p is None else f"{p:.2g}",
                      f"[bold green]{verdict}[/]" if "faster" in verdict else f"[dim]{verdict}[/]")
    console.print(table)
