"""``fsscope probe``: the per-syscall latency probe, headless, with a summary and explained flags."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from fsscope.cli.common import add_job_args, recipe_from_args, target_from_args
from fsscope.cli.headless import run_job
from fsscope.cli.render import RENDERERS
from fsscope.errors import FsscopeError
from fsscope.explain.names import plain as plain_words
from fsscope.records import build
from fsscope.workloads.probe import DEFAULT_RUN_CAP_FACTOR, OPS, SYNC_SCOPES, TRACE_MODES, ProbeSpec

DESCRIPTION = """\
Time one syscall per file: on a freshly made file system, do OP on files 0..N-1 in one new
directory (names are zero-padded decimals), each call right after a sync of that file system
(syncfs; --sync global: the machine-wide sync() of the papers), and time every call.
With --in-root the files go into the file system's root directory instead, as in the papers.
The structural indices depend on where the files are: a new XFS directory gets an attribute
fork (12 seven-character names fit in its inode, 22 in the root's) and takes an inode itself
(chunk series from 60, not 61); ext4's root holds lost+found (htree from 252, not 253).
Repeat R times on fresh file systems, and more (up to --max-runs) until every candidate file
— where the geometry predicts a change, or a repeatable outlier — is decided slow or typical.
Calls that were slow only because another task had the CPU (the kernel's run delay) do not
vote, so the verdicts hold on a busy machine. Files that are slow in (nearly) every run are
structural — the file system changed a data structure at that point (a directory changed
format, an inode chunk was allocated, a B-tree leaf filled) — and fsscope explains them from
the file system's geometry; files slow in one run only are counted as noise.
(Method: Aota & Kono, quantitative analysis of tail latency in file systems.)

As root, fsscope also asks the kernel (tracefs, its own instance per job) what happened inside
each call: by default one extra traced run after the untraced measured ones, so every flag's
note says which file-system events fired inside that call, how many block requests it issued,
and whether the kernel confirms or contradicts the geometry's prediction."""

EPILOG = """\
examples:
  fsscope probe --recipe xfs-default --ram --size 512M --files 1000 --runs 5
  fsscope probe --recipe xfs-default --ram --size 512M --files 1024 --runs 10 --in-root   (Aota & Kono)
  fsscope probe --recipe ext4-bench --image /var/tmp/p.img --mkfs-opts "-b 1024" --name-length 12
  fsscope probe --recipe btrfs-default --ram --size 512M --files 3000 --json probe.json
  fsscope probe --dir /srv/scratch --op stat --files 5000       (no root: a fresh subdirectory per run)
  fsscope probe --recipe xfs-default --files 600 --runs 3 --trace all   (every run traced)
  fsscope probe --recipe ext4-default --trace off                        (no kernel tracing)"""


MAX_FLAGS_SHOWN = 30


def _us(ns) -> str:
    return "-" if ns is None else f"{ns / 1e3:.1f}"


def render(report: dict, console: Console) -> None:
    stats = report.get("stats") or {}
    table = Table(title=f"{report['op']} × {report['files']} files, {report.get('runs_completed', report['runs'])} "
                  f"of {report['runs']} runs (latency in µs)", title_justify="left")
    for col in ("", "count", "mean", "sd", "min", "p50", "p95", "p99", "max", "rsd"):
        table.add_column(col, justify="right", no_wrap=True)

    def row(label, s):
        if not s or not s.get("count"):
            return
        table.add_row(label, str(s["count"]), *(_us(s.get(k)) for k in ("mean_ns", "sd_ns", "min_ns", "p50_ns",
                                                                           "p95_ns", "p99_ns", "max_ns")),
                      f"{s.get('rsd', 0):.2f}")

    for i, s in enumerate(stats.get("per_run", [])):
        row(f"run {i + 1}", s)
    row("all", stats.get("overall"))
    low_high = stats.get("low_high") or {}
    row("low group", low_high.get("low"))
    row("high group", low_high.get("high"))
    console.print(table)
    flags = report.get("flags") or []
    if not flags:
        console.print("no repeatable outliers, series or level shifts")
    if (report.get("settings") or {}).get("single_run"):
        console.print("[yellow]one run cannot tell structure from noise: every slow file is listed; "
                      "use --runs 3 or more[/]")
    explained = [f for f in flags if f.get("structure")]
    shown = explained + [f for f in flags if not f.get("structure")][: max(0, MAX_FLAGS_SHOWN - len(explained))]
    for flag in shown:
        console.print(f"[bold yellow]▲[/] [bold]{flag['title']}[/]")
        if flag.get("predicted_index") is not None:
            console.print(f"    predicted at file {flag['predicted_index']}")
        console.print(f"    {flag['note']}", highlight=False)
    for threshold in [t for t in report.get("thresholds") or [] if t.get("evidence") == "kernel"]:
        console.print(f"[bold cyan]●[/] [bold]file {threshold['index']} — {plain_words(threshold['structure'])}[/] "
                      f"(kernel evidence; latency: {threshold['latency']})", highlight=False)
        console.print(f"    {threshold['note']}", highlight=False)
    if len(flags) > len(shown):
        console.print(f"[dim]… and {len(flags) - len(shown)} more unexplained flags (all in --json and 'fsscope report')[/]")
    if report.get("noise_count"):
        console.print(f"[dim]{report['noise_count']} files were slow in too few runs to be structural (noise)[/]")
    render_kernel(report, console)
    render_decisions(report, console)
    if report.get("stopped_by"):
        console.print(f"[red]stopped early:[/] {report['stopped_by']}")


def render_decisions(report: dict, console: Console) -> None:
    """How many runs the probe needed and why; calls the machine disturbed; the sync used."""
    decisions = report.get("decisions") or {}
    if decisions.get("why"):
        undecided = [c["index"] for c in decisions.get("candidates", []) if c["verdict"] == "undecided"]
        console.print(f"[dim]runs: {decisions['why']}"
                      + (f"; undecided: files {_indices(undecided)}" if undecided else "") + "[/]", highlight=False)
    disturbed = (report.get("settings") or {}).get("disturbed_calls_per_run")
    if disturbed and sum(disturbed):
        count = sum(disturbed)
        console.print(f"[dim]{count} call{' was' if count == 1 else 's were'} slow only because another task had the CPU "
                      f"(per run: {', '.join(map(str, disturbed))}); they did not vote[/]", highlight=False)
    if report.get("sync"):
        console.print(f"[dim]sync: {report['sync']['note']}[/]", highlight=False)


def _indices(values: list[int], limit: int = 6) -> str:
    if not values:
        return "-"
    text = ", ".join(str(v) for v in values[:limit])
    return text + (f", … ({len(values)})" if len(values) > limit else "")


def render_kernel(report: dict, console: Console) -> None:
    """The kernel's side: per structure predicted / seen / slow, and one-off noise causes."""
    trace = report.get("trace") or {}
    if not trace.get("active"):
        if trace.get("reason") and trace.get("mode") != "off":
            console.print(f"[dim]kernel tracing off: {trace['reason']}[/]", highlight=False)
        return
    runs = trace.get("runs_traced") or []
    table = Table(title=f"structures: geometry vs kernel ({len(runs)} traced run{'s' if len(runs) != 1 else ''}) "
                        f"vs latency", title_justify="left")
    for col in ("structure", "predicted at", "kernel saw it at", "slow at", "verdict"):
        table.add_column(col, overflow="fold")
    for row in report.get("structures") or []:
        verdict = row["verdict"]
        style = "green" if verdict.startswith("confirmed") and "contradicts" not in verdict else (
            "red" if verdict.startswith("contradicted") or "contradicts" in verdict else "dim")
        if row.get("window"):
            style = "yellow"
        predicted = (f"range {row['window'][0]}–{row['window'][1]}" if row.get("window")
                     else _indices(row["predicted"]))
        table.add_row(row["structure"], predicted, _indices(row["seen"]),
                      _indices(row["slow"]), f"[{style}]{verdict}[/]")
    console.print(table)
    kernel_marked = {i for t in report.get("thresholds") or [] if t.get("evidence") == "kernel"
                     for i in t.get("indices") or [t["index"]]}  # already shown as thresholds
    quiet = [e for e in report.get("structural_events") or []
             if not e["latency_outlier"] and e["event"].startswith(("xfs_dir2_", "ext4_allocate"))
             and e["event"] != "xfs_dir2_grow_inode" and e["index"] not in kernel_marked]
    for event in quiet[:10]:
        console.print(f"[cyan]●[/] {event['event']} at file {event['index']} in {event['runs']}/{len(runs)} "
                      f"traced runs, not a latency outlier", highlight=False)
    for item in (report.get("noise") or [])[:5]:
        console.print(f"[dim]one-off: run {item['run'] + 1} file {item['index']} {item['latency_ns'] / 1e3:.0f} µs: "
                      f"{item['cause']}[/]", highlight=False)
    if trace.get("median_ratio_vs_untraced") is not None:
        console.print(f"[dim]the traced run's median call took {trace['median_ratio_vs_untraced']:.2f}× the "
                      f"untraced runs' (observer effect; the flags come from the untraced runs)[/]", highlight=False)
    if not trace.get("complete", True):
        console.print(f"[red]trace incomplete:[/] {trace.get('overrun', 0)} overrun, {trace.get('dropped', 0)} dropped")


RENDERERS["probe"] = render


def cmd_probe(args) -> int:
    target = target_from_args(args, default_kind="ram")
    if args.in_root and target.kind == "dir":
        raise FsscopeError(f"--in-root: {target.path} is a directory fsscope did not make; the files can "
                           f"go into the root of a file system fsscope makes (--ram, --image, --device)")
    spec = build(ProbeSpec, op=args.op, files=args.files, runs=args.runs, name_length=args.name_length,
                     sync_before=args.sync_before, fresh_fs=not args.same_fs, cpu=args.cpu,
                     trace=args.trace, sync_scope=args.sync, max_runs=args.max_runs, in_root=args.in_root)
    recipe = recipe_from_args(args, default=None if target.kind == "dir" else "ext4-default")
    return run_job("probe", spec, target, recipe, json_path=args.json, verbose=args.verbose, render=render)


def add_parser(sub) -> None:
    p = sub.add_parser("probe", help="per-syscall latency probe: repeatable outlier files, explained",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", choices=OPS, default="creat", help="the timed syscall (default creat)")
    p.add_argument("--files", type=int, default=1024, metavar="N", help="files per run (default 1024)")
    p.add_argument("--runs", type=int, default=5, metavar="R", help="runs, each on a fresh file system (default 5)")
    p.add_argument("--name-length", type=int, default=7, metavar="L", help="digits per file name (default 7)")
    p.add_argument("--sync-before", choices=("each", "none"), default="each", help="sync before each call (default each)")
    p.add_argument("--sync", choices=SYNC_SCOPES, default="fs",
                   help="what that sync writes back: 'fs' (default) the measured file system (syncfs), "
                        "'global' every file system (sync(), the papers' method: on a busy machine it "
                        "waits on all their writeback)")
    p.add_argument("--max-runs", type=int, metavar="R", default=None,
                   help="add runs after the first --runs until every candidate file is decided slow or "
                        f"typical, up to R runs (default {DEFAULT_RUN_CAP_FACTOR}× --runs, none after --runs 1; "
                        "equal to --runs: no extra runs)")
    p.add_argument("--same-fs", action="store_true", help="one file system for all runs (a fresh directory per run) instead of mkfs per run")
    p.add_argument("--in-root", action="store_true",
                   help="files in the root directory of the file system fsscope made (the papers' "
                        "setup) instead of a fresh subdirectory; the structural indices depend on it")
    p.add_argument("--cpu", type=int, metavar="CPU", help="CPU to pin the probe to (default: the last one)")
    p.add_argument("--trace", choices=TRACE_MODES, default="attribute",
                   help="kernel-event attribution through tracefs (root): 'attribute' (default) adds one "
                        "traced run after the untraced measured ones and backs every flag with the kernel "
                        "events inside that call; 'all' traces every run; 'off' none")
    add_job_args(p)
    p.set_defaults(func=cmd_probe)
