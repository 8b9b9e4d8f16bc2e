"""Which on-disk structure a directory's entries put it in, and how far the next change is.

The probe's rules (xfs.py, ext4.py) predict where a directory grown one name at a time
changes format. A live tree's directories hold names of many lengths, so here the same
arithmetic runs on the actual names: the bytes they take in each format decide the format,
and adding names of the directory's typical length until the format changes says how many
creates are left before one pays the change. Pure: names and geometry in, a verdict out.

- XFS: short-form (entries inside the inode's data fork) -> block (one directory block with
  its hash leaf) -> leaf (data blocks + one leaf block) -> node (leaf blocks + free index).
- ext4: one linear block -> htree (dir_index) or more linear blocks; the htree's depth
  (indirect levels) follows from how many leaf blocks the root must index.
- btrfs: entries are items in the fs tree; a directory has no format of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from fsscope.explain.ext4 import ext4_rec_len
from fsscope.explain.geometry import Geometry
from fsscope.explain.xfs import xfs_data_entry_bytes, xfs_sf_sizes

#: XFS directory segments (xfs_dir2.h): the leaf blocks live at 32 GiB, the free index at 64 GiB.
XFS_DIR2_LEAF_OFFSET_BYTES = 32 * 2**30
XFS_DIR2_FREE_OFFSET_BYTES = 64 * 2**30
#: ext4 htree: dx_root header (fake '.' and '..' + dx_root_info) and the dx_tail (csum).
EXT4_DX_ROOT_HEADER_BYTES = 32
EXT4_DX_NODE_HEADER_BYTES = 8
EXT4_DX_TAIL_BYTES = 8
#: How many creates ahead a change counts as "within a few entries".
NEAR_ENTRIES = 4


@dataclass(frozen=True)
class DirShape:
    """What a directory's names put it in: ``structure`` and the bytes that decided it."""

    structure: str              # xfs: shortform|block|leaf|node; ext4: linear|htree; btrfs: items
    bytes_needed: int           # the entries' bytes in that structure (sf: the fork's size)
    limit_bytes: int | None     # what the structure holds (None: no limit)
    data_blocks: int | None = None      # xfs leaf/node: data blocks the entries fill
    depth: int | None = None    # ext4 htree: indirect levels (0: the root indexes the leaves)


def xfs_shape(g: Geometry, name_lengths: list[int], *, ino8: bool = False,
              fork_bytes: int | None = None) -> DirShape:
    """XFS format for these names (the inode's data fork: ``fork_bytes``, default the
    literal area). Assumes packed data blocks (no free space left by removed names)."""
    ftype, crc = "ftype" in g.features, "crc" in g.features
    B = g.dir_block_size_bytes or 4096
    fork = fork_bytes if fork_bytes is not None else (g.xfs_literal_area_bytes or 0)
    sf_hdr, _ = xfs_sf_sizes(0, ftype, ino8)
    sf = sf_hdr + sum(xfs_sf_sizes(n, ftype, ino8)[1] for n in name_lengths)
    if sf <= fork:
        return DirShape("shortform", sf, fork)
    hdr = 64 if crc else 16
    dots = xfs_data_entry_bytes(1, ftype) + xfs_data_entry_bytes(2, ftype)
    data = sum(xfs_data_entry_bytes(n, ftype) for n in name_lengths)
    count = len(name_lengths) + 2
    block = hdr + dots + data + 8 * count + 8
    if block <= B:
        return DirShape("block", block, B)
    blocks, free = 1, B - hdr - dots
    for n in name_lengths:
        size = xfs_data_entry_bytes(n, ftype)
        if size > free:
            blocks, free = blocks + 1, B - hdr
        free -= size
    leaf = hdr + 4 + 2 * blocks + 8 * count
    return DirShape("leaf" if leaf <= B else "node", leaf, B, data_blocks=blocks)


def ext4_shape(g: Geometry, name_lengths: list[int], *, size_bytes: int | None = None) -> DirShape:
    """ext4 structure for these names. ``size_bytes`` (the directory's st_size) gives the
    htree depth: ext4 directories never shrink, so the blocks it has are what the root indexes."""
    B = g.block_size_bytes or 4096
    tail = 12 if g.has_csum else 0
    needed = 24 + sum(ext4_rec_len(n) for n in name_lengths)
    if needed <= B - tail:
        return DirShape("linear", needed, B - tail)
    if "dir_index" not in g.features:
        return DirShape("linear", needed, None)
    dx_tail = EXT4_DX_TAIL_BYTES if g.has_csum else 0
    root_limit = (B - EXT4_DX_ROOT_HEADER_BYTES - dx_tail) // 8
    node_limit = (B - EXT4_DX_NODE_HEADER_BYTES - dx_tail) // 8
    blocks = (size_bytes or 0) // B
    leaves = max(blocks - 1, -(-needed // (B - tail)))  # at least what the entries fill
    depth = 0 if leaves <= root_limit else 1 if leaves <= root_limit * node_limit else 2
    return DirShape("htree", needed, None, data_blocks=leaves, depth=depth)


def shape(g: Geometry, name_lengths: list[int], *, ino8: bool = False, fork_bytes: int | None = None,
          size_bytes: int | None = None) -> DirShape | None:
    """The structure of a directory with these names on this file system; None: no rules.
    ``ino8``, ``fork_bytes``: xfs's (64-bit inode numbers, attribute fork offset);
    ``size_bytes``: ext4's (the directory's st_size)."""
    if g.fs == "xfs" and g.xfs_literal_area_bytes:
        return xfs_shape(g, name_lengths, ino8=ino8, fork_bytes=fork_bytes)
    if g.fs in ("ext4", "ext3", "ext2") and g.block_size_bytes:
        if not g.features or "inline_data" in g.features:  # superblock not read / no rule
            return None
        return ext4_shape(g, name_lengths, size_bytes=size_bytes)
    if g.fs == "btrfs":
        return DirShape("items", 2 * sum(name_lengths), None)
    return None


def creates_until_change(g: Geometry, name_lengths: list[int], *, next_name_length: int,
                         limit: int = 64, ino8: bool = False, fork_bytes: int | None = None,
                         size_bytes: int | None = None) -> tuple[int, str] | None:
    """(k, new structure): the k-th create of a ``next_name_length`` name from now changes
    the structure (1 = the very next one). None when nothing changes within ``limit``
    creates (or there are no rules). An htree's later changes (leaf splits) depend on the
    hash of each name, so only its depth is followed. The keywords are :func:`shape`'s."""
    shape_of = partial(shape, g, ino8=ino8, fork_bytes=fork_bytes, size_bytes=size_bytes)
    now = shape_of(name_lengths)
    if now is None or now.structure == "items":
        return None
    names = list(name_lengths)
    for k in range(1, limit + 1):
        names.append(next_name_length)
        later = shape_of(names)
        if later is None:
            return None
        if later.structure != now.structure or later.depth != now.depth:
            return k, later.structure + (f" depth {later.depth}" if later.depth else "")
    return None


__all__ = ["DirShape", "xfs_shape", "ext4_shape", "shape", "creates_until_change", "NEAR_ENTRIES",
           "XFS_DIR2_LEAF_OFFSET_BYTES", "XFS_DIR2_FREE_OFFSET_BYTES"]
