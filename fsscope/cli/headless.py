"""Run a job in its child process and show its event stream with rich: the headless view."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from fsscope.engine import events as ev
from fsscope.engine import runner
from fsscope.errors import FsscopeError
from fsscope.recipes import Recipe
from fsscope.targets import TargetSpec

console = Console(stderr=True)


def run_job(job: str, spec, target: TargetSpec, recipe: Recipe | None, *, json_path: str | None = None,
            verbose: bool = False, runs_root: Path | None = None,
            render: Callable[[dict, Console], None] | None = None) -> int:
    """Start the job, follow it, print its report; Ctrl-C/SIGTERM cancel it cleanly."""
    handle = runner.start(job, spec, target, recipe, runs_root=runs_root)
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    report, error, interrupts, findings = None, None, 0, 0
    console.print(f"[dim]run {handle.run_dir.path}[/]")
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                      TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True) as progress:
            task = progress.add_task(job, total=None, info="")
            events = handle.records()
            while True:
                try:
                    event = next(events)
                except StopIteration:
                    break
                except KeyboardInterrupt:
                    interrupts += 1
                    if interrupts == 1:
                        console.print("[yellow]cancelling: the job stops, cleans up and keeps what it measured "
                                      "(Ctrl-C again to kill)[/]")
                        handle.cancel()
                    else:
                        handle.kill()
                    continue
                if isinstance(event, ev.Phase):
                    progress.update(task, description=f"{job}: {event.name}")
                elif isinstance(event, ev.Progress):
                    progress.update(task, completed=event.done, total=event.total, info=event.info)
                elif isinstance(event, ev.Log) and verbose:
                    progress.console.print(f"[dim]{event.line}[/]")
                elif isinstance(event, ev.Finding):  # the report lists them all; here only a count
                    findings += 1
                    progress.update(task, info=f"{findings} flag{'s' if findings > 1 else ''}")
                elif isinstance(event, ev.Result):
                    report = dict(event.report)
                elif isinstance(event, ev.Error):
                    error = event.message
    finally:
        signal.signal(signal.SIGTERM, previous)
        if handle.returncode is None:
            handle.wait()
    for line in handle.leftovers:
        console.print(f"[yellow]cleaned up after the killed job:[/] {line}")
    status = handle.run_dir.status()
    if report is None:
        report = handle.run_dir.report()
    if report is not None and render is not None:
        render(report, Console())
    elif report is not None:
        Console().print_json(data=report)
    if json_path and report is not None:
        Path(json_path).write_text(json.dumps(report, indent=2, default=str) + "\n")
        console.print(f"[dim]wrote {json_path}[/]")
    console.print(f"[dim]recorded in {handle.run_dir.path} ({status})[/]")
    if error:
        raise FsscopeError(error)
    if status == "cancelled" or interrupts:
        return 130
    return 0 if status == "ok" else 1
