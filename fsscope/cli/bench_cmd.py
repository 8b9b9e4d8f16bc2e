"""``fsscope bench``: throughput personalities and their variation, headless, with rich reports
and JSON (``--ladder`` lives in :mod:`fsscope.cli.ladder_cmd`, ``fsscope syncwrite`` in
:mod:`fsscope.cli.syncwrite_cmd`)."""

from __future__ import annotations

import argparse
import math

from rich.console import Console
from rich.table import Table

from fsscope.analysis.compare import compare_recipe_reports
from fsscope.cli.common import (
    add_job_args,
    dash_value,
    out_console,
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
from fsscope.cli.ladder_cmd import cmd_ladder  # also registers the ladder's report renderer
from fsscope.cli.render import RENDERERS
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes, format_pct
from fsscope.records import build

PERSONALITIES = ("fileserver", "webserver", "varmail")

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
Flags: variation (cumulative relative range above the threshold), warmup, periodic (dips
every P s, compared with the kernel's dirty-page writeback intervals), window_disagrees
(stable in total but not window by window, or the reverse).

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
    try:
        value = float(text.rstrip("%")) / (100.0 if text.endswith("%") else 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a fraction (0.1 or 10%)") from None
    if not 0 <= value <= 10:
        raise argparse.ArgumentTypeError(f"'{text}' is not a fraction (0.1 or 10%)")
    return value


def _size(text: str) -> int:
    value = parse_size(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"'{text}' must be at least one byte")
    return value


# ---------------------------------------------------------------------------------------------
# rendering
# ---------------------------------------------------------------------------------------------

def _us(ns) -> str:
    if ns is None or (isinstance(ns, float) and not math.isfinite(ns)):
        return "-"
    return f"{ns / 1e3:,.1f}" if ns < 1e8 else f"{ns / 1e6:,.0f} ms"


LOOP_NAMES = {"native": "C worker loops", "python": "Python worker loops: the run's notes say why"}


def _generator_cost(run: dict) -> str:
    cost = (run.get("generator") or {}).get("user_us_per_op")
    return "-" if cost is None else f"{cost:.2f}"


def _pct(x) -> str:
    return format_pct(x, "-")


def _bytes(n) -> str:
    return format_bytes(n, "-")


_SPARK = "▁▂▃▄▅▆▇█"


def spark(values, width: int = 48) -> str:
    """A one-line sparkline of a series (bucketed to ``width`` points; None/nan as a space)."""
    vals = [v for v in values]
    if not vals:
        return ""
    if len(vals) > width:
        step = len(vals) / width
        vals = [_mean(vals[int(i * step): max(int((i + 1) * step), int(i * step) + 1)]) for i in range(width)]
    finite = [v for v in vals if v is not None and math.isfinite(v)]
    if not finite:
        return ""
    lo, hi = min(finite), max(finite)
    out = []
    for v in vals:
        if v is None or not math.isfinite(v):
            out.append(" ")
        elif hi == lo:
            out.append(_SPARK[3])
        else:
            out.append(_SPARK[min(7, int((v - lo) / (hi - lo) * 7.999))])
    return "".join(out)


def _mean(values):
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def _variation_style(rr, threshold) -> str:
    if rr is None:
        return "dim"
    return "bold red" if rr > threshold else "green"


def render_bench(report: dict, console: Console) -> None:
    runs = report.get("runs") or []
    spec = report.get("spec") or {}
    work = report.get("workload") or {}
    threshold = spec.get("threshold", 0.10)
    where = report.get("recipe") or report.get("fs") or "?"
    target = (report.get("target") or {}).get("describe", "")
    head = (f"[bold]{report.get('personality')}[/] on [bold]{where}[/] ({target}): "
            f"{report.get('runs_completed', len(runs))} of {report.get('runs_requested', len(runs))} runs × "
            f"{spec.get('duration_s', '?'):g} s")
    if work:
        head += (f", {work.get('workers')} workers, {work.get('nfiles')} files of mean "
                 f"{_bytes(work.get('mean_file_size_bytes'))}")
    console.print(head)

    windows = [f"{w:g}" for w in spec.get("window_sizes_s", [])]
    table = Table(title="runs", title_justify="left")
    for col in ("run", "ops/s", "s", "errors", "device MB/s", "busy", "iowait", "gen µs/op"):
        table.add_column(col, justify="right", no_wrap=True)
    for i, run in enumerate(runs):
        errors = sum((op.get("errors") or 0) for op in (run.get("ops") or {}).values())
        tel = run.get("telemetry") or {}
        mb_s = None
        if tel.get("disk_write_bytes_per_s") is not None:
            mb_s = (tel["disk_write_bytes_per_s"] + (tel.get("disk_read_bytes_per_s") or 0)) / 1e6
        table.add_row(str(i + 1), f"{run.get('ops_per_s') or 0:,.0f}", f"{run.get('elapsed_s') or 0:.1f}",
                      str(errors), "-" if mb_s is None else f"{mb_s:,.1f}", _pct(tel.get("disk_busy_mean")),
                      "-" if tel.get("cpu_iowait_pct_mean") is None else f"{tel['cpu_iowait_pct_mean']:.0f}%",
                      _generator_cost(run))
    console.print(table)
    loops = {run.get("worker_loop") for run in runs if run.get("worker_loop")}
    if loops:
        console.print("gen µs/op: the workers' own user CPU per op, the generator's cost "
                      f"({' and '.join(sorted(LOOP_NAMES.get(loop, loop) for loop in loops))})", highlight=False)

    var = report.get("variation") or {}
    rr, rsd = var.get("relative_range"), var.get("rsd")
    if var.get("runs") == 1:
        console.print(f"cumulative throughput: [bold]{var.get('mean_ops_per_s') or 0:,.0f}[/] ops/s "
                      "(one run: no run-to-run variation to measure)")
    elif var.get("runs"):
        console.print(f"cumulative throughput: mean [bold]{var.get('mean_ops_per_s') or 0:,.0f}[/] ops/s "
                      f"({var.get('min_ops_per_s') or 0:,.0f}..{var.get('max_ops_per_s') or 0:,.0f}); "
                      f"relative range [{_variation_style(rr, threshold)}]{_pct(rr)}[/], RSD {_pct(rsd)} "
                      f"(threshold {threshold:.0%})")
    for key in windows:
        band = (var.get("windows") or {}).get(key) or {}
        mean = band.get("mean", [])
        if not mean:
            console.print(f"Throughput-{key}: no complete {key}-s window in these runs")
            continue
        console.print(f"Throughput-{key}: {len(mean)} windows, "
                      f"{min(band.get('min') or [0]):,.0f}..{max(band.get('max') or [0]):,.0f} ops/s")
        for i, run in enumerate(runs):
            series = [v for v in (run.get("windows") or {}).get(key, []) if v is not None]
            if series:
                console.print(f"    run {i + 1:<3d} [cyan]{spark(series)}[/] {min(series):,.0f}..{max(series):,.0f}",
                              highlight=False)
        rrs = [x for x in band.get("relative_range", []) if x is not None]
        if rrs and len(runs) > 1:
            above = sum(1 for x in rrs if x > threshold)
            worst = max(range(len(band["relative_range"])),
                        key=lambda i: band["relative_range"][i] if band["relative_range"][i] is not None else -1)
            style = _variation_style(max(rrs), threshold)
            console.print(f"    relative range across runs per window: median {_pct(sorted(rrs)[len(rrs) // 2])}, "
                          f"worst {_pct(max(rrs))} at {worst * float(key):g} s; "
                          f"[{style}]{above} of {len(rrs)} windows above {threshold:.0%}[/]", highlight=False)

    if runs:
        ops = list((runs[0].get("ops") or {}).keys())
        latency = report.get("latency") or {}
        optable = Table(title="per op (latency in µs, mean over runs; ranges are min..max across runs; "
                        "B/op: bytes moved per op)", title_justify="left")
        for col in ("op", "ops/s", "mean", "p50", "p99", "K-S", "B/op"):
            optable.add_column(col, justify="right", no_wrap=True)
        for op in ops:
            entries = [r.get("ops", {}).get(op, {}) for r in runs]
            rate = _mean([e.get("ops_per_s") for e in entries])
            mean = _mean([e.get("mean_ns") for e in entries])
            p50 = [e.get("p50_ns") for e in entries if e.get("p50_ns") is not None]
            p99 = [e.get("p99_ns") for e in entries if e.get("p99_ns") is not None]
            per_op = _mean([e.get("mean_bytes") for e in entries])

            def rng(values):
                if not values:
                    return "-"
                lo, hi = min(values), max(values)
                return _us(lo) if len(values) == 1 or lo == hi else f"{_us(lo)}..{_us(hi)}"
            ks = (latency.get(op) or {}).get("ks_range")
            optable.add_row(op, "-" if rate is None else f"{rate:,.0f}", _us(mean), rng(p50), rng(p99),
                            "-" if ks is None else f"{ks:.2f}", "-" if not per_op else _bytes(per_op))
        console.print(optable)

    flags = report.get("flags") or []
    if not flags and runs:
        console.print("[green]no variation flags[/]: runs agree within the threshold, no warm-up or periodic "
                      "pattern found")
    for flag in flags:
        console.print(f"[bold yellow]▲[/] [bold]{flag.get('title') or flag.get('kind')}[/]")
        console.print(f"    {flag.get('note', '')}", highlight=False)
    for r, run in enumerate(runs):
        kw = run.get("kernel_windows")
        if kw:
            console.print(f"[bold]kernel, run {r + 1}[/] (per {kw['window_s']:g}-s window): journal commits "
                          f"{sum(kw['journal_commits'])}, writeback starts {sum(kw['writeback_starts'])}, "
                          f"{sum(kw['bytes_written']) / 2**20:.1f} MiB written", highlight=False)
        for dip in run.get("dips") or []:
            console.print(f"[bold yellow]▼[/] run {r + 1} dip {dip['note']}", highlight=False)
    placement = report.get("placement")
    if placement:
        unit = next((r["placement"] for r in runs if (r.get("placement") or {}).get("available")), {})
        where = ", ".join(f"{x / 2**20:,.0f}" for x in placement["first_byte_median"])
        r = placement.get("pcc")
        console.print(f"dataset placement (Fig. 4): median first byte per run {where} MiB "
                      f"({unit.get('unit', '')} of {_bytes(unit.get('unit_bytes'))}; "
                      f"{'the same' if placement['same_groups_every_run'] else 'different'} groups in every run)"
                      + ("" if r is None else f"; r with throughput = {r:.2f}"), highlight=False)
    tel = report.get("telemetry") or {}
    notes = list(report.get("notes") or [])
    if tel.get("taskstats_available") is False:
        notes.append("taskstats (per-worker block-I/O and CPU delay) unavailable here")
    notes += [*(tel.get("notes") or []), *([tel["delayacct"]] if tel.get("delayacct") else [])]
    for note in dict.fromkeys(notes):
        console.print(f"[dim]note: {note}[/]", highlight=False)


def render_comparison(comparison: dict, console: Console) -> None:
    table = Table(title=f"recipes compared ({comparison.get('personality')}, cumulative throughput)",
                  title_justify="left")
    for col in ("recipe", "runs", "mean ops/s", "min..max", "rel. range", "RSD"):
        table.add_column(col, justify="right", no_wrap=True)
    for entry in comparison.get("recipes", []):
        runs = entry.get("ops_per_s_runs") or []
        table.add_row(entry["recipe"], str(len(runs)), "-" if entry.get("mean_ops_per_s") is None else
                      f"{entry['mean_ops_per_s']:,.0f}",
                      f"{min(runs):,.0f}..{max(runs):,.0f}" if runs else "-",
                      _pct(entry.get("relative_range")), _pct(entry.get("rsd")))
    console.print(table)
    pairs = Table(title=f"Welch t-test per pair (a winner only when p < {comparison.get('alpha', 0.05):g})",
                  title_justify="left")
    for col in ("a vs b", "a / b", "t", "p", "verdict"):
        pairs.add_column(col, justify="right", no_wrap=True)
    for pair in comparison.get("pairs", []):
        ratio = (pair["mean_a"] / pair["mean_b"]) if pair.get("mean_a") and pair.get("mean_b") else None
        pairs.add_row(f"{pair['a']} vs {pair['b']}", "-" if ratio is None else f"{ratio:.2f}",
                      "-" if pair.get("t") is None else f"{pair['t']:.2f}",
                      "-" if pair.get("p") is None else f"{pair['p']:.3g}",
                      f"[bold green]{pair['winner']} wins[/]" if pair.get("winner") else "[dim]not significant[/]")
    console.print(pairs)
    for pair in comparison.get("pairs", []):
        flag = pair.get("window_flag")
        if flag:
            console.print(f"[bold yellow]▲[/] {flag['note']}", highlight=False)
    best = comparison.get("best")
    if best:
        console.print(f"[bold green]{best}[/] is significantly faster than every other recipe here")
    else:
        console.print("no recipe is significantly faster than all the others at these run counts "
                      "(more runs narrow the test)")
    for entry in comparison.get("recipes", []):
        console.print(f"[dim]{entry['recipe']}: run {entry.get('run_id') or '-'}[/]", highlight=False)


RENDERERS["bench"] = render_bench


# ---------------------------------------------------------------------------------------------
# commands
# ---------------------------------------------------------------------------------------------

def _bench_spec(args):
    from fsscope.workloads.bench_job import Spec

    auto = args.duration == "auto"
    return build(Spec, personality=args.personality, runs=args.runs, duration_s=args.duration_max if auto else args.duration,
                duration_auto=auto, workers=args.workers,
                nfiles=args.files, mean_file_size_bytes=args.mean_file_size, mem_limit_bytes=args.mem_limit,
                window_sizes_s=tuple(dict.fromkeys(args.window or [])), threshold=args.threshold,
                seed=args.seed, fresh_fs=not args.same_fs, trace=args.trace == "on")


def cmd_bench(args) -> int:
    from fsscope.cli.check_cmd import point_at_check
    from fsscope.workloads import bench_job

    if args.ladder:
        return cmd_ladder(args)
    spec = _bench_spec(args)
    target = target_from_args(args, default_kind="ram")
    # the workload's own checks, before anything is formatted
    bench_job.personality_spec(spec, target.size_bytes)

    if not args.recipes:
        recipe = recipe_from_args(args, default=None if target.kind == "dir" else "ext4-default")
        point_at_check()
        return run_job("bench", spec, target, recipe, json_path=args.json, verbose=args.verbose,
                       render=render_bench)

    if args.recipe:
        raise FsscopeError("--recipe and --recipes: name one recipe, or several to compare, not both")
    if target.kind == "dir":
        raise FsscopeError("--recipes needs a target fsscope formats (--ram, --image or --device), not --dir")
    chosen = []
    for name in args.recipes:  # every recipe loads (and gets the extra options) before any run
        args.recipe = name
        chosen.append((name, recipe_from_args(args)))
    args.recipe = None
    point_at_check()
    reports: dict[str, dict] = {}
    status = 0
    for name, recipe in chosen:
        err_console.rule(f"[bold]{name}[/]")
        captured: list[dict] = []

        def render(report, console, captured=captured):
            captured.append(report)
            render_bench(report, console)

        status = run_job("bench", spec, target, recipe, verbose=args.verbose, render=render)
        if captured:
            reports[name] = captured[-1]
        if status != 0:
            break
    out = out_console()
    comparison = None
    if len(reports) >= 2:
        comparison = compare_recipe_reports(reports)
        out.rule("[bold]comparison[/]")
        render_comparison(comparison, out)
    elif status == 0:
        out.print("fewer than two recipes finished: no comparison")
    if args.json:
        doc = {"personality": spec.personality, "recipes": list(reports), "reports": reports,
               "comparison": comparison}
        write_json(args.json, doc)
        err_console.print(f"[dim]wrote {args.json}[/]")
    return status


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="throughput personalities (fileserver/webserver/varmail), run-to-run variation",
                       description=BENCH_DESCRIPTION, epilog=BENCH_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--personality", choices=PERSONALITIES, default="fileserver",
                   help="the workload (default fileserver)")
    p.add_argument("--runs", type=positive_int, default=3, metavar="R",
                   help="runs, each on a freshly formatted file system (default 3; the paper used 10+)")
    p.add_argument("--duration", type=_duration, default=30.0, metavar="S|auto",
                   help="measured seconds per run (default 30); auto: a calibration run first, until the "
                        "cumulative throughput settles (±2%% over 5 s; capped by --duration-max)")
    p.add_argument("--duration-max", type=positive_float, default=600.0, metavar="S",
                   help="with --duration auto: the longest run it may choose (default 600)")
    p.add_argument("--workers", type=positive_int, metavar="N",
                   help="workers (default min(Filebench's threads, 4 per CPU)); threads over one process per CPU, "
                        "like Filebench's threads (a process each where the C loops cannot be built)")
    p.add_argument("--files", type=positive_int, metavar="N",
                   help="files in the file set (default Filebench's, scaled to a quarter of the target)")
    dash_value(p.add_argument("--mean-file-size", type=_size, metavar="SIZE",
                              help="mean file size, gamma-distributed (default 128K fileserver, 16K others)"))
    dash_value(p.add_argument("--mem-limit", type=_size, metavar="SIZE",
                              help="memory cgroup limit for the workers (page cache included), e.g. 512M"))
    p.add_argument("--window", type=_window, action="append", metavar="N",
                   help="Throughput-N window in seconds; repeat for several (default 10, or the run length if shorter); no longer than --duration")
    p.add_argument("--threshold", type=_fraction, default=0.10, metavar="F",
                   help="relative range above which runs count as unstable (default 0.1 = 10%%)")
    p.add_argument("--recipes", type=recipe_list, metavar="A,B,...",
                   help="compare recipes: one job per recipe in sequence, then Welch t-tests")
    p.add_argument("--seed", type=int, default=1, help="seed of file sizes and op choices (default 1)")
    p.add_argument("--same-fs", action="store_true",
                   help="one file system for all runs (repopulated per run) instead of mkfs per run")
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
