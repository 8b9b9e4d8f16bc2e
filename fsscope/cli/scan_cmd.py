"""``fsscope scan PATH``: which on-disk structure each directory of a live tree is in, checked
against the file system's own account, without writing (see :mod:`fsscope.scan`)."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.text import Text

from fsscope.cli.common import output_path, write_json
from fsscope.cli.render.scan import render_scan
from fsscope.cli.spec_options import add_spec_options, spec_from_args
from fsscope.format import visible
from fsscope.scan.job import Report, Spec

DESCRIPTION = """\
Walk a directory tree on a mounted file system WITHOUT WRITING to it, and say for every
directory which on-disk structure its entry count and name lengths put it in under this file
system's geometry (XFS short-form / block / leaf / node; ext4 linear / htree and its depth;
btrfs items), checked against what the file system itself reports (st_size, ext4's indexed
flag and htree root, XFS block maps). Lists the directories a few creates away from a
structural change (the next create pays it) and the largest ones, the free-space
fragmentation of the file system (xfs_spaceman / e2freefrag, live), and how aged the tree looks
(its profile against the shipped aging profiles, nearest first).

Directories are opened with O_NOATIME (root, or the owner), nothing is synced. Without root
the superblock of ext4/btrfs, the htree depth and e2freefrag may be out of reach: the
report says which.
"""

EPILOG = """\
examples:
  fsscope scan /srv/data                    as root: everything, nothing written
  fsscope scan ~/mail --near 8 --json s.json   directories up to 8 creates from a change
"""


SPEC_OPTIONS = ("near", "largest", "free_space", "aging")
"""The scan's options: its Spec's fields, as the Spec declares them (bounds, help)."""


def cmd_scan(args) -> int:
    from fsscope.scan import scan

    spec = spec_from_args(args, Spec, SPEC_OPTIONS)
    chatter = Console(stderr=True, soft_wrap=True)
    with chatter.status(Text(f"scanning {visible(args.path)} (read-only)…")):
        report = Report.of(scan(args.path, near=spec.near, largest=spec.largest, free_space=spec.free_space,
                                aging=spec.aging))
    if args.json:  # first: nothing the table shows can lose the report
        write_json(args.json, report)
    render_scan(report, Console() if sys.stdout.isatty() else Console(width=160))
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("scan", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("path", metavar="PATH", help="the tree to scan (not crossing into other mounts)")
    add_spec_options(p, Spec, SPEC_OPTIONS)
    p.add_argument("--json", type=output_path, metavar="PATH", help="also write the report as JSON")
    p.set_defaults(func=cmd_scan)
