"""Options shared by the commands that put a file system on a target, and their parsing."""

from __future__ import annotations

import argparse
import math
import os
import sys

from rich.console import Console
from rich.text import Text

from fsscope import paths, recipes, records, trust
from fsscope.errors import FsscopeError, SafetyRefusal
from fsscope.format import visible
from fsscope.recipes import Recipe
from fsscope.targets import DEFAULT_SIZE_BYTES, TargetSpec
from fsscope.units import parse_size_bytes
from fsscope.workloads import PERSONALITIES  # a light module

PIPE_WIDTH = 160
"""Columns of a report written into a pipe or a file: rich's default 80 cut numbers to "…"
(``fsscope report latest | less``)."""


def out_console() -> Console:
    """Where a command's report goes: the terminal's width (or COLUMNS, if set), else PIPE_WIDTH."""
    return Console() if sys.stdout.isatty() or os.environ.get("COLUMNS") else Console(width=PIPE_WIDTH)


def parse_size(text: str) -> int:
    """argparse type: '2G', '512M', '1GiB', '4096' → bytes (powers of two)."""
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(f"a size cannot be negative, got '{text}'")
    try:
        return parse_size_bytes(text)
    except FsscopeError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (examples: 512M, 2G, 1GiB)") from None


def add_personality_arg(parser: argparse.ArgumentParser, what: str) -> None:
    """--personality of bench and check: a Filebench personality, fileserver unless named."""
    parser.add_argument("--personality", choices=PERSONALITIES, default="fileserver",
                        help=f"{what} (default fileserver)")


def dash_value(action: argparse.Action) -> argparse.Action:
    """Let this option's value start with '-' without the '=' form: mkfs options such as
    ``--mkfs-opts "-c"``, and sizes, so ``--size -5M`` is refused as negative instead of
    argparse's "expected one argument" (:class:`fsscope.cli.Parser` joins such pairs)."""
    action.dash_value = True  # type: ignore[attr-defined]  # a mark fsscope.cli.Parser reads
    return action


def recipe_list(text: str) -> list[str]:
    """argparse type of --recipes: two or more distinct recipe names, comma-separated."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if len(names) < 2:
        raise argparse.ArgumentTypeError("name at least two recipes, comma-separated (e.g. ext4-default,xfs-default)")
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a recipe is named twice in '{text}'")
    return names


def add_target_args(parser: argparse.ArgumentParser, *, dir_allowed: bool = True) -> None:
    group = parser.add_argument_group("target (choose one)")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--device", metavar="DEV", help="a block device to format (safety checks apply)")
    where.add_argument("--image", metavar="PATH", help="a sparse image file, created (and marked as fsscope's) if "
                       "missing, attached as a loop device; an existing file fsscope did not create needs "
                       "--yes-destroy PATH")
    where.add_argument("--ram", action="store_true", help="a RAM-backed image in /dev/shm ($FSSCOPE_RAM_DIR), removed "
                       "afterwards; its whole --size must be free there")
    if dir_allowed:
        where.add_argument("--dir", metavar="PATH", help="a plain directory: no formatting, no root needed; "
                           "work happens in a fresh subdirectory that is removed afterwards")
    dash_value(group.add_argument("--size", type=parse_size, default=DEFAULT_SIZE_BYTES, metavar="SIZE",
                       help="image or RAM size (default 2G; XFS needs at least 300M)"))
    group.add_argument("--mountpoint", metavar="DIR", help="where to mount (default: under fsscope's state dir)")
    group.add_argument("--yes-destroy", metavar="DEV|PATH", help="confirm destroying the contents of a device with a "
                       "signature, or of an existing image file fsscope did not create; must name the same one")
    group.add_argument("--from-snapshot", metavar="PATH", default="",
                       help="restore this aged image (from 'fsscope age --snapshot') before each run instead of "
                       "mkfs, so every run starts from the same aged state; its fs must match the recipe")
    rgroup = parser.add_argument_group("recipe")
    rgroup.add_argument("--recipe", metavar="NAME|PATH", help="file-system recipe (see 'fsscope recipes')")
    dash_value(rgroup.add_argument("--mkfs-opts", default="", metavar='"OPTS"',
                                   help='extra mkfs options for this run, e.g. "-i size=1024" or "-c"'))
    dash_value(rgroup.add_argument("--mount-opts", default="", metavar="OPTS",
                                   help="extra mount options, comma-separated"))
    rgroup.add_argument("--prep", action="append", default=[], metavar="STEP=VALUE",
                        help="change a hygiene step, e.g. --prep drop_caches=false --prep io_scheduler=mq-deadline")


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


STDOUT_NAMES = ("-", "/dev/stdout")


def output_path(text: str) -> str:
    """argparse type: a file written when the job ends, checked now so a finished run's
    report is not lost to a typo in its directory. ``-`` (or /dev/stdout) is standard output."""
    if text in STDOUT_NAMES:
        return text
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"{folder}: no such directory")
    if os.path.isdir(text) or not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text}: cannot write a file there")
    try:
        trust.output_place(text, "output")
    except SafetyRefusal as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def write_json(path: str, doc) -> None:
    """Write a report where --json asked, checked again now (see :func:`fsscope.trust.write_output`),
    and say where on stderr."""
    if path in STDOUT_NAMES:  # the process's own stdout: no path to trust or refuse
        sys.stdout.write(records.dumps(doc, indent=2) + "\n")
        sys.stdout.flush()
        return
    trust.write_output(path, records.dumps(doc, indent=2) + "\n", "--json")
    Console(stderr=True, soft_wrap=True).print(Text(f"wrote {visible(path)}", style="dim"))


def add_job_args(parser: argparse.ArgumentParser) -> None:
    """What every headless job command takes: --json, -v and the target/recipe options."""
    parser.add_argument("--json", type=output_path, metavar="PATH", help="also write the report as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="show every external command as it runs")
    add_target_args(parser)


def add_scheduler_args(parser: argparse.ArgumentParser) -> None:
    """A study's Dask cluster: --scheduler tls://… with --security FILE, or --insecure-scheduler."""
    parser.add_argument("--scheduler", metavar="tls://HOST:PORT",
                        help="run on this Dask scheduler's workers instead (mutual TLS: needs --security)")
    parser.add_argument("--security", metavar="FILE",
                        help="TOML naming the cluster's CA and this client's certificate and key "
                             "(ca = , cert = , key = ; paths relative to the file; see README)")
    parser.add_argument("--insecure-scheduler", action="store_true",
                        help="allow a plain tcp:// scheduler: anyone reaching its port runs code as root on the workers")


