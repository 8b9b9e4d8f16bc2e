"""Options shared by the commands that put a file system on a target, and their parsing."""

from __future__ import annotations

import argparse
import math
import os

from fsscope import recipes
from fsscope.errors import FsscopeError
from fsscope.recipes import Recipe
from fsscope.targets import DEFAULT_SIZE_BYTES, TargetSpec
from fsscope.units import parse_size_bytes


def parse_size(text: str) -> int:
    """argparse type: '2G', '512M', '1GiB', '4096' → bytes (powers of two)."""
    try:
        return parse_size_bytes(text)
    except FsscopeError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (examples: 512M, 2G, 1GiB)") from None


def add_target_args(parser: argparse.ArgumentParser, *, dir_allowed: bool = True) -> None:
    group = parser.add_argument_group("target (choose one)")
    where = group.add_mutually_exclusive_group()
    where.add_argument("--device", metavar="DEV", help="a block device to format (safety checks apply)")
    where.add_argument("--image", metavar="PATH", help="a sparse image file, created if missing, attached as a loop device")
    where.add_argument("--ram", action="store_true", help="a RAM-backed image in /dev/shm, removed afterwards")
    if dir_allowed:
        where.add_argument("--dir", metavar="PATH", help="a plain directory: no formatting, no root needed; "
                           "work happens in a fresh subdirectory that is removed afterwards")
    group.add_argument("--size", type=parse_size, default=DEFAULT_SIZE_BYTES, metavar="SIZE",
                       help="image or RAM size (default 2G; XFS needs at least 300M)")
    group.add_argument("--mountpoint", metavar="DIR", help="where to mount (default: under fsscope's state dir)")
    group.add_argument("--yes-destroy", metavar="DEV", help="confirm destroying DEV's existing signature; must name the same device")
    group.add_argument("--from-snapshot", metavar="PATH", default="",
                       help="restore this aged image (from 'fsscope age --snapshot') before each run instead of "
                       "mkfs, so every run starts from the same aged state; its fs must match the recipe")
    rgroup = parser.add_argument_group("recipe")
    rgroup.add_argument("--recipe", metavar="NAME|PATH", help="file-system recipe (see 'fsscope recipes')")
    rgroup.add_argument("--mkfs-opts", default="", metavar='"OPTS"', help='extra mkfs options for this run, e.g. "-i size=1024"')
    rgroup.add_argument("--mount-opts", default="", metavar="OPTS", help="extra mount options, comma-separated")
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


def add_job_args(parser: argparse.ArgumentParser) -> None:
    """What every headless job command takes: --json, -v and the target/recipe options."""
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="show every external command as it runs")
    add_target_args(parser)


def _prep_value(text: str):
    low = text.lower()
    if low in ("true", "on", "yes", "1"):
        return True
    if low in ("false", "off", "no", "0"):
        return False
    return text


def recipe_from_args(args, *, default: str | None = None) -> Recipe | None:
    name = args.recipe or default
    if name is None:
        return None
    recipe = recipes.load(name).with_extra(args.mkfs_opts, args.mount_opts)
    changes = {}
    for item in args.prep:
        if "=" not in item:
            raise FsscopeError(f"--prep {item}: expected STEP=VALUE (e.g. drop_caches=false)")
        key, value = item.split("=", 1)
        changes[key.strip()] = _prep_value(value.strip())
    return recipe.with_prep(**changes) if changes else recipe


def target_from_args(args, *, default_kind: str | None = None) -> TargetSpec:
    """The TargetSpec the options name; with none given, ``default_kind`` (ram) or an error."""
    size = args.size
    snap = os.path.abspath(args.from_snapshot) if getattr(args, "from_snapshot", "") else ""
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
