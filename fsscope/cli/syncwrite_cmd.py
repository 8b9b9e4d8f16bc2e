"""``fsscope syncwrite``: the synchronous-write buffer sweep (Mingardi & Vieira), headless."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fsscope.cli.common import (
    add_job_args,
    parse_size,
    positive_float,
    positive_int,
    recipe_from_args,
    recipe_list,
    target_from_args,
    write_json,
)
from fsscope.cli.headless import console as err_console
from fsscope.cli.headless import run_job
from fsscope.cli.render import RENDERERS
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
from fsscope.records import build, plain
from fsscope.workloads import syncwrite as sw

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
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' must be at least one byte")
    if value > sw.MAX_WRITE_BYTES:
        raise argparse.ArgumentTypeError(f"'{text}' is above 2 GiB - 4 KiB, the most Linux writes in one call")
    return value


def _sizes(text: str) -> tuple[int, ...]:
    parts = [p for p in text.replace(",", " ").split() if p]
    if not parts:
        raise argparse.ArgumentTypeError("no sizes given (example: 4K,64K,1M)")
    return tuple(_size(p) for p in parts)


def _file_size(text: str) -> int:
    value = parse_size(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' must be at least one byte")
    return value


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
# rendering
# ---------------------------------------------------------------------------------------------

def _size_label(n) -> str:
    return format_bytes(n, missing="-")


def _ms(ns) -> str:
    if ns is None or (isinstance(ns, float) and not math.isfinite(ns)):
        return "-"
    return f"{ns / 1e6:,.3f}" if ns < 1e9 else f"{ns / 1e6:,.0f}"


def _mb(bps) -> str:
    return "-" if bps is None else f"{bps / 1e6:,.1f}"


def _phase_of(report: dict, size: int) -> str:
    for phase, sizes in (report.get("phases") or {}).items():
        if size in sizes:
            return phase
    return "-"


def render_syncwrite(report: dict, console: Console) -> None:
    where = report.get("recipe") or report.get("fs") or "?"
    target = (report.get("target") or {}).get("describe", "")
    knees = report.get("knees") or {}
    rise, sat = knees.get("latency_rise_bytes"), knees.get("throughput_saturation_bytes")
    best = report.get("recommended_bytes")
    reps = (report.get("spec") or {}).get("repeats")
    title = (f"synchronous writes ({report.get('mode')}) on {where} ({target}): "
             f"{report.get('points_completed', 0)} of {report.get('points_requested', 0)} points"
             + (f", {reps} repetitions" if reps else ""))
    table = Table(title=title, title_justify="left")
    for col in ("buffer", "n", "MB/s ±95%", "ms/write ±95%", "p50 ms", "p99 ms", "MB/s per ms", "phase", ""):
        table.add_column(col, justify="right", no_wrap=True)
    for row in report.get("sizes") or []:
        size = row["buffer_bytes"]
        marks = [mark for mark, at in (("[bold green]◀ best[/]", best), ("[yellow]rise after[/]", rise),
                                       ("[cyan]saturated[/]", sat)) if size == at]
        ratio = row.get("ratio")
        table.add_row(_size_label(size), str(row.get("repeats", "")),
                      f"{_mb(row.get('throughput_mean'))} ±{_mb(row.get('throughput_ci95'))}",
                      f"{_ms(row.get('latency_mean_ns'))} ±{_ms(row.get('latency_ci95_ns'))}",
                      _ms(row.get("latency_p50_ns")), _ms(row.get("latency_p99_ns")),
                      "-" if ratio is None else f"{ratio / 1e9:,.3g}", _phase_of(report, size), " ".join(marks))
    console.print(table)
    for key in ("latency_rise", "throughput_saturation"):
        note = (knees.get(key) or {}).get("note")
        if note:
            console.print(f"{key.replace('_', ' ')}: {note}", highlight=False)
    if report.get("recommendation"):
        console.print(f"[bold]{report['recommendation']}[/]", highlight=False)
    for choice in report.get("choices") or []:
        style = "bold green" if choice.get("buffer_bytes") else "bold red"
        console.print(f"[{style}]{choice['note']}[/]", highlight=False)
    render_kernel(report, console)
    for flag in report.get("flags") or []:
        console.print(f"[bold yellow]▲[/] [bold]{flag.get('title')}[/]: {flag.get('note')}", highlight=False)
    for note in report.get("notes") or []:
        console.print(f"[dim]note: {note}[/]", highlight=False)


def render_kernel(report: dict, console: Console) -> None:
    """--trace: per buffer size, what reached the device per synchronous write."""
    rows = report.get("kernel_by_size")
    trace = report.get("trace") or {}
    if not rows:
        if trace.get("reason") and trace["reason"] != "tracing off":
            console.print(f"[dim]kernel tracing off: {trace['reason']}[/]", highlight=False)
        return
    table = Table(title="per synchronous write, what reached the device (kernel trace)", title_justify="left")
    for col in ("buffer", "writes", "requests", "KiB", "device B / B", "FLUSH", "FUA", "journal commits"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in rows:
        amp = row.get("device_bytes_per_byte")
        table.add_row(_size_label(row["buffer_bytes"]), f"{row['writes']:,}", f"{row['requests_per_write']:.2f}",
                      f"{row['bytes_per_write'] / 1024:,.1f}", "-" if amp is None else f"{amp:.2f}",
                      f"{row['flush_per_write']:.2f}", f"{row['fua_per_write']:.2f}", f"{row['commits_per_write']:.2f}")
    console.print(table)
    if not trace.get("complete", True):
        console.print("[yellow]the trace lost events: the counts are lower bounds[/]", highlight=False)


def render_tests(tests: list[dict], console: Console) -> None:
    table = Table(title="recipes compared per buffer size: Welch t-test on throughput (a difference counts at "
                  "p < 0.001)", title_justify="left")
    for col in ("buffer", "a vs b", "MB/s a", "MB/s b", "b / a", "p", "verdict"):
        table.add_column(col, justify="right", no_wrap=True)
    for t in tests:
        ratio = t["mean_b"] / t["mean_a"] if t.get("mean_a") and t.get("mean_b") else None
        p = t.get("p")
        verdict = t["verdict"]
        table.add_row(_size_label(t["buffer_bytes"]), f"{t['a']} vs {t['b']}", _mb(t.get("mean_a")),
                      _mb(t.get("mean_b")), "-" if ratio is None else f"{ratio:.2f}",
                      "-" if p is None else f"{p:.2g}",
                      f"[bold green]{verdict}[/]" if "faster" in verdict else f"[dim]{verdict}[/]")
    console.print(table)


RENDERERS["syncwrite"] = render_syncwrite


# ---------------------------------------------------------------------------------------------
# command
# ---------------------------------------------------------------------------------------------

def _choices(report: dict, args) -> list[dict]:
    """--target-throughput / --max-latency applied to a finished report."""
    from fsscope.analysis import efficiency

    if args.target_throughput is None and args.max_latency is None:
        return []
    stats = [efficiency.SizeStats(**{k: (math.nan if v is None else v) for k, v in row.items()
                                     if k in efficiency.SizeStats.__dataclass_fields__})
             for row in report.get("sizes") or []]
    analysis = efficiency.analyze(stats, resamples=0)
    choice = efficiency.choose(analysis, args.target_throughput, args.max_latency)
    return [{"target_throughput": args.target_throughput, "max_latency_ns": args.max_latency,
             "buffer_bytes": choice.buffer_bytes, "note": choice.note}]


def _check_mode(args, target, recipe) -> None:
    """Refuse a mode the file system will refuse, before anything is formatted or recorded."""
    if not sw.is_direct(args.mode):
        return
    if target.kind == "dir":
        if not Path(target.path).is_dir():
            raise FsscopeError(f"--dir {target.path}: no such directory")
        problem = sw.refused_mode(target.path, args.mode)
        if problem:
            raise FsscopeError(problem)
    elif (recipe is not None and recipe.fs == "tmpfs" and Path("/dev/shm").is_dir()
          and sw.refused_mode("/dev/shm", args.mode)):
        # tmpfs takes O_DIRECT from Linux 6.6 on: ask this kernel's tmpfs (/dev/shm is one)
        raise FsscopeError(f"recipe {recipe.name}: this kernel's tmpfs refuses O_DIRECT (mode {args.mode}); "
                           "use osync, odsync, fsync or fdatasync")


def _check_array_space(spec) -> None:
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


def cmd_syncwrite(args) -> int:
    from fsscope.workloads.syncwrite_job import Spec

    kw = {}
    if args.sizes:
        kw["buffer_sizes_bytes"] = args.sizes
    if args.bytes_per_point:
        kw["file_size_bytes"] = args.bytes_per_point
    repeats = args.repeats or (sw.QUICK_REPEATS if args.quick else sw.DEFAULT_REPEATS)
    spec = build(Spec, mode=args.mode, repeats=repeats, duration_s=args.duration, seed=args.seed,
                preallocate=not args.no_preallocate, trace=args.trace, **kw)
    _check_array_space(spec)
    target = target_from_args(args, default_kind="ram")
    if args.recipes:
        if args.recipe:
            raise FsscopeError("--recipe and --recipes: name one recipe, or several to compare, not both")
        if target.kind == "dir":
            raise FsscopeError("--recipes needs a target fsscope formats (--ram, --image or --device), not --dir")
        chosen = []
        for name in args.recipes:  # every recipe loads before any run
            args.recipe = name
            chosen.append((name, recipe_from_args(args)))
    else:
        recipe = recipe_from_args(args, default=None if target.kind == "dir" else "ext4-default")
        chosen = [(recipe.name if recipe is not None else "dir", recipe)]
    for _, recipe in chosen:
        _check_mode(args, target, recipe)

    reports: dict[str, dict] = {}
    status = 0
    for name, recipe in chosen:
        if len(chosen) > 1:
            err_console.rule(f"[bold]{name}[/]")
        captured: list[dict] = []

        def render(report, console, captured=captured):
            report["choices"] = _choices(report, args)
            captured.append(report)
            render_syncwrite(report, console)

        status = run_job("syncwrite", spec, target, recipe, verbose=args.verbose, render=render)
        if captured:
            key = name if recipe is not None else (captured[-1].get("fs") or name)
            reports[key] = captured[-1]
        if status != 0:
            break
    tests: list[dict] = []
    if len(reports) >= 2:
        from fsscope.analysis.efficiency import compare_per_size

        runs = {name: {row["buffer_bytes"]: row.get("throughput_runs") or [] for row in r.get("sizes") or []}
                for name, r in reports.items()}
        tests = plain(compare_per_size(runs))
        out = Console()
        out.rule("[bold]comparison[/]")
        render_tests(tests, out)
    if args.json and reports:
        doc = {"mode": spec.mode, "recipes": reports, "tests": tests}
        write_json(args.json, doc)
        err_console.print(f"[dim]wrote {args.json}[/]")
    return status


def add_parser(sub) -> None:
    p = sub.add_parser("syncwrite", help="synchronous-write buffer sweep: throughput, latency, knees, best buffer",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=sw.MODES, default="osync",
                   help="how each write is made durable (default osync = O_SYNC)")
    p.add_argument("--sizes", type=_sizes, metavar="S1,S2,...", help="buffer sizes (default 4K..16M, doubling)")
    p.add_argument("--bytes-per-point", type=_file_size, metavar="SIZE",
                   help="size of the new file each point writes (default 16M, the paper's)")
    p.add_argument("--duration", type=positive_float, metavar="S",
                   help="also stop each point after S seconds (for slow devices and small buffers)")
    reps = p.add_mutually_exclusive_group()
    reps.add_argument("--repeats", type=positive_int, metavar="N",
                      help=f"repetitions, each a new file per size (default {sw.DEFAULT_REPEATS}, the paper's)")
    reps.add_argument("--quick", action="store_true", help=f"{sw.QUICK_REPEATS} repetitions instead of 30")
    p.add_argument("--seed", type=int, default=1, help="seed of each repetition's size order (default 1)")
    p.add_argument("--no-preallocate", action="store_true",
                   help="the paper's way: append to a fresh, unallocated file (as its iozone did) instead of "
                   "fallocating it first (as fio does by default, and logs such as etcd's WAL)")
    p.add_argument("--trace", action="store_true",
                   help="trace the kernel (root): per write, the block requests, bytes, cache flushes and "
                   "journal commits that reached the device inside it (off by default: tracing shifts µs latencies)")
    p.add_argument("--target-throughput", type=_rate, metavar="RATE",
                   help="the throughput you need, e.g. 200M (= 200 MB/s): the smallest buffer that reaches it")
    p.add_argument("--max-latency", type=_duration_ns, metavar="T",
                   help="the most a write may take, e.g. 5ms: the largest buffer within it")
    p.add_argument("--recipes", type=recipe_list, metavar="A,B,...",
                   help="sweep each recipe and compare them per buffer size (Welch t-test, p < 0.001)")
    add_job_args(p)
    p.set_defaults(func=cmd_syncwrite)
