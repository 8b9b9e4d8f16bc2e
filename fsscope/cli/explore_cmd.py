"""``fsscope explore``: layout exploration (Chopper) headless -- plan, treatments, analysis."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fsscope import paths, trust
from fsscope.cli.common import output_path, positive_float, positive_int
from fsscope.cli.headless import run_job
from fsscope.cli.render import RENDERERS
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
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
(--scheduler tcp://HOST:8786; workers there must run as root with fsscope installed)."""

EPILOG = """\
examples:
  fsscope explore                                         the small space, 24 treatments on ext4
  fsscope explore --space chopper --treatments 1000 --recipes ext4-default,xfs-default
  fsscope explore --factor DiskSize=1G --factor FileSize=8K,64K,256K --treatments 200
  fsscope explore --repeat 2 --treatments 100            how often does the same run land differently?
  fsscope explore --resume latest                         continue the last interrupted study
  fsscope explore --scheduler tcp://10.0.0.5:8786 --treatments 5000 --json out.json

the table: RUN/treatments.csv (pandas.read_csv), full rows in RUN/treatments.ndjson.
a cluster: 'dask scheduler' on one host, 'dask worker tcp://HOST:8786 --nthreads 1' as root on
each worker host (see README)."""


def _bar(share: float, width: int = 24) -> str:
    n = max(0.0, min(1.0, share)) * width
    return "█" * int(n) + ("▌" if n - int(n) >= 0.5 else "")


def render(report: dict, console: Console) -> None:
    rate = report.get("treatments_per_min")
    console.print(f"[bold]{report['completed']} of {report['planned']} treatments[/] on "
                  f"{', '.join(report['recipes'])} (space {report['space']}, seed {report['seed']})"
                  + (f", {rate:.0f} per minute" if rate else ""))
    console.print("[dim]d-span: the largest of a treatment's files' d-spans (first to last physical block "
                  "of a file, as Chopper defines it)[/]")
    for fs, cdf in (report.get("d_span_cdf") or {}).items():
        xs = [x for x, _ in cdf]
        pick = {q: next((x for x, f in cdf if f >= q), xs[-1]) for q in (0.5, 0.9, 0.99)}
        console.print(f"  {fs}: d-span P50 {format_bytes(pick[0.5])}, P90 {format_bytes(pick[0.9])}, "
                      f"P99 {format_bytes(pick[0.99])}, max {format_bytes(xs[-1])}")
    by_fs = report.get("by_fs") or {}
    # several file systems: each ranked on its own (as the paper does), pooled beside them
    parts = [("pooled", report)] + list(by_fs.items()) if len(by_fs) > 1 else [("", report)]
    table = Table(title="factor prioritization: share of d-span variance (first order)", title_justify="left")
    table.add_column("factor")
    for name, _ in parts:
        table.add_column(name or "share", justify="right")
        if len(parts) == 1:
            table.add_column("")
    shares = {name: {p["factor"]: p["first_order"] for p in part.get("prioritization", [])} for name, part in parts}
    for p in report.get("prioritization", []):
        cells = []
        for name, _ in parts:
            share = shares[name].get(p["factor"])
            cells.append("too few runs" if share is None else f"{share * 100:.1f}%")
            if len(parts) == 1:
                cells.append("" if share is None else _bar(share))
        table.add_row(p["factor"], *cells)
    console.print(table)
    for name, part in parts:
        tail = part.get("tail") or {}
        hot = [lv for lv in tail.get("levels", []) if lv["significant"]]
        where = f"{name}: " if name else ""
        if tail.get("threshold_bytes") is not None:
            console.print(f"{where}tail: d-span >= {format_bytes(tail['threshold_bytes'])} "
                          f"(P{tail['quantile'] * 100:.0f}); {len(hot)} level(s) put runs there significantly "
                          "more often" + ("" if hot else " (none decided: more treatments would sharpen the test)"))
        for lv in sorted(hot, key=lambda lv: -lv["tail_share"])[:10]:
            console.print(f"  {lv['factor']} = {lv['level']}: {lv['tail_share'] * 100:.0f}% of {lv['runs']} runs "
                          f"(p = {lv['p_value']:.2g})")
        nd = part.get("nondeterminism") or {}
        if nd.get("changed_share") is not None:
            console.print(f"{where}nondeterminism: {nd['changed_share'] * 100:.0f}% of {nd['pairs']} repeated "
                          "treatments changed")
    for note in report.get("notes", []):
        console.print(f"[bold yellow]▲[/] {note}", highlight=False)
    for failed in report.get("failed", [])[:5]:
        console.print(f"[red]failed[/] {failed['id']}: {failed['error']}")
    if report.get("study_dir"):
        console.print(f"[dim]table: {Path(report['study_dir']) / 'treatments.csv'}[/]")


RENDERERS["explore"] = render


def resolve_study_run(text: str, job: str = "explore") -> str:
    """--resume's RUN: a run directory, a run id, or 'latest' (the newest ``job`` study with a plan)."""
    if os.path.isdir(text):
        trust.check_work_dir(text, "--resume")  # root writes the study's rows and table there
        return os.path.abspath(text)
    root = paths.runs_dir()
    if text == "latest":
        from fsscope import store  # numpy: not for --help

        runs = [r.path for r in store.list_runs(root)             # oldest first, by creation
                if r.id.split("-")[2:3] == [job] and (r.path / "plan.json").exists()]
        if runs:
            return str(runs[-1])
    elif (root / text).is_dir():
        return str(root / text)
    raise FsscopeError(f"--resume {text}: no such study run (a run directory or id from 'fsscope runs')")


def cmd_explore(args) -> int:
    from fsscope.study import explore  # numpy, scipy, dask: only when exploring

    spec = build(explore.Spec, space=args.space, factors=tuple(args.factor), treatments=args.treatments,
                        seed=args.seed, recipes=tuple(r.strip() for r in args.recipes.split(",") if r.strip()),
                        repeat=args.repeat, workers=args.workers, scheduler=args.scheduler or "",
                        resume=resolve_study_run(args.resume) if args.resume else "",
                        tail_quantile=args.tail_quantile)
    explore.check_spec(spec)  # a bad space, factor or recipe: one line, before any run record
    ram = Path(os.environ.get("FSSCOPE_RAM_DIR", "/dev/shm"))
    target = TargetSpec("dir", str(ram))
    return run_job("explore", spec, target, None, json_path=args.json, verbose=args.verbose, render=render)


def add_parser(sub) -> None:
    p = sub.add_parser("explore", help="layout exploration (Chopper): which factors spread files on disk",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on this Dask scheduler's workers instead")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted study (run dir, id, or 'latest')")
    p.add_argument("--tail-quantile", type=positive_float, default=0.9, metavar="Q", help="tail = d-span >= this quantile (default 0.9)")
    p.add_argument("--json", type=output_path, metavar="PATH", help="also write the report as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="show every external command as it runs")
    p.set_defaults(func=cmd_explore)
