"""The report of ``fsscope bench``: the runs, cumulative and Throughput-N variation, per-op
latency, flags, the kernel's windows, dataset placement; and the ``--recipes`` comparison.

One function per section of the report, in the order they print."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from fsscope.analysis.variation.report import Band, OpLatency, Variation
from fsscope.format import format_bytes, format_pct, format_us
from fsscope.format import spark as format_spark
from fsscope.workloads.bench_records import BenchRun, PlacementVsThroughput, Report

if TYPE_CHECKING:  # the records' modules bring numpy and the workloads: not for every CLI start
    from fsscope.analysis.compare import RecipeComparison
    from fsscope.analysis.variation.report import Band, OpLatency, Variation
    from fsscope.workloads.bench_records import BenchRun, PlacementVsThroughput, Report

LOOP_NAMES = {"native": "C worker loops", "python": "Python worker loops: the run's notes say why"}


def _generator_cost(run: BenchRun) -> str:
    cost = run.generator.user_us_per_op if run.generator is not None else None
    return "-" if cost is None else f"{cost:.2f}"


def _bytes(n) -> str:
    return format_bytes(n, "-")


def spark(values, width: int = 48) -> str:
    """A one-line sparkline of a series (bucketed to ``width`` points; None/nan as a space)."""
    vals = list(values)
    if len(vals) > width:
        step = len(vals) / width
        vals = [_mean(vals[int(i * step): max(int((i + 1) * step), int(i * step) + 1)]) for i in range(width)]
    return format_spark(vals)


def _mean(values):
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def _variation_style(rr, threshold) -> str:
    if rr is None:
        return "dim"
    return "bold red" if rr > threshold else "green"


def render_bench(report: Report, console: Console) -> None:
    runs = report.runs
    threshold = report.spec.threshold
    _render_head(report, console)
    _render_runs(runs, console)
    var = report.variation
    _render_cumulative(var, threshold, console)
    for key in [f"{w:g}" for w in report.spec.window_sizes_s]:
        _render_window(key, var.windows.get(key), runs, threshold, console)
    if runs:
        _render_ops(runs, report.latency, console)
    _render_flags(report.flags, runs, console)
    _render_kernel(runs, console)
    _render_placement(report.placement, runs, console)
    _render_notes(report, console)


def _render_head(report: Report, console: Console) -> None:
    runs, work = len(report.runs), report.workload
    where = report.recipe or report.fs or "?"
    head = (f"[bold]{report.personality}[/] on [bold]{where}[/] ({report.target.get('describe', '')}): "
            f"{report.runs_completed if report.runs_completed is not None else runs} of "
            f"{report.runs_requested if report.runs_requested is not None else runs} runs × "
            f"{report.spec.duration_s:g} s")
    if work is not None:
        head += f", {work.workers} workers, {work.nfiles} files of mean {_bytes(work.mean_file_size_bytes)}"
    console.print(head)


def _run_row(i: int, run: BenchRun) -> list[str]:
    errors = sum(op.errors or 0 for op in run.ops.values())
    tel = run.telemetry
    mb_s = None
    if tel.disk_write_bytes_per_s is not None:
        mb_s = (tel.disk_write_bytes_per_s + (tel.disk_read_bytes_per_s or 0)) / 1e6
    return [str(i + 1), f"{run.ops_per_s or 0:,.0f}", f"{run.elapsed_s or 0:.1f}",
            str(errors), "-" if mb_s is None else f"{mb_s:,.1f}", format_pct(tel.disk_busy_mean, '-'),
            "-" if tel.cpu_iowait_pct_mean is None else f"{tel.cpu_iowait_pct_mean:.0f}%",
            _generator_cost(run)]


def _render_runs(runs: list[BenchRun], console: Console) -> None:
    table = Table(title="runs", title_justify="left")
    for col in ("run", "ops/s", "s", "errors", "device MB/s", "busy", "iowait", "gen µs/op"):
        table.add_column(col, justify="right", no_wrap=True)
    for i, run in enumerate(runs):
        table.add_row(*_run_row(i, run))
    console.print(table)
    loops = {run.worker_loop for run in runs if run.worker_loop}
    if loops:
        console.print("gen µs/op: the workers' own user CPU per op, the generator's cost "
                      f"({' and '.join(sorted(LOOP_NAMES.get(loop, loop) for loop in loops))})", highlight=False)


def _render_cumulative(var: Variation, threshold: float, console: Console) -> None:
    rr, rsd = var.relative_range, var.rsd
    if var.runs == 1:
        console.print(f"cumulative throughput: [bold]{var.mean_ops_per_s or 0:,.0f}[/] ops/s "
                      "(one run: no run-to-run variation to measure)")
    elif var.runs:
        console.print(f"cumulative throughput: mean [bold]{var.mean_ops_per_s or 0:,.0f}[/] ops/s "
                      f"({var.min_ops_per_s or 0:,.0f}..{var.max_ops_per_s or 0:,.0f}); "
                      f"relative range [{_variation_style(rr, threshold)}]{format_pct(rr, '-')}[/], RSD {format_pct(rsd, '-')} "
                      f"(threshold {threshold:.0%})")


def _render_window(key: str, band: Band | None, runs: list[BenchRun], threshold: float, console: Console) -> None:
    """Throughput-N: its range, a sparkline per run, the relative range across runs per window."""
    if band is None or not band.mean:
        console.print(f"Throughput-{key}: no complete {key}-s window in these runs")
        return
    low = [v for v in band.min if v is not None] or [0]
    high = [v for v in band.max if v is not None] or [0]
    console.print(f"Throughput-{key}: {len(band.mean)} windows, {min(low):,.0f}..{max(high):,.0f} ops/s")
    for i, run in enumerate(runs):
        series = [v for v in run.windows.get(key, []) if v is not None]
        if series:
            console.print(f"    run {i + 1:<3d} [cyan]{spark(series)}[/] {min(series):,.0f}..{max(series):,.0f}",
                          highlight=False)
    rrs = [x for x in band.relative_range if x is not None]
    if rrs and len(runs) > 1:
        above = sum(1 for x in rrs if x > threshold)
        worst = max(range(len(band.relative_range)), key=lambda i: band.relative_range[i] or -1.0)
        style = _variation_style(max(rrs), threshold)
        console.print(f"    relative range across runs per window: median {format_pct(sorted(rrs)[len(rrs) // 2], '-')}, "
                      f"worst {format_pct(max(rrs), '-')} at {worst * float(key):g} s; "
                      f"[{style}]{above} of {len(rrs)} windows above {threshold:.0%}[/]", highlight=False)


def _us_range(values: list) -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return format_us(lo) if len(values) == 1 or lo == hi else f"{format_us(lo)}..{format_us(hi)}"


def _op_row(op: str, runs: list[BenchRun], latency: dict[str, OpLatency]) -> list[str]:
    entries = [r.ops[op] for r in runs if op in r.ops]
    rate = _mean([e.ops_per_s for e in entries])
    mean = _mean([e.mean_ns for e in entries])
    p50 = [e.p50_ns for e in entries if e.p50_ns is not None]
    p99 = [e.p99_ns for e in entries if e.p99_ns is not None]
    per_op = _mean([e.mean_bytes for e in entries])
    ks = latency[op].ks_range if op in latency else None
    return [op, "-" if rate is None else f"{rate:,.0f}", format_us(mean), _us_range(p50), _us_range(p99),
            "-" if ks is None else f"{ks:.2f}", "-" if not per_op else _bytes(per_op)]


def _render_ops(runs: list[BenchRun], latency: dict[str, OpLatency], console: Console) -> None:
    table = Table(title="per op (latency in µs, mean over runs; ranges are min..max across runs; "
                  "B/op: bytes moved per op)", title_justify="left")
    for col in ("op", "ops/s", "mean", "p50", "p99", "K-S", "B/op"):
        table.add_column(col, justify="right", no_wrap=True)
    for op in runs[0].ops:
        table.add_row(*_op_row(op, runs, latency))
    console.print(table)


def _render_flags(flags: list[dict[str, Any]], runs: list[BenchRun], console: Console) -> None:
    if not flags and runs:
        console.print("[green]no variation flags[/]: runs agree within the threshold, no warm-up or periodic "
                      "pattern found")
    for flag in flags:  # a flag's own numbers differ per kind; every flag has a kind, a title and a note
        console.print(f"[bold yellow]▲[/] [bold]{flag.get('title') or flag.get('kind')}[/]")
        console.print(f"    {flag.get('note', '')}", highlight=False)


def _render_kernel(runs: list[BenchRun], console: Console) -> None:
    """Per run: the kernel's events over the Throughput-N windows, and every dip annotated."""
    for r, run in enumerate(runs):
        kw = run.kernel_windows
        if kw is not None:
            console.print(f"[bold]kernel, run {r + 1}[/] (per {kw.window_s:g}-s window): journal commits "
                          f"{sum(kw.journal_commits)}, writeback starts {sum(kw.writeback_starts)}, "
                          f"{sum(kw.bytes_written) / 2**20:.1f} MiB written", highlight=False)
        for dip in run.dips:
            console.print(f"[bold yellow]▼[/] run {r + 1} dip {dip.note}", highlight=False)


