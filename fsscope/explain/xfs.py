"""XFS rules: short-form -> block -> leaf -> node directory, data blocks, inode chunks and cold
inode clusters, for a directory grown one create at a time (see rules.py for the ops)."""

from __future__ import annotations

from dataclasses import dataclass

from fsscope.explain.geometry import Geometry
from fsscope.explain.prediction import CREATING_OPS, Prediction, round_up, series_count


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
    return round_up(8 + 1 + name_length + (1 if ftype else 0) + 2, 8)


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


def predict(g: Geometry, op: str, L: int, files: int, **_: int) -> list[Prediction]:
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
    if g.probe_dir_entry_name_bytes:  # entries already there take short-form room first
        taken = sum(xfs_sf_sizes(n, ftype, ino8)[1] for n in g.probe_dir_entry_name_bytes)
        forks = [(fork - taken, f"{source}, minus {taken} B of the "
                  f"{len(g.probe_dir_entry_name_bytes)} entries already there", condition)
                 for fork, source, condition in forks]
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
        arithmetic=(f"{g.files_where}data fork {source}; {lim.arithmetic['sf']}"
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

    def conversion(structure: str, index: int, step: str, note: str) -> Prediction:
        """A one-off format change at file ``index``, by the limits' arithmetic of ``step``."""
        return Prediction(structure=structure, kind="outlier", index=index,
                          arithmetic=lim.arithmetic[step], condition=cond, note=note)

    out: list[Prediction] = []
    if lim.block_capacity > lim.sf_capacity:
        out.append(conversion(
            "xfs-dir-block-to-leaf", lim.block_capacity, "block",
            f"The single directory block held data entries and the hash leaf together; "
            f"at file {lim.block_capacity} it is full, so XFS moves the leaf into its "
            f"own block (leaf format): a block allocation and a rewrite of the hash "
            f"index in one call. Later lookups read two blocks instead of one."))
    out.append(Prediction(
        structure="xfs-dir-new-data-block", kind="series", index=lim.first_block_files,
        stride=lim.block_files,
        count=series_count(lim.first_block_files, lim.block_files, files),
        arithmetic=lim.arithmetic["data"], condition=cond,
        note=(f"In leaf/node format the entries fill data blocks in order; a new "
              f"{blk}-byte data block is allocated at file {lim.first_block_files} and then "
              f"every {lim.block_files} files (one extent added, free-space index "
              f"updated). Usually a small cost next to inode-chunk allocation.")))
    out.append(conversion(
        "xfs-dir-leaf-to-node", lim.node_index, "node",
        f"The leaf block indexes every name by hash; at file {lim.node_index} it is "
        f"full, so XFS converts the directory to node format (a free-index block "
        f"plus a B+tree of leaves): several blocks allocated and rewritten in one "
        f"call. Later leaf splits depend on the names' hashes and are not "
        f"predicted here."))
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
        source = (f"{g.files_where}measured: AG {g.xfs_dir_ag} (the probe directory's) has "
                  f"{free} free inodes in allocated chunks")
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
        count=series_count(free, chunk, files), condition=condition,
        arithmetic=(f"{source}; files 0..{free - 1} use them, file {free} allocates a new "
                    f"chunk of {chunk} inodes (XFS_INODES_PER_CHUNK), then every {chunk} "
                    f"files: {free}, {free + chunk}, {free + 2 * chunk}, ..."),
        note=(f"XFS allocates inodes {chunk} at a time ({chunk} x {g.inode_size_bytes} B = "
              f"{chunk * (g.inode_size_bytes or 0) // 1024} KiB of inode space). New files "
              f"take free inodes from the directory's allocation group; when none is left the "
              f"call allocates and initialises a whole new chunk and inserts it into the "
              f"inode B+trees (inobt, finobt) -- every {chunk} files, starting at file {free}"
              f", when the {free} inodes still free in the AG's existing chunks (mkfs's chunk "
              f"holds the root directory{' and the probe directory itself' if not g.probe_dir_in_root else ''}"
              f") are used up. Admin: "
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


def limits(g: Geometry, op: str) -> list[str]:
    """What :func:`predict` does not cover on XFS, one line each."""
    out = ["XFS node-format directory leaf splits (after the leaf→node conversion) are not predicted"]
    if op == "mkdir" and (g.xfs_ag_count or 0) > 1:
        out.append("XFS mkdir: new directories rotate over the AGs, no inode-chunk series")
    if op == "unlink":
        out.append("XFS unlink: inode chunks are freed by background inactivation "
                   "(inodegc), outside the timed call; node/leaf collapse not predicted")
    return out
