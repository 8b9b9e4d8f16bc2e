"""``fsscope runs`` and ``fsscope report RUN``: what was recorded."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsscope import store
from fsscope.cli.common import out_console, positive_int
from fsscope.engine import registry
from fsscope.errors import FsscopeError
from fsscope.format import visible

console = out_console()


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
    unreadable = []
    for run in runs[-args.last:]:
        why = run.problem(report=False)  # a listing reads manifests only; report/compare check the rest
        if why:  # one line for it below; the others are still listed
            unreadable.append(f"{run.id}: {why}")
            continue
        m = run.info()
        spec = m.target_spec  # the target's spec as recorded (plain data: the store is below the targets)
        # a target's path, a recipe's name: files someone may have named; text
        table.add_row(Text(visible(run.id)), Text(visible(m.job or "?")), run.status(),
                      Text(visible(f"{spec.get('kind', '?')} {spec.get('path', '')}".strip())),
                      Text(visible(m.recipe_name or "-")), Text(visible(m.started or "-")))
    console.print(table)
    warn = Console(stderr=True, soft_wrap=True, highlight=False)  # whole lines: scripts grep them
    for line in unreadable:
        warn.print(Text.assemble(("unreadable run record", "yellow"), f" {visible(line)}"))
    return 0


def cmd_report(args) -> int:
    run = store.find_run(args.run).check()
    # all or nothing: a record of the wrong shape is one line, not a half-printed report
    with store.reading(f"the record of run {run.id}"), console.capture() as out:
        _print_report(run)
    print(out.get(), end="")
    return 0


def _print_report(run: store.RunDir) -> None:
    from fsscope.cli.render import render_report

    m = run.info()
    job = m.job or ""
    console.print(Text.assemble((visible(run.id), "bold"), f"  job {visible(m.job)}  status {run.status()}"))
    if m.error:  # an error quotes paths and names as they are
        console.print(Text.assemble(("error:", "red"), f" {visible(m.error)}"))
    for cmd in m.target.commands if m.target is not None else []:
        console.print(Text(f"$ {visible(' '.join(map(str, cmd.argv)))}  → exit {cmd.rc}", style="dim"))
    try:
        report = registry.report_from_data(m.job, run.report())
    except FsscopeError as exc:
        raise FsscopeError(f"run {run.id}: {exc}") from None
    if report is None:
        report = _partial_report(job, run)
    if report is None:
        console.print("no report (the job did not finish); what it measured before it stopped:")
        for line in kept_lines(run) or ["nothing: no array was recorded"]:
            console.print(Text(f"  {visible(line)}"))
        return
    render_report(job, report, console, m.machine)


def kept_lines(run: store.RunDir) -> list[str]:
    """One line per array an unfinished run kept: what was measured, read from the arrays."""
    import numpy as np

    lines, others = [], []
    spec = run.info().spec or {}
    for name in run.arrays():
        try:
            arr = run.load_array(name)
        except (OSError, ValueError) as exc:
            lines.append(f"{name}: unreadable ({exc})")
            continue
        if name == "latency_ns" and arr.ndim == 2:  # the probe: runs × files, -1 = not measured
            lines.append(f"latency_ns: {int((arr >= 0).sum()):,} of {arr.size:,} calls measured")
            for r, row in enumerate(arr):
                done = row[row >= 0]
                if done.size:
                    lines.append(f"  run {r + 1}: {done.size:,} of {row.size:,} files, "
                                 f"median {np.median(done) / 1e3:,.1f} µs")
        elif name.startswith("run") and name.endswith("_counts") and arr.ndim == 2:  # bench: ops × 1-s bins
            per_bin = arr.sum(axis=0)
            bins = int(np.flatnonzero(per_bin)[-1]) + 1 if per_bin.any() else 0
            ops = _bench_ops(spec.get("personality"), arr.shape[0])
            per_op = " · ".join(f"{op} {int(n):,}" for op, n in zip(ops, arr.sum(axis=1)) if n)
            rate = f" ({per_bin[:bins].sum() / bins:,.0f} ops/s)" if bins else ""
            lines.append(f"run {int(name[3:-7]) + 1}: {int(per_bin.sum()):,} operations in {bins} 1-s bins"
                         f"{rate}{': ' + per_op if per_op else ''}")
        elif arr.dtype.kind in "iu" and arr.size and arr.min() == -1:  # -1 = not measured
            lines.append(f"{name}: {int((arr >= 0).sum()):,} of {arr.size:,} values measured")
        else:
            others.append(name)
    if others:
        lines.append("also kept: " + ", ".join(others))
    return lines


def _bench_ops(personality: str | None, n: int) -> tuple[str, ...]:
    from fsscope.workloads.personalities import OPS

    ops = OPS.get(personality or "", ())
    return ops if len(ops) == n else tuple(f"op{i}" for i in range(n))


def _partial_report(job: str, run) -> dict | None:
    """A job that did not finish, rebuilt from the arrays it kept (jobs offering
    ``partial_report(run_dir)``)."""

    if job not in registry.JOBS:
        return None
    rebuild = getattr(registry.load(job), "partial_report", None)
    return rebuild(run) if rebuild is not None else None


def add_parser(sub) -> None:
    p = sub.add_parser("runs", description="List the recorded runs, newest last: job, status (ok, failed, cancelled, "
                       "interrupted), target and recipe. Each run is a directory with manifest.json, "
                       "events.ndjson, *.npy arrays and report.json.",
                       epilog="examples:\n  fsscope runs\n  fsscope runs --last 5\n  fsscope report latest")
    p.add_argument("--last", type=positive_int, default=30, metavar="N", help="show the last N (default 30)")
    p.set_defaults(func=cmd_runs)
    p = sub.add_parser("report", epilog="examples:\n  fsscope report latest\n  fsscope report 20261122-0215\n"
                       "  fsscope compare RUN_A RUN_B      (two runs side by side)",
                       description="Print a recorded run again: status, the commands it ran, its report. "
                       "RUN is a run directory, its name, a unique part of it, or 'latest'.")
    p.add_argument("run")
    p.set_defaults(func=cmd_report)
