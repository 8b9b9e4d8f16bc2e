"""The report of ``fsscope bench``: the runs, cumulative and Throughput-N variation, per-op
latency, flags, the kernel's windows, dataset placement; and the ``--recipes`` comparison.

One function per section of the report, in the order they print."""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from fsscope.format import format_bytes, format_pct, format_us
from fsscope.format import spark as format_spark

LOOP_NAMES = {"native": "C worker loops", "python": "Python worker loops: the run's notes say why"}


def _generator_cost(run: dict) -> str:
    cost = (run.get("generator") or {}).get("user_us_per_op")
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




def render_bench(report: dict, console: Console) -> None:
    runs = report.get("runs") or []
    threshold = (report.get("spec") or {}).get("threshold", 0.10)
    _render_head(report, runs, console)
    _render_runs(runs, console)
    var = report.get("variation") or {}
    _render_cumulative(var, threshold, console)
    for key in [f"{w:g}" for w in (report.get("spec") or {}).get("window_sizes_s", [])]:
        _render_window(key, (var.get("windows") or {}).get(key) or {}, runs, threshold, console)
    if runs:
        _render_ops(runs, report.get("latency") or {}, console)
    _render_flags(report.get("flags") or [], runs, console)
    _render_kernel(runs, console)
    _render_placement(report.get("placement"), runs, console)
    _render_notes(report, console)


def _render_head(report: dict, runs: list[dict], console: Console) -> None:
    spec = report.get("spec") or {}
    work = report.get("workload") or {}
    where = report.get("recipe") or report.get("fs") or "?"
    target = (report.get("target") or {}).get("describe", "")
    head = (f"[bold]{report.get('personality')}[/] on [bold]{where}[/] ({target}): "
            f"{report.get('runs_completed', len(runs))} of {report.get('runs_requested', len(runs))} runs × "
            f"{spec.get('duration_s', '?'):g} s")
    if work:
        head += (f", {work.get('workers')} workers, {work.get('nfiles')} files of mean "
                 f"{_bytes(work.get('mean_file_size_bytes'))}")
    console.print(head)


def _run_row(i: int, run: dict) -> list[str]:
    errors = sum((op.get("errors") or 0) for op in (run.get("ops") or {}).values())
    tel = run.get("telemetry") or {}
    mb_s = None
    if tel.get("disk_write_bytes_per_s") is not None:
        mb_s = (tel["disk_write_bytes_per_s"] + (tel.get("disk_read_bytes_per_s") or 0)) / 1e6
    return [str(i + 1), f"{run.get('ops_per_s') or 0:,.0f}", f"{run.get('elapsed_s') or 0:.1f}",
            str(errors), "-" if mb_s is None else f"{mb_s:,.1f}", format_pct(tel.get("disk_busy_mean"), '-'),
            "-" if tel.get("cpu_iowait_pct_mean") is None else f"{tel['cpu_iowait_pct_mean']:.0f}%",
            _generator_cost(run)]


def _render_runs(runs: list[dict], console: Console) -> None:
    table = Table(title="runs", title_justify="left")
    for col in ("run", "ops/s", "s", "errors", "device MB/s", "busy", "iowait", "gen µs/op"):
        table.add_column(col, justify="right", no_wrap=True)
    for i, run in enumerate(runs):
        table.add_row(*_run_row(i, run))
    console.print(table)
    loops = {run["worker_loop"] for run in runs if run.get("worker_loop")}
    if loops:
        console.print("gen µs/op: the workers' own user CPU per op, the generator's cost "
                      f"({' and '.join(sorted(LOOP_NAMES.get(loop, loop) for loop in loops))})", highlight=False)


