"""The report of ``fsscope check``: audit lights, calibration, verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsscope.format import visible

if TYPE_CHECKING:  # the job module brings the workloads; the renderer only reads its records
    from fsscope.check.findings import Finding
    from fsscope.check.job import Report
    from fsscope.check.verdict import Calibration

LIGHT = {"ok": ("●", "green"), "warn": ("●", "yellow"), "bad": ("●", "bold red"), "unknown": ("○", "dim")}
VERDICT_STYLE = {"fit": "bold green", "caution": "bold yellow", "unfit": "bold red"}


def render_check(report: Report, console: Console) -> None:
    _render_audit(report.findings, console)
    for f in report.findings:
        if f.severity in ("bad", "warn", "unknown"):
            _render_finding(f, console)
    if report.calibration is not None:
        _render_calibration(report.calibration, console)
    for note in report.notes:   # notes hold paths (an overlay's upper directory): text, not markup
        console.print(Text(f"note: {visible(note)}", style="dim"))
    _render_verdict(report, console)


def _render_audit(findings: list[Finding], console: Console) -> None:
    table = Table(title="audit", title_justify="left", show_lines=False)
    for col in ("", "item", "finding"):
        table.add_column(col, no_wrap=col != "finding")
    for f in findings:
        mark, style = LIGHT.get(f.severity, ("?", ""))
        table.add_row(Text(mark, style=style), f.id, Text(f.title, style=style))
    console.print(table)


def _render_finding(f: Finding, console: Console) -> None:
    """A finding that is not OK: the evidence read, what it does to results, the fix."""
    mark, style = LIGHT[f.severity]
    console.print(Text.assemble((f"{mark} {f.id}", style), f": {f.title}"))
    console.print(f"    evidence: {f.evidence}", highlight=False, markup=False)
    if f.severity != "unknown":
        console.print(f"    effect:   {f.effect}", highlight=False, markup=False)
    if f.fix:
        console.print(f"    fix:      {f.fix}", highlight=False, markup=False)


def _render_calibration(cal: Calibration, console: Console) -> None:
    """The calibration runs and what they say: runs needed, run length, Throughput-N window."""
    runs = cal.runs
    work = cal.workload
    console.rule("calibration")
    sized = f" ({work.nfiles} files, {work.workers} workers)" if work is not None else ""
    console.print(f"{len(runs)} runs × {cal.run_s:g} s of {cal.personality}{sized}: "
                  + ", ".join("–" if r.ops_per_s is None else f"{r.ops_per_s:,.0f}" for r in runs) + " ops/s",
                  highlight=False)
    if cal.cv is not None:
        console.print(f"CV {cal.cv:.1%} (95 % upper bound {cal.cv_upper or 0:.1%}), relative range "
                      f"{cal.relative_range or 0:.1%}", highlight=False)
        console.print(f"runs needed for ±{cal.precision:.0%} at {cal.confidence:.0%} confidence: "
                      f"[bold]{cal.runs_needed}[/]  ({cal.runs_needed_method})", highlight=False)
    d = cal.duration_s_needed
    settled = ", ".join("–" if r.stable_after_s is None else f"{r.stable_after_s:g} s" for r in runs)
    console.print("run length: " + (f"[bold]{d:g} s[/]" if d is not None else
                                    f"not settled within {cal.run_s:g} s (run longer)")
                  + f"  (settled per run: {settled})", highlight=False)
    console.print(f"    criterion: {cal.criterion}", style="dim", highlight=False)
    w = cal.window_s_needed
    curve = ", ".join(f"T-{p.window_s:g}: " + ("–" if p.median_relative_range is None else f"{p.median_relative_range:.1%}")
                      for p in cal.window_curve)
    console.print("Throughput-N window: " + (f"[bold]{w:g} s[/]" if w is not None else "none of the windows tried")
                  + (f"  ({curve})" if curve else ""), highlight=False)
    console.print(f"    criterion: {cal.window_criterion}", style="dim", highlight=False)


def _render_verdict(report: Report, console: Console) -> None:
    verdict = report.verdict or "?"
    console.print(Text(report.headline or verdict, style=VERDICT_STYLE.get(verdict, "bold")))
    if verdict == "fit" and report.fix_first:
        console.print("worth a look (warnings):", style="dim")
    for i, line in enumerate(report.fix_first, 1):
        console.print(f"  {i}. {line}", highlight=False, markup=False)
