"""The report of ``fsscope bench --ladder``: relative range per hygiene step."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fsscope.format import format_pct


def render_ladder(report: dict, console: Console) -> None:
    table = Table(title=f"hygiene ladder: {report.get('personality')} on {report.get('recipe')} "
                  "(each step adds to the ones above)", title_justify="left")
    for col in ("step", "runs", "mean ops/s", "rel. range", "RSD", "same image"):
        table.add_column(col, justify="right", no_wrap=True)
    for step in report.get("ladder", []):
        runs = step.get("runs") or []
        same = len({r.get("image_sha256") for r in runs}) == 1 and len(runs) > 1
        table.add_row(step["step"], str(len(runs)), "-" if step.get("mean_ops_per_s") is None
                      else f"{step['mean_ops_per_s']:,.0f}", format_pct(step.get("relative_range"), "-"),
                      format_pct(step.get("rsd"), "-"), "yes" if same else "no")
    console.print(table)
    for step in report.get("ladder", []):
        if step.get("vs_previous"):
            console.print(f"  {step['vs_previous']['step']} -> {step['step']}: {step['vs_previous']['note']}")
    from fsscope.analysis.variation import ladder_verdict  # local: scipy and numpy, only for a ladder
    from fsscope.workloads.ladder import step_ops

    verdict = ladder_verdict(step_ops(report.get("ladder", [])))
    if len(verdict.ranges) > 1:
        style = "" if verdict.paper.get("verdict") == "agree" else "[yellow]"
        console.print(style + verdict.text, highlight=False)