def _render_cumulative(var: dict, threshold: float, console: Console) -> None:
    rr, rsd = var.get("relative_range"), var.get("rsd")
    if var.get("runs") == 1:
        console.print(f"cumulative throughput: [bold]{var.get('mean_ops_per_s') or 0:,.0f}[/] ops/s "
                      "(one run: no run-to-run variation to measure)")
    elif var.get("runs"):
        console.print(f"cumulative throughput: mean [bold]{var.get('mean_ops_per_s') or 0:,.0f}[/] ops/s "
                      f"({var.get('min_ops_per_s') or 0:,.0f}..{var.get('max_ops_per_s') or 0:,.0f}); "
                      f"relative range [{_variation_style(rr, threshold)}]{format_pct(rr, '-')}[/], RSD {format_pct(rsd, '-')} "
                      f"(threshold {threshold:.0%})")


def _render_window(key: str, band: dict, runs: list[dict], threshold: float, console: Console) -> None:
    """Throughput-N: its range, a sparkline per run, the relative range across runs per window."""
    mean = band.get("mean", [])
    if not mean:
        console.print(f"Throughput-{key}: no complete {key}-s window in these runs")
        return
    console.print(f"Throughput-{key}: {len(mean)} windows, "
                  f"{min(band.get('min') or [0]):,.0f}..{max(band.get('max') or [0]):,.0f} ops/s")
    for i, run in enumerate(runs):
        series = [v for v in (run.get("windows") or {}).get(key, []) if v is not None]
        if series:
            console.print(f"    run {i + 1:<3d} [cyan]{spark(series)}[/] {min(series):,.0f}..{max(series):,.0f}",
                          highlight=False)
    rrs = [x for x in band.get("relative_range", []) if x is not None]
    if rrs and len(runs) > 1:
        above = sum(1 for x in rrs if x > threshold)
        worst = max(range(len(band["relative_range"])),
                    key=lambda i: band["relative_range"][i] if band["relative_range"][i] is not None else -1)
        style = _variation_style(max(rrs), threshold)
        console.print(f"    relative range across runs per window: median {format_pct(sorted(rrs)[len(rrs) // 2], '-')}, "
                      f"worst {format_pct(max(rrs), '-')} at {worst * float(key):g} s; "
                      f"[{style}]{above} of {len(rrs)} windows above {threshold:.0%}[/]", highlight=False)


def _us_range(values: list) -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return format_us(lo) if len(values) == 1 or lo == hi else f"{format_us(lo)}..{format_us(hi)}"


def _op_row(op: str, runs: list[dict], latency: dict) -> list[str]:
    entries = [r.get("ops", {}).get(op, {}) for r in runs]
    rate = _mean([e.get("ops_per_s") for e in entries])
    mean = _mean([e.get("mean_ns") for e in entries])
    p50 = [e.get("p50_ns") for e in entries if e.get("p50_ns") is not None]
    p99 = [e.get("p99_ns") for e in entries if e.get("p99_ns") is not None]
    per_op = _mean([e.get("mean_bytes") for e in entries])
    ks = (latency.get(op) or {}).get("ks_range")
    return [op, "-" if rate is None else f"{rate:,.0f}", format_us(mean), _us_range(p50), _us_range(p99),
            "-" if ks is None else f"{ks:.2f}", "-" if not per_op else _bytes(per_op)]


def _render_ops(runs: list[dict], latency: dict, console: Console) -> None:
    table = Table(title="per op (latency in µs, mean over runs; ranges are min..max across runs; "
                  "B/op: bytes moved per op)", title_justify="left")
    for col in ("op", "ops/s", "mean", "p50", "p99", "K-S", "B/op"):
        table.add_column(col, justify="right", no_wrap=True)
    for op in (runs[0].get("ops") or {}):
        table.add_row(*_op_row(op, runs, latency))
    console.print(table)


def _render_flags(flags: list[dict], runs: list[dict], console: Console) -> None:
    if not flags and runs:
        console.print("[green]no variation flags[/]: runs agree within the threshold, no warm-up or periodic "
                      "pattern found")
    for flag in flags:
        console.print(f"[bold yellow]▲[/] [bold]{flag.get('title') or flag.get('kind')}[/]")
        console.print(f"    {flag.get('note', '')}", highlight=False)


