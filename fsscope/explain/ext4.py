"""ext4 rules: a directory's linear first block, its htree conversion and first leaf split (or
new linear blocks without dir_index), for a directory grown one create at a time."""

from __future__ import annotations

from dataclasses import dataclass

from fsscope.explain.ext4_htree import HASH_NAMES, dirhash, first_leaf_split
from fsscope.explain.geometry import Geometry
from fsscope.explain.prediction import CREATING_OPS, Prediction, round_up, series_count


def ext4_rec_len(name_length: int) -> int:
    """ext4 directory entry size: inode 4 + rec_len 2 + name_len 1 + type 1 + name, to 4 B."""
    return round_up(8 + name_length, 4)


@dataclass(frozen=True)
class Ext4DirLimits:
    first_block_files: int   # files block 0 holds (with . and ..) -> conversion index
    block_files: int         # files any other block holds
    split_low: int           # first htree leaf split: earliest and latest possible index
    split_high: int
    moved_files: int         # entries do_split moves to the new leaf at conversion
    arithmetic: dict[str, str]


def ext4_dir_limits(*, block_bytes: int, name_length: int, csum: bool,
                    existing_name_bytes: tuple[int, ...] = ()) -> Ext4DirLimits:
    """ext4 thresholds for a directory of one block holding '.', '..' and entries with names
    of ``existing_name_bytes`` (a fresh subdirectory: none; a fresh root: lost+found)."""
    rec = ext4_rec_len(name_length)
    tail = 12 if csum else 0   # struct ext4_dir_entry_tail at the end of every leaf block
    dots = 12 + 12
    existing = sum(ext4_rec_len(n) for n in existing_name_bytes)
    c0 = (block_bytes - tail - dots - existing) // rec
    c = (block_bytes - tail) // rec
    # make_indexed_dir moves block 0's c0 entries to a new block and do_split moves the
    # upper half by size (entries whose cumulative size stays <= block/2) to another one.
    moved, size = 0, 0
    for _ in range(c0):
        if size + rec // 2 > block_bytes // 2:
            break
        size += rec
        moved += 1
    fuller = max(moved, c0 - moved) + 1  # the new entry may land in the fuller leaf
    # earliest split: every later entry hashes into the fuller leaf; latest: both leaves fill.
    low = c0 + 1 + (c - fuller)
    high = 2 * c
    csum_text = " - tail 12 (metadata_csum)" if csum else ""
    others = "".join(f" - {ext4_rec_len(n)}" for n in existing_name_bytes)
    others_text = "".join(f" - an entry of {n} B name {ext4_rec_len(n)}" for n in existing_name_bytes)
    arithmetic = {
        "first": (f"entry = roundup4(8 + {name_length}) = {rec} B; block 0 = {block_bytes} B"
                  f"{csum_text} - '.' 12 - '..' 12{others_text} -> ({block_bytes}"
                  f"{' - 12' if csum else ''} - 24{others}) // {rec} = {c0} files fit -> file "
                  f"{c0} needs a second block"),
        "block": f"other blocks: ({block_bytes}{' - 12' if csum else ''}) // {rec} = {c} files",
        "split": (f"conversion splits the {c0} entries {c0 - moved}/{moved} over two leaves of "
                  f"{c}; the first leaf to fill splits: earliest {c0} + 1 + ({c} - {fuller}) "
                  f"= {low} (all new names hash to the fuller leaf), latest 2 x {c} = {high} "
                  f"(both leaves full)"),
    }
    return Ext4DirLimits(c0, c, low, high, moved, arithmetic)


