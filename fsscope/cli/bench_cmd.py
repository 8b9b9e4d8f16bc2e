"""``fsscope bench``: throughput personalities and their variation, headless, with rich reports
and JSON (``--ladder`` lives in :mod:`fsscope.cli.ladder_cmd`, ``fsscope syncwrite`` in
:mod:`fsscope.cli.syncwrite_cmd`)."""

from __future__ import annotations

import argparse

from fsscope.analysis.compare import RecipeComparison, compare_recipe_reports
from fsscope.cli.check_pointer import point_at_check
from fsscope.cli.common import (
    add_job_args,
    out_console,
    positive_float,
    recipe_for,
    recipe_list,
    recipes_from_args,
    target_from_args,
    write_json,
)
from fsscope.cli.headless import run_each_recipe, run_job
from fsscope.cli.ladder_cmd import cmd_ladder
from fsscope.cli.render.bench import render_bench, render_comparison
from fsscope.cli.spec_options import add_spec_options, spec_from_args
from fsscope.records import plain
from fsscope.workloads.bench_spec import Spec

BENCH_DESCRIPTION = """\
Run a Filebench-like throughput personality R times, each run on a freshly formatted file
system prepared identically (same seed, same file set, the recipe's hygiene: remount or sync
and drop caches after populating), and measure how much the results vary.

  fileserver  create+write whole file, append, read whole file, delete, stat  (50 users, 128 KiB files)
  webserver   10 whole-file reads per append to a shared log                  (100 users, 16 KiB files)
  varmail     delete, create+append+fsync, read+append+fsync, read            (16 users, 16 KiB, one directory)

File counts are Filebench's, scaled so the file set takes at most a quarter of the target;
workers are processes (min(Filebench's threads, 4 per CPU)).

What the numbers mean (Cao et al., "On the Performance Variation in Modern Storage Stacks",
FAST'17):
  cumulative throughput  ops/s over a whole run.
  Throughput-N           ops/s in each consecutive N-second window of a run (--window N):
                         short windows show warm-up, writeback bursts and stalls that a
                         whole-run average hides.
  relative range         (max - min) / mean across runs, of cumulative throughput or of each
                         Throughput-N window. The paper's main metric: unlike the RSD (sample
                         std / mean) it does not soften one outlier run. Above --threshold
                         (default 10 %) one run is not a trustworthy result for this setup.
Flags: variation (the runs' spread above the threshold's, the sd a relative range of the
threshold over 10 runs stands for, by a chi-square test at p < 0.025; a range above the
threshold the runs cannot tell from it is inconclusive and names the runs that would decide;
the machine's own spread is included: 'fsscope replicate cao' measures a baseline beside it),
warmup, periodic (dips every P s, compared with the kernel's dirty-page writeback intervals),
window_disagrees (stable in total but not window by window, or the reverse).

With --recipes a,b,c each recipe runs as its own job (its own run record) and a Welch t-test
on the runs' cumulative throughput names a winner only where the difference is significant
(p < 0.05); a flag says when the other recipe wins in some Throughput-N windows."""

BENCH_EPILOG = """\
examples:
  fsscope bench --personality fileserver --runs 5 --duration 60 --recipe ext4-bench --ram --size 4G
  fsscope bench --personality varmail --runs 3 --duration 30 --window 10 --window 30 --json varmail.json
  fsscope bench --personality webserver --recipes ext4-default,xfs-default --ram --size 1G --runs 4
  fsscope bench --personality fileserver --mem-limit 512M --image /var/tmp/b.img --size 8G
  fsscope bench --personality fileserver --dir /srv/scratch --runs 3 --duration 20   (no root)
  fsscope bench --ladder --personality varmail --runs 5 --duration 30 --image /var/tmp/l.img --size 1G

Default target: a 2G RAM image with the ext4-default recipe. Without --mem-limit a file set
that fits in RAM is served from the page cache (the FAST'17 study limited RAM to 4 GiB);
--mem-limit puts the workers in a memory cgroup instead, so reads reach the device."""


# ---------------------------------------------------------------------------------------------
# argument types: bad input is one line and exit status 2 (argparse via Parser.error)
# ---------------------------------------------------------------------------------------------