def scheduler_fields(args) -> dict[str, object]:
    """The spec's scheduler fields from :func:`add_scheduler_args`' options; says on stderr what
    --insecure-scheduler means when it is used."""
    if args.insecure_scheduler and args.scheduler and not args.scheduler.startswith("tls://"):
        from fsscope.study.credentials import INSECURE_NOTE

        Console(stderr=True, soft_wrap=True, highlight=False).print(f"[yellow]warning:[/] {INSECURE_NOTE}", markup=True)
    return {"scheduler": args.scheduler or "", "security": os.path.abspath(args.security) if args.security else "",
            "insecure_scheduler": bool(args.insecure_scheduler)}


def recipe_from_args(args, *, default: str | None = None) -> Recipe | None:
    name = args.recipe or default
    return None if name is None else _recipe(name, args)


def recipe_for(args, target: TargetSpec) -> Recipe | None:
    """The recipe a job on ``target`` uses: the one named, else ext4-default where fsscope
    formats the target, else none (a --dir is measured as it is)."""
    return recipe_from_args(args, default=None if target.kind == "dir" else "ext4-default")


def _recipe(name: str, args) -> Recipe:
    """The recipe ``name`` with the options' extra mkfs/mount options and hygiene changes."""
    recipe = recipes.load(name).with_extra(args.mkfs_opts, args.mount_opts)
    changes = recipes.prep_changes(args.prep)
    return recipe.with_prep(**changes) if changes else recipe


def recipes_from_args(args, target: TargetSpec) -> list[tuple[str, Recipe]]:
    """--recipes a,b,...: every recipe loaded (with the extra options) before any job runs, so
    a bad one is refused before anything is formatted."""
    if args.recipe:
        raise FsscopeError("--recipe and --recipes: name one recipe, or several to compare, not both")
    if target.kind == "dir":
        raise FsscopeError("--recipes needs a target fsscope formats (--ram, --image or --device), not --dir")
    return [(name, _recipe(name, args)) for name in args.recipes]


def target_from_args(args, *, default_kind: str | None = None) -> TargetSpec:
    """The TargetSpec the options name; with none given, ``default_kind`` (ram) or an error."""
    size = args.size
    snap = os.path.abspath(args.from_snapshot) if getattr(args, "from_snapshot", "") else ""
    if snap and not os.path.isfile(snap):
        raise FsscopeError(f"--from-snapshot {snap}: no such file (make one with 'fsscope age')")
    if args.device:
        return TargetSpec("device", args.device, size, args.mountpoint or "", args.yes_destroy, snap)
    if args.image:
        if os.path.isfile(args.image):  # an existing image keeps its size (--size makes new ones)
            size = os.path.getsize(args.image)
        return TargetSpec("image", os.path.abspath(args.image), size, args.mountpoint or "", args.yes_destroy, snap)
    if args.ram:
        return TargetSpec("ram", "", size, args.mountpoint or "", snapshot=snap)
    if getattr(args, "dir", None):
        return TargetSpec("dir", os.path.abspath(args.dir), size, snapshot=snap)
    if default_kind:
        return TargetSpec(default_kind, "", size, args.mountpoint or "", snapshot=snap)
    raise FsscopeError("name a target: --device DEV, --image PATH, --ram or --dir PATH")


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
