"""Run a job in its child process and show its event stream with rich: the headless view."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from fsscope.engine import runner
from fsscope.errors import FsscopeError
from fsscope.recipes import Recipe
from fsscope.targets import TargetSpec

console = Console(stderr=True)


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def run_job(job: str, spec, target: TargetSpec, recipe: Recipe | None, *, json_path: str | None = None,
            verbose: bool = False, runs_root: Path | None = None,
            render: Callable[[dict, Console], None] | None = None) -> int:
    """Start the job, follow it, print its report. Ctrl-C/SIGTERM cancel it cleanly; a second
    one kills it and every process it started, then undoes what it left (mounts, loops)."""
    handle = runner.start(job, spec, target, recipe, runs_root=runs_root)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    report, error, interrupts, findings = None, None, 0, 0
    console.print(f"[dim]run {handle.run_dir.path}[/]")
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
                      TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True) as progress:
            task = progress.add_task(job, total=None, info="")
            phase = job
            while True:
                try:
                    event = handle.next_event()
                except KeyboardInterrupt:
                    interrupts += 1
                    if interrupts == 1:
                        progress.console.print("[yellow]cancelling: the job stops, cleans up and keeps what it "
                                               "measured (Ctrl-C again to kill it)[/]")
                        handle.cancel()
                    elif interrupts == 2:
                        killed = handle.kill("killed by a second Ctrl-C")
                        progress.console.print("[red]killed the job and every process it started:[/] "
                                               + (", ".join(killed) or "none was running any more"))
                    progress.update(task, description=f"{phase} (cancelling…)" if interrupts == 1
                                    else f"{phase} (killed; cleaning up…)")
                    continue
                if event is None:
                    break
                kind = event.get("kind")
                if kind == "phase":
                    phase = f"{job}: {event.get('name')}"
                    progress.update(task, description=phase + (" (cancelling…)" if interrupts else ""))
                elif kind == "progress":
                    progress.update(task, completed=event.get("done", 0), total=event.get("total") or None,
                                    info=event.get("info", ""))
                elif kind == "log" and verbose:
                    progress.console.print(f"[dim]{event['line']}[/]")
                elif kind == "finding":  # the report lists them all; here only a count
                    findings += 1
                    progress.update(task, info=f"{findings} flag{'s' if findings > 1 else ''}")
                elif kind == "result":
                    report = event.get("report")
                elif kind == "error":
                    error = event.get("message")
    finally:
        # The job is ending: let nothing (a third Ctrl-C, an error above) skip undoing what it left.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            if handle.returncode is None and handle.proc.poll() is None:
                handle.cancel()  # we are leaving early (an error above): stop it cleanly
                for _ in handle.events():  # drain, so a child blocked on a full pipe can exit
                    pass
            handle.wait()
        finally:
            signal.signal(signal.SIGINT, before)
            signal.signal(signal.SIGTERM, previous)
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
    if status == "interrupted":
        note = handle.run_dir.manifest().get("error") or "interrupted"
        console.print(f"[yellow]interrupted:[/] {note}; what it measured is kept ('fsscope report "
                      f"{handle.run_dir.id}')")
        return 130
    if error:
        raise FsscopeError(error)
    if status == "cancelled" or interrupts:
        return 130
    return 0 if status == "ok" else 1
