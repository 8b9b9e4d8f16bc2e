"""``fsscope scan PATH``: which on-disk structure each directory of a live tree is in, checked
against the file system's own account, without writing (see :mod:`fsscope.scan`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fsscope.cli.common import output_path
from fsscope.format import format_bytes

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


def cmd_scan(args) -> int:
    from fsscope.scan import scan

    chatter = Console(stderr=True, soft_wrap=True)
    with chatter.status(f"scanning {args.path} (read-only)…"):
        report = scan(args.path, near=args.near, largest=args.largest,
                      free_space=not args.no_free_space, aging=not args.no_aging)
    render(report, Console() if sys.stdout.isatty() else Console(width=160))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str) + "\n")
        chatter.print(f"[dim]wrote {args.json}[/]")
    return 0


def _structure(d: dict) -> str:
    text = str(d["structure"])
    if d.get("depth"):
        text += f" (depth {d['depth']})"
    return text


def _verdict(d: dict) -> str:
    if d["agrees"] is None:
        return "not checked" + (f": {d['account']['how']}" if d.get("account") else "")
    return "agrees" if d["agrees"] else f"differs: {d.get('why', '')}"


def render(report: dict, console: Console) -> None:
    ex = report["existing"]
    console.print(f"[bold]{report['path']}[/] on {ex['summary']}", highlight=False)
    for gap in report["geometry"].get("unread") or []:
        console.print(f"  [yellow]not read:[/] {gap}", highlight=False)
    counts = ", ".join(f"{n} {k}" for k, n in sorted(report["structures"].items()))
    c = report["checked"]
    console.print(f"{report['directories']} directories, {report['files']} files: {counts}. "
                  f"Checked against the file system: {c['agree']} agree, {c['disagree']} differ, "
                  f"{c['not_checked']} not checked. {report['read_only']['note']}.", highlight=False)

    def table(title: str, rows: list[dict]) -> None:
        if not rows:
            return
        t = Table(title=title, title_justify="left")
        for col in ("directory", "entries", "structure", "next change", "file system says"):
            t.add_column(col, overflow="fold")
        for d in rows:
            ahead = d.get("creates_until_change")
            nxt = (f"in {ahead['creates']} create{'s' if ahead['creates'] > 1 else ''} → {ahead['becomes']}"
                   if ahead else "-")
            t.add_row(d["path"], str(d["entries"]), _structure(d), nxt, _verdict(d))
        console.print(t)

    table(f"within {report['near_entries']} creates of a structural change (the next create pays it)",
          report["near_change"])
    table("largest directories", report["largest"])
    table("where the names and the file system disagree", report["disagreements"][:20])
    if "free_space" in report:
        fs = report["free_space"]
        console.print(f"free space: {format_bytes(fs['total_free_bytes'])} in {fs['free_extent_count']} "
                      f"free extents, largest {format_bytes(fs['largest_free_extent_bytes'])}, mean "
                      f"{format_bytes(int(fs['mean_free_extent_bytes']))} ({fs['source']})", highlight=False)
    elif "free_space_error" in report:
        console.print(f"free space: not read: {report['free_space_error']}", highlight=False)
    aging = report.get("aging") or {}
    if aging.get("nearest"):
        near = ", ".join(f"{r['profile']} ({r['distance']:.2f})" for r in aging["nearest"][:4])
        console.print(f"aging: this tree's profile is nearest to {near} "
                      f"(distance: size W1 in log2 bytes + depth W1 + 4 x fullness)", highlight=False)
    elif aging.get("error"):
        console.print(f"aging: {aging['error']}", highlight=False)
    if report["errors_count"]:
        console.print(f"[yellow]{report['errors_count']} entries could not be read[/] "
                      f"(first: {report['errors'][0]})", highlight=False)


def add_parser(sub) -> None:
    p = sub.add_parser("scan", help="read-only: each directory's on-disk structure, checked; near-threshold "
                                    "and largest directories; free-space fragmentation; how aged",
                       description=DESCRIPTION, epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", metavar="PATH", help="the tree to scan (not crossing into other mounts)")
    p.add_argument("--near", type=int, default=4, metavar="N",
                   help="list directories at most N creates from a structural change (default 4)")
    p.add_argument("--largest", type=int, default=10, metavar="N", help="list the N largest directories (default 10)")
    p.add_argument("--no-free-space", action="store_true", help="skip the free-space histogram")
    p.add_argument("--no-aging", action="store_true", help="skip the profile comparison")
    p.add_argument("--json", type=output_path, metavar="PATH", help="also write the report as JSON")
    p.set_defaults(func=cmd_scan)