def predict(g: Geometry, op: str, L: int, files: int, **_: int) -> list[Prediction]:
    if op not in CREATING_OPS or not g.block_size_bytes:
        return []
    if "inline_data" in g.features:
        return []  # directories start inline in the inode: different arithmetic, no rule
    if g.existing and not g.features:
        return _unread_conversion(g, op, L)  # dir_index and metadata_csum unknown
    B = g.block_size_bytes
    if g.ext4_dir_size_bytes is not None and g.ext4_dir_size_bytes != B:
        return []  # not a fresh one-block directory
    lim = ext4_dir_limits(block_bytes=B, name_length=L, csum=g.has_csum,
                          existing_name_bytes=g.probe_dir_entry_name_bytes)
    c0 = lim.first_block_files
    indexed = "dir_index" in g.features
    scan_end = c0 if indexed else files
    out = [Prediction(
        structure="ext4-dir-linear-scan", kind="linear", index=0, end=scan_end,
        arithmetic=(f"{lim.arithmetic['first']}; every lookup scans block 0 linearly"
                    if indexed else "without dir_index every lookup scans all entries of all "
                                    f"blocks: files 0..{files - 1}"),
        tolerance_why="range ends where the first block is full (exact); a measured range "
                      "matches when it lies mostly inside",
        note=(f"Inside a directory block ext4 keeps entries in creation order and finds a "
              f"name (and free space) by scanning them, so each {op} of a new name costs a "
              f"bit more than the last: latency grows linearly over files 0..{scan_end - 1}"
              + (f", the {c0} entries block 0 holds." if indexed else
                 ", because without dir_index the scan covers the whole directory.")))]
    if indexed:
        out.append(Prediction(
            structure="ext4-dir-htree-conversion", kind="outlier", index=c0,
            arithmetic=g.files_where + lim.arithmetic["first"] + "; with dir_index the "
                       "directory becomes a hash tree (htree) at that call",
            note=(f"Block 0 is full after {c0} names of {L} characters ({B}-byte blocks"
                  f"{', metadata_csum tail' if g.has_csum else ''}). File {c0} needs a second "
                  f"block, and with dir_index ext4 converts the directory into a hash-indexed "
                  f"one right there: block 0 becomes the htree root, the entries are moved to "
                  f"a new block, hashed and split into two leaves (3 blocks in all) -- two "
                  f"block allocations, a sort and a copy of every entry in one call, once per "
                  f"directory. Afterwards a lookup scans one leaf, not the whole directory.")))
        exact = _exact_split(g, L, lim)
        if exact is not None:
            out.append(exact)
        else:
            out.append(Prediction(
                structure="ext4-htree-first-leaf-split", kind="outlier", index=None,
                index_low=lim.split_low, index_high=lim.split_high,
                arithmetic=f"{lim.arithmetic['block']}; {lim.arithmetic['split']}",
                tolerance_why="window from the hash split bounds: the exact index depends on the "
                              "directory hash seed, which mkfs draws at random",
                note=(f"After the conversion new names go to the leaf their hash selects; the "
                      f"first leaf to fill is split in two (one block allocated, half the entries "
                      f"moved) somewhere in files {lim.split_low}..{lim.split_high}. Where exactly "
                      f"depends on the directory hash seed: "
                      + ("it is null here (fixed), so the split repeats at the same file on every "
                         "fresh file system; fsscope computes it for the probe's own names in a fresh "
                         "subdirectory, not beside entries already there." if g.ext4_hash_seed_null else
                         "mkfs draws it at random, so on fresh file systems the split moves from "
                         "run to run and is rarely a repeatable outlier."))))
        scan_to = exact.index if exact is not None and exact.index is not None else lim.split_low
        if scan_to > c0 + 1:
            out.append(Prediction(
                structure="ext4-htree-leaf-scan", kind="linear", index=c0 + 1,
                end=scan_to, arithmetic=lim.arithmetic["split"],
                tolerance_why="range ends inside the hash-dependent split window; compared by "
                              "overlap",
                note=("After the conversion a lookup hashes the name and scans one of two "
                      "leaves, which fill as files are added, so latency keeps growing with "
                      "the leaves' fill until one splits (the slope is not predicted).")))
    else:
        out.append(Prediction(
            structure="ext4-dir-new-linear-block", kind="series", index=c0,
            stride=lim.block_files, count=series_count(c0, lim.block_files, files),
            arithmetic=f"{lim.arithmetic['first']}; {lim.arithmetic['block']}; without "
                       f"dir_index blocks are appended: {c0}, {c0} + {lim.block_files}, ...",
            note=(f"Without dir_index the directory stays a linear list of blocks: when all "
                  f"are full (file {c0}, then every {lim.block_files} files) one more block is "
                  f"appended, and every lookup scans all of them -- creation cost grows with "
                  f"directory size. Admin: enable dir_index (tune2fs -O dir_index; e2fsck -D).")))
    return out


