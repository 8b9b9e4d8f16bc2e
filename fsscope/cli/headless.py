"""Run a job in its child process and show its event stream with rich: the headless view."""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from fsscope.cli.common import out_console, write_json
from fsscope.cli.render import render_machine
from fsscope.engine import events as ev
from fsscope.engine import registry, runner
from fsscope.errors import FsscopeError
from fsscope.format import visible
from fsscope.recipes import Recipe
from fsscope.records import SpecRecord, plain, report_part
from fsscope.targets import TargetSpec

console = Console(stderr=True, soft_wrap=True)  # a path in a line is never broken: it is copied and grepped


class _Interrupts:
    """Ctrl-C and SIGTERM while a job runs, handled where they land (never as an exception, so
    no event, no progress and no cleanup is skipped): the first cancels the job, the second
    kills it and every process it started; later ones change nothing."""

    def __init__(self, job: str) -> None:
        self.count = 0
        self.handle: runner.JobHandle | None = None
        self.progress: Progress | None = None
        self.task: TaskID | None = None
        self.phase = job

    def __call__(self, signum: int, frame: object) -> None:
        self.count += 1
        if self.handle is None:
            return  # not started yet: run_job cancels it as soon as it has started
        out = self.progress.console if self.progress is not None else console
        if self.count == 1:
            out.print("[yellow]cancelling: the job stops, cleans up and keeps what it measured "
                      "(Ctrl-C again to kill it)[/]")
            self.handle.cancel()
        elif self.count == 2:
            killed = self.handle.kill("killed by a second Ctrl-C")
            out.print("[red]killed the job and every process it started:[/] "
                      + (", ".join(killed) or "none was running any more"))
        self.show(self.phase)

    def show(self, phase: str) -> None:
        self.phase = phase
        if self.progress is not None and self.task is not None:
            suffix = {0: "", 1: " (cancelling…)"}.get(self.count, " (killed; cleaning up…)")
            # the column is markup: a phase quoting a path goes in escaped, controls visible
            self.progress.update(self.task, description=escape(visible(phase)) + suffix)


def run_job(job: str, spec: SpecRecord, target: TargetSpec, recipe: Recipe | None, *, json_path: str | None = None,
            verbose: bool = False, runs_root: Path | None = None,
            render: Callable[[Any, Console], None] | None = None) -> int:
    """Start the job, follow it, print its report. Ctrl-C/SIGTERM cancel it cleanly; a second
    one kills it and every process it started, then undoes what it left (mounts, loops)."""
    interrupts = _Interrupts(job)
    previous = {sig: signal.signal(sig, interrupts) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        handle = interrupts.handle = runner.start(job, spec, target, recipe, runs_root=runs_root)
        if interrupts.count:
            handle.cancel()
        report, error, findings = None, None, 0
        console.print(Text(f"run {visible(handle.run_dir.path)}", style="dim"))
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                      TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True) as progress:
            task = interrupts.task = progress.add_task(job, total=None, info="")
            interrupts.progress = progress
            interrupts.show(job)
            while (data := handle.next_event()) is not None:
                event = registry.decode_event(job, data)
                if isinstance(event, ev.Phase):
                    interrupts.show(f"{job}: {event.name}")
                elif isinstance(event, ev.Progress):
                    progress.update(task, completed=event.done, total=event.total, info=escape(visible(event.info)))
                elif isinstance(event, ev.Log) and verbose:
                    progress.console.print(Text(visible(event.line), style="dim"))  # may quote names
                elif isinstance(event, ev.Finding):  # the report lists them all; here only a count
                    findings += 1
                    progress.update(task, info=f"{findings} flag{'s' if findings > 1 else ''}")
                elif isinstance(event, ev.Result):
                    report = event.report
                elif isinstance(event, ev.Error):
                    error = event.message
            interrupts.progress = None
    finally:
        if interrupts.handle is not None and interrupts.handle.returncode is None:
            handle = interrupts.handle  # leaving early (an error above): stop it cleanly, undo what it left
            if handle.proc.poll() is None:
                handle.cancel()
                handle.drain()
            handle.wait()
        for sig, before in previous.items():
            signal.signal(sig, before)
    for line in handle.leftovers:
        console.print(Text.assemble(("cleaned up after the killed job:", "yellow"), f" {visible(line)}"))
    if handle.cleanup_error:
        console.print(Text.assemble(("fsscope:", "red"), f" {visible(handle.cleanup_error)}"))
    status = handle.run_dir.status()
    if report is None:
        report = registry.report_from_data(job, handle.run_dir.report())
    data = plain(report) if report is not None else {}  # a Report record or (older jobs) a dict
    if json_path and report is not None:  # first: nothing shown below can lose the report
        write_json(json_path, data)
    if report is not None and render is not None:
        render(report, out_console())
    elif report is not None:
        Console().print_json(data=data)
    manifest = handle.run_dir.info()
    render_machine(report_part(report, "machine") or manifest.machine, Console())
    existing = report_part(report, "existing")
    if existing is not None:  # --dir: which file system was measured, and what of it was not read
        console.print(Text(f"measured on the file system holding it: {visible(existing['summary'])}"))
        for gap in report_part(report_part(report, "geometry"), "unread") or []:  # said, never silent
            console.print(Text.assemble("  ", ("not read:", "yellow"), f" {visible(gap)}"))
    console.print(Text(f"recorded in {visible(handle.run_dir.path)} ({status})", style="dim"))
    if status == "interrupted":
        note = manifest.error or "interrupted"
        console.print(Text.assemble(("interrupted:", "yellow"), f" {visible(note)}; what it measured is kept "
                                    f"('fsscope report {handle.run_dir.id}')"))
        return 130
    if error:
        raise FsscopeError(error)
    if status == "cancelled" or interrupts.count:
        return 130
    return 0 if status == "ok" else 1


def run_each_recipe(job: str, spec: SpecRecord, target: TargetSpec, chosen: Sequence[tuple[str, Recipe | None]],
                    *, verbose: bool, render: Callable[[Any, Console], Any]) -> tuple[dict[str, Any], int]:
    """One job per (name, recipe) in sequence, a rule naming each when there are several,
    stopping at the first that does not succeed. ``render`` prints a report and returns what
    to keep of it; what was kept by name (a failed job's too, if it made a report), and the
    last job's exit status."""
    kept: dict[str, Any] = {}
    shown: list[Any] = []  # what render kept of the running job's report

    def keep(report: Any, out: Console) -> None:
        shown.append(render(report, out))

    status = 0
    for name, recipe in chosen:
        if len(chosen) > 1:
            console.rule(f"[bold]{name}[/]")
        shown.clear()
        status = run_job(job, spec, target, recipe, verbose=verbose, render=keep)
        if shown:
            kept[name] = shown[-1]
        if status != 0:
            break
    return kept, status
