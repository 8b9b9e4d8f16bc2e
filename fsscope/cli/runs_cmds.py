"""``fsscope runs`` and ``fsscope report RUN``: what was recorded."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from fsscope import store
from fsscope.cli.common import positive_int

console = Console()


def cmd_runs(args) -> int:
    runs = store.list_runs()
    if not runs:
        console.print("no runs recorded yet")
        return 0
    table = Table(title=f"Runs in {runs[0].path.parent}", title_justify="left")
    # the run id is what `report`/`compare` take: never cut it; the target path folds instead
    table.add_column("run", no_wrap=True, min_width=len(runs[-1].id))
    for col in ("job", "status"):
        table.add_column(col, no_wrap=True)
    table.add_column("target", overflow="fold", ratio=1)
    table.add_column("recipe", overflow="fold")
    table.add_column("started", overflow="fold")
    for run in runs[-args.last:]:
        m = run.manifest()
        target = m.get("target") or {}
        spec = target.get("spec", target) if isinstance(target, dict) else {}
        recipe = m.get("recipe") or {}
        table.add_row(run.id, m.get("job", "?"), run.status(), f"{spec.get('kind', '?')} {spec.get('path', '')}".strip(),
                      recipe.get("name", "-") if isinstance(recipe, dict) else "-", m.get("started", "-"))
    console.print(table)
    return 0


def cmd_report(args) -> int:
    from fsscope.cli.render import render_report

    run = store.find_run(args.run)
    m = run.manifest()
    console.print(f"[bold]{run.id}[/]  job {m.get('job')}  status {run.status()}")
    if m.get("error"):
        console.print(f"[red]error:[/] {m['error']}")
    target = m.get("target") or {}
    for cmd in target.get("commands", []) if isinstance(target, dict) else []:
        console.print(f"[dim]$ {' '.join(cmd['argv'])}  → exit {cmd['rc']}[/]")
    report = run.report()
    if report is None:
        report = _partial_report(m.get("job", ""), run)
    if report is None:
        console.print("no report (the job did not finish); arrays recorded: " + (", ".join(run.arrays()) or "none"))
        return 0
    render_report(m.get("job", ""), report, console)
    return 0


def _partial_report(job: str, run) -> dict | None:
    """A job that did not finish, rebuilt from the arrays it kept (jobs offering
    ``partial_report(run_dir)``)."""
    from fsscope.engine import registry

    if job not in registry.JOBS:
        return None
    rebuild = getattr(registry.load(job), "partial_report", None)
    return rebuild(run) if rebuild is not None else None


def add_parser(sub) -> None:
    p = sub.add_parser("runs", help="list recorded runs", formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="List the recorded runs, newest last: job, status (ok, failed, cancelled, "
                       "interrupted), target and recipe. Each run is a directory with manifest.json, "
                       "events.ndjson, *.npy arrays and report.json.",
                       epilog="examples:\n  fsscope runs\n  fsscope runs --last 5\n  fsscope report latest")
    p.add_argument("--last", type=positive_int, default=30, metavar="N", help="show the last N (default 30)")
    p.set_defaults(func=cmd_runs)
    p = sub.add_parser("report", help="print a recorded run's report again",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n  fsscope report latest\n  fsscope report 20261122-0215\n"
                       "  fsscope compare RUN_A RUN_B      (two runs side by side)",
                       description="Print a recorded run again: status, the commands it ran, its report. "
                       "RUN is a run directory, its name, a unique part of it, or 'latest'.")
    p.add_argument("run")
    p.set_defaults(func=cmd_report)