def _unread_conversion(g: Geometry, op: str, L: int) -> list[Prediction]:
    """An existing ext4 whose superblock could not be read: the conversion to an htree where
    block 0 is full, assuming dir_index (mke2fs's default since 2003), between the file
    metadata_csum's 12-byte tail puts it at and the one without it."""
    B = g.block_size_bytes or 4096
    if g.ext4_dir_size_bytes is not None and g.ext4_dir_size_bytes != B:
        return []
    with_csum, plain = (ext4_dir_limits(block_bytes=B, name_length=L, csum=csum,
                                        existing_name_bytes=g.probe_dir_entry_name_bytes)
                        for csum in (True, False))
    low, high = with_csum.first_block_files, plain.first_block_files
    condition = ("the superblock was not read: dir_index assumed (mke2fs's default); "
                 + ("metadata_csum unknown, and the 12-byte tail it adds to a block changes nothing here"
                    if low == high else f"metadata_csum unknown: {low} with its 12-byte tail, {high} without"))
    return [Prediction(
        structure="ext4-dir-htree-conversion", kind="outlier", index=low if low == high else None,
        index_low=None if low == high else low, index_high=None if low == high else high,
        arithmetic=f"{g.files_where}with metadata_csum: {with_csum.arithmetic['first']}; without: "
                   f"{plain.arithmetic['first']}; with dir_index the directory becomes an htree at that call",
        condition=condition,
        tolerance_why=("exact under the assumptions" if low == high else
                       "a window of two files: whether metadata_csum is on is in the superblock"),
        note=(f"Block 0 of the {op} directory is full after {low}{'' if low == high else f' or {high}'} names "
              f"of {L} characters ({B}-byte blocks from statfs); the next create converts it into a hashed "
              f"index: two block allocations, a sort and a copy of every entry in one call."))]


def _exact_split(g: Geometry, L: int, lim: Ext4DirLimits) -> Prediction | None:
    """The first leaf split at its exact file, where the hash seed is the same in every run
    (an existing file system's, or a null one) and the probe's directory starts empty: the
    kernel's hash of each name the probe will create and do_split's arithmetic, replayed
    (:mod:`fsscope.explain.ext4_htree`). None: the window stays."""
    seed, version = g.ext4_hash_seed, g.ext4_hash_version
    if seed is None or version is None or not (g.existing or g.ext4_hash_seed_null):
        return None
    if g.probe_dir_in_root is not False or "casefold" in g.features or "encrypt" in g.features:
        return None   # the names already there (lost+found) or the hashed form are not known
    B = g.block_size_bytes or 4096
    names = (f"{i:0{L}d}".encode() for i in range(lim.split_high + 1))
    index = first_leaf_split(names, block_bytes=B, csum=g.has_csum,
                             hash_of=lambda name: dirhash(name, version, seed))
    if index is None:
        return None
    seed_text = "null (MD4's initial words)" if not any(seed) else " ".join(f"{w:08x}" for w in seed)
    why = "an existing file system keeps its seed" if g.existing else "the seed is null"
    return Prediction(
        structure="ext4-htree-first-leaf-split", kind="outlier", index=index,
        arithmetic=(f"{lim.arithmetic['block']}; hash {HASH_NAMES.get(version, version)} with seed "
                    f"{seed_text} of each name (fs/ext4/hash.c); conversion at file {lim.first_block_files} "
                    f"splits block 1 by hash, then each name goes to the leaf whose index hash is "
                    f"the largest at most its own; the first leaf to outgrow {B}"
                    f"{' - 12' if g.has_csum else ''} B is split (do_split) by file {index} "
                    f"(window without the hashes: {lim.split_low}..{lim.split_high})"),
        tolerance_why=f"exact: {why}, so every run's names hash alike and split at the same file",
        note=(f"After the conversion new names go to the leaf their hash selects; the first leaf to "
              f"fill is split in two (one block allocated, half the entries moved) at file {index}. "
              f"ext4's hash of the probe's names under this file system's seed puts it there in every "
              f"run: {why}."))


def limits(g: Geometry, op: str) -> list[str]:
    """What :func:`predict` does not cover on ext4, one line each."""
    out = ["ext4 inline_data: directories start inside the inode; no rule"] if "inline_data" in g.features else []
    if g.existing and not g.features:
        out.append("ext4 superblock not read (features unknown): only the htree conversion is predicted, "
                   "assuming dir_index, as a window over metadata_csum")
    return out + ["ext4 htree leaf splits after the first one depend on the per-mkfs hash seed: not predicted",
                  "ext4 moving to the next block group's inodes is not predicted"]
