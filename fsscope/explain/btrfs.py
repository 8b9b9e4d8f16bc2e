"""btrfs rules: the fs-tree leaf splits (level 0 -> 1, then packed splits up to three leaves)
from the items each new file adds."""

from __future__ import annotations

from fsscope.explain.geometry import BTRFS_HEADER_BYTES, Geometry
from fsscope.explain.prediction import CREATING_OPS, Prediction

#: Matching tolerance of a btrfs leaf split, in files, and why: +1 because the split may
#: happen in the sync *after* call k (the delayed DIR_INDEX item is inserted at commit), so
#: call k+1 is the first on two leaves; +1 for the change-point estimate of a level shift,
#: which is quantised to a file and can land one file early or late.
BTRFS_LEVEL_SHIFT_TOLERANCE_FILES = 2

BTRFS_ITEM_BYTES = 25        # struct btrfs_item: key 17 + offset 4 + size 4
BTRFS_INODE_ITEM_BYTES = 160
BTRFS_INODE_REF_BYTES = 10   # + name
BTRFS_DIR_ITEM_BYTES = 30    # + name; DIR_ITEM and DIR_INDEX each
BTRFS_INLINE_EXTENT_BYTES = 21  # + inline data
BTRFS_REG_EXTENT_BYTES = 53
BTRFS_KEY_PTR_BYTES = 33     # struct btrfs_key_ptr in a node: key 17 + blockptr 8 + generation 8


def btrfs_file_items(name_length: int, op: str, *, symlink_target_bytes: int,
                     write_bytes: int, max_inline_bytes: int, sector_bytes: int
                     ) -> tuple[int, int, str]:
    """(bytes one new file adds to the fs-tree leaf, bytes inserted inside the timed call,
    the arithmetic). DIR_INDEX items are delayed to the transaction commit (the next sync)."""
    L, I = name_length, BTRFS_ITEM_BYTES
    inode = I + BTRFS_INODE_ITEM_BYTES
    ref = I + BTRFS_INODE_REF_BYTES + L
    dir_item = I + BTRFS_DIR_ITEM_BYTES + L
    parts = [f"INODE_ITEM {inode}", f"INODE_REF {ref}", f"DIR_ITEM {dir_item}",
             f"DIR_INDEX {dir_item}"]
    extra = 0
    if op == "symlink":
        extra = I + BTRFS_INLINE_EXTENT_BYTES + symlink_target_bytes
        parts.append(f"inline EXTENT_DATA {extra} (target {symlink_target_bytes} B)")
    elif op == "write-fsync" and write_bytes > 0:
        if write_bytes <= max_inline_bytes and write_bytes < sector_bytes:
            extra = I + BTRFS_INLINE_EXTENT_BYTES + write_bytes
            parts.append(f"inline EXTENT_DATA {extra}")
        else:
            extra = I + BTRFS_REG_EXTENT_BYTES
            parts.append(f"EXTENT_DATA {extra}")
    total = inode + ref + 2 * dir_item + extra
    in_call = total - dir_item
    text = (f"items of one file (25-byte item header each): {' + '.join(parts)} = {total} B"
            f" ({in_call} B inserted in the call, DIR_INDEX at commit)")
    return total, in_call, text


def predict(g: Geometry, op: str, L: int, files: int, *, symlink_target_bytes: int,
            write_bytes: int) -> list[Prediction]:
    if op not in CREATING_OPS or g.btrfs_fs_tree_level != 0:
        return []
    free, node_bytes = g.btrfs_fs_tree_leaf_free_bytes, g.node_size_bytes
    if free is None or not node_bytes:
        return []
    per_file, in_call, items = btrfs_file_items(
        L, op, symlink_target_bytes=symlink_target_bytes, write_bytes=write_bytes,
        max_inline_bytes=g.btrfs_max_inline_bytes or 2048,
        sector_bytes=g.btrfs_sector_size_bytes or 4096)
    out = [_btrfs_first_split(g, op, free, per_file, in_call, items)]
    if g.btrfs_tree_includes_dir:
        out += [_btrfs_later_split(node_bytes, free, per_file, in_call, items, k) for k in (2, 3)]
    return out


#: Later btrfs splits are predicted while every leaf is a sibling of the one being inserted
#: into (up to three leaves): pushes then pack them full before the next split.
BTRFS_PACKED_SPLITS = 3


