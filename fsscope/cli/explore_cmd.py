"""``fsscope explore``: layout exploration (Chopper) headless -- plan, treatments, analysis."""

from __future__ import annotations

import os

from fsscope import paths
from fsscope.cli.common import (
    add_scheduler_args,
    output_path,
    positive_float,
    positive_int,
    resolve_study_run,
    scheduler_fields,
)
from fsscope.cli.headless import run_job
from fsscope.cli.render.explore import render_explore
from fsscope.engine import registry
from fsscope.records import build
from fsscope.targets import TargetSpec

DESCRIPTION = """\
Treat the file system as a simulator of its block allocator (He et al., "Reducing File System
Tail Latencies with Chopper", FAST'15). A factor space (a shipped one or a .toml) lists disk
states (DiskSize, UsedRatio, FreeSpaceLayout) and write patterns (FileSize, ChunkCount,
InternalDensity, ChunkOrder, Fsync, Sync, FileCount, DirectorySpan, CPUCount). A seeded,
balanced Latin Hypercube picks N treatments. Each runs on a clone of its disk state's base
image in RAM: the files are written chunk by chunk, then FIEMAP says how far each one is spread
(d-span: bytes from a file's first to its last physical block; a treatment of several files
reports the largest, as the paper does -- the span over all of them is dspan_all_files_bytes).

Then, per file system and pooled: which factors drive the d-span variance (first-order
shares), which levels put runs in the tail (>= P90, with a significance test), and -- with
--repeat 2 -- how often the same treatment lands differently. The plan is saved before anything runs; --resume continues an
interrupted study. Treatments run in worker processes here (--workers) or on a Dask cluster
(--scheduler tls://HOST:8786 --security FILE: mutual TLS; workers there must run as root with
fsscope installed). A local study's cluster speaks mutual TLS with credentials made for the job."""

EPILOG = """\
examples:
  fsscope explore                                         the small space, 24 treatments on ext4
  fsscope explore --space chopper --treatments 1000 --recipes ext4-default,xfs-default
  fsscope explore --factor DiskSize=1G --factor FileSize=8K,64K,256K --treatments 200
  fsscope explore --repeat 2 --treatments 100            how often does the same run land differently?
  fsscope explore --resume latest                         continue the last interrupted study
  fsscope explore --scheduler tls://10.0.0.5:8786 --security dask.toml --treatments 5000

the table: RUN/treatments.csv (pandas.read_csv), full rows in RUN/treatments.ndjson.
a cluster: 'dask scheduler --tls-ca-file ...' on one host, 'dask worker tls://HOST:8786 --nthreads 1
--tls-ca-file ...' as root on each worker host; dask.toml: ca = "ca.pem", cert = "client.pem",
key = "client-key.pem" (see README: how to make them)."""


def cmd_explore(args) -> int:
    registry.require_extra("explore")  # without Dask: one line saying how to add it
    from fsscope.study import explore  # numpy, scipy, dask: only when exploring

    spec = build(explore.Spec, space=args.space, factors=tuple(args.factor), treatments=args.treatments,
                        seed=args.seed, recipes=tuple(r.strip() for r in args.recipes.split(",") if r.strip()),
                        repeat=args.repeat, workers=args.workers, **scheduler_fields(args),
                        resume=resolve_study_run(args.resume) if args.resume else "",
                        tail_quantile=args.tail_quantile)
    explore.check_spec(spec)  # a bad space, factor or recipe: one line, before any run record
    target = TargetSpec("dir", str(paths.ram_dir(checked=False)))
    return run_job("explore", spec, target, None, json_path=args.json, verbose=args.verbose, render=render_explore)


def add_parser(sub) -> None:
    p = sub.add_parser("explore", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("--space", default="small", metavar="NAME|PATH",
                   help="factor space: a shipped name or a .toml path (default small; chopper = the paper's)")
    p.add_argument("--factor", action="append", default=[], metavar="NAME=L1,L2",
                   help="replace a factor's levels, e.g. --factor FileSize=8K,64K (repeatable)")
    p.add_argument("--treatments", type=positive_int, default=24, metavar="N", help="treatments in the plan (default 24)")
    p.add_argument("--seed", type=int, default=1, help="plan seed (default 1): the same seed, the same plan")
    p.add_argument("--recipes", default="ext4-default", metavar="R1,R2",
                   help="file-system recipes; the plan runs on each (default ext4-default)")
    p.add_argument("--repeat", type=positive_int, default=1, metavar="K", help="run every treatment K times (2: nondeterminism)")
    p.add_argument("--workers", type=positive_int, default=os.cpu_count() or 2, metavar="W",
                   help="local worker processes (default: one per CPU)")
    add_scheduler_args(p)
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted study (run dir, id, or 'latest')")
    p.add_argument("--tail-quantile", type=positive_float, default=0.9, metavar="Q", help="tail = d-span >= this quantile (default 0.9)")
    p.add_argument("--json", type=output_path, metavar="PATH", help="also write the report as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="show every external command as it runs")
    p.set_defaults(func=cmd_explore)
