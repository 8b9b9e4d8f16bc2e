"""Rendering job reports in the terminal: one module per job's report, registered here by job
name (``fsscope report RUN`` and each job's command use the same renderer). The commands in
``fsscope/cli/*_cmd.py`` parse and dispatch; nothing here reads the command line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console

from fsscope.cli.render.age import render_age
from fsscope.cli.render.bench import render_bench
from fsscope.cli.render.check import render_check
from fsscope.cli.render.explore import render_explore
from fsscope.cli.render.frag import render_frag
from fsscope.cli.render.ladder import render_ladder
from fsscope.cli.render.probe import render_probe
from fsscope.cli.render.replay import render_replay
from fsscope.cli.render.syncwrite import render_syncwrite
from fsscope.cli.render.variation import render_variation
from fsscope.cli.render.watch import render_watch
from fsscope.records import plain, report_part

RENDERERS: dict[str, Callable[[Any, Console], None]] = {
    "age": render_age, "bench": render_bench, "check": render_check, "explore": render_explore,
    "frag": render_frag, "ladder": render_ladder, "probe": render_probe, "syncwrite": render_syncwrite,
    "variation": render_variation, "watch": render_watch, "replay": render_replay,
}


def render_report(job: str, report: Any, console: Console, machine: dict | None = None) -> None:
    """A job's report (its Report record, or a dict for a job without one) and the machine line."""
    renderer = RENDERERS.get(job)
    if renderer is None:
        console.print_json(data=plain(report))
    else:
        renderer(report, console)
    render_machine(report_part(report, "machine") or machine, console)


def render_machine(machine: dict | None, console: Console) -> None:
    """The line saying how busy the machine was during the run (yellow when busier than its CPUs)."""
    from fsscope.telemetry.machine import busy, machine_line

    if machine:
        console.print(machine_line(machine), style="yellow" if busy(machine) else "dim", highlight=False,
                      soft_wrap=True)  # one line: grepped and compared across runs