def _btrfs_later_split(node_bytes: int, free: int, per_file: int, in_call: int, items: str,
                       k: int) -> Prediction:
    leaf = node_bytes - BTRFS_HEADER_BYTES
    total = free + (k - 1) * leaf
    fit = total // per_file
    left = total - fit * per_file
    index = fit if left < in_call else fit + 1
    tol = BTRFS_LEVEL_SHIFT_TOLERANCE_FILES + (k - 1)
    return Prediction(
        structure=f"btrfs-fs-tree-leaf-split-{k}", kind="level_shift", index=index,
        arithmetic=(f"{items}; before the split to {k + 1} leaves the {k} leaves are packed "
                    f"(split_leaf first pushes items into the neighbour leaves): free {free} B "
                    f"+ {k - 1} x leaf ({node_bytes} - {BTRFS_HEADER_BYTES} = {leaf} B) "
                    f"= {total} B; {total} // {per_file} = {fit} files, {left} B left "
                    f"-> file {index}"),
        tolerance_files=tol,
        tolerance_why=(f"+-{BTRFS_LEVEL_SHIFT_TOLERANCE_FILES} as the first split, plus up to "
                       f"{k - 1} file(s) early: an item cannot straddle two leaves, so each "
                       f"of the {k - 1} leaf boundaries wastes less than one file's items"),
        note=(f"After the first split the creates keep filling the fs tree: new DIR_ITEMs land "
              f"by name hash in the left leaf, DIR_INDEX and inode items append on the right. "
              f"Before splitting a full leaf btrfs pushes items into its neighbours, so while "
              f"there are at most three leaves they all fill up: the tree splits to {k + 1} "
              f"leaves about every {leaf // per_file} files ({leaf} B of leaf / {per_file} B "
              f"per file), here at file {index}. The split itself is a short extra cost, and "
              f"each create now COWs one more leaf-sized path -- a small step, often lost in "
              f"noise. Beyond three leaves the hash leaf and the append leaf no longer touch "
              f"and splits come earlier (not predicted)."))


def _btrfs_first_split(g: Geometry, op: str, free: int, per_file: int, in_call: int,
                       items: str) -> Prediction:
    fit = free // per_file                 # files 0..fit-1 fit completely
    left = free - fit * per_file           # room left before file `fit`
    index = fit if left < in_call else fit + 1
    where = ("the split happens inside that call" if left < in_call else
             f"call {fit} still fits; the split happens in the following sync (DIR_INDEX), so "
             f"call {fit + 1} is the first on two leaves")
    arithmetic = (f"{items}; leaf = nodesize {g.node_size_bytes} - header {BTRFS_HEADER_BYTES}"
                  f", measured free {free} B; {free} // {per_file} = {fit} files fit, "
                  f"{left} B left < {per_file} -> {where}")
    condition = ""
    low = high = None
    if not g.btrfs_tree_includes_dir:
        condition = ("free space read before the probe directory existed: it takes one "
                     "directory's items (330 + 3 x its name length B) -- pass probe_dir")
        low, high = max(0, index - 3), index
    return Prediction(
        structure="btrfs-fs-tree-leaf-split", kind="level_shift",
        index=index if low is None else None, index_low=low, index_high=high,
        arithmetic=arithmetic, condition=condition,
        tolerance_files=BTRFS_LEVEL_SHIFT_TOLERANCE_FILES,
        tolerance_why=("+-2 files: the split may land in the sync after the call (delayed "
                       "DIR_INDEX) and a change point is estimated to +-1 file"),
        note=(f"btrfs keeps inodes and directory entries as items in one B-tree (the fs "
              f"tree). Each new file adds {per_file} B of items; the single leaf "
              f"({g.node_size_bytes} B) is full after {fit} files, and from file {index} on "
              f"the tree has a root node over two leaves (level 0 -> 1). Every later create "
              f"copy-on-writes two leaves and the root instead of one leaf, so latency steps "
              f"up to a new level rather than showing one spike. Admin: a property of "
              f"nodesize ({g.node_size_bytes} B); a larger nodesize moves the step later."))


def limits(g: Geometry, op: str) -> list[str]:
    """What :func:`predict` does not cover on btrfs, one line each."""
    out = ["btrfs leaf splits after the third leaf are not predicted (the hash and append "
           "leaves are no longer neighbours; a split may make two leaves)"]
    per_file = (f"{BTRFS_ITEM_BYTES + BTRFS_INODE_ITEM_BYTES} + {BTRFS_ITEM_BYTES + BTRFS_INODE_REF_BYTES} + "
                f"2 x {BTRFS_ITEM_BYTES + BTRFS_DIR_ITEM_BYTES} = 330 B + 3 x the name length")
    if op in CREATING_OPS and g.btrfs_fs_tree_level is None:
        out.append("btrfs: the fs tree's root was not read (its level and its leaf's free space), so no leaf "
                   f"split is predicted; each new file adds {per_file} of items")
    elif op in CREATING_OPS and g.btrfs_fs_tree_level:
        leaf = (g.node_size_bytes or 0) - BTRFS_HEADER_BYTES
        out.append(f"btrfs: this subvolume's fs tree already has {g.btrfs_fs_tree_level} level(s) above its "
                   "leaves, so no split is predicted: a new file's items sort after every existing key (inode "
                   "numbers only grow) and go into the rightmost leaf, whose free space is not read, and before "
                   "splitting it btrfs pushes items into its left neighbour, whose free space is not read either. "
                   f"Each new file adds {per_file} of items; a {leaf}-B leaf (nodesize {g.node_size_bytes} - "
                   f"header {BTRFS_HEADER_BYTES}) holds {leaf} // that many, and the tree grows a level only "
                   f"when its root node's {leaf // BTRFS_KEY_PTR_BYTES} pointers ({leaf} // "
                   f"{BTRFS_KEY_PTR_BYTES}-B key pointers) are used up")
    elif op in CREATING_OPS and g.btrfs_fs_tree_leaf_free_bytes is None:
        out.append("btrfs: the fs tree's leaf was not read (its free space), so no leaf split is predicted; "
                   f"each new file adds {per_file} of items")
    if op == "unlink":
        out.append("btrfs unlink: leaf merging/rebalancing is not modelled")
    return out
