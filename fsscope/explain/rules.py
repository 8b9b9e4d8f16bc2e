"""Predict, from a file system's geometry, the file indices where its structures change.

The latency probe does one op on files 0..N-1 (names of ``name_length`` digits) in one fresh
directory. Some of those calls change an on-disk structure — the XFS directory leaves its
inode, an XFS inode chunk is allocated, the ext4 directory's first block is full and becomes
a hash tree, the btrfs fs-tree leaf splits — and those are the repeatably slow files. Each
rule here computes *where* from the geometry (entry sizes, inode literal area, block size,
node size), so a changed mkfs option or name length moves the prediction, and says how.

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

from dataclasses import asdict, dataclass
from typing import Any, Literal

from fsscope.explain.geometry import BTRFS_HEADER_BYTES, Geometry

Kind = Literal["outlier", "series", "level_shift", "linear"]

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

#: Ops that add one directory entry (and one inode) per timed call.
CREATING_OPS = frozenset({"creat", "mkdir", "symlink", "write-fsync"})

#: The probe's symlink target length (fsscope.workloads.probe.SYMLINK_TARGET).
DEFAULT_SYMLINK_TARGET_BYTES = 22
DEFAULT_WRITE_BYTES = 4096

#: Matching tolerance of a btrfs leaf split, in files, and why: +1 because the split may
#: happen in the sync *after* call k (the delayed DIR_INDEX item is inserted at commit), so
#: call k+1 is the first on two leaves; +1 for the change-point estimate of a level shift,
#: which is quantised to a file and can land one file early or late.
BTRFS_LEVEL_SHIFT_TOLERANCE_FILES = 2


@dataclass(frozen=True)
class Prediction:
    """A structural change predicted at a file index (or a series / window / range of them).

    ``index``: exact index (series: first element; linear: first file of the range).
    ``index_low``/``index_high``: inclusive window when the index is not exact (hash-dependent).
    ``end``: linear growth range end (exclusive). ``tolerance_files``: how far a measured
    index may be from ``index`` and still match, with ``tolerance_why``. ``condition``: an
    assumption the prediction depends on ("" when everything was measured).
    """

    structure: str
    kind: Kind
    index: int | None
    stride: int | None = None
    count: int = 1
    arithmetic: str = ""
    note: str = ""
    index_low: int | None = None
    index_high: int | None = None
    end: int | None = None
    tolerance_files: int = 0
    tolerance_why: str = "deterministic: verified on disk at exactly this index"
    condition: str = ""
    fs: str = ""
    op: str = ""

    @property
    def exact(self) -> bool:
        return self.index is not None and self.index_low is None

    def indices(self) -> list[int]:
        """Every predicted index (series expanded; window/linear -> its bounds)."""
        if self.kind == "series" and self.index is not None and self.stride:
            return [self.index + k * self.stride for k in range(self.count)]
        if self.index is not None:
            return [self.index]
        return [i for i in (self.index_low, self.index_high) if i is not None]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


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
    if fs == "xfs":
        found += _xfs(geometry, op, name_length, files)
    elif fs in ("ext4", "ext3", "ext2"):
        found += _ext4(geometry, op, name_length, files)
    elif fs == "btrfs":
        found += _btrfs(geometry, op, name_length, files, symlink_target_bytes, write_bytes)
    kept = [p for p in found if _within(p, files)]
    for i, p in enumerate(kept):
        if p.fs != fs or p.op != op:
            kept[i] = _with(p, fs=fs, op=op)
    return sorted(kept, key=lambda p: (p.index if p.index is not None else p.index_low or 0,
                                       p.structure))


def limits(geometry: Geometry, op: str) -> list[str]:
    """What :func:`predict` does NOT cover for this geometry and op, one line each."""
    op = normalize_op(op)
    out: list[str] = []
    if op not in OP_RULES:
        out.append(f"op {op!r} has no rules")
    fs = geometry.fs
    if fs == "xfs":
        out.append("XFS node-format directory leaf splits (after the leaf→node conversion) "
                   "are not predicted")
        if op == "mkdir" and (geometry.xfs_ag_count or 0) > 1:
            out.append("XFS mkdir: new directories rotate over the AGs, no inode-chunk series")
        if op == "unlink":
            out.append("XFS unlink: inode chunks are freed by background inactivation "
                       "(inodegc), outside the timed call; node/leaf collapse not predicted")
    elif fs in ("ext4", "ext3", "ext2"):
        if "inline_data" in geometry.features:
            out.append("ext4 inline_data: directories start inside the inode; no rule")
        out.append("ext4 htree leaf splits after the first one depend on the per-mkfs hash "
                   "seed: not predicted")
        out.append("ext4 moving to the next block group's inodes is not predicted")
    elif fs == "btrfs":
        out.append("btrfs leaf splits after the third leaf are not predicted (the hash and "
                   "append leaves are no longer neighbours; a split may make two leaves)")
        if op == "unlink":
            out.append("btrfs unlink: leaf merging/rebalancing is not modelled")
    else:
        out.append(f"{fs}: no structural rules (only the first call)")
    return out


def _within(p: Prediction, files: int) -> bool:
    first = p.index if p.index is not None else p.index_low
    return first is not None and 0 <= first < files


def _with(p: Prediction, **changes: Any) -> Prediction:
    return Prediction(**{**asdict(p), **changes})


def _series_count(start: int, stride: int, files: int) -> int:
    return len(range(start, files, stride)) if start < files else 0


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


# --- every file system -------------------------------------------------------------

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


# --- XFS ---------------------------------------------------------------------------

def xfs_attr_fork_offset_bytes(inode_size_bytes: int, literal_area_bytes: int) -> int:
    """Data-fork size the kernel leaves when it preallocates an attr fork at inode creation
    (xfs_bmap_compute_attr_offset): 256-byte inodes keep room for a 2-pointer bmap root,
    larger inodes give the data fork a fixed 12-pointer bmap root (4 + 12*16 = 196 -> 192)."""
    bmdr = lambda pointers: 4 + pointers * 16  # noqa: E731 -- xfs_bmdr_space_calc
    offset = (literal_area_bytes - bmdr(2)) if inode_size_bytes == 256 else bmdr(12)
    return (offset >> 3) << 3


def xfs_sf_sizes(name_length: int, ftype: bool, ino8: bool) -> tuple[int, int]:
    """(header_bytes, entry_bytes) of a short-form directory: header count(1) + i8count(1) +
    parent(4|8); entry namelen(1) + offset(2) + name + ftype(1) + inumber(4|8)."""
    ino = 8 if ino8 else 4
    return 2 + ino, 3 + name_length + (1 if ftype else 0) + ino


def xfs_data_entry_bytes(name_length: int, ftype: bool) -> int:
    """A block/leaf directory data entry: inumber(8) + namelen(1) + name + ftype(1) + tag(2),
    rounded up to 8 bytes."""
    return _round_up(8 + 1 + name_length + (1 if ftype else 0) + 2, 8)


@dataclass(frozen=True)
class XfsDirLimits:
    """Where an XFS directory grown one entry at a time changes format (file indices)."""

    sf_capacity: int       # files a short-form dir holds -> index of sf -> block
    block_capacity: int    # files a block dir holds -> index of block -> leaf
    first_block_files: int  # files data block 0 holds in leaf form -> first new data block
    block_files: int       # files every later data block holds (series stride)
    node_index: int        # first file that does not fit the leaf block -> leaf -> node
    arithmetic: dict[str, str]


def xfs_dir_limits(*, fork_bytes: int, dir_block_bytes: int, name_length: int, ftype: bool,
                   crc: bool, ino8: bool = False) -> XfsDirLimits:
    """The XFS directory format thresholds for names of ``name_length`` bytes."""
    L, ft = name_length, (1 if ftype else 0)
    sf_hdr, sf_entry = xfs_sf_sizes(L, ftype, ino8)
    sf_cap = max(0, (fork_bytes - sf_hdr) // sf_entry)
    data_hdr = 64 if crc else 16   # xfs_dir3_data_hdr / xfs_dir2_data_hdr
    leaf_hdr = 64 if crc else 16   # xfs_dir3_leaf_hdr / xfs_dir2_leaf_hdr
    entry = xfs_data_entry_bytes(L, ftype)
    dots = xfs_data_entry_bytes(1, ftype) + xfs_data_entry_bytes(2, ftype)
    # block form: data entries + one 8-byte leaf entry per name (incl. . and ..) + 8-byte tail
    block_cap = (dir_block_bytes - data_hdr - dots - 2 * 8 - 8) // (entry + 8)
    first_files = (dir_block_bytes - data_hdr - dots) // entry
    later_files = (dir_block_bytes - data_hdr) // entry
    # leaf block: header + 8 bytes per entry (files + 2) + 2-byte best per data block + 4 tail
    node_index = block_cap
    while True:
        k = node_index
        blocks = 1 if k < first_files else 2 + (k - first_files) // later_files
        if leaf_hdr + 4 + 2 * blocks + 8 * (k + 3) > dir_block_bytes:
            break
        node_index += 1
    ino = 8 if ino8 else 4
    arithmetic = {
        "sf": (f"short-form entry = namelen 1 + offset 2 + name {L} + ftype {ft} + inumber {ino}"
               f" = {sf_entry} B; header = {sf_hdr} B; ({fork_bytes} - {sf_hdr}) // {sf_entry}"
               f" = {sf_cap} entries fit -> file {sf_cap} converts"),
        "block": (f"block dir: data entry = roundup8(8+1+{L}+{ft}+2) = {entry} B + leaf entry 8 B;"
                  f" ({dir_block_bytes} - hdr {data_hdr} - '.'/'..' {dots} - their leaf entries 16"
                  f" - tail 8) // ({entry}+8) = {block_cap} files fit -> file {block_cap} "
                  f"moves the leaf out"),
        "data": (f"leaf form: data block 0 holds ({dir_block_bytes} - {data_hdr} - {dots}) // "
                 f"{entry} = {first_files} files, later blocks ({dir_block_bytes} - {data_hdr})"
                 f" // {entry} = {later_files}"),
        "node": (f"leaf block: hdr {leaf_hdr} + tail 4 + 2 B per data block + 8 B per entry "
                 f"(files + . + ..) <= {dir_block_bytes} fails first at file {node_index}"),
    }
    return XfsDirLimits(sf_cap, block_cap, first_files, later_files, node_index, arithmetic)


def _xfs_ino8(g: Geometry) -> tuple[bool, str]:
    bits = g.xfs_inode_number_bits
    if bits is None or bits <= 32:
        return False, ""
    if g.xfs_dir_ag is not None and g.xfs_agino_bits is not None:
        first = g.xfs_dir_ag << g.xfs_agino_bits
        last = ((g.xfs_dir_ag + 1) << g.xfs_agino_bits) - 1
        if first >= 1 << 32:
            return True, ""
        if last >= 1 << 32:
            return True, ("assumes 8-byte inode numbers in entries (the directory's AG holds "
                          "inode numbers on both sides of 2^32)")
        return False, ""
    return False, (f"assumes 4-byte inode numbers in entries (inode numbers have {bits} bits; "
                   f"the directory's AG is not known)")


def _xfs(g: Geometry, op: str, L: int, files: int) -> list[Prediction]:
    if not (g.dir_block_size_bytes and g.xfs_literal_area_bytes and g.inode_size_bytes):
        return []
    ftype, crc = "ftype" in g.features, "crc" in g.features
    ino8, ino_condition = _xfs_ino8(g)
    forks: list[tuple[int, str, str]] = []
    if g.xfs_dir_data_fork_bytes is not None:
        source = ("measured: the probe directory's data fork (bulkstat bs_forkoff"
                  + (f" = {g.xfs_dir_data_fork_bytes} B, an attr fork was preallocated)"
                     if g.xfs_dir_data_fork_bytes < g.xfs_literal_area_bytes else
                     " = 0: the whole literal area)"))
        forks.append((g.xfs_dir_data_fork_bytes, source, ""))
    else:
        lit = g.xfs_literal_area_bytes
        attr = xfs_attr_fork_offset_bytes(g.inode_size_bytes, lit)
        forks.append((lit, f"literal area = inode {g.inode_size_bytes} - core "
                           f"{g.xfs_inode_core_bytes} = {lit} B",
                      "if the directory has no attr fork (no LSM/ACL xattrs at creation)"))
        forks.append((attr, f"attr fork preallocated at creation: data fork = {attr} B",
                      "if the kernel preallocates an attr fork (Linux 6.x with a security "
                      "module or default ACLs) -- pass probe_dir to read_geometry to measure"))
    out: list[Prediction] = []
    for n, (fork, source, condition) in enumerate(forks):
        cond = "; ".join(c for c in (condition, ino_condition) if c)
        limits_ = xfs_dir_limits(fork_bytes=fork, dir_block_bytes=g.dir_block_size_bytes,
                                 name_length=L, ftype=ftype, crc=crc, ino8=ino8)
        if op in CREATING_OPS:
            out.append(_xfs_sf_to_block(g, limits_, source, cond, L))
            if n == 0:  # block/leaf/node limits do not depend on the inode's fork size
                out += _xfs_dir_blocks(g, limits_, ino_condition, files)
        elif op == "unlink":
            out += _xfs_dir_shrink(g, limits_, source, cond, L, files)
    if op in CREATING_OPS and (op != "mkdir" or g.xfs_ag_count == 1):
        series = _xfs_chunk_series(g, files)
        if series is not None:
            out.append(series)
        cold = _xfs_cold_clusters(g, files)
        if cold is not None:
            out.append(cold)
    return out


def _xfs_sf_to_block(g: Geometry, lim: XfsDirLimits, source: str, cond: str,
                     L: int) -> Prediction:
    blk = g.dir_block_size_bytes
    return Prediction(
        structure="xfs-dir-shortform-to-block", kind="outlier", index=lim.sf_capacity,
        arithmetic=(f"data fork {source}; {lim.arithmetic['sf']}"
                    + ("" if lim.block_capacity > lim.sf_capacity else
                       f"; a block holds only {lim.block_capacity} files, so the same call "
                       f"goes straight to leaf format")),
        condition=cond,
        note=(f"The directory's entries lived inside its own inode (short-form, 'local' "
              f"format). With {L}-character names {lim.sf_capacity} fit; file "
              f"{lim.sf_capacity} does not, so XFS allocates a {blk}-byte directory block, "
              f"moves every entry into it and changes the inode to extents format -- block "
              f"allocation, copy and extra logging inside one call, once per directory. "
              f"Admin: small directories are cheapest in short-form; shorter names keep more "
              f"entries in the inode, and larger inodes only help when the kernel does not "
              f"preallocate an attribute fork (then the fork, not the inode, is the limit)."))


def _xfs_dir_blocks(g: Geometry, lim: XfsDirLimits, cond: str, files: int) -> list[Prediction]:
    blk = g.dir_block_size_bytes
    out: list[Prediction] = []
    if lim.block_capacity > lim.sf_capacity:
        out.append(Prediction(
            structure="xfs-dir-block-to-leaf", kind="outlier", index=lim.block_capacity,
            arithmetic=lim.arithmetic["block"], condition=cond,
            note=(f"The single directory block held data entries and the hash leaf together; "
                  f"at file {lim.block_capacity} it is full, so XFS moves the leaf into its "
                  f"own block (leaf format): a block allocation and a rewrite of the hash "
                  f"index in one call. Later lookups read two blocks instead of one.")))
    out.append(Prediction(
        structure="xfs-dir-new-data-block", kind="series", index=lim.first_block_files,
        stride=lim.block_files,
        count=_series_count(lim.first_block_files, lim.block_files, files),
        arithmetic=lim.arithmetic["data"], condition=cond,
        note=(f"In leaf/node format the entries fill data blocks in order; a new "
              f"{blk}-byte data block is allocated at file {lim.first_block_files} and then "
              f"every {lim.block_files} files (one extent added, free-space index "
              f"updated). Usually a small cost next to inode-chunk allocation.")))
    out.append(Prediction(
        structure="xfs-dir-leaf-to-node", kind="outlier", index=lim.node_index,
        arithmetic=lim.arithmetic["node"], condition=cond,
        note=(f"The leaf block indexes every name by hash; at file {lim.node_index} it is "
              f"full, so XFS converts the directory to node format (a free-index block "
              f"plus a B+tree of leaves): several blocks allocated and rewritten in one "
              f"call. Later leaf splits depend on the names' hashes and are not "
              f"predicted here.")))
    return out


def _xfs_dir_shrink(g: Geometry, lim: XfsDirLimits, source: str, cond: str, L: int,
                    files: int) -> list[Prediction]:
    # The populated directory holds `files` entries; it is in block form iff
    # sf_capacity < files <= block_capacity. Removing in order 0, 1, ..., the block converts
    # back to short-form in the call that leaves sf_capacity entries.
    if not (lim.sf_capacity < files <= lim.block_capacity):
        return []
    index = files - 1 - lim.sf_capacity
    return [Prediction(
        structure="xfs-dir-block-to-shortform", kind="outlier", index=index,
        arithmetic=(f"data fork {source}; {lim.arithmetic['sf']}; {files} files populated "
                    f"(block form: {lim.sf_capacity} < {files} <= {lim.block_capacity}); "
                    f"after unlink i, {files} - 1 - i remain -> fits short-form at i = "
                    f"{files} - 1 - {lim.sf_capacity} = {index}"),
        condition=cond,
        note=(f"Unlinking in order, the directory shrinks; at file {index} the remaining "
              f"{lim.sf_capacity} entries fit into the inode again, so XFS copies them back "
              f"to short-form and frees the directory block -- a format conversion inside "
              f"that unlink."))]


def _xfs_chunk_series(g: Geometry, files: int) -> Prediction | None:
    chunk = g.inode_chunk_inodes or 64
    if g.xfs_dir_ag_free_inodes is not None:
        free = g.xfs_dir_ag_free_inodes
        source = (f"measured: AG {g.xfs_dir_ag} (the probe directory's) has {free} free "
                  f"inodes in allocated chunks")
        condition = ""
    elif g.xfs_ag0_free_inodes is not None:
        free = max(0, g.xfs_ag0_free_inodes - 1)
        source = (f"AG 0 has {g.xfs_ag0_free_inodes} free inodes in allocated chunks, minus "
                  f"one for the probe directory = {free}")
        condition = ("assumes the probe directory and its files are in AG 0 (the first "
                     "directory made after mount goes there) -- pass probe_dir to measure")
    else:
        return None
    return Prediction(
        structure="xfs-inode-chunk-alloc", kind="series", index=free, stride=chunk,
        count=_series_count(free, chunk, files), condition=condition,
        arithmetic=(f"{source}; files 0..{free - 1} use them, file {free} allocates a new "
                    f"chunk of {chunk} inodes (XFS_INODES_PER_CHUNK), then every {chunk} "
                    f"files: {free}, {free + chunk}, {free + 2 * chunk}, ..."),
        note=(f"XFS allocates inodes {chunk} at a time ({chunk} x {g.inode_size_bytes} B = "
              f"{chunk * (g.inode_size_bytes or 0) // 1024} KiB of inode space). New files "
              f"take free inodes from the directory's allocation group; when none is left the "
              f"call allocates and initialises a whole new chunk and inserts it into the "
              f"inode B+trees (inobt, finobt) -- every {chunk} files, starting at file {free}"
              f", when the {free} inodes still free in the AG's existing chunks (shared with "
              f"the root directory and the probe directory itself) are used up. Admin: "
              f"periodic, small (a few x a normal create), unavoidable for "
              f"file creation; bigger inodes make each chunk bigger, not rarer."))


def xfs_cold_cluster_indices(*, chunks: tuple[tuple[int, int, int], ...], dir_inode: int,
                             root_inode: int | None, cluster_inodes: int
                             ) -> list[tuple[int, int]]:
    """(file index, inode) of every create that is the first to use an inode cluster whose
    buffer is not in memory: a cluster of a chunk that existed before the probe, holding
    neither the root directory's inode (read at mount) nor the probe directory's (just
    made). New files take the lowest free inode of the chunk nearest the directory
    (xfs_dialloc_ag_finobt_near + xfs_inobt_first_free_inode): the directory's chunk first,
    then the others by distance. Clusters of chunks allocated later are initialised in
    memory (xfs_ialloc_inode_init) and never read."""
    warm = {ino // cluster_inodes for ino in (dir_inode, root_inode) if ino is not None}
    order = sorted(chunks, key=lambda c: (0 if c[0] <= dir_inode < c[0] + 64 else 1,
                                          abs(c[0] - dir_inode)))
    found, index = [], 0
    for start, allocmask, holemask in order:
        for bit in range(64):
            ino = start + bit
            if allocmask >> bit & 1 or holemask >> (bit // 4) & 1:
                continue
            cluster = ino // cluster_inodes
            if cluster not in warm:
                found.append((index, ino))
                warm.add(cluster)
            index += 1
    return found


def _xfs_cold_clusters(g: Geometry, files: int) -> Prediction | None:
    n = g.xfs_inode_cluster_inodes
    if not (n and g.xfs_dir_ag_chunks is not None and g.xfs_dir_inode is not None):
        return None
    cold = xfs_cold_cluster_indices(chunks=g.xfs_dir_ag_chunks, dir_inode=g.xfs_dir_inode,
                                    root_inode=g.xfs_root_inode, cluster_inodes=n)
    cold = [(i, ino) for i, ino in cold if i < files]
    if not cold:
        return None
    isz = g.inode_size_bytes or 0
    indices = [i for i, _ in cold]
    strides = {b - a for a, b in zip(indices, indices[1:])}
    series = len(strides) == 1
    chunk_text = ", ".join(f"{s} (allocmask {m:#x})" for s, m, _ in g.xfs_dir_ag_chunks)
    cluster_text = (f"inode cluster = {n} inodes x {isz} B = {n * isz // 1024} KiB (8 KiB"
                    + (f" x inodesize {isz}/256" if "crc" in g.features and n * isz > 8192
                       else "") + ", xfs_ialloc_setup_geometry)")
    hits = "; ".join(f"file {i} gets inode {ino} = first of cluster {ino // n * n}.."
                     f"{ino // n * n + n - 1}" for i, ino in cold)
    return Prediction(
        structure="xfs-inode-cluster-read",
        kind="series" if series else "outlier",
        index=indices[0], stride=strides.pop() if series else None,
        count=len(indices) if series else 1,
        arithmetic=(f"{cluster_text}; chunks of AG {g.xfs_dir_ag} before the probe: "
                    f"{chunk_text}; in memory since mount: the clusters of the root "
                    f"(inode {g.xfs_root_inode}) and the probe directory (inode "
                    f"{g.xfs_dir_inode}); files take the lowest free inode: {hits}"),
        note=(f"XFS reads and writes inodes in cluster buffers of {n} inodes "
              f"({n * isz // 1024} KiB). Since Linux 5.9 the first change logged to an inode "
              f"pins its cluster buffer, so a create whose new inode is the first used in a "
              f"cluster that is not in memory reads that cluster from disk inside the call. "
              f"The chunk mkfs made holds the root directory; its other clusters were never "
              f"read since mount, so file {indices[0]} -- the first to get an inode there -- "
              f"pays one {n * isz // 1024} KiB read. Chunks allocated during the probe are "
              f"initialised in memory, so their clusters cost nothing extra. Admin: a cold "
              f"cache cost, once per cluster after mount; on a slow disk it is a full read "
              f"latency."),
        tolerance_why=("deterministic: the inode numbers and the device read were verified "
                       "at exactly this index (fresh mount; nothing else read the cluster)"))


# --- ext4 --------------------------------------------------------------------------

def ext4_rec_len(name_length: int) -> int:
    """ext4 directory entry size: inode 4 + rec_len 2 + name_len 1 + type 1 + name, to 4 B."""
    return _round_up(8 + name_length, 4)


@dataclass(frozen=True)
class Ext4DirLimits:
    first_block_files: int   # files block 0 holds (with . and ..) -> conversion index
    block_files: int         # files any other block holds
    split_low: int           # first htree leaf split: earliest and latest possible index
    split_high: int
    moved_files: int         # entries do_split moves to the new leaf at conversion
    arithmetic: dict[str, str]


def ext4_dir_limits(*, block_bytes: int, name_length: int, csum: bool) -> Ext4DirLimits:
    """ext4 thresholds for a fresh directory (only '.' and '..' in block 0)."""
    rec = ext4_rec_len(name_length)
    tail = 12 if csum else 0   # struct ext4_dir_entry_tail at the end of every leaf block
    dots = 12 + 12
    c0 = (block_bytes - tail - dots) // rec
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
    arithmetic = {
        "first": (f"entry = roundup4(8 + {name_length}) = {rec} B; block 0 = {block_bytes} B"
                  f"{csum_text} - '.' 12 - '..' 12 -> ({block_bytes}{' - 12' if csum else ''}"
                  f" - 24) // {rec} = {c0} files fit -> file {c0} needs a second block"),
        "block": f"other blocks: ({block_bytes}{' - 12' if csum else ''}) // {rec} = {c} files",
        "split": (f"conversion splits the {c0} entries {c0 - moved}/{moved} over two leaves of "
                  f"{c}; the first leaf to fill splits: earliest {c0} + 1 + ({c} - {fuller}) "
                  f"= {low} (all new names hash to the fuller leaf), latest 2 x {c} = {high} "
                  f"(both leaves full)"),
    }
    return Ext4DirLimits(c0, c, low, high, moved, arithmetic)


def _ext4(g: Geometry, op: str, L: int, files: int) -> list[Prediction]:
    if op not in CREATING_OPS or not g.block_size_bytes:
        return []
    if "inline_data" in g.features:
        return []  # directories start inline in the inode: different arithmetic, no rule
    B = g.block_size_bytes
    if g.ext4_dir_size_bytes is not None and g.ext4_dir_size_bytes != B:
        return []  # not a fresh one-block directory
    lim = ext4_dir_limits(block_bytes=B, name_length=L, csum=g.has_csum)
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
            arithmetic=lim.arithmetic["first"] + "; with dir_index the directory becomes a "
                       "hash tree (htree) at that call",
            note=(f"Block 0 is full after {c0} names of {L} characters ({B}-byte blocks"
                  f"{', metadata_csum tail' if g.has_csum else ''}). File {c0} needs a second "
                  f"block, and with dir_index ext4 converts the directory into a hash-indexed "
                  f"one right there: block 0 becomes the htree root, the entries are moved to "
                  f"a new block, hashed and split into two leaves (3 blocks in all) -- two "
                  f"block allocations, a sort and a copy of every entry in one call, once per "
                  f"directory. Afterwards a lookup scans one leaf, not the whole directory.")))
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
                     "fresh file system, but fsscope does not compute the hashes -- only the "
                     "window." if g.ext4_hash_seed_null else
                     "mkfs draws it at random, so on fresh file systems the split moves from "
                     "run to run and is rarely a repeatable outlier."))))
        if lim.split_low > c0 + 1:
            out.append(Prediction(
                structure="ext4-htree-leaf-scan", kind="linear", index=c0 + 1,
                end=lim.split_low, arithmetic=lim.arithmetic["split"],
                tolerance_why="range ends inside the hash-dependent split window; compared by "
                              "overlap",
                note=("After the conversion a lookup hashes the name and scans one of two "
                      "leaves, which fill as files are added, so latency keeps growing with "
                      "the leaves' fill until one splits (the slope is not predicted).")))
    else:
        out.append(Prediction(
            structure="ext4-dir-new-linear-block", kind="series", index=c0,
            stride=lim.block_files, count=_series_count(c0, lim.block_files, files),
            arithmetic=f"{lim.arithmetic['first']}; {lim.arithmetic['block']}; without "
                       f"dir_index blocks are appended: {c0}, {c0} + {lim.block_files}, ...",
            note=(f"Without dir_index the directory stays a linear list of blocks: when all "
                  f"are full (file {c0}, then every {lim.block_files} files) one more block is "
                  f"appended, and every lookup scans all of them -- creation cost grows with "
                  f"directory size. Admin: enable dir_index (tune2fs -O dir_index; e2fsck -D).")))
    return out


# --- btrfs -------------------------------------------------------------------------

BTRFS_ITEM_BYTES = 25        # struct btrfs_item: key 17 + offset 4 + size 4
BTRFS_INODE_ITEM_BYTES = 160
BTRFS_INODE_REF_BYTES = 10   # + name
BTRFS_DIR_ITEM_BYTES = 30    # + name; DIR_ITEM and DIR_INDEX each
BTRFS_INLINE_EXTENT_BYTES = 21  # + inline data
BTRFS_REG_EXTENT_BYTES = 53


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


def _btrfs(g: Geometry, op: str, L: int, files: int, symlink_target_bytes: int,
           write_bytes: int) -> list[Prediction]:
    if op not in CREATING_OPS or g.btrfs_fs_tree_level != 0:
        return []
    free = g.btrfs_fs_tree_leaf_free_bytes
    if free is None or not g.node_size_bytes:
        return []
    per_file, in_call, items = btrfs_file_items(
        L, op, symlink_target_bytes=symlink_target_bytes, write_bytes=write_bytes,
        max_inline_bytes=g.btrfs_max_inline_bytes or 2048,
        sector_bytes=g.btrfs_sector_size_bytes or 4096)
    out = [_btrfs_first_split(g, op, free, per_file, in_call, items)]
    if g.btrfs_tree_includes_dir:
        out += [_btrfs_later_split(g, free, per_file, in_call, items, k) for k in (2, 3)]
    return out


#: Later btrfs splits are predicted while every leaf is a sibling of the one being inserted
#: into (up to three leaves): pushes then pack them full before the next split.
BTRFS_PACKED_SPLITS = 3


def _btrfs_later_split(g: Geometry, free: int, per_file: int, in_call: int, items: str,
                       k: int) -> Prediction:
    leaf = g.node_size_bytes - BTRFS_HEADER_BYTES
    total = free + (k - 1) * leaf
    fit = total // per_file
    left = total - fit * per_file
    index = fit if left < in_call else fit + 1
    tol = BTRFS_LEVEL_SHIFT_TOLERANCE_FILES + (k - 1)
    return Prediction(
        structure=f"btrfs-fs-tree-leaf-split-{k}", kind="level_shift", index=index,
        arithmetic=(f"{items}; before the split to {k + 1} leaves the {k} leaves are packed "
                    f"(split_leaf first pushes items into the neighbour leaves): free {free} B "
                    f"+ {k - 1} x leaf ({g.node_size_bytes} - {BTRFS_HEADER_BYTES} = {leaf} B) "
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
