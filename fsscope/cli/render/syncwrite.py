"""The report of ``fsscope syncwrite``: per buffer size, the knees, the kernel trace, recipe tests."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from fsscope.format import format_bytes

if TYPE_CHECKING:  # the job module brings the workloads; the renderer only reads its records
    from fsscope.workloads.syncwrite_records import Report, SizeTest


def _size_label(n: int | None) -> str:
    return format_bytes(n, missing="-")


def _ms(ns: float | None) -> str:
    if ns is None or (isinstance(ns, float) and not math.isfinite(ns)):
        return "-"
    return f"{ns / 1e6:,.3f}" if ns < 1e9 else f"{ns / 1e6:,.0f}"


def _mb(bps: float | None) -> str:
    return "-" if bps is None else f"{bps / 1e6:,.1f}"


def _phase_of(report: Report, size: int) -> str:
    for phase, sizes in report.phases.items():
        if size in sizes:
            return phase
    return "-"


def render_syncwrite(report: Report, console: Console) -> None:
    target = report.target.described if report.target is not None else ""
    knees = report.knees
    rise, sat = knees.latency_rise_bytes, knees.throughput_saturation_bytes
    best = report.recommended_bytes
    reps = report.spec.repeats if report.spec is not None else None
    title = (f"synchronous writes ({report.mode}) on {report.where} ({target}): "
             f"{report.points_completed} of {report.points_requested} points"
             + (f", {reps} repetitions" if reps else ""))
    table = Table(title=title, title_justify="left")
    for col in ("buffer", "n", "MB/s ±95%", "ms/write ±95%", "p50 ms", "p99 ms", "MB/s per ms", "phase", ""):
        table.add_column(col, justify="right", no_wrap=True)
    for row in report.sizes:
        size = row.buffer_bytes
        marks = [mark for mark, at in (("[bold green]◀ best[/]", best), ("[yellow]rise after[/]", rise),
                                       ("[cyan]saturated[/]", sat)) if size == at]
        table.add_row(_size_label(size), str(row.repeats),
                      f"{_mb(row.throughput_mean)} ±{_mb(row.throughput_ci95)}",
                      f"{_ms(row.latency_mean_ns)} ±{_ms(row.latency_ci95_ns)}",
                      _ms(row.latency_p50_ns), _ms(row.latency_p99_ns),
                      "-" if row.ratio is None else f"{row.ratio / 1e9:,.3g}", _phase_of(report, size), " ".join(marks))
    console.print(table)
    for key, knee in (("latency rise", knees.latency_rise), ("throughput saturation", knees.throughput_saturation)):
        if knee is not None and knee.note:
            console.print(f"{key}: {knee.note}", highlight=False)
    if report.recommendation:
        console.print(f"[bold]{report.recommendation}[/]", highlight=False)
    for choice in report.choices:
        style = "bold green" if choice.buffer_bytes else "bold red"
        console.print(f"[{style}]{choice.note}[/]", highlight=False)
    render_kernel(report, console)
    for flag in report.flags:
        console.print(f"[bold yellow]▲[/] [bold]{flag.title}[/]: {flag.note}", highlight=False)
    for note in report.notes:
        console.print(f"[dim]note: {note}[/]", highlight=False)


def render_kernel(report: Report, console: Console) -> None:
    """--trace: per buffer size, what reached the device per synchronous write."""
    reason = str(report.trace.get("reason") or "")
    if not report.kernel_by_size:
        if reason and reason != "tracing off":
            console.print(f"[dim]kernel tracing off: {reason}[/]", highlight=False)
        return
    table = Table(title="per synchronous write, what reached the device (kernel trace)", title_justify="left")
    for col in ("buffer", "writes", "requests", "KiB", "device B / B", "FLUSH", "FUA", "journal commits"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in report.kernel_by_size:
        amp = row.device_bytes_per_byte
        table.add_row(_size_label(row.buffer_bytes), f"{row.writes:,}", _per(row.requests_per_write),
                      "-" if row.bytes_per_write is None else f"{row.bytes_per_write / 1024:,.1f}",
                      "-" if amp is None else f"{amp:.2f}", _per(row.flush_per_write), _per(row.fua_per_write),
                      _per(row.commits_per_write))
    console.print(table)
    if not report.trace.get("complete", True):
        console.print("[yellow]the trace lost events: the counts are lower bounds[/]", highlight=False)


def _per(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def render_tests(tests: list[SizeTest], console: Console) -> None:
    table = Table(title="recipes compared per buffer size: Welch t-test on throughput (a difference counts at "
                  "p < 0.001)", title_justify="left")
    for col in ("buffer", "a vs b", "MB/s a", "MB/s b", "b / a", "p", "verdict"):
        table.add_column(col, justify="right", no_wrap=True)
    for t in tests:
        ratio = t.mean_b / t.mean_a if t.mean_a and t.mean_b else None
        table.add_row(_size_label(t.buffer_bytes), f"{t.a} vs {t.b}", _mb(t.mean_a),
                      _mb(t.mean_b), "-" if ratio is None else f"{ratio:.2f}",
                      "-" if t.p is None else f"{t.p:.2g}",
                      f"[bold green]{t.verdict}[/]" if "faster" in t.verdict else f"[dim]{t.verdict}[/]")
    console.print(table)
