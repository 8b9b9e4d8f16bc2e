"""The report of ``fsscope check``: audit lights, calibration, verdict."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

LIGHT = {"ok": ("●", "green"), "warn": ("●", "yellow"), "bad": ("●", "bold red"), "unknown": ("○", "dim")}
VERDICT_STYLE = {"fit": "bold green", "caution": "bold yellow", "unfit": "bold red"}


def render_check(report: dict, console: Console) -> None:
    findings = report.get("findings") or []
    _render_audit(findings, console)
    for f in findings:
        if f.get("severity") in ("bad", "warn", "unknown"):
            _render_finding(f, console)
    if report.get("calibration"):
        _render_calibration(report["calibration"], console)
    for note in report.get("notes") or []:
        console.print(f"[dim]note: {note}[/]", highlight=False)
    _render_verdict(report, console)


def _render_audit(findings: list[dict], console: Console) -> None:
    table = Table(title="audit", title_justify="left", show_lines=False)
    for col in ("", "item", "finding"):
        table.add_column(col, no_wrap=col != "finding")
    for f in findings:
        mark, style = LIGHT.get(f.get("severity") or "", ("?", ""))
        table.add_row(Text(mark, style=style), f.get("id", ""), Text(f.get("title", ""), style=style))
    console.print(table)


def _render_finding(f: dict, console: Console) -> None:
    """A finding that is not OK: the evidence read, what it does to results, the fix."""
    mark, style = LIGHT[f["severity"]]
    console.print(Text.assemble((f"{mark} {f['id']}", style), f": {f['title']}"))
    console.print(f"    evidence: {f['evidence']}", highlight=False, markup=False)
    if f["severity"] != "unknown":
        console.print(f"    effect:   {f['effect']}", highlight=False, markup=False)
    if f.get("fix"):
        console.print(f"    fix:      {f['fix']}", highlight=False, markup=False)


def _render_calibration(cal: dict, console: Console) -> None:
    """The calibration runs and what they say: runs needed, run length, Throughput-N window."""
    runs = cal.get("runs") or []
    work = cal.get("workload") or {}
    console.rule("calibration")
    console.print(f"{len(runs)} runs × {cal.get('run_s', 0):g} s of {cal.get('personality')} "
                  f"({work.get('nfiles')} files, {work.get('workers')} workers): "
                  + ", ".join(f"{r['ops_per_s']:,.0f}" for r in runs) + " ops/s", highlight=False)
    cv = cal.get("cv")
    if cv is not None:
        console.print(f"CV {cv:.1%} (95 % upper bound {cal.get('cv_upper') or 0:.1%}), relative range "
                      f"{cal.get('relative_range') or 0:.1%}", highlight=False)
        console.print(f"runs needed for ±{cal['precision']:.0%} at {cal['confidence']:.0%} confidence: "
                      f"[bold]{cal.get('runs_needed')}[/]  ({cal.get('runs_needed_method')})", highlight=False)
    d = cal.get("duration_s_needed")
    settled = ", ".join("–" if r.get("stable_after_s") is None else f"{r['stable_after_s']:g} s" for r in runs)
    console.print("run length: " + (f"[bold]{d:g} s[/]" if d is not None else
                                    f"not settled within {cal.get('run_s', 0):g} s (run longer)")
                  + f"  (settled per run: {settled})", highlight=False)
    console.print(f"    criterion: {cal.get('criterion')}", style="dim", highlight=False)
    w = cal.get("window_s_needed")
    curve = ", ".join(f"T-{p['window_s']:g}: {p['median_relative_range']:.1%}" for p in cal.get("window_curve") or [])
    console.print("Throughput-N window: " + (f"[bold]{w:g} s[/]" if w is not None else "none of the windows tried")
                  + (f"  ({curve})" if curve else ""), highlight=False)
    console.print(f"    criterion: {cal.get('window_criterion')}", style="dim", highlight=False)


def _render_verdict(report: dict, console: Console) -> None:
    verdict = report.get("verdict", "?")
    console.print(Text(report.get("headline") or verdict, style=VERDICT_STYLE.get(verdict, "bold")))
    if verdict == "fit" and report.get("fix_first"):
        console.print("worth a look (warnings):", style="dim")
    for i, line in enumerate(report.get("fix_first") or [], 1):
        console.print(f"  {i}. {line}", highlight=False, markup=False)
