"""What repeats: a directory's format changes where the kernel marked them (with the rules'
arithmetic), and slow calls that recur at a fixed stride on one file or directory.

A format change is read from the kernel's own events inside a call (XFS's ``xfs_dir2_*``
conversions and new directory blocks; an ext4 block allocated to a directory's inode) and set
beside the rules of :mod:`fsscope.explain` for the directory's typical name length: where the
arithmetic says the change comes, from the names it held before that call. A prediction that
does not match says so; nothing is made to agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np

from fsscope.explain.ext4 import ext4_dir_limits
from fsscope.explain.geometry import Geometry
from fsscope.explain.xfs import xfs_attr_fork_offset_bytes, xfs_dir_limits

#: Slow calls needed in a group before a stride is looked for, and the share of the gaps
#: between them that must be that stride.
MIN_SLOW = 3
STRIDE_SHARE = 0.6

XFS_CONVERSIONS = {"xfs_dir2_sf_to_block": "sf", "xfs_dir2_block_to_leaf": "block",
                   "xfs_dir2_leaf_to_node": "node"}


def format_events(short: list[str], events: np.ndarray, where: np.ndarray, dirs) -> Iterator[tuple[int, str, int]]:
    """(call, event, directory inode) for each directory-format change the kernel marked inside a
    call (``where[k]``: the call event ``k`` fell in, -1 for none; ``short``: event names by
    code), once per call and event; the block a conversion adds is part of the conversion. An
    ext4 block allocation counts where its inode is a directory in ``dirs``."""
    from fsscope.watch.causes import FORMAT_EVENTS

    conversions = [c for c, n in enumerate(short) if n in FORMAT_EVENTS and n != "xfs_dir2_grow_inode"]
    converted = set(where[np.isin(events["code"], conversions) & (where >= 0)].tolist())
    seen: set[tuple[int, str]] = set()
    for k in np.flatnonzero(where >= 0):
        name = short[int(events["code"][k])]
        d = int(events["arg"][k])
        if not (name in FORMAT_EVENTS or (name == "ext4_allocate_blocks" and d in dirs)):
            continue
        i = int(where[k])
        if (i, name) in seen or (name == "xfs_dir2_grow_inode" and i in converted):
            continue
        seen.add((i, name))
        yield i, name, d


def format_verdict(g: Geometry | None, event: str, name_bytes: int, new_dir: bool,
                   before: int) -> tuple[int, int | None, str, bool | None]:
    """(entries before, entries the rules predict, the arithmetic, whether they agree) for a
    format change: a new directory's first block, or ``before`` names (-1: not known)."""
    if new_dir:
        return 0, 0, "a new directory gets its first block", True
    if before < 0:
        return -1, None, "the names the directory held before this call are not known", None
    return (before, *predicted(g, event, name_bytes, before))


def predicted(g: Geometry | None, event: str, name_bytes: int, before: int) -> tuple[int | None, str, bool | None]:
    """(entries the rules say the directory held when ``event`` fired, the arithmetic, whether
    that is what the kernel showed: None when the rules say nothing exact)."""
    if g is None or not name_bytes:
        return None, "no geometry or name length: no arithmetic", None
    if event in XFS_CONVERSIONS or event == "xfs_dir2_grow_inode":
        if not (g.dir_block_size_bytes and g.xfs_literal_area_bytes and g.inode_size_bytes):
            return None, "XFS geometry not read: no arithmetic", None
        ftype, crc = "ftype" in g.features, "crc" in g.features
        lit = g.xfs_literal_area_bytes
        forks = [(lit, f"literal area {lit} B"),
                 (xfs_attr_fork_offset_bytes(g.inode_size_bytes, lit), "an attr fork preallocated")]
        tried = []
        for fork, why in forks:
            lim = xfs_dir_limits(fork_bytes=fork, dir_block_bytes=g.dir_block_size_bytes,
                                 name_length=name_bytes, ftype=ftype, crc=crc)
            if event == "xfs_dir2_grow_inode":  # leaf form: data block k+1 at first + k x later
                k = max(0, round((before - lim.first_block_files) / max(lim.block_files, 1)))
                at = lim.first_block_files + k * lim.block_files
                return at, lim.arithmetic["data"] + f" -> data block {k + 1} at {at} files", before == at
            index = {"sf": lim.sf_capacity, "block": lim.block_capacity, "node": lim.node_index}[
                XFS_CONVERSIONS[event]]
            text = f"data fork: {why}; {lim.arithmetic[XFS_CONVERSIONS[event]]}"
            if index == before:
                return index, text, True
            tried.append((index, text))
        return tried[0][0], tried[0][1] + " (" + "; ".join(f"{t[0]}" for t in tried) + " predicted)", False
    if event == "ext4_allocate_blocks":
        if not g.block_size_bytes:
            return None, "ext4 geometry not read: no arithmetic", None
        ext = ext4_dir_limits(block_bytes=g.block_size_bytes, name_length=name_bytes, csum=g.has_csum)
        if before <= ext.first_block_files:
            return ext.first_block_files, ext.arithmetic["first"], before == ext.first_block_files
        if before <= ext.split_high:
            return None, ext.arithmetic["split"], ext.split_low <= before <= ext.split_high
        return None, ext.arithmetic["block"] + "; a later leaf split depends on the names' hashes", None
    return None, "no rule for this event", None


def stride(ordinals: np.ndarray) -> tuple[int, int] | None:
    """(stride, how many of the gaps are it) when the slow calls' positions in their group
    mostly step by one stride (> 1), else None."""
    if len(ordinals) < MIN_SLOW:
        return None
    gaps = np.diff(np.sort(ordinals))
    (gap, hits), = Counter(gaps.tolist()).most_common(1)
    if gap <= 1 or hits < STRIDE_SHARE * len(gaps):
        return None
    return int(gap), int(hits)
