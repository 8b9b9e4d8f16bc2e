"""``fsscope probe``: the per-syscall latency probe, headless, with a summary and explained flags."""

from __future__ import annotations

from fsscope.cli.common import add_job_args, recipe_for, target_from_args
from fsscope.cli.headless import run_job
from fsscope.cli.render.probe import render_probe
from fsscope.cli.spec_options import add_spec_options, spec_from_args
from fsscope.errors import FsscopeError
from fsscope.workloads.probe_spec import ProbeSpec

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


SPEC_OPTIONS = ("op", "files", "runs", "name_length", "sync_before", "sync_scope", "max_runs", "fresh_fs", "in_root",
                "cpu", "trace")
"""The probe's options: its Spec's fields, as the Spec declares them (bounds, help)."""
FLAGS = {"sync_scope": "--sync", "fresh_fs": "--same-fs"}


def cmd_probe(args) -> int:
    target = target_from_args(args, default_kind="ram")
    spec = spec_from_args(args, ProbeSpec, SPEC_OPTIONS)
    if spec.in_root and target.kind == "dir":
        raise FsscopeError(f"--in-root: {target.path} is a directory fsscope did not make; the files can "
                           f"go into the root of a file system fsscope makes (--ram, --image, --device)")
    recipe = recipe_for(args, target)
    return run_job("probe", spec, target, recipe, json_path=args.json, verbose=args.verbose, render=render_probe)


def add_parser(sub) -> None:
    p = sub.add_parser("probe", description=DESCRIPTION, epilog=EPILOG)
    add_spec_options(p, ProbeSpec, SPEC_OPTIONS, flags=FLAGS)
    add_job_args(p)
    p.set_defaults(func=cmd_probe)
