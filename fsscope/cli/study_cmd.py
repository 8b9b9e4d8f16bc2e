"""``fsscope study variation``: the configuration-space variation study (Cao et al., FAST'17)."""

from __future__ import annotations

import argparse
from pathlib import Path

from fsscope import paths
from fsscope.cli.check_pointer import point_at_check
from fsscope.cli.common import (
    add_scheduler_args,
    output_path,
    parse_size,
    positive_float,
    positive_int,
    resolve_study_run,
    scheduler_fields,
)
from fsscope.cli.headless import console as err_console
from fsscope.cli.headless import run_job
from fsscope.cli.render.variation import print_cost, render_variation
from fsscope.engine import registry
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
  fsscope study variation --space cao-expert --configurations 40 --scheduler tls://10.0.0.5:8786 --security dask.toml
  fsscope study variation --factor ext4_journal=journal --file-systems ext4 --personalities varmail
  fsscope study variation --factor device=ram,disk           RAM-backed vs disk-backed images
  fsscope study variation --resume latest
  fsscope study variation --paper --dry-run                  the paper's scale: what it would cost
  fsscope study variation --paper --mem-limit 1G --configurations 4 --personalities varmail

the rows: RUN/treatments.ndjson (per-run ops per 1-s bin and per-op latency histograms; the
report is recomputed from them). Remote Dask workers must run as root, with fsscope installed
and DASK_DISTRIBUTED__WORKER__DAEMON=False (a treatment starts worker processes)."""


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def cmd_variation(args: argparse.Namespace) -> int:
    registry.require_extra("variation")  # without Dask and SALib: one line saying how to add them
    from fsscope.study import variation
    from fsscope.study.execute import require_root
    from fsscope.study.plan import Plan

    paper = variation.PAPER if args.paper else None
    spec = build(variation.Spec, space=args.space or (paper.space if paper else "cao-small"), factors=tuple(args.factor),
                          configurations=args.configurations or (paper.configurations if paper else 12),
                          seed=args.seed, file_systems=_names(args.file_systems or ""),
                          personalities=_names(args.personalities or ""), runs=args.runs or 0,
                          duration_s=args.duration or 0.0, image_size=args.image_size or "",
                          nfiles=args.files or 0, workers=args.workers, **scheduler_fields(args),
                          resume=resolve_study_run(args.resume, "variation") if args.resume else "", threshold=args.threshold,
                          window_sizes_s=tuple(args.window or ()), mem_limit_bytes=args.mem_limit or 0,
                          paper=args.paper)
    variation.check_spec(spec)
    plan = Plan.load(Path(spec.resume)) if spec.resume else variation.make_plan(spec)
    print_cost(variation.cost(plan), variation.settings_of(plan), err_console)
    if args.dry_run:
        return 0
    require_root("study variation", spec.scheduler)
    point_at_check()  # a timing study on a busy or misconfigured machine: say so first
    target = TargetSpec("dir", str(paths.ram_dir(checked=False)))
    return run_job("variation", spec, target, None, json_path=args.json, verbose=args.verbose, render=render_variation)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("study", description=STUDY_DESCRIPTION, epilog=EPILOG)
    studies = p.add_subparsers(dest="study", metavar="STUDY", required=True)
    v = studies.add_parser("variation", help="run-to-run variation across sampled storage-stack configurations",
                           description=DESCRIPTION, epilog=EPILOG)
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
    add_scheduler_args(v)
    v.add_argument("--resume", metavar="RUN", help="continue an interrupted study (run dir, id, or 'latest')")
    v.add_argument("--json", type=output_path, metavar="PATH", help="also write the report as JSON")
    v.add_argument("-v", "--verbose", action="store_true", help="show every external command as it runs")
    v.set_defaults(func=cmd_variation)