def _render_placement(placement: PlacementVsThroughput | None, runs: list[BenchRun], console: Console) -> None:
    if placement is None:
        return
    unit = next((r.placement for r in runs if r.placement is not None and r.placement.available), None)
    where = ", ".join(f"{x / 2**20:,.0f}" for x in placement.first_byte_median)
    r = placement.pcc
    console.print(f"dataset placement (Fig. 4): median first byte per run {where} MiB "
                  f"({unit.unit if unit else ''} of {_bytes(unit.unit_bytes if unit else None)}; "
                  f"{'the same' if placement.same_groups_every_run else 'different'} groups in every run)"
                  + ("" if r is None else f"; r with throughput = {r:.2f}"), highlight=False)


def _render_notes(report: Report, console: Console) -> None:
    tel = report.telemetry
    notes = list(report.notes)
    if tel.taskstats_available is False:
        notes.append("taskstats (per-worker block-I/O and CPU delay) unavailable here")
    notes += [*tel.notes, *([tel.delayacct] if tel.delayacct else [])]
    for note in dict.fromkeys(notes):
        console.print(f"[dim]note: {note}[/]", highlight=False)


def render_comparison(comparison: RecipeComparison, console: Console) -> None:
    table = Table(title=f"recipes compared ({comparison.personality}, cumulative throughput)",
                  title_justify="left")
    for col in ("recipe", "runs", "mean ops/s", "min..max", "rel. range", "RSD"):
        table.add_column(col, justify="right", no_wrap=True)
    for entry in comparison.recipes:
        runs = entry.ops_per_s_runs
        table.add_row(entry.recipe, str(len(runs)), "-" if entry.mean_ops_per_s is None else
                      f"{entry.mean_ops_per_s:,.0f}",
                      f"{min(runs):,.0f}..{max(runs):,.0f}" if runs else "-",
                      format_pct(entry.relative_range, '-'), format_pct(entry.rsd, '-'))
    console.print(table)
    pairs = Table(title=f"Welch t-test per pair (a winner only when p < {comparison.alpha:g})",
                  title_justify="left")
    for col in ("a vs b", "a / b", "t", "p", "verdict"):
        pairs.add_column(col, justify="right", no_wrap=True)
    for pair in comparison.pairs:
        ratio = (pair.mean_a / pair.mean_b) if pair.mean_a and pair.mean_b else None
        pairs.add_row(f"{pair.a} vs {pair.b}", "-" if ratio is None else f"{ratio:.2f}",
                      "-" if pair.t is None else f"{pair.t:.2f}",
                      "-" if pair.p is None else f"{pair.p:.3g}",
                      f"[bold green]{pair.winner} wins[/]" if pair.winner else "[dim]not significant[/]")
    console.print(pairs)
    for pair in comparison.pairs:
        if pair.window_flag:
            console.print(f"[bold yellow]▲[/] {pair.window_flag['note']}", highlight=False)
    if comparison.best:
        console.print(f"[bold green]{comparison.best}[/] is significantly faster than every other recipe here")
    else:
        console.print("no recipe is significantly faster than all the others at these run counts "
                      "(more runs narrow the test)")
    for entry in comparison.recipes:
        console.print(f"[dim]{entry.recipe}: run {entry.run_id or '-'}[/]", highlight=False)
