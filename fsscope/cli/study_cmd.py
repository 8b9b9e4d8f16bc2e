"""``fsscope study variation``: the configuration-space variation study (Cao et al., FAST'17)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fsscope.cli.common import output_path, parse_size, positive_float, positive_int
from fsscope.cli.explore_cmd import resolve_study_run
from fsscope.cli.headless import console as err_console
from fsscope.cli.headless import run_job
from fsscope.cli.render import RENDERERS
from fsscope.format import format_bytes, format_pct
from fsscope.records import build
from fsscope.targets import TargetSpec

DESCRIPTION = """\
How much does throughput vary from run to run across storage-stack configurations, under which
workloads, and which knob levels go with large variation? (Cao et al., "On the Performance
Variation in Modern Storage Stacks", FAST'17.)

A configuration space (the shipped cao-expert is the paper's Table 2 -- ext4 block and inode
size, journal mode; XFS block and inode size, AG count; btrfs node size, nodatacow/nodatasum;
atime; I/O scheduler; device) is sampled with a seeded, balanced Latin Hypercube. Every configuration
runs on each file system of the space (only its own knobs apply; levels mkfs refuses on this
image are capped, and the report shows what ran) under each personality, R times, each run on
a freshly made file system in a loop image with the hygiene steps (inode tables written at mkfs,
hash seed nulled, populate, unmount + mount, drop caches). The device knob says where that
image lives: ram (the RAM directory, default /dev/shm) or disk (this machine's disk:
$FSSCOPE_DISK_DIR, default /var/tmp); the paper compared HDDs and an SSD.

Per configuration x personality: mean ops/s, the relative range ((max - min) / mean) of the
runs' throughput, the K-S range of per-op latency distributions (largest over ops). Across
configurations: the CDF of the Throughput-N relative range per window size (Fig. 6), the PCC
of latency range vs throughput range with its p-value (Fig. 9), and the configurations above
--threshold with the knob levels they share. Treatments (configuration x personality) run in
worker processes here (--workers) or on a Dask cluster (--scheduler); --resume continues."""

STUDY_DESCRIPTION = """\
Studies that sample a space of settings with a Latin Hypercube and run every sampled point as
treatments on the plan/treatment engine (local worker processes or a Dask cluster, resumable,
one row per treatment in RUN/treatments.ndjson). Layout exploration is 'fsscope explore'.

  variation   run-to-run throughput variation across storage-stack configurations (Cao et
              al., FAST'17): see 'fsscope study variation --help'."""

EPILOG = """\
examples:
  fsscope study variation                                    cao-small: 12 configurations, ext4 + XFS
  fsscope study variation --configurations 2 --runs 2 --duration 2 --json v.json
  fsscope study variation --space cao-expert --configurations 40 --scheduler tcp://10.0.0.5:8786
  fsscope study variation --factor ext4_journal=journal --file-systems ext4 --personalities varmail
  fsscope study variation --factor device=ram,disk           RAM-backed vs disk-backed images
  fsscope study variation --resume latest
  fsscope study variation --paper --dry-run                  the paper's scale: what it would cost
  fsscope study variation --paper --mem-limit 1G --configurations 4 --personalities varmail

the rows: RUN/treatments.ndjson (per-run ops per 1-s bin and per-op latency histograms; the
report is recomputed from them). Remote Dask workers must run as root, with fsscope installed
and DASK_DISTRIBUTED__WORKER__DAEMON=False (a treatment starts worker processes)."""


def render(report: dict, console: Console) -> None:
    console.print(f"[bold]{report['completed']} of {report['planned']} treatments[/] "
                  f"(space {report['space']}, seed {report['seed']}, {report['settings'].get('runs')} runs of "
                  f"{report['settings'].get('duration_s')} s each)"
                  + (f", {report['configurations_per_hour']:.0f} per hour" if report.get("configurations_per_hour") else ""))
    table = Table(title="configurations (relative range of the runs' throughput; K-S range of latency)",
                  title_justify="left")
    for col in ("id", "knobs", "mean ops/s", "rel. range", "K-S range"):
        table.add_column(col, justify="right" if col not in ("id", "knobs") else "left")
    threshold = report.get("threshold", 0.1)
    for c in report["configurations"]:
        rr = c["relative_range"]
        style = "bold red" if rr is not None and rr > threshold else ""
        knobs = " ".join(f"{k.split('_', 1)[-1] if k.startswith(c['fs']) else k}={v}" for k, v in c["knobs"].items())
        table.add_row(c["id"], knobs, f"{c['mean_ops_per_s']:,.0f}", f"[{style}]{format_pct(rr, '-')}[/]" if style
                      else format_pct(rr, "-"), "-" if c["ks_range"] is None else f"{c['ks_range']:.2f}")
    console.print(table)
    for window, cdf in report.get("relative_range_cdf", {}).items():
        if cdf:
            xs = [x for x, _ in cdf]
            med = next(x for x, f in cdf if f >= 0.5)
            console.print(f"Throughput-{window}: relative range over {len(xs)} windows: median {format_pct(med)}, "
                          f"max {format_pct(xs[-1])}")
    pcc = report.get("pcc") or {}
    if pcc.get("r") is not None:
        console.print(f"latency range vs throughput range: PCC r = {pcc['r']:.2f} (p = {pcc['p']:.2g}, "
                      f"{pcc['configurations']} configurations)")
    console.print(f"{len(report['flagged'])} configuration(s) vary more than {threshold:.0%}")
    for lv in [lv for lv in report.get("flagged_levels", []) if lv["shared"]]:
        console.print(f"  {lv['fs']}: all flagged share {lv['knob']} = {lv['level']} "
                      f"({lv['flagged']} of {lv['configurations']} configurations at that level flagged)")
    share = report.get("time_share") or {}
    if share.get("prepare") is not None:
        console.print(f"[dim]time: {share['prepare']:.0%} preparing (mkfs, populate, remount), "
                      f"{share['measure']:.0%} measuring[/]")
    for failed in report.get("failed", [])[:5]:
        console.print(f"[red]failed[/] {failed['id']}: {failed['error']}")
    if report.get("study_dir"):
        console.print(f"[dim]rows: {Path(report['study_dir']) / 'treatments.ndjson'}[/]")


RENDERERS["variation"] = render


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _duration_text(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:,.0f} s"


def print_cost(cost: dict, settings: dict, console: Console) -> None:
    """What the study will take, before it starts (the measured time is exact; preparation
    -- mkfs, populating, remounting -- comes on top)."""
    mem = cost.get("mem_limit_bytes")
    durations = settings.get("durations_s") or {}
    length = ", ".join(f"{p} {d:g} s" for p, d in durations.items()) or f"{settings.get('duration_s')} s"
    console.print(f"[bold]cost[/]: {cost['configurations']} configurations -> {cost['treatments']} treatments "
                  f"(configuration x file system x personality) x {settings.get('runs')} runs = {cost['runs']:,} runs "
                  f"({length}); measuring alone {_duration_text(cost['measure_s'])} on one host, plus populating "
                  f"{format_bytes(cost['populate_bytes'])} in all; an image of {format_bytes(cost['image_bytes'])} (sparse) per run"
                  + (f"; workers limited to {format_bytes(mem)} of memory" if mem else ""), highlight=False)
    if settings.get("paper"):
        console.print("[dim]--paper: Cao et al.'s scale (10 runs, 800 s / 2,000 s, dataset 2.5x the memory limit, "
                      "Table 2 sampled to ~107 configurations); on loop images in RAM or on this machine's disk "
                      "(device=ram/disk), where the paper used HDDs and an SSD[/]", highlight=False)


def cmd_variation(args) -> int:
    from fsscope.cli.check_cmd import point_at_check
    from fsscope.study import variation
    from fsscope.study.execute import require_root
    from fsscope.study.plan import Plan

    paper = variation.PAPER if args.paper else {}
    spec = build(variation.Spec, space=args.space or paper.get("space", "cao-small"), factors=tuple(args.factor),
                          configurations=args.configurations or paper.get("configurations", 12),
                          seed=args.seed, file_systems=_names(args.file_systems or ""),
                          personalities=_names(args.personalities or ""), runs=args.runs or 0,
                          duration_s=args.duration or 0.0, image_size=args.image_size or "",
                          nfiles=args.files or 0, workers=args.workers, scheduler=args.scheduler or "",
                          resume=resolve_study_run(args.resume, "variation") if args.resume else "", threshold=args.threshold,
                          window_sizes_s=tuple(args.window or ()), mem_limit_bytes=args.mem_limit or 0,
                          paper=args.paper)
    variation.check_spec(spec)
    plan = Plan.load(Path(spec.resume)) if spec.resume else variation.make_plan(spec)
    print_cost(variation.cost(plan), plan.space.settings, err_console)
    if args.dry_run:
        return 0
    require_root("study variation", spec.scheduler)
    point_at_check()  # a timing study on a busy or misconfigured machine: say so first
    target = TargetSpec("dir", os.environ.get("FSSCOPE_RAM_DIR", "/dev/shm"))
    return run_job("variation", spec, target, None, json_path=args.json, verbose=args.verbose, render=render)


def add_parser(sub) -> None:
    p = sub.add_parser("study", help="studies on the plan/treatment engine (variation: Cao et al.)",
                       description=STUDY_DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    studies = p.add_subparsers(dest="study", metavar="STUDY", required=True)
    v = studies.add_parser("variation", help="run-to-run variation across sampled storage-stack configurations",
                           description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("--space", metavar="NAME|PATH",
                   help="configuration space (default cao-small; cao-expert = the paper's Table 2)")
    v.add_argument("--paper", action="store_true",
                   help="the paper's scale: cao-expert, 36 configurations (x3 file systems ~ its 107), 10 runs, "
                        "webserver/fileserver 800 s and varmail 2000 s, a dataset 2.5x --mem-limit (default 4G); "
                        "options given explicitly win. Prints the cost first (weeks: try --dry-run)")
    v.add_argument("--mem-limit", type=parse_size, metavar="SIZE",
                   help="memory cgroup limit for the workers (page cache included), e.g. 4G")
    v.add_argument("--dry-run", action="store_true", help="print the plan's cost and stop")
    v.add_argument("--factor", action="append", default=[], metavar="KNOB=L1,L2", help="replace a knob's levels (repeatable)")
    v.add_argument("--configurations", type=positive_int, metavar="N",
                   help="sampled configurations (default 12; --paper 36)")
    v.add_argument("--seed", type=int, default=1, help="plan and workload seed (default 1)")
    v.add_argument("--file-systems", metavar="FS,FS", help="override the space's file systems (ext4,xfs,btrfs)")
    v.add_argument("--personalities", metavar="P,P", help="override the space's personalities (fileserver,varmail,webserver)")
    v.add_argument("--runs", type=positive_int, metavar="R", help="runs per configuration and personality")
    v.add_argument("--duration", type=positive_float, metavar="S", help="measured seconds per run")
    v.add_argument("--image-size", metavar="SIZE", help="loop image per run (sparse), e.g. 1G")
    v.add_argument("--files", type=positive_int, metavar="N", help="files in each personality's file set")
    v.add_argument("--window", type=positive_int, action="append", metavar="N",
                   help="Throughput-N window for the relative-range CDF (repeatable; default 1,2,5,10 that fit)")
    v.add_argument("--threshold", type=positive_float, default=0.10, metavar="F",
                   help="flag configurations whose relative range exceeds F (default 0.1)")
    v.add_argument("--workers", type=positive_int, default=1, metavar="W",
                   help="local worker processes (default 1: treatments running side by side on one host "
                        "perturb each other's throughput, which is what this study measures)")
    v.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on this Dask scheduler's workers instead")
    v.add_argument("--resume", metavar="RUN", help="continue an interrupted study (run dir, id, or 'latest')")
    v.add_argument("--json", type=output_path, metavar="PATH", help="also write the report as JSON")
    v.add_argument("-v", "--verbose", action="store_true", help="show every external command as it runs")
    v.set_defaults(func=cmd_variation)
