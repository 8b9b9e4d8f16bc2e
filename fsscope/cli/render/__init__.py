"""Rendering job reports in the terminal: one module per job's report, named by the job's
descriptor (``Job.renderer`` in :mod:`fsscope.engine.jobs`; ``fsscope report RUN`` and
each job's command use the same renderer). The commands in
``fsscope/cli/*_cmd.py`` parse and dispatch; nothing here reads the command line."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from fsscope.engine import jobs
from fsscope.records import plain, report_part


def renderer(job: str) -> Any:
    """Job ``job``'s renderer ``(report, console) -> None`` (the part its descriptor names,
    imported now: importing them all pulled every job's model, scipy among them, into `fsscope
    --help`); None for a job without one."""
    ref = jobs.JOBS[job].renderer if job in jobs.JOBS else ""
    return jobs.resolve(ref) if ref else None


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
