"""``fsscope bench --ladder``: the hygiene ladder (Cao et al.) of one recipe -- baseline,
+no_lazy, +umount, +alloc -- on the target given, and its report."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from fsscope.cli.common import recipe_from_args, target_from_args
from fsscope.cli.headless import run_job
from fsscope.cli.render import RENDERERS
from fsscope.errors import FsscopeError
from fsscope.format import format_pct
from fsscope.records import build


def render_ladder(report: dict, console: Console) -> None:
    table = Table(title=f"hygiene ladder: {report.get('personality')} on {report.get('recipe')} "
                  "(each step adds to the ones above)", title_justify="left")
    for col in ("step", "runs", "mean ops/s", "rel. range", "RSD", "same image"):
        table.add_column(col, justify="right", no_wrap=True)
    for step in report.get("ladder", []):
        runs = step.get("runs") or []
        same = len({r.get("image_sha256") for r in runs}) == 1 and len(runs) > 1
        table.add_row(step["step"], str(len(runs)), "-" if step.get("mean_ops_per_s") is None
                      else f"{step['mean_ops_per_s']:,.0f}", format_pct(step.get("relative_range"), "-"),
                      format_pct(step.get("rsd"), "-"), "yes" if same else "no")
    console.print(table)
    for step in report.get("ladder", []):
        if step.get("vs_previous"):
            console.print(f"  {step['vs_previous']['step']} -> {step['step']}: {step['vs_previous']['note']}")
    from fsscope.analysis.variation import ladder_verdict  # local: scipy and numpy, only for a ladder
    from fsscope.workloads.ladder import step_ops

    verdict = ladder_verdict(step_ops(report.get("ladder", [])))
    if len(verdict.ranges) > 1:
        style = "" if verdict.paper.get("verdict") == "agree" else "[yellow]"
        console.print(style + verdict.text, highlight=False)


RENDERERS["ladder"] = render_ladder


def cmd_ladder(args) -> int:
    from fsscope.workloads import ladder

    if args.recipes:
        raise FsscopeError("--ladder runs one recipe (--recipe), not --recipes")
    if args.duration == "auto":
        raise FsscopeError("--ladder: give --duration S (every step must run equally long)")
    if args.from_snapshot:
        raise FsscopeError("--ladder makes its own dataset image (the alloc step): no --from-snapshot")
    target = target_from_args(args, default_kind="ram")
    if target.kind == "dir":
        raise FsscopeError("--ladder formats its target at every step: give --ram, --image PATH or --device DEV, "
                           "not --dir")
    spec = build(ladder.Spec, personality=args.personality, runs=args.runs, duration_s=args.duration, nfiles=args.files,
                       workers=args.workers, image_size_bytes=target.size_bytes, seed=args.seed)
    recipe = recipe_from_args(args, default="ext4-default")
    if recipe.fs == "tmpfs":
        raise FsscopeError("--ladder needs a file system fsscope formats, not tmpfs")
    return run_job("ladder", spec, target, recipe, json_path=args.json, verbose=args.verbose, render=render_ladder)