def _render_kernel(runs: list[dict], console: Console) -> None:
    """Per run: the kernel's events over the Throughput-N windows, and every dip annotated."""
    for r, run in enumerate(runs):
        kw = run.get("kernel_windows")
        if kw:
            console.print(f"[bold]kernel, run {r + 1}[/] (per {kw['window_s']:g}-s window): journal commits "
                          f"{sum(kw['journal_commits'])}, writeback starts {sum(kw['writeback_starts'])}, "
                          f"{sum(kw['bytes_written']) / 2**20:.1f} MiB written", highlight=False)
        for dip in run.get("dips") or []:
            console.print(f"[bold yellow]▼[/] run {r + 1} dip {dip['note']}", highlight=False)


def _render_placement(placement: dict | None, runs: list[dict], console: Console) -> None:
    if not placement:
        return
    unit: dict = next((r["placement"] for r in runs if (r.get("placement") or {}).get("available")), {})
    where = ", ".join(f"{x / 2**20:,.0f}" for x in placement["first_byte_median"])
    r = placement.get("pcc")
    console.print(f"dataset placement (Fig. 4): median first byte per run {where} MiB "
                  f"({unit.get('unit', '')} of {_bytes(unit.get('unit_bytes'))}; "
                  f"{'the same' if placement['same_groups_every_run'] else 'different'} groups in every run)"
                  + ("" if r is None else f"; r with throughput = {r:.2f}"), highlight=False)


def _render_notes(report: dict, console: Console) -> None:
    tel = report.get("telemetry") or {}
    notes = list(report.get("notes") or [])
    if tel.get("taskstats_available") is False:
        notes.append("taskstats (per-worker block-I/O and CPU delay) unavailable here")
    notes += [*(tel.get("notes") or []), *([tel["delayacct"]] if tel.get("delayacct") else [])]
    for note in dict.fromkeys(notes):
        console.print(f"[dim]note: {note}[/]", highlight=False)


def render_comparison(comparison: dict, console: Console) -> None:
    table = Table(title=f"recipes compared ({comparison.get('personality')}, cumulative throughput)",
                  title_justify="left")
    for col in ("recipe", "runs", "mean ops/s", "min..max", "rel. range", "RSD"):
        table.add_column(col, justify="right", no_wrap=True)
    for entry in comparison.get("recipes", []):
        runs = entry.get("ops_per_s_runs") or []
        table.add_row(entry["recipe"], str(len(runs)), "-" if entry.get("mean_ops_per_s") is None else
                      f"{entry['mean_ops_per_s']:,.0f}",
                      f"{min(runs):,.0f}..{max(runs):,.0f}" if runs else "-",
                      format_pct(entry.get("relative_range"), '-'), format_pct(entry.get("rsd"), '-'))
    console.print(table)
    pairs = Table(title=f"Welch t-test per pair (a winner only when p < {comparison.get('alpha', 0.05):g})",
                  title_justify="left")
    for col in ("a vs b", "a / b", "t", "p", "verdict"):
        pairs.add_column(col, justify="right", no_wrap=True)
    for pair in comparison.get("pairs", []):
        ratio = (pair["mean_a"] / pair["mean_b"]) if pair.get("mean_a") and pair.get("mean_b") else None
        pairs.add_row(f"{pair['a']} vs {pair['b']}", "-" if ratio is None else f"{ratio:.2f}",
                      "-" if pair.get("t") is None else f"{pair['t']:.2f}",
                      "-" if pair.get("p") is None else f"{pair['p']:.3g}",
                      f"[bold green]{pair['winner']} wins[/]" if pair.get("winner") else "[dim]not significant[/]")
    console.print(pairs)
    for pair in comparison.get("pairs", []):
        flag = pair.get("window_flag")
        if flag:
            console.print(f"[bold yellow]▲[/] {flag['note']}", highlight=False)
    best = comparison.get("best")
    if best:
        console.print(f"[bold green]{best}[/] is significantly faster than every other recipe here")
    else:
        console.print("no recipe is significantly faster than all the others at these run counts "
                      "(more runs narrow the test)")
    for entry in comparison.get("recipes", []):
        console.print(f"[dim]{entry['recipe']}: run {entry.get('run_id') or '-'}[/]", highlight=False)

