"""Plain words for the structure ids the rules predict (``xfs-inode-chunk-alloc``), for the
titles people read; the id stays in the record and the note's detail line for searching."""

from __future__ import annotations

PLAIN: dict[str, str] = {
    "first-call": "the first call (cold caches, first allocations)",
    "xfs-dir-shortform-to-block": "XFS directory outgrows the inode: short-form → one block",
    "xfs-dir-block-to-leaf": "XFS directory block → leaf format (a separate hash index)",
    "xfs-dir-new-data-block": "XFS directory adds a data block",
    "xfs-dir-leaf-to-node": "XFS directory leaf → node format (a B-tree of leaves)",
    "xfs-dir-block-to-shortform": "XFS directory shrinks back into the inode (short-form)",
    "xfs-inode-chunk-alloc": "XFS allocates a new chunk of 64 inodes",
    "xfs-inode-cluster-read": "XFS reads an inode cluster from disk (first create in it)",
    "ext4-dir-linear-scan": "ext4 scans a linear directory block by block",
    "ext4-dir-htree-conversion": "ext4 directory becomes an htree (hashed index)",
    "ext4-htree-first-leaf-split": "ext4 htree splits its first leaf block",
    "ext4-htree-leaf-scan": "ext4 scans an htree leaf block",
    "ext4-dir-new-linear-block": "ext4 linear directory adds a block",
    "btrfs-fs-tree-leaf-split": "btrfs file-system tree leaf splits",
}


def plain(structure: str | None) -> str:
    """``xfs-inode-chunk-alloc`` → 'XFS allocates a new chunk of 64 inodes'; unknown ids
    are returned as they are (a new rule without a name here still shows something true)."""
    if not structure:
        return ""
    return PLAIN.get(structure, structure)
