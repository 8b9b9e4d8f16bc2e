"""The report of ``fsscope study variation`` and the cost it prints before starting."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsscope.format import format_bytes, format_pct, visible

if TYPE_CHECKING:
    from fsscope.study.variation import Cost, Report, Settings


def render_variation(report: Report, console: Console) -> None:
    settings = report.settings
    rate = report.configurations_per_hour
    console.print(f"[bold]{report.completed} of {report.planned} treatments[/] "
                  f"(space {report.space}, seed {report.seed}, {settings.runs} runs of "
                  f"{settings.duration_s} s each)" + (f", {rate:.0f} per hour" if rate else ""))
    table = Table(title="configurations (relative range of the runs' throughput; K-S range of latency)",
                  title_justify="left")
    for col in ("id", "knobs", "mean ops/s", "rel. range", "K-S range"):
        table.add_column(col, justify="right" if col not in ("id", "knobs") else "left")
    threshold = report.threshold
    for c in report.configurations:
        rr = c.relative_range
        style = "bold red" if rr is not None and rr > threshold else ""
        knobs = " ".join(f"{k.split('_', 1)[-1] if k.startswith(c.fs) else k}={v}" for k, v in c.knobs.items())
        table.add_row(c.id, knobs, f"{c.mean_ops_per_s:,.0f}", f"[{style}]{format_pct(rr, '-')}[/]" if style
                      else format_pct(rr, "-"), "-" if c.ks_range is None else f"{c.ks_range:.2f}")
    console.print(table)
    for window, cdf in report.relative_range_cdf.items():
        if cdf:
            xs = [x for x, _ in cdf]
            med = next(x for x, f in cdf if f >= 0.5)
            console.print(f"Throughput-{window}: relative range over {len(xs)} windows: median {format_pct(med)}, "
                          f"max {format_pct(xs[-1])}")
    pcc = report.pcc
    if pcc.r is not None:
        console.print(f"latency range vs throughput range: PCC r = {pcc.r:.2f} (p = {pcc.p:.2g}, "
                      f"{pcc.configurations} configurations)")
    console.print(f"{len(report.flagged)} configuration(s) vary more than {threshold:.0%}")
    for lv in [lv for lv in report.flagged_levels if lv.shared]:
        console.print(f"  {lv.fs}: all flagged share {lv.knob} = {lv.level} "
                      f"({lv.flagged} of {lv.configurations} configurations at that level flagged)")
    share = report.time_share
    if share.prepare is not None and share.measure is not None:
        console.print(f"[dim]time: {share.prepare:.0%} preparing (mkfs, populate, remount), "
                      f"{share.measure:.0%} measuring[/]")
    for failed in report.failed[:5]:
        console.print(Text.assemble(("failed", "red"), f" {failed.id}: {visible(failed.error)}"))
    if report.study_dir:
        console.print(Text(f"rows: {visible(Path(report.study_dir) / 'treatments.ndjson')}", style="dim"))


def _duration_text(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:,.0f} s"


def print_cost(cost: Cost, settings: Settings, console: Console) -> None:
    """What the study will take, before it starts (the measured time is exact; preparation
    -- mkfs, populating, remounting -- comes on top)."""
    mem = cost.mem_limit_bytes
    durations = settings.durations_s or {}
    length = ", ".join(f"{p} {d:g} s" for p, d in durations.items()) or f"{settings.duration_s} s"
    console.print(f"[bold]cost[/]: {cost.configurations} configurations -> {cost.treatments} treatments "
                  f"(configuration x file system x personality) x {settings.runs} runs = {cost.runs:,} runs "
                  f"({length}); measuring alone {_duration_text(cost.measure_s)} on one host, plus populating "
                  f"{format_bytes(cost.populate_bytes)} in all; an image of {format_bytes(cost.image_bytes)} (sparse) per run"
                  + (f"; workers limited to {format_bytes(mem)} of memory" if mem else ""), highlight=False)
    if settings.paper:
        console.print("[dim]--paper: Cao et al.'s scale (10 runs, 800 s / 2,000 s, dataset 2.5x the memory limit, "
                      "Table 2 sampled to ~107 configurations); on loop images in RAM or on this machine's disk "
                      "(device=ram/disk), where the paper used HDDs and an SSD[/]", highlight=False)
