"""Rendering job reports in the terminal: one module per job's report, registered here by job
name (``fsscope report RUN`` and each job's command use the same renderer). The commands in
``fsscope/cli/*_cmd.py`` parse and dispatch; nothing here reads the command line."""

from __future__ import annotations

import importlib
from typing import Any

from rich.console import Console

from fsscope.records import plain, report_part

# The jobs with a renderer: ``render_<job>`` in ``fsscope/cli/render/<job>.py``, imported when a
# report of that job is printed (importing them all here pulled every job's model, scipy among
# them, into `fsscope --help`).
RENDERERS: tuple[str, ...] = ("age", "bench", "check", "explore", "frag", "ladder", "probe", "scan", "syncwrite",
                              "variation", "watch", "replay")


def renderer(job: str) -> Any:
    """Job ``job``'s renderer ``(report, console) -> None``; None for a job without one."""
    if job not in RENDERERS:
        return None
    return getattr(importlib.import_module(f"fsscope.cli.render.{job}"), f"render_{job}")


def render_report(job: str, report: Any, console: Console, machine: dict | None = None) -> None:
    """A job's report (its Report record, or a dict for a job without one) and the machine line."""
    render = renderer(job)
    if render is None:
        console.print_json(data=plain(report))
    else:
        render(report, console)
    render_machine(report_part(report, "machine") or machine, console)


def render_machine(machine: dict | None, console: Console) -> None:
    """The line saying how busy the machine was during the run (yellow when busier than its CPUs)."""
    from fsscope.telemetry.machine import busy, machine_line

    if machine:
        console.print(machine_line(machine), style="yellow" if busy(machine) else "dim", highlight=False,
                      soft_wrap=True)  # one line: grepped and compared across runs
