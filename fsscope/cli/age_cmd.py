"""``fsscope age``, ``fsscope frag`` and ``fsscope profile capture|show|list``: aging a target to
a profile, fragmentation of fresh and aged file systems, and the profiles themselves."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsscope import trust
from fsscope.aging.job import Spec as AgingSpec
from fsscope.cli import common
from fsscope.cli.common import (
    add_job_args,
    positive_float,
    recipe_for,
    target_from_args,
)
from fsscope.cli.headless import run_job
from fsscope.cli.render.age import render_age, render_profile
from fsscope.cli.render.frag import render_frag
from fsscope.cli.spec_options import add_spec_options, spec_from_args
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes, visible
from fsscope.layout.job import Spec as FragSpec
from fsscope.targets import image

AGE_DESCRIPTION = """\
Age a file system the way years of use would (Geriatrix method, Kadekodi et al. ATC 2018):
format the target once, then create and delete files until the tree matches an aging
profile's file-size, directory-depth and relative-age distributions at the target fullness.

Rapid phase: creates only, up to the fullness. Stable phase: a seeded fair coin between
create and delete, each picking the bucket furthest from its target share. Every choice
follows --seed, so the same seed, profile and empty file system give the same operation
sequence (its sha256 is recorded). It stops at the first of: --max-minutes, --confidence
(every distribution's chi-squared p-value >= C), --max-overwrites; with none of them, at the
paper's convergence bound. A full file system (ENOSPC) is a normal stop, explained.

Before and after aging it measures fragmentation the same way: the free-space extent
histogram and the fragments of a large test file (written, mapped with FIEMAP, deleted).
On an image target the aged image stays on disk, unmounted: '--resume' ages it further
with new stop conditions (no mkfs), and a snapshot (IMAGE.aged by default; reflink where
the backing file system can) lets measurement jobs start every run from the same aged
state with '--from-snapshot'."""

AGE_EPILOG = """\
examples:
  fsscope age --image /var/tmp/aged.img --size 1G --profile small --fullness 0.8
  fsscope age --image /var/tmp/aged.img --resume --confidence 0.9 --max-minutes 10
  fsscope age --recipe xfs-default --image /var/tmp/x.img --size 2G --profile agrawal --max-overwrites 2 --jobs 4
  fsscope probe --image /var/tmp/run.img --from-snapshot /var/tmp/aged.img.aged --runs 5
  fsscope compare FRESH_PROBE_RUN AGED_PROBE_RUN
  fsscope profile capture /srv/data -o prod.toml && fsscope age --image t.img --profile prod.toml

--jobs N: worker processes carry out the same seeded operation sequence (same op-log hash),
  but their interleaving on disk differs from run to run, so block placement may too.
--fallocate: allocates blocks without writing data (posix_fallocate): faster, and every op
  reaches the allocator at once, but extents stay unwritten, delayed allocation and writeback
  merging are skipped, and copy-on-write/log-structured layouts are not exercised as by writes."""

FRAG_DESCRIPTION = """\
Fragmentation of a file system: its free-space extent histogram (e2freefrag for ext4, freesp
for xfs, the extent tree for btrfs) and the fragments of a large test file written
sequentially and mapped with FIEMAP (then deleted). On a fresh file system, or on an aged
one with --from-snapshot — the same measurement 'fsscope age' makes before and after aging."""

FRAG_EPILOG = """\
examples:
  fsscope frag --recipe xfs-default --ram --size 1G
  fsscope frag --image /var/tmp/run.img --from-snapshot /var/tmp/aged.img.aged --test-file 64M"""

PROFILE_DESCRIPTION = """\
Aging profiles: file-size, directory-depth and relative-age distributions and a default
fullness (shipped in recipes/aging/: eight published ones and 'small'). 'capture'
walks a real tree (one device, symlinks not followed, unreadable entries counted) and writes a
profile of it."""

out_console = common.out_console()
chatter = Console(stderr=True, soft_wrap=True)  # paths stay whole for copy and grep


# ---------------------------------------------------------------- commands

def _profile_arg(text: str) -> str:
    """A shipped name stays a name; a file becomes an absolute path (the job runs elsewhere)."""
    from fsscope.aging.profile import find_profile, load_profile

    load_profile(text)  # a bad profile: one line naming the file and field, before anything starts
    candidate = Path(text)
    if candidate.suffix == ".toml" or candidate.exists():
        return str(find_profile(text).resolve())
    return text


def cmd_age(args) -> int:
    target = target_from_args(args, default_kind="ram")
    recipe = recipe_for(args, target)
    if args.resume:
        if target.kind in ("ram", "dir") and not target.snapshot:
            raise FsscopeError(f"--resume needs the kept aged image (--image PATH or --device DEV): a {target.kind} "
                               "target is removed after each run")
        if target.kind == "image" and not target.snapshot and not os.path.isfile(target.path):
            raise FsscopeError(f"--resume: {target.path}: no such image to resume (age it first)")
    capacity_bytes: int | None = getattr(args, "capacity_bytes", None)
    if target.kind == "dir" and capacity_bytes is None:
        raise FsscopeError("--dir needs --capacity SIZE: a directory has no file system of its own to fill")
    if capacity_bytes is not None and target.kind == "dir" and os.path.isdir(target.path):
        free = shutil.disk_usage(target.path).free
        if capacity_bytes > free:
            raise FsscopeError(f"--capacity {format_bytes(capacity_bytes)} is more than the "
                               f"{format_bytes(free)} free in {target.path}")
    if target.kind != "dir" and capacity_bytes is not None:
        raise FsscopeError("--capacity is for --dir targets only: a formatted target is filled to its own size")
    profile = _profile_arg(args.profile) if args.profile else ("" if args.resume else "small")
    if args.no_snapshot:
        snapshot = ""
    elif args.snapshot:
        snapshot = os.path.abspath(args.snapshot)
    elif target.kind == "image":
        snapshot = target.path + ".aged"
    else:
        snapshot = ""
    if snapshot and target.kind == "dir":
        raise FsscopeError("--snapshot needs an image, RAM or device target, not --dir")
    if snapshot and target.kind == "image" and os.path.abspath(snapshot) == target.path:
        raise FsscopeError("--snapshot names the target image itself: choose another path")
    if snapshot:  # the snapshot replaces whatever is there: only fsscope's own, or what is named
        image.check_not_foreign(Path(snapshot), args.yes_destroy, "overwrite")
        trust.output_place(snapshot, "--snapshot")  # as --json: not where another user can swap it
    spec = spec_from_args(args, AgingSpec, AGE_OPTIONS, profile=profile,
                          max_seconds=args.max_minutes * 60 if args.max_minutes else None, resume=args.resume,
                          snapshot_path=snapshot)
    capacity = capacity_bytes if target.kind == "dir" else target.size_bytes if target.kind != "device" else None
    if profile and capacity:  # a device's size is known only once opened; the ager stops at ENOSPC there
        from fsscope.aging.profile import check_fits, load_profile

        loaded = load_profile(profile)
        check_fits(loaded, capacity, spec.fullness or loaded.fullness)
    return run_job("age", spec, target, recipe, json_path=args.json, verbose=args.verbose, render=render_age)


AGE_OPTIONS = ("fullness", "seed", "confidence", "max_overwrites", "fallocate", "workers", "capacity_bytes",
               "test_file_bytes")
"""age's options that are its Spec's fields, as the Spec declares them (bounds, units, help);
--profile, --max-minutes (the Spec counts seconds), --resume and the snapshot's are read here."""

FRAG_OPTIONS = ("test_file_bytes", "chunk_bytes", "free_space")
"""frag's options: its Spec's fields, as the Spec declares them (bounds, units, help)."""


def cmd_frag(args) -> int:
    target = target_from_args(args, default_kind="ram")
    recipe = recipe_for(args, target)
    spec = spec_from_args(args, FragSpec, FRAG_OPTIONS)
    return run_job("frag", spec, target, recipe, json_path=args.json, verbose=args.verbose, render=render_frag)


def cmd_profile_list(args) -> int:
    from fsscope.aging.profile import list_profiles, load_profile, profiles_dir

    table = Table(title=Text(f"Aging profiles in {visible(profiles_dir())} (use --profile NAME, or a path to your "
                             "own .toml)"), title_justify="left")
    for col in ("name", "fullness", "sizes", "depths", "age buckets", "description"):
        table.add_column(col, overflow="fold")
    for name in list_profiles():
        try:
            p = load_profile(name)
        except FsscopeError as exc:
            table.add_row(Text(visible(name)), "-", "-", "-", "-", Text(visible(exc), style="red"))
            continue
        # a captured profile is named after a tree's directory and describes it by its path: text
        table.add_row(Text(visible(p.name)), f"{p.fullness:.0%}",
                      f"{len(p.size_bytes)}: {format_bytes(p.size_bytes[0])}–{format_bytes(p.size_bytes[-1])}",
                      f"{p.depths[0]}–{p.depths[-1]}", str(len(p.age_cutoffs)), Text(visible(p.description)))
    out_console.print(table)
    return 0


def cmd_profile_show(args) -> int:
    from fsscope.aging.profile import load_profile

    render_profile(load_profile(args.profile), out_console)
    return 0


def cmd_profile_capture(args) -> int:
    from fsscope.aging.profile import ProfileError, profile_from_scan, save_profile, scan_tree

    root = Path(args.dir)
    if not root.is_dir():
        raise ProfileError(f"{root}: not a directory")
    with chatter.status(Text(f"walking {visible(root)} (one device, symlinks not followed)…")):
        scan = scan_tree(root)
    name = args.name or root.resolve().name or "root"
    profile = profile_from_scan(scan, name=name)
    dest = Path(args.output) if args.output else Path(f"{name}.toml")
    if dest.exists() and not args.force:
        raise FsscopeError(f"{dest}: exists (choose another with -o FILE, or --force to overwrite)")
    save_profile(profile, dest)
    render_profile(profile, out_console)
    chatter.print(f"{len(scan.size_bytes):,} files, {sum(scan.dirs_per_depth) - 1:,} directories; "
                  f"{scan.errors} unreadable entries (permission or vanished) counted, {scan.symlinks_skipped} "
                  f"symlinks not followed, {scan.other_device_skipped} mount points not crossed; file system "
                  f"{scan.fullness:.1%} full", highlight=False)
    for line in scan.swapped:
        chatter.print(Text.assemble(("swapped, not followed: ", "bold red"), visible(line)))
    print(f"wrote {visible(dest)}")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("age", description=AGE_DESCRIPTION, epilog=AGE_EPILOG)
    p.add_argument("--profile", metavar="NAME|PATH",
                   help="aging profile: a shipped name (see 'fsscope profile list') or a .toml (default small)")
    p.add_argument("--max-minutes", type=positive_float, metavar="M",
                   help="stop after at most M minutes of aging (this session); it may stop earlier, at the "
                        "last planned fit point that the time allows (the fit is measured only there), "
                        "which the stop note says")
    add_spec_options(p, AgingSpec, AGE_OPTIONS, flags={"workers": "--jobs"},
                     readers={"fullness": ("F", float), "confidence": ("C", float), "max_overwrites": ("K", float)})
    p.add_argument("--resume", action="store_true",
                   help="continue the aging kept on this image (no mkfs) with the new stop conditions")
    p.add_argument("--snapshot", metavar="PATH",
                   help="copy the aged image here (default for --image: IMAGE.aged; reflink where possible)")
    p.add_argument("--no-snapshot", action="store_true", help="take no snapshot")
    add_job_args(p)
    p.set_defaults(func=cmd_age)

    p = sub.add_parser("frag", description=FRAG_DESCRIPTION, epilog=FRAG_EPILOG)
    add_spec_options(p, FragSpec, FRAG_OPTIONS)
    add_job_args(p)
    p.set_defaults(func=cmd_frag)

    p = sub.add_parser("profile", description=PROFILE_DESCRIPTION,
                       epilog="examples:\n  fsscope profile list\n  fsscope profile show agrawal\n"
                       "  fsscope profile capture /home -o home.toml")
    psub = p.add_subparsers(dest="profile_command", metavar="ACTION", required=True,
                            parser_class=type(p))
    q = psub.add_parser("list", help="the shipped profiles")
    q.set_defaults(func=cmd_profile_list)
    q = psub.add_parser("show", help="a profile's distributions as bar charts")
    q.add_argument("profile", metavar="NAME|FILE")
    q.set_defaults(func=cmd_profile_show)
    q = psub.add_parser("capture", help="walk a tree and write a profile of it")
    q.add_argument("dir", metavar="DIR")
    q.add_argument("-o", "--output", metavar="FILE", help="where to write it (default ./NAME.toml)")
    q.add_argument("--name", help="profile name (default: the directory's name)")
    q.add_argument("--force", action="store_true", help="overwrite an existing FILE")
    q.set_defaults(func=cmd_profile_capture)
