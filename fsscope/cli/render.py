"""Rendering job reports in the terminal; each job may add a renderer here."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console

RENDERERS: dict[str, Callable[[dict, Console], None]] = {}


def render_report(job: str, report: dict, console: Console, machine: dict | None = None) -> None:
    renderer = RENDERERS.get(job)
    if renderer is None:
        console.print_json(data=report)
    else:
        renderer(report, console)
    render_machine(report.get("machine") or machine, console)


def render_machine(machine: dict | None, console: Console) -> None:
    """The line saying how busy the machine was during the run (yellow when busier than its CPUs)."""
    from fsscope.telemetry.machine import busy, machine_line

    if machine:
        console.print(machine_line(machine), style="yellow" if busy(machine) else "dim", highlight=False,
                      soft_wrap=True)  # one line: grepped and compared across runs