def _window(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if value < 1 or not value.is_integer():
        raise argparse.ArgumentTypeError(f"a window is a whole number of seconds >= 1, got {text}")
    return int(value)


def _duration(text: str) -> float | str:
    return "auto" if text == "auto" else positive_float(text)


def _fraction(text: str) -> float:
    """--threshold: 0.1 or 10% (the Spec holds it to its bounds)."""
    try:
        return float(text.rstrip("%")) / (100.0 if text.endswith("%") else 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a fraction (0.1 or 10%)") from None


# ---------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------

SPEC_OPTIONS = ("personality", "runs", "workers", "nfiles", "mean_file_size_bytes", "mem_limit_bytes", "threshold",
                "seed", "fresh_fs")
"""The bench's options that are its Spec's fields, as the Spec declares them (bounds, units, help);
--duration (seconds or auto), --window (repeated) and --trace on|off are read here."""
FLAGS = {"nfiles": "--files", "fresh_fs": "--same-fs"}


def _bench_spec(args) -> Spec:
    auto = args.duration == "auto"
    return spec_from_args(args, Spec, SPEC_OPTIONS, duration_s=args.duration_max if auto else args.duration,
                          duration_auto=auto, window_sizes_s=tuple(dict.fromkeys(args.window or [])),
                          trace=args.trace == "on")


def cmd_bench(args) -> int:
    from fsscope.workloads import bench_job

    spec = _bench_spec(args)
    if args.ladder:
        return cmd_ladder(args, spec)
    target = target_from_args(args, default_kind="ram")
    # the workload's own checks, before anything is formatted
    bench_job.personality_spec(spec, target.size_bytes)

    if not args.recipes:
        recipe = recipe_for(args, target)
        point_at_check()
        return run_job("bench", spec, target, recipe, json_path=args.json, verbose=args.verbose,
                       render=render_bench)

    return _cmd_recipes(args, spec, target)


def _cmd_recipes(args, spec, target) -> int:
    """--recipes a,b,...: one bench job per recipe in sequence, then the Welch t-tests."""
    chosen = recipes_from_args(args, target)
    point_at_check()

    def render(report, console):
        render_bench(report, console)
        return plain(report)  # compared (and written by --json) in its written form

    reports, status = run_each_recipe("bench", spec, target, chosen, verbose=args.verbose, render=render)
    comparison = _compare(reports, status)
    if args.json:
        doc = {"personality": spec.personality, "recipes": list(reports), "reports": reports,
               "comparison": comparison}
        write_json(args.json, doc)
    return status


def _compare(reports: dict[str, dict], status: int) -> RecipeComparison | None:
    """The recipes' comparison, printed (None when fewer than two finished)."""
    out = out_console()
    if len(reports) < 2:
        if status == 0:
            out.print("fewer than two recipes finished: no comparison")
        return None
    comparison = compare_recipe_reports(reports)
    out.rule("[bold]comparison[/]")
    render_comparison(comparison, out)
    return comparison


def add_parser(sub) -> None:
    p = sub.add_parser("bench", description=BENCH_DESCRIPTION, epilog=BENCH_EPILOG)
    add_spec_options(p, Spec, SPEC_OPTIONS, flags=FLAGS, readers={"threshold": ("F", _fraction)})
    p.add_argument("--duration", type=_duration, default=30.0, metavar="S|auto",
                   help="measured seconds per run (default 30); auto: a calibration run first, until the "
                        "cumulative throughput settles (±2%% over 5 s; capped by --duration-max)")
    p.add_argument("--duration-max", type=positive_float, default=600.0, metavar="S",
                   help="with --duration auto: the longest run it may choose (default 600)")
    p.add_argument("--window", type=_window, action="append", metavar="N",
                   help="Throughput-N window in seconds; repeat for several (default 10, or the run length if shorter); no longer than --duration")
    p.add_argument("--recipes", type=recipe_list, metavar="A,B,...",
                   help="compare recipes: one job per recipe in sequence, then Welch t-tests")
    p.add_argument("--ladder", action="store_true",
                   help="the hygiene ladder: baseline, +no_lazy, +umount, +alloc (dataset image restored "
                        "byte-identical per run), R runs each on the target given (--ram by default, "
                        "--image or --device); relative range per step")
    p.add_argument("--trace", choices=("on", "off"), default="on", type=str.lower,
                   help="kernel events per window through tracefs (root): journal commits, writeback "
                        "starts and bytes written per Throughput-N window, and every dip annotated "
                        "with them (default on; untraced with a note when tracing is not possible)")
    add_job_args(p)
    p.set_defaults(func=cmd_bench)
