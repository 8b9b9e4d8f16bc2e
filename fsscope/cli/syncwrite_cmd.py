"""``fsscope syncwrite``: the synchronous-write buffer sweep (Mingardi & Vieira), headless."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
from rich.console import Console

from fsscope.cli.common import (
    add_job_args,
    parse_size,
    recipe_for,
    recipe_list,
    recipes_from_args,
    target_from_args,
    write_json,
)
from fsscope.cli.headless import run_each_recipe
from fsscope.cli.render.syncwrite import render_syncwrite, render_tests
from fsscope.cli.spec_options import add_spec_options, spec_from_args
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
from fsscope.records import convert, plain
from fsscope.units import list_items
from fsscope.workloads import syncwrite as sw

if TYPE_CHECKING:
    from fsscope.recipes import Recipe
    from fsscope.targets import TargetSpec
    from fsscope.workloads.syncwrite_records import Choice, Report, SizeTest, Spec

DESCRIPTION = """\
Synchronous-write buffer sweep (Mingardi & Vieira, "Characterizing Synchronous Writes in
Stable Memory Devices"). An application that must make every write durable (a consensus log,
a database WAL) batches its writes into a buffer: how big should it be?

For every buffer size (default 4 KiB..16 MiB, doubling) a NEW file of --bytes-per-point
(default 16 MiB, the paper's) is preallocated (fallocate, untimed, as fio does), written
sequentially with synchronous writes and removed. The paper's iozone wrote a fresh,
unallocated file instead: --no-preallocate does that (the report says which was used).
This is one repetition; there are 30 (the paper's), or 5 with --quick, and each repetition
visits the sizes in a seeded random order so a slow drift of the device does not look like a
trend over sizes. Every write's latency is kept (also when the job is killed).

Modes (--mode):
  osync, odsync        O_SYNC / O_DSYNC at open (iozone -o; fio --sync=1)
  fsync, fdatasync     write() then fsync() / fdatasync()
  direct+osync         O_DIRECT + O_SYNC (iozone -I -o, the paper's setting), aligned buffers
  direct+odsync, direct+fdatasync
A file system that refuses O_DIRECT (ramfs) is refused in one line.

Per buffer size: throughput mean, sd and 95 % CI over the repetitions; per-write latency
mean, sd, 95 % CI (over the repetitions' means), P50, P99; and the ratio throughput/latency
(MB/s per ms of mean write latency), the paper's efficiency curve. Then the three phases:
  1  throughput grows, latency flat       (up to the LATENCY RISE knee)
  2  both grow
  3  throughput saturated, latency grows  (from the THROUGHPUT SATURATION knee)
The latency-rise knee is the last size before mean latency first leaves 25 % of its floor
(the note says if it comes back later); throughput "saturates" at 90 % of its maximum. Each knee comes with how often a bootstrap over the repetitions finds the
same size. The recommendation is the ratio's maximum, or the paper's rules when you give a
goal: --target-throughput (the smallest buffer that reaches it) and/or --max-latency (the
largest buffer within it). --recipes a,b,c sweeps each recipe (one run record each) and
compares every pair at every size with a Welch t-test on the repetitions' throughput; a
difference counts at p < 0.001, the paper's threshold."""

EPILOG = """\
examples:
  fsscope syncwrite --recipe xfs-default --ram --size 1G                  30 repetitions, 4K..16M
  fsscope syncwrite --quick --mode direct+osync --image /var/tmp/s.img    the paper's iozone -o -I, 5 reps
  fsscope syncwrite --quick --recipes ext4-default,xfs-default,btrfs-default --ram --json sw.json
  fsscope syncwrite --quick --target-throughput 200M --max-latency 5ms --recipe ext4-default --ram
  fsscope syncwrite --mode fdatasync --sizes 4K,64K,1M --bytes-per-point 64M --duration 5 --device /dev/sdX
  fsscope syncwrite --dir /srv/scratch --quick --sizes 4K,16K    (no root: the directory's file system)
  fsscope syncwrite --quick --trace --sizes 4K,1M --ram            what reached the device per write

--json PATH writes {"mode", "recipes": {NAME: {"sizes": [...], "knees": {...},
"recommended_bytes", ...}}, "tests": [{"a", "b", "buffer_bytes", "p", "verdict"}, ...]}; with
--trace each recipe also has "kernel_by_size": [{"buffer_bytes", "requests_per_write",
"bytes_per_write", "flush_per_write", "fua_per_write", "commits_per_write", ...}].
Default target: a RAM image with the ext4-default recipe."""


# ---------------------------------------------------------------------------------------------
# argument types: bad input is one line and exit status 2
# ---------------------------------------------------------------------------------------------

def _size(text: str) -> int:
    value = parse_size(text)
    if value > sw.MAX_WRITE_BYTES:
        raise argparse.ArgumentTypeError(f"'{text}' is above 2 GiB - 4 KiB, the most Linux writes in one call")
    return value


def _sizes(text: str) -> tuple[int, ...]:
    parts = list_items(text)
    if not parts:
        raise argparse.ArgumentTypeError("no sizes given (example: 4K,64K,1M)")
    return tuple(_size(p) for p in parts)


def _rate(text: str) -> float:
    """'200M', '200MB/s', '1.5G' → bytes per second in MB/s (powers of ten, as the tables print)."""
    clean = text.strip().removesuffix("/s").removesuffix("B")
    match = re.fullmatch(r"([0-9.]+)\s*([KMGT]?)", clean, re.IGNORECASE)
    if not match:
        raise argparse.ArgumentTypeError(f"'{text}' is not a rate (examples: 200M, 1.5G/s)")
    value = float(match.group(1)) * 1000 ** " KMGT".index(match.group(2).upper() or " ")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be above zero")
    return value


def _duration_ns(text: str) -> float:
    """'5ms', '500us', '0.02s', '2' (ms) → nanoseconds."""
    match = re.fullmatch(r"([0-9.]+)\s*(ns|us|µs|ms|s)?", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"'{text}' is not a latency (examples: 5ms, 500us, 0.02s)")
    scale = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, None: 1e6}[match.group(2)]
    value = float(match.group(1)) * scale
    if not value > 0:
        raise argparse.ArgumentTypeError(f"'{text}' must be above zero")
    return value


# ---------------------------------------------------------------------------------------------
# command
# ---------------------------------------------------------------------------------------------

def _choices(report: Report, args: argparse.Namespace) -> list[Choice]:
    """--target-throughput / --max-latency applied to a finished report."""
    from fsscope.analysis import efficiency
    from fsscope.workloads.syncwrite_records import Choice

    if args.target_throughput is None and args.max_latency is None:
        return []

    def value(x: float | None) -> float:
        return math.nan if x is None else x

    stats = [efficiency.SizeStats(row.buffer_bytes, row.repeats, row.writes, value(row.throughput_mean),
                                  value(row.throughput_sd), value(row.throughput_ci95), value(row.latency_mean_ns),
                                  value(row.latency_sd_ns), value(row.latency_ci95_ns), value(row.latency_p50_ns),
                                  value(row.latency_p99_ns), tuple(map(value, row.throughput_runs)),
                                  tuple(map(value, row.latency_mean_runs_ns)))
             for row in report.sizes]
    analysis = efficiency.analyze(stats, resamples=0)
    choice = efficiency.choose(analysis, args.target_throughput, args.max_latency)
    return [Choice(target_throughput=args.target_throughput, max_latency_ns=args.max_latency,
                   buffer_bytes=choice.buffer_bytes, note=choice.note)]


def _check_mode(mode: str, target: TargetSpec, recipe: Recipe | None) -> None:
    """Refuse a mode the file system will refuse, before anything is formatted or recorded."""
    if not sw.is_direct(mode):
        return
    if target.kind == "dir":
        if not Path(target.path).is_dir():
            raise FsscopeError(f"--dir {target.path}: no such directory")
        problem = sw.refused_mode(target.path, mode)
        if problem:
            raise FsscopeError(problem)
    elif (recipe is not None and recipe.fs == "tmpfs" and Path("/dev/shm").is_dir()
          and sw.refused_mode("/dev/shm", mode)):
        # tmpfs takes O_DIRECT from Linux 6.6 on: ask this kernel's tmpfs (/dev/shm is one)
        raise FsscopeError(f"recipe {recipe.name}: this kernel's tmpfs refuses O_DIRECT (mode {mode}); "
                           "use osync, odsync, fsync or fdatasync")


def _check_array_space(spec: Spec) -> None:
    """Every write's latency is kept (8 bytes each, on disk from the start): refuse a plan whose
    arrays would not fit comfortably in the run directory's file system."""
    import shutil

    from fsscope import paths

    writes = sum(sw.writes_per_point(spec.sweep_spec(), size) for size in spec.buffer_sizes_bytes) * spec.repeats
    need = 8 * writes
    where = paths.runs_dir()
    while not where.exists():
        where = where.parent
    free = shutil.disk_usage(where).free
    if need > free // 2:
        raise FsscopeError(f"--sizes/--bytes-per-point: {writes:,} writes would keep {format_bytes(need)} of "
                           f"latencies in {paths.runs_dir()}, more than half its free {format_bytes(free)}; use larger buffers, a "
                           "smaller --bytes-per-point or fewer repetitions")


def cmd_syncwrite(args: argparse.Namespace) -> int:
    from fsscope.workloads.syncwrite_records import Spec

    spec = spec_from_args(args, Spec, SPEC_OPTIONS, **({"repeats": sw.QUICK_REPEATS} if args.quick else {}))
    _check_array_space(spec)
    target = target_from_args(args, default_kind="ram")
    if args.recipes:
        chosen: list[tuple[str, Recipe | None]] = [*recipes_from_args(args, target)]
    else:
        recipe = recipe_for(args, target)
        chosen = [(recipe.name if recipe is not None else "dir", recipe)]
    for _, recipe in chosen:
        _check_mode(spec.mode, target, recipe)

    def render(report: Report, console: Console) -> Report:
        report = msgspec.structs.replace(report, choices=_choices(report, args))
        render_syncwrite(report, console)
        return report

    reports, status = run_each_recipe("syncwrite", spec, target, chosen, verbose=args.verbose, render=render)
    if chosen[0][1] is None:  # --dir: the file system found there names the report
        reports = {report.fs or name: report for name, report in reports.items()}
    tests: list[SizeTest] = []
    if len(reports) >= 2:
        from fsscope.analysis.efficiency import compare_per_size
        from fsscope.workloads.syncwrite_records import SizeTest

        runs = {name: {row.buffer_bytes: [x for x in row.throughput_runs if x is not None] for row in r.sizes}
                for name, r in reports.items()}
        tests = [convert(t, SizeTest) for t in plain(compare_per_size(runs))]
        out = Console()
        out.rule("[bold]comparison[/]")
        render_tests(tests, out)
    if args.json and reports:
        doc = {"mode": spec.mode, "recipes": reports, "tests": tests}
        write_json(args.json, doc)
    return status


SPEC_OPTIONS = ("mode", "buffer_sizes_bytes", "file_size_bytes", "duration_s", "seed", "preallocate", "trace", "repeats")
"""The sweep's options that are its Spec's fields, as the Spec declares them (bounds, units, help);
--repeats last: it is one of two choices with --quick."""
FLAGS = {"buffer_sizes_bytes": "--sizes", "file_size_bytes": "--bytes-per-point"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    from fsscope.workloads.syncwrite_records import Spec

    p = sub.add_parser("syncwrite", description=DESCRIPTION, epilog=EPILOG)
    add_spec_options(p, Spec, SPEC_OPTIONS[:-1], flags=FLAGS, readers={"buffer_sizes_bytes": ("S1,S2,...", _sizes)})
    reps = p.add_mutually_exclusive_group()
    add_spec_options(reps, Spec, SPEC_OPTIONS[-1:])
    reps.add_argument("--quick", action="store_true", help=f"{sw.QUICK_REPEATS} repetitions instead of 30")
    p.add_argument("--target-throughput", type=_rate, metavar="RATE",
                   help="the throughput you need, e.g. 200M (= 200 MB/s): the smallest buffer that reaches it")
    p.add_argument("--max-latency", type=_duration_ns, metavar="T",
                   help="the most a write may take, e.g. 5ms: the largest buffer within it")
    p.add_argument("--recipes", type=recipe_list, metavar="A,B,...",
                   help="sweep each recipe and compare them per buffer size (Welch t-test, p < 0.001)")
    add_job_args(p)
    p.set_defaults(func=cmd_syncwrite)
