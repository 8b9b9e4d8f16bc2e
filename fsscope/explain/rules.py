"""Predict, from a file system's geometry, the file indices where its structures change.

The latency probe does one op on files 0..N-1 (names of ``name_length`` digits) in one fresh
directory. Some of those calls change an on-disk structure — the XFS directory leaves its
inode, an XFS inode chunk is allocated, the ext4 directory's first block is full and becomes
a hash tree, the btrfs fs-tree leaf splits — and those are the repeatably slow files. Each
rule here computes *where* from the geometry (entry sizes, inode literal area, block size,
node size), so a changed mkfs option or name length moves the prediction, and says how.
Each file system's rules are a module of their own (xfs.py, ext4.py, btrfs.py, each with
``predict`` and ``limits``); this one dispatches to them and adds the first call.

Every formula below was checked against the on-disk structure on real images (see
tests/test_explain.py): XFS with bulkstat/xfs_db (format, extents, inode numbers), ext4 with
the directory size and its indexed flag, btrfs with dump-tree levels.

Which ops have rules (:data:`OP_RULES`):

- creat, symlink, write-fsync: add one entry and one inode per call → every directory and
  inode-allocation rule, including the first create in each inode cluster of a pre-existing
  chunk that was not read since mount (XFS reads that cluster buffer in the call) (btrfs counts the extra inline/regular extent item they add).
- mkdir: one entry per call like creat; XFS inode-chunk series only with one AG, because XFS
  spreads new directories over the AGs (rotor), so their inodes do not come from one chunk.
- unlink (of files created beforehand): XFS block → short-form conversion when the populated
  directory is in block form; ext4 directories never shrink and btrfs leaf merging is not
  modelled → only the first call there.
- stat, open-existing, rename (same-length sibling name), fallocate (the file is created
  outside the timed call): no structure changes size → only the first call.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fsscope.explain import btrfs, ext4, xfs
from fsscope.explain.geometry import Geometry
from fsscope.explain.prediction import CREATING_OPS, DEFAULT_SYMLINK_TARGET_BYTES, DEFAULT_WRITE_BYTES, Prediction

__all__ = ["OP_RULES", "CREATING_OPS", "Prediction", "normalize_op", "predict", "limits"]

#: What each op's rules cover (see the module docstring for why).
OP_RULES: dict[str, str] = {
    "creat": "first call; XFS short-form→block→leaf→node directory, data-block series, "
             "inode-chunk series, first use of a cold inode cluster; ext4 linear first block, htree conversion, first split "
             "window (or new linear blocks without dir_index); btrfs first leaf full",
    "symlink": "as creat (btrfs: + inline extent item holding the target)",
    "write-fsync": "as creat (btrfs: + the file's extent item)",
    "mkdir": "as creat, except the XFS inode-chunk series (only with one AG)",
    "unlink": "first call; XFS block→short-form conversion when the directory starts in "
              "block form",
    "rename": "first call only (same-length sibling name: directory sizes do not change)",
    "stat": "first call only (nothing changes on disk)",
    "open-existing": "first call only (nothing changes on disk)",
    "fallocate": "first call only (the file is created before the timed call)",
}

#: Predictions that depend on the file system's state, not only on mkfs and the (fresh) probe
#: directory: on a file system fsscope did not make they use its current state.
STATE_DEPENDENT = frozenset({"xfs-inode-chunk-alloc", "xfs-inode-cluster-read",
                             "btrfs-fs-tree-leaf-split"})
USED_NOTE = ("This file system is in use, not fresh: the numbers are its state when the probe "
             "started (free inodes in allocated chunks, the fs tree's fill), and other work "
             "on it can move them.")
USED_CONDITION = "the file system's state at the start (used, not fresh) holds during the run"

#: The rules module of each file system (ext2/3 directories are ext4's).
FS_RULES = {"xfs": xfs, "ext4": ext4, "ext3": ext4, "ext2": ext4, "btrfs": btrfs}


def normalize_op(op: str) -> str:
    """'write_fsync' -> 'write-fsync' (the probe's spelling); unknown ops pass through."""
    return op.strip().lower().replace("_", "-")


def predict(geometry: Geometry, op: str, name_length: int, files: int, *,
            symlink_target_bytes: int = DEFAULT_SYMLINK_TARGET_BYTES,
            write_bytes: int = DEFAULT_WRITE_BYTES) -> list[Prediction]:
    """Predicted structural changes for ``files`` calls of ``op`` with names of
    ``name_length`` characters in one fresh directory, sorted by index. Only indices below
    ``files`` are returned. An op or file system without rules gets the first call only."""
    op = normalize_op(op)
    if files <= 0:
        return []
    found: list[Prediction] = [_first_call(geometry, op)]
    fs = geometry.fs
    if fs in FS_RULES:
        found += FS_RULES[fs].predict(geometry, op, name_length, files,
                                      symlink_target_bytes=symlink_target_bytes, write_bytes=write_bytes)
    kept = [p for p in found if _within(p, files)]
    for i, p in enumerate(kept):
        if p.fs != fs or p.op != op:
            kept[i] = _with(p, fs=fs, op=op)
        if geometry.existing and p.structure in STATE_DEPENDENT:
            kept[i] = _with(kept[i], note=f"{kept[i].note} {USED_NOTE}",
                            condition="; ".join(c for c in (p.condition, USED_CONDITION) if c))
    return sorted(kept, key=lambda p: (p.index if p.index is not None else p.index_low or 0,
                                       p.structure))


def limits(geometry: Geometry, op: str) -> list[str]:
    """What :func:`predict` does NOT cover for this geometry and op, one line each."""
    op = normalize_op(op)
    out = [] if op in OP_RULES else [f"op {op!r} has no rules"]
    fs = geometry.fs
    if fs in FS_RULES:
        return out + FS_RULES[fs].limits(geometry, op)
    return out + [f"{fs}: no structural rules (only the first call)"]


def _within(p: Prediction, files: int) -> bool:
    first = p.index if p.index is not None else p.index_low
    return first is not None and 0 <= first < files


def _with(p: Prediction, **changes: Any) -> Prediction:
    return Prediction(**{**asdict(p), **changes})


def _first_call(g: Geometry, op: str) -> Prediction:
    if op in CREATING_OPS:
        what = ("the first entry goes into a directory nothing has touched since it was made: "
                "its inode, the parent's and the allocation structures are read and joined to "
                "a new journal/log transaction for the first time")
    else:
        what = "the first timed call finds caches and the journal/log in their post-sync state"
    return Prediction(
        structure="first-call", kind="outlier", index=0,
        arithmetic="index 0: no call before it in this directory",
        note=(f"File 0 is the first {op} in this directory: {what}. Not a format change — "
              f"a one-time warm-up every run pays. Cost: one slow call per directory; an "
              f"application creating many directories pays it once per directory."),
        tolerance_why="by definition the first call")

