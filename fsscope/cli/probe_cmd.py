"""``fsscope probe``: the per-syscall latency probe, headless, with a summary and explained flags."""

from __future__ import annotations

from fsscope.cli.common import add_job_args, recipe_for, target_from_args
from fsscope.cli.headless import run_job
from fsscope.cli.render.probe import render_probe
from fsscope.errors import FsscopeError
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


def cmd_probe(args) -> int:
    target = target_from_args(args, default_kind="ram")
    if args.in_root and target.kind == "dir":
        raise FsscopeError(f"--in-root: {target.path} is a directory fsscope did not make; the files can "
                           f"go into the root of a file system fsscope makes (--ram, --image, --device)")
    spec = build(ProbeSpec, op=args.op, files=args.files, runs=args.runs, name_length=args.name_length,
                     sync_before=args.sync_before, fresh_fs=not args.same_fs, cpu=args.cpu,
                     trace=args.trace, sync_scope=args.sync, max_runs=args.max_runs, in_root=args.in_root)
    recipe = recipe_for(args, target)
    return run_job("probe", spec, target, recipe, json_path=args.json, verbose=args.verbose, render=render_probe)


def add_parser(sub) -> None:
    p = sub.add_parser("probe", description=DESCRIPTION, epilog=EPILOG)
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
