"""The report of ``fsscope explore``: d-span quantiles, factor shares, tail levels."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from fsscope.format import format_bytes

if TYPE_CHECKING:
    from fsscope.study.explore import Analysis, Prioritized, Report


def _bar(share: float, width: int = 24) -> str:
    n = max(0.0, min(1.0, share)) * width
    return "█" * int(n) + ("▌" if n - int(n) >= 0.5 else "")


def render_explore(report: Report, console: Console) -> None:
    rate = report.treatments_per_min
    console.print(f"[bold]{report.completed} of {report.planned} treatments[/] on "
                  f"{', '.join(report.recipes)} (space {report.space}, seed {report.seed})"
                  + (f", {rate:.0f} per minute" if rate else ""))
    console.print("[dim]d-span: the largest of a treatment's files' d-spans (first to last physical block "
                  "of a file, as Chopper defines it)[/]")
    for fs, cdf in report.d_span_cdf.items():
        if not cdf:
            continue
        xs = [x for x, _ in cdf]
        pick = {q: next((x for x, f in cdf if f >= q), xs[-1]) for q in (0.5, 0.9, 0.99)}
        console.print(f"  {fs}: d-span P50 {format_bytes(pick[0.5])}, P90 {format_bytes(pick[0.9])}, "
                      f"P99 {format_bytes(pick[0.99])}, max {format_bytes(xs[-1])}")
    # several file systems: each ranked on its own (as the paper does), pooled beside them
    parts = ([("pooled", report.pooled)] + list(report.by_fs.items()) if len(report.by_fs) > 1
             else [("", report.pooled)])
    _render_prioritization(report.prioritization, parts, console)
    for name, part in parts:
        _render_tail(f"{name}: " if name else "", part, console)
    for note in report.notes:
        console.print(f"[bold yellow]▲[/] {note}", highlight=False)
    for failed in report.failed[:5]:
        console.print(f"[red]failed[/] {failed.id}: {failed.error}")
    if report.study_dir:
        console.print(f"[dim]table: {Path(report.study_dir) / 'treatments.csv'}[/]")


def _render_prioritization(factors: list[Prioritized], parts: list[tuple[str, Analysis]], console: Console) -> None:
    """Each factor's first-order share of the d-span variance, per part (with a bar when one)."""
    table = Table(title="factor prioritization: share of d-span variance (first order)", title_justify="left")
    table.add_column("factor")
    for name, _ in parts:
        table.add_column(name or "share", justify="right")
        if len(parts) == 1:
            table.add_column("")
    shares = {name: {p.factor: p.first_order for p in part.prioritization} for name, part in parts}
    for p in factors:
        cells = []
        for name, _ in parts:
            share = shares[name].get(p.factor)
            cells.append("too few runs" if share is None else f"{share * 100:.1f}%")
            if len(parts) == 1:
                cells.append("" if share is None else _bar(share))
        table.add_row(p.factor, *cells)
    console.print(table)


def _render_tail(where: str, part: Analysis, console: Console) -> None:
    """The levels that put runs in the d-span tail significantly more often; nondeterminism."""
    tail = part.tail
    hot = [lv for lv in tail.levels if lv.significant]
    if tail.threshold_bytes is not None:
        console.print(f"{where}tail: d-span >= {format_bytes(tail.threshold_bytes)} "
                      f"(P{tail.quantile * 100:.0f}); {len(hot)} level(s) put runs there significantly "
                      "more often" + ("" if hot else " (none decided: more treatments would sharpen the test)"))
    for lv in sorted(hot, key=lambda lv: -lv.tail_share)[:10]:
        console.print(f"  {lv.factor} = {lv.level}: {lv.tail_share * 100:.0f}% of {lv.runs} runs "
                      f"(p = {lv.p_value:.2g})")
    nd = part.nondeterminism
    if nd.changed_share is not None:
        console.print(f"{where}nondeterminism: {nd.changed_share * 100:.0f}% of {nd.pairs} repeated "
                      "treatments changed")
