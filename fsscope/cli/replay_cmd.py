"""``fsscope replay``: an op log from ``watch --capture`` played on file systems recipes make
(see :mod:`fsscope.replay`)."""

from __future__ import annotations

import os

from fsscope.cli.common import (
    add_job_args,
    out_console,
    recipe_for,
    recipe_list,
    recipes_from_args,
    target_from_args,
    write_json,
)
from fsscope.cli.headless import run_each_recipe, run_job
from fsscope.cli.render.replay import render_replay, render_replay_comparison
from fsscope.cli.spec_options import add_spec_options, spec_from_args
from fsscope.errors import FsscopeError
from fsscope.records import plain

DESCRIPTION = """\
Play an op log captured by `fsscope watch --capture LOG` on a file system fsscope makes: the
starting tree the log recorded (the directories the calls touched, with their names and
sizes) is recreated, then each recorded thread's calls run in order on a thread of their own,
keeping the dependencies between threads the log shows (a call waits for another thread's
create, rename or unlink of a name it uses, and for another thread's use of its descriptor),
as fast as possible (--pace asap) or with each call's recorded think time before it (--pace
recorded: asleep as long as the captured thread slept, then working on this thread's CPU as
long as it worked -- the time it waited for a CPU is left to this machine's load; --pace wall:
the whole think time, in wall time). File contents are never recorded: writes write a fixed pattern of the recorded
sizes.

Reported per call type: latency p50/p99/mean/max, calls/s and MB/s, failures, calls slow
against their own kind on their file or directory (watch's judge), and the captured
latencies beside them; the files that took the most time; what repeats. Each of --runs R
runs is on a freshly made file system. With --recipes a,b each recipe runs as its own job
and the recipes are compared per call type with Welch's t-test on the runs' mean latency (a
winner only where the difference is significant; --runs 2 or more).

Under --trace on (root), the replayed calls are traced as watch traces (their durations are
their system calls' entry-to-exit, as the captured ones), and the report carries watch's
directory-format changes (with the geometry's arithmetic) and the causes of slow calls.
With --from-snapshot AGED every run starts from the aged image instead of mkfs.

A log that is not whole (truncated, corrupted, not an op log) is refused in one line before
anything is formatted."""

EPILOG = """\
examples:
  fsscope watch --capture mail.oplog.gz --tree /var/spool/mail --pid 1234 --for 1m
  fsscope replay mail.oplog.gz --recipes ext4-default,xfs-default --ram --size 1G --runs 3
  fsscope replay mail.oplog.gz --recipe xfs-default --image /var/tmp/r.img --size 4G --pace recorded
  fsscope replay mail.oplog.gz --recipe ext4-default --ram --from-snapshot /var/tmp/aged.img.aged --runs 3
"""


def cmd_replay(args) -> int:
    from fsscope import oplog
    from fsscope.replay.compare import compare_replays
    from fsscope.replay.job import Spec

    log = os.path.abspath(args.log)
    read = oplog.read(log)  # one line, exit 2, before anything is formatted
    spec = spec_from_args(args, Spec, SPEC_OPTIONS, log=log, trace=args.trace == "on")
    target = target_from_args(args, default_kind="ram")
    if not args.recipes:
        return run_job("replay", spec, target, recipe_for(args, target), json_path=args.json, verbose=args.verbose,
                       render=render_replay)
    chosen = recipes_from_args(args, target)
    systems = sorted({recipe.fs for _, recipe in chosen if recipe is not None})
    if target.snapshot and len(systems) > 1:
        # one aged image holds one file system: refused before the first recipe runs, not after
        raise FsscopeError(f"--from-snapshot restores one aged image, of one file system, but --recipes names "
                           f"{', '.join(systems)}: compare recipes of the image's file system (mount options), "
                           f"or drop --from-snapshot")

    def render(report, console):
        render_replay(report, console)
        return plain(report)

    reports, status = run_each_recipe("replay", spec, target, chosen, verbose=args.verbose, render=render)
    comparison = None
    if len(reports) >= 2:
        comparison = compare_replays(reports)
        out = out_console()
        out.rule("[bold]comparison[/]")
        render_replay_comparison(comparison, out)
    if args.json:
        write_json(args.json, {"log": log, "calls": len(read.ops), "recipes": list(reports), "reports": reports,
                               "comparison": comparison})
    return status


SPEC_OPTIONS = ("runs", "pace", "slow_factor", "slow_floor_us", "buffer_kb")
"""replay's options that are its Spec's fields, as the Spec declares them (bounds, units, help);
--trace on|off is read here."""


def add_parser(sub) -> None:
    from fsscope.replay.job import Spec

    p = sub.add_parser("replay", help="play an op log (watch --capture) on file systems recipes make; "
                                      "compare recipes per call type",
                       description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("log", metavar="LOG", help="an op log written by 'fsscope watch --capture LOG'")
    add_spec_options(p, Spec, SPEC_OPTIONS, readers={"slow_floor_us": ("US", float), "buffer_kb": ("KB", int)})
    p.add_argument("--recipes", type=recipe_list, metavar="A,B,...",
                   help="compare recipes: one job per recipe in sequence, then Welch t-tests per call type")
    p.add_argument("--trace", choices=("on", "off"), default="on", type=str.lower,
                   help="replay under watch's tracing (root): each call timed by its system call's entry and "
                        "exit events, as the captured ones were, and the directory format changes and the slow "
                        "calls' causes explained as watch explains them (default on; untraced with a note "
                        "when tracing is not possible)")
    add_job_args(p)
    p.set_defaults(func=cmd_replay)
