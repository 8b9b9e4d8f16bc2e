"""``fsscope bench --ladder``: the hygiene ladder (Cao et al.) of one recipe -- baseline,
+no_lazy, +umount, +alloc -- on the target given, and its report."""

from __future__ import annotations

from fsscope.cli.common import recipe_from_args, target_from_args
from fsscope.cli.headless import run_job
from fsscope.cli.render.ladder import render_ladder
from fsscope.errors import FsscopeError
from fsscope.records import build


def cmd_ladder(args, bench) -> int:
    """The ladder of the bench options given (``bench``: their bench Spec)."""
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
    spec = build(ladder.Spec, personality=bench.personality, runs=bench.runs, duration_s=bench.duration_s,
                 nfiles=bench.nfiles, workers=bench.workers, image_size_bytes=target.size_bytes, seed=bench.seed)
    recipe = recipe_from_args(args, default="ext4-default")
    if recipe is None or recipe.fs == "tmpfs":
        raise FsscopeError("--ladder needs a file system fsscope formats, not tmpfs")
    return run_job("ladder", spec, target, recipe, json_path=args.json, verbose=args.verbose, render=render_ladder)
