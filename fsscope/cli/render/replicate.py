"""``fsscope replicate``: a paper's findings with the paper's number, today's arithmetic, the measurement and a verdict."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fsscope.format import format_measure
from fsscope.replicate.base import Result
from fsscope.replicate.worlds import FALSE_AGREE_TARGET, POWER_TARGET, SelfTest

STYLE = {"agree": "green", "disagree": "red", "inconclusive": "yellow"}


def render_replicate(result: Result, console: Console) -> None:
    console.print(f"[bold]{result.title}[/]  ({'quick' if result.quick else 'full'})")
    for line in result.setup:
        console.print(f"  [dim]{line}[/]", highlight=False)
    table = Table(title_justify="left")
    for col in ("finding", "paper", "today's arithmetic", "measured", "verdict"):
        table.add_column(col, overflow="fold")
    for f in result.findings:
        table.add_row(f.id, format_measure(f.paper), format_measure(f.expected_today), format_measure(f.measured),
                      f"[{STYLE[f.verdict]}]{f.verdict}[/]")
    console.print(table)
    for f in result.findings:
        console.print(f"[{STYLE[f.verdict]}]{f.verdict}[/] [bold]{f.id}[/] ({f.setup}): {f.why}", highlight=False)


def render_self_test(checked: SelfTest, console: Console) -> None:
    """One row per judge, noise level and scenario size: the rates on the three worlds and the
    runs 80 % power needs; a rate that misses its target is red."""
    table = Table(title=f"judges on simulated worlds (seed {checked.seed}, {checked.elapsed_s:.0f} s)",
                  title_justify="left")
    table.add_column("judge", overflow="fold")
    for col in ("machine", "runs", "false agree", "power", "reversed", "80 % at"):
        table.add_column(col, no_wrap=True)
    for j in checked.judges:
        fa = f"[{'green' if j.false_agree <= FALSE_AGREE_TARGET else 'red'}]{j.false_agree:.0%}[/]"
        power = f"[{'green' if j.power >= POWER_TARGET else 'yellow'}]{j.power:.0%}[/]"
        need = (str(j.runs_for_80) if j.runs_for_80 is not None else j.setting_for_80 if j.setting_for_80
                else f"> {max(j.runs_tried)}")
        table.add_row(f"{j.scenario} {j.finding}", j.noise, f"{j.runs} ({j.mode})", fa, power,
                      f"{j.reversed_disagree:.0%}", need)
    console.print(table)
    for j in checked.judges:  # where more runs of those tried do not decide, what would
        if j.decides:
            tried = (f" (tried: {j.setting_for_80}, power {j.setting_power:.0%}, false agree "
                     f"{j.setting_false_agree:.0%})"
                     if j.setting_for_80 and j.setting_power is not None and j.setting_false_agree is not None else "")
            console.print(f"{j.scenario} {j.finding} ({j.noise}, {j.mode}): {j.decides}{tried}", highlight=False)
    console.print(f"targets: false agree <= {FALSE_AGREE_TARGET:.0%}, power >= {POWER_TARGET:.0%} at the "
                  f"scenario's runs; '80 % at' is the smallest run count tried that reaches it (or the setting "
                  f"tried that does); "
                  f"{checked.judges[0].trials if checked.judges else 0}+ draws a world", highlight=False)
