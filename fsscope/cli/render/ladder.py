"""The report of ``fsscope bench --ladder``: relative range per hygiene step."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from fsscope.format import format_pct

if TYPE_CHECKING:
    from fsscope.workloads.ladder import Report


def render_ladder(report: Report, console: Console) -> None:
    table = Table(title=f"hygiene ladder: {report.personality} on {report.recipe} "
                  "(each step adds to the ones above)", title_justify="left")
    for col in ("step", "runs", "mean ops/s", "rel. range", "RSD", "same image"):
        table.add_column(col, justify="right", no_wrap=True)
    for step in report.ladder:
        same = len({r.image_sha256 for r in step.runs}) == 1 and len(step.runs) > 1
        table.add_row(step.step, str(len(step.runs)), "-" if step.mean_ops_per_s is None
                      else f"{step.mean_ops_per_s:,.0f}", format_pct(step.relative_range, "-"),
                      format_pct(step.rsd, "-"), "yes" if same else "no")
    console.print(table)
    for step in report.ladder:
        if step.vs_previous is not None:
            console.print(f"  {step.vs_previous.step} -> {step.step}: {step.vs_previous.note}")
    from fsscope.analysis.variation.stats import ladder_verdict  # local: scipy and numpy, only for a ladder
    from fsscope.workloads.ladder import step_ops

    verdict = ladder_verdict(step_ops(report.ladder))
    if len(verdict.ranges) > 1:
        style = "" if verdict.paper.get("verdict") == "agree" else "[yellow]"
        console.print(style + verdict.text, highlight=False)
