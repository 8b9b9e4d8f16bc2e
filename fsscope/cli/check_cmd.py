"""``fsscope check``: the pre-benchmark sanity check, headless."""

from __future__ import annotations

import argparse
import os
import time

import psutil
from rich.console import Console

from fsscope.cli.common import (
    add_job_args,
    add_personality_arg,
    parse_size,
    positive_float,
    positive_int,
    recipe_for,
    target_from_args,
)
from fsscope.cli.headless import run_job
from fsscope.cli.render.check import render_check
from fsscope.errors import FsscopeError
from fsscope.records import build

DESCRIPTION = """\
Before a storage benchmark: what on this machine will distort it, and how many runs of what
length a trustworthy result needs. Start here.

1. Audit (seconds, read-only): every item OK / warn / bad / unknown, with the evidence read
   (path and value), what it does to results, and the command that fixes it:
   cpu-governor, turbo, load, other-io (diskstats on the target's device over a few seconds
   and the processes moving bytes, from /proc/PID/io), ext4-lazy-init, io-scheduler,
   read-ahead, write-cache, rotational (and zoned), discard, atime, dirty-settings,
   dirty-pending, swap, thp, page-cache-fit (--dataset vs RAM), fullness,
   free-space-fragmentation, loop-direct-io, cgroup-io-limit, periodic-jobs, thermal.
   An item that cannot be read says "unknown" and why, never OK.
2. Calibration: short repeated runs of a personality on the target (a fresh file system per
   run where fsscope formats it; a scratch subdirectory of --dir, removed afterwards). From
   their throughput: the coefficient of variation (CV); the runs needed for a confidence
   interval of the mean of ±E % (Student-t, iterated: the smallest n with
   n >= (t(95 %, n-1) * CV / E)^2 — the normal approximation undercounts: CV 5 %, ±2 % needs 27
   runs, not 25); the run length after which cumulative throughput stays in a band (the
   criterion is printed); the Throughput-N window at which the relative range across runs
   falls below E (Cao et al., FAST'17).

Verdict: fit ("benchmark with >= N runs of >= T s each"), caution (what to fix first, ranked
by expected effect) or unfit (e.g. another process writes to this device). Exit status 0 / 1 /
2 for fit / caution / unfit, so a script can gate a benchmark on it; 2 with one line for a bad
target or option."""

EPILOG = """\
examples:
  fsscope check --dir /srv/data --quick                 the file system mounted there (no root needed)
  fsscope check --dir /srv/data --dataset 40G           is 40 GiB more than the page cache holds?
  fsscope check --ram --recipe ext4-default --quick     the file system fsscope would make
  fsscope check --device /dev/sdb --recipe xfs-default --yes-destroy /dev/sdb --budget 600
  fsscope check --dir /srv/data --audit-only --json check.json && fsscope bench ...

--quick takes about a minute, the default a few minutes (--budget SECONDS sets it). Without
root some items read as unknown (lazy init, free-space fragmentation need the device).
--json PATH writes {"verdict", "findings": [{"id", "severity", "title", "evidence", "effect",
"fix", "values"}], "calibration": {"personality", "runs": [{"ops_per_s", ...}], "cv",
"precision", "confidence", "runs_needed", "duration_s_needed", "window_s_needed", "criterion",
...}, ...}; precision and confidence are fractions there (0.05, 0.95)."""



def _percent(text: str) -> float:
    """--precision: always percent ('5', '5%', '0.5' = 0.5 %) → a fraction."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a percentage (e.g. 5 or 5%)") from None
    if not 0 < value < 100:
        raise argparse.ArgumentTypeError(f"'{text}' must be between 0 and 100 (percent)")
    return value / 100


def _confidence(text: str) -> float:
    """--confidence: '95', '95%' or '0.95' → 0.95 (a confidence below 1 % is never meant)."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a confidence level (e.g. 95)") from None
    fraction = value if value < 1 and not text.endswith("%") else value / 100
    if not 0.5 <= fraction < 1:
        raise argparse.ArgumentTypeError(f"'{text}': the confidence level must be at least 50 and below 100 (percent)")
    return fraction


def cmd_check(args: argparse.Namespace) -> int:
    from fsscope.check.job import DEFAULT_BUDGET_S, QUICK_BUDGET_S, Report, Spec, shortfall
    from fsscope.check.verdict import EXIT_STATUS

    if args.quick and args.budget:
        raise FsscopeError("--quick and --budget: pick one (--quick is --budget 60)")
    budget = args.budget or (QUICK_BUDGET_S if args.quick else DEFAULT_BUDGET_S)
    # the budget is the whole command's: what this process's start-up took is spent already
    spent_s = max(0.0, time.time() - psutil.Process().create_time())
    spec = build(Spec, personality=args.personality, precision=args.precision, confidence=args.confidence,
                budget_s=max(budget - spent_s, min(budget, 10.0)), sample_s=args.sample or (2.0 if budget <= 90 else 5.0),
                dataset_bytes=args.dataset, runs=args.runs, calibrate=not args.audit_only)
    target = target_from_args(args)
    if target.kind == "dir" and not os.path.isdir(target.path):  # before a run record is made
        raise FsscopeError(f"--dir {target.path}: not a directory")
    if target.kind == "dir" and not os.access(target.path, os.W_OK | os.X_OK):
        raise FsscopeError(f"--dir {target.path}: not writable by this user (the check works in a scratch "
                           "subdirectory there; pass a writable directory on the same file system)")
    recipe = recipe_for(args, target)
    short = shortfall(spec, target.kind != "dir")
    if short:  # said before anything starts; the job then stops at the budget with what it has
        Console(stderr=True, soft_wrap=True).print(f"check: {short}; it stops at the budget with what it has",
                                                   style="yellow", highlight=False, markup=False)
    captured: list[Report] = []

    def render(report: Report, console: Console) -> None:
        captured.append(report)
        render_check(report, console)

    status = run_job("check", spec, target, recipe, json_path=args.json, verbose=args.verbose, render=render)
    if status != 0 or not captured:
        return status
    return EXIT_STATUS.get(captured[-1].verdict, 2)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", description=DESCRIPTION, epilog=EPILOG)
    add_personality_arg(p, "workload of the calibration runs")
    p.add_argument("--precision", type=_percent, default=0.05, metavar="E",
                   help="wanted half-width of the 95%% confidence interval, in %% of the mean (default 5)")
    p.add_argument("--confidence", type=_confidence, default=0.95, metavar="C",
                   help="confidence level of that interval, in %% (default 95)")
    p.add_argument("--quick", action="store_true", help="about one minute in all (a shorter calibration)")
    p.add_argument("--budget", type=positive_float, metavar="SECONDS",
                   help="total time for audit + calibration (default 180; --quick = 60)")
    p.add_argument("--dataset", type=parse_size, metavar="SIZE",
                   help="the data your benchmark will touch, e.g. 40G: judged against the page cache")
    p.add_argument("--runs", type=positive_int, metavar="N", help="calibration runs (default from the budget)")
    p.add_argument("--sample", type=positive_float, metavar="SECONDS",
                   help="how long the audit watches the device for other I/O (default 2 with --quick, else 5)")
    p.add_argument("--audit-only", action="store_true", help="skip the calibration runs (no runs-needed figure)")
    add_job_args(p)
    p.set_defaults(func=cmd_check)
