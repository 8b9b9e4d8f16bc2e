"""Where a dataset's files landed: the block groups (ext4) or allocation groups (XFS) holding
each file's first block, from FIEMAP (Cao et al., FAST'17, Fig. 4: datasets created the same
way on freshly made ext4 file systems clustered in different regions of the disk from run to
run, and the runs' throughput followed).

``group_bytes`` reads the group size with the file system's own tool (``dumpe2fs -h``,
``xfs_info``); btrfs has no such groups (FIEMAP gives its chunk-mapped logical addresses), so
its placement is in GiB of that address space. ``dataset_placement`` summarises the first
physical byte of each file (every file, or an even sample of ``max_files``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import numpy as np

from fsscope.errors import FsscopeError
from fsscope.layout import fiemap
from fsscope.records import Record
from fsscope.tools import run

GIB = 1 << 30


class Placement(Record, frozen=True, kw_only=True, omit_defaults=True):
    """Where a dataset's files start on the device (Fig. 4: block groups / AGs), or why that is
    unknown. ``groups`` is [[group, files], ...]; an unknown placement writes only ``available``
    and ``why``, as the first releases did (hence ``omit_defaults``)."""

    available: bool
    why: str | None = None
    unit: str | None = None
    unit_bytes: int | None = None
    files: int | None = None
    files_placed: int | None = None
    first_byte_min: int | None = None
    first_byte_median: float | None = None
    first_byte_max: int | None = None
    groups: list[list[int]] | None = None
    device_bytes: int | None = None


def group_bytes(fs: str, device: str | None, mountpoint: str) -> tuple[str, int]:
    """(unit name, bytes per unit) of the file system's allocation regions."""
    if fs in ("ext4", "ext3", "ext2") and device:
        text = run("dumpe2fs", "-h", device)
        per_group = re.search(r"^Blocks per group:\s+(\d+)", text, re.M)
        block = re.search(r"^Block size:\s+(\d+)", text, re.M)
        if per_group and block:
            return "block_group", int(per_group.group(1)) * int(block.group(1))
    if fs == "xfs":
        text = run("xfs_info", mountpoint)
        agsize = re.search(r"agsize=(\d+) blks", text)
        bsize = re.search(r"^data\s*=\s*bsize=(\d+)", text, re.M)
        if agsize and bsize:
            return "ag", int(agsize.group(1)) * int(bsize.group(1))
    return "GiB", GIB


def first_bytes(paths: Sequence[str]) -> np.ndarray:
    """The physical byte address of each file's first placed extent (-1: none, e.g. empty or
    inline). The file system should be synced (or remounted) first: no FIEMAP sync here."""
    out = np.full(len(paths), -1, dtype=np.int64)
    for i, path in enumerate(paths):
        try:
            exts = fiemap.placed(fiemap.extents(path, sync=False))
        except OSError:
            continue
        if len(exts):
            out[i] = int(exts["physical_bytes"][0])
    return out


def dataset_placement(paths: Sequence[str], fs: str, device: str | None, mountpoint: str,
                      max_files: int = 4000) -> Placement:
    """Per-group file counts of the dataset and where its first blocks lie."""
    if len(paths) > max_files:
        paths = [paths[int(i)] for i in np.linspace(0, len(paths) - 1, max_files)]
    try:
        unit, unit_bytes = group_bytes(fs, device, mountpoint)
        starts = first_bytes(paths)
    except FsscopeError as exc:  # no FIEMAP (tmpfs) or the tool failed: say why, measure on
        return Placement(available=False, why=str(exc))
    placed = starts[starts >= 0]
    if placed.size == 0:
        return Placement(available=False, why="no file of the dataset has a placed extent")
    groups, counts = np.unique(placed // unit_bytes, return_counts=True)
    return Placement(available=True, unit=unit, unit_bytes=unit_bytes, files=len(paths),
                     files_placed=int(placed.size), first_byte_min=int(placed.min()),
                     first_byte_median=float(np.median(placed)), first_byte_max=int(placed.max()),
                     groups=np.column_stack([groups, counts]).tolist(), device_bytes=_size_of(device))


def _size_of(device: str | None) -> int | None:
    if not device:
        return None
    try:
        fd = os.open(device, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)
