"""``fsscope scan PATH``: a read-only look at a live tree's directory structures.

Walk the tree without writing (directories opened with O_NOATIME so even their access times
stay; no sync, no FIEMAP_FLAG_SYNC), and for every directory say which on-disk structure its
names put it in under this file system's geometry (:mod:`fsscope.explain.dirs`), then check
that claim against what the file system itself says:

- XFS: a short-form directory's st_size is exactly its short-form bytes; a block directory
  has one block and nothing in the leaf segment; leaf vs node from where its blocks are
  mapped (XFS_IOC_GETBMAP: the free index at 64 GiB exists only in node form).
- ext4: the indexed flag (EXT4_INDEX_FL, FS_IOC_GETFLAGS) says htree; its depth is the
  dx_root's indirect_levels, read from the device at the directory's first block (FIEMAP),
  when the device can be opened (root).
- btrfs: a directory's st_size is twice the bytes of its names (DIR_ITEM + DIR_INDEX).

Then the directories within a few creates of a structural change, the largest ones, the
free-space fragmentation of the mounted file system (GETFSMAP tools, no sync) and how aged
the tree looks: its captured profile against the shipped ones, nearest first.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import struct
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fsscope import trust
from fsscope.aging import profile as P
from fsscope.errors import FsscopeError
from fsscope.explain import dirs
from fsscope.explain.ext4 import ext4_rec_len
from fsscope.explain.ext4_htree import DIRENT_TAIL_BYTES, DOTS_BYTES
from fsscope.explain.geometry import Geometry, read_geometry
from fsscope.explain.xfs import xfs_attr_fork_offset_bytes
from fsscope.layout.fiemap import extents_of_fd
from fsscope.layout.freespace import free_space_live
from fsscope.targets.existing import df_fullness, existing_fs

FS_IOC_GETFLAGS = 0x80086601
EXT4_INDEX_FL = 0x1000
FS_IOC_FSGETXATTR = 0x801C581F
FS_XFLAG_HASATTR = 0x80000000
XFS_IOC_GETBMAP = 0xC0205826  # _IOWR('X', 38, struct getbmap): 32-byte records, 512-byte units
GETBMAP_RECORDS = 64
#: map a directory's three segments (data, leaf at 32 GiB, free index at 64 GiB), in sectors
XFS_DIR_MAP_SECTORS = 2 * dirs.XFS_DIR2_FREE_OFFSET_BYTES // 512
#: ext4 dx_root: '.' (12 B) + '..' header (12 B) + dx_root_info; indirect_levels is its 7th byte.
EXT4_DX_ROOT_LEVELS_OFFSET = 30


@dataclass
class DirRecord:
    path: str
    entries: int
    name_lengths: list[int] = field(repr=False)
    size_bytes: int
    inode: int
    ino8: bool = False
    has_attr: bool = False
    indexed: bool | None = None
    #: what the file system maps, read from the walk's descriptor (never reopened by path):
    #: XFS: the logical byte offsets of its mapped blocks; ext4 (indexed): where its first
    #: block lies on the device; ``map_error`` why not
    mapped_offsets: list[int] | None = None
    first_block_bytes: int | None = None
    map_error: str | None = None


@dataclass
class Walk:
    dirs: list[DirRecord]
    file_sizes: list[int]
    file_depths: list[int]
    file_mtimes: list[float]
    dirs_per_depth: list[int]
    errors: list[str]
    noatime_refused: int = 0
    other_device_skipped: int = 0
    symlinks: int = 0
    swapped: list[str] = field(default_factory=list)


def _first_u32(fd: int, request: int, size: int) -> int | None:
    """The first 32 bits an ioctl fills in (flags), None if the file system refuses it."""
    buf = bytearray(size)
    try:
        fcntl.ioctl(fd, request, buf)
    except OSError:
        return None
    return struct.unpack_from("=I", buf)[0]


def _flags(fd: int, fs: str) -> tuple[bool | None, bool]:
    """(ext4 indexed flag, XFS has-attr-fork flag) of an open directory."""
    if fs in ("ext4", "ext3", "ext2"):
        flags = _first_u32(fd, FS_IOC_GETFLAGS, 8)
        return (None if flags is None else bool(flags & EXT4_INDEX_FL)), False
    if fs == "xfs":
        return None, bool((_first_u32(fd, FS_IOC_FSGETXATTR, 28) or 0) & FS_XFLAG_HASATTR)
    return None, False


def _mapping(rec: DirRecord, fd: int, fs: str, dir_block_bytes: int) -> None:
    """Read what :func:`account` needs of the directory's blocks from its open descriptor."""
    try:
        if fs == "xfs" and rec.size_bytes >= dir_block_bytes:
            rec.mapped_offsets = xfs_mapped_offsets(fd)
        elif fs in ("ext4", "ext3", "ext2") and rec.indexed:
            first = [e for e in extents_of_fd(fd, sync=False, label=rec.path) if e["logical_bytes"] == 0]
            rec.first_block_bytes = int(first[0]["physical_bytes"]) if first else None
    except OSError as exc:
        rec.map_error = f"GETBMAP failed: {exc.strerror}"
    except FsscopeError:
        rec.first_block_bytes = None


def walk_tree(root: str, fs: str, *, limit_dirs: int = 200_000, dir_block_bytes: int = 4096) -> Walk:
    """Every directory under ``root`` on its device: names, sizes, flags, block maps; regular
    files' size, depth and mtime (for the profile). Read-only, and never redirected: each
    directory is opened from its parent's descriptor and must be the one listed
    (:class:`fsscope.trust.TreeWalk`; a swapped one is named in ``swapped``)."""
    walk = Walk([], [], [], [], [1], [])
    tree = trust.TreeWalk(root, limit_dirs=limit_dirs)
    try:
        for listed in tree:
            depth, fd, st = listed.depth, listed.fd, listed.st
            indexed, has_attr = _flags(fd, fs)
            names: list[int] = []
            ino8 = st.st_ino >= 2**32
            for entry in listed.entries:
                names.append(len(os.fsencode(entry.name)))
                ino8 = ino8 or entry.inode() >= 2**32
                try:
                    if entry.is_file(follow_symlinks=False):
                        fst = entry.stat(follow_symlinks=False)
                        walk.file_sizes.append(fst.st_size)
                        walk.file_depths.append(depth)
                        walk.file_mtimes.append(fst.st_mtime)
                except OSError as exc:
                    walk.errors.append(f"{listed.path}/{entry.name}: {exc.strerror}")
            if listed.subdirs:
                while len(walk.dirs_per_depth) <= depth + 1:
                    walk.dirs_per_depth.append(0)
                walk.dirs_per_depth[depth + 1] += len(listed.subdirs)
            rec = DirRecord(listed.path, len(names), names, st.st_size, st.st_ino, ino8, has_attr, indexed)
            _mapping(rec, fd, fs, dir_block_bytes)
            walk.dirs.append(rec)
    except OSError as exc:
        walk.errors.append(f"{root}: {exc.strerror}")
    walk.errors[:0] = tree.errors
    walk.noatime_refused, walk.other_device_skipped = tree.noatime_refused, tree.other_device
    walk.symlinks, walk.swapped = tree.symlinks, tree.swapped
    return walk


# --- what the file system says ------------------------------------------------------------

def xfs_mapped_offsets(fd: int) -> list[int]:
    """Logical byte offsets of an open directory's mapped blocks (XFS_IOC_GETBMAP, read-only)."""
    offsets: list[int] = []
    start = 0
    while True:
        buf = bytearray(32 * (GETBMAP_RECORDS + 1))
        # an explicit length: -1 would stop at i_size, which covers only the data segment
        struct.pack_into("=qqqii", buf, 0, start, 0, XFS_DIR_MAP_SECTORS - start,
                         GETBMAP_RECORDS + 1, 0)
        fcntl.ioctl(fd, XFS_IOC_GETBMAP, buf)
        got = struct.unpack_from("=qqqii", buf, 0)[4]
        last_end = start
        for i in range(1, got + 1):
            offset, block, length, _, _ = struct.unpack_from("=qqqii", buf, 32 * i)
            if block != -1:  # -1: a hole
                offsets.append(offset * 512)
            last_end = offset + length
        if got < GETBMAP_RECORDS or last_end <= start or last_end >= XFS_DIR_MAP_SECTORS:
            break
        start = last_end
    return offsets


def xfs_account(rec: DirRecord, g: Geometry) -> str:
    """The format XFS says the directory is in (from its block map, read by the walk)."""
    B = g.dir_block_size_bytes or 4096
    if rec.size_bytes < B:
        return "shortform"
    if rec.map_error:
        raise FsscopeError(rec.map_error)
    offsets = rec.mapped_offsets or []
    if any(o >= dirs.XFS_DIR2_FREE_OFFSET_BYTES for o in offsets):
        return "node"
    if any(o >= dirs.XFS_DIR2_LEAF_OFFSET_BYTES for o in offsets):
        return "leaf"
    return "block"


def ext4_htree_depth(first_block_bytes: int | None, device: str | None) -> int | None:
    """indirect_levels of an indexed ext4 directory, from its first block on the device (the
    device's page cache is where ext4 keeps directory blocks, so this is current). None
    when the device cannot be opened or the block's place was not read."""

    if device is None or first_block_bytes is None:
        return None
    try:
        dev_fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.pread(dev_fd, 1, first_block_bytes + EXT4_DX_ROOT_LEVELS_OFFSET)
    finally:
        os.close(dev_fd)
    return raw[0] if raw else None


def account(rec: DirRecord, g: Geometry, device: str | None) -> dict:
    """What the file system says about this directory's structure (and how it was read)."""
    if g.fs == "xfs":
        try:
            return {"structure": xfs_account(rec, g), "how": "st_size, XFS_IOC_GETBMAP"}
        except FsscopeError as exc:
            return {"structure": None, "how": str(exc)}
    if g.fs in ("ext4", "ext3", "ext2"):
        if rec.indexed is None:
            return {"structure": None, "how": "FS_IOC_GETFLAGS refused"}
        out = {"structure": "htree" if rec.indexed else "linear",
               "how": "EXT4_INDEX_FL (FS_IOC_GETFLAGS), st_size", "blocks": rec.size_bytes // (g.block_size_bytes or 4096)}
        if not rec.indexed:
            return out
        depth = ext4_htree_depth(rec.first_block_bytes, device)
        how = "depth not read (the device needs root)" if depth is None else "depth from the dx_root on the device"
        return out | {"how": f"{out['how']}; {how}", "depth": depth}
    if g.fs == "btrfs":
        return {"structure": "items", "how": "st_size = 2 x name bytes", "size_bytes": rec.size_bytes}
    return {"structure": None, "how": f"{g.fs}: no on-disk directory structure fsscope knows"}


def _fork_bytes(rec: DirRecord, g: Geometry) -> int | None:
    if g.fs != "xfs" or not rec.has_attr or not g.inode_size_bytes or not g.xfs_literal_area_bytes:
        return None

    return xfs_attr_fork_offset_bytes(g.inode_size_bytes, g.xfs_literal_area_bytes)


def judge(rec: DirRecord, g: Geometry, device: str | None) -> dict:
    """One directory: the structure its names give, the file system's account, agreement,
    and how many creates until the next structural change."""
    if g.fs in EXT4_FAMILY and g.existing and not g.features:
        return judge_ext4_unread(rec, g)
    fork_bytes = _fork_bytes(rec, g)
    shape = dirs.shape(g, rec.name_lengths, ino8=rec.ino8, fork_bytes=fork_bytes, size_bytes=rec.size_bytes)
    name_bytes_median = int(np.median(rec.name_lengths)) if rec.name_lengths else 0
    out = {"path": rec.path, "entries": rec.entries, "size_bytes": rec.size_bytes,
           "name_bytes_median": name_bytes_median,
           "structure": shape.structure if shape else None,
           "bytes_needed": shape.bytes_needed if shape else None,
           "limit_bytes": shape.limit_bytes if shape else None,
           "depth": shape.depth if shape else None}
    if shape is None:  # why is said once, in the report's geometry.unread, not per directory
        why = ("the geometry it needs was not read (see unread)" if g.fs in ("xfs", "btrfs", *EXT4_FAMILY)
               else f"{g.fs}: no directory structure rules")
        return out | {"account": {"structure": None, "how": why}, "agrees": None,
                      "creates_until_change": None}
    said = account(rec, g, device)
    agrees, why = _agreement(shape, said, rec, g)
    out |= {"account": said, "agrees": agrees, "why": why}
    ahead = None
    if agrees:
        next_len = name_bytes_median or 8
        found = dirs.creates_until_change(g, rec.name_lengths, next_name_length=next_len, ino8=rec.ino8,
                                          fork_bytes=fork_bytes, size_bytes=rec.size_bytes)
        if found is not None:
            ahead = {"creates": found[0], "becomes": found[1], "name_bytes": next_len}
    out["creates_until_change"] = ahead
    return out


EXT4_FAMILY = ("ext4", "ext3", "ext2")
#: what an ext4 directory's classification rests on when its superblock cannot be read
EXT4_BY_FLAG_HOW = "EXT4_INDEX_FL (FS_IOC_GETFLAGS), st_size; superblock not read (see unread)"


def ext4_csum_from_dirs(recs: list[DirRecord], g: Geometry) -> Geometry:
    """metadata_csum off, proven by a directory when the superblock cannot be read: one
    whose names need more than a block less the 12-byte csum tail yet sit, unindexed, in one
    block. (No directory proves it on: an index may outlive the names that made it.) The
    proof is said in ``unread``; ``raw["ext4_csum_inferred"]`` carries it to the judging."""
    B = g.block_size_bytes or 4096
    for rec in recs:
        needed = DOTS_BYTES + sum(ext4_rec_len(n) for n in rec.name_lengths)
        if rec.indexed is False and rec.size_bytes <= B and B - DIRENT_TAIL_BYTES < needed <= B:
            proof = (f"ext4 metadata_csum: off, inferred: {rec.path} holds names needing {needed} B in one "
                     f"{B} B block without an index, which a {DIRENT_TAIL_BYTES} B csum tail would not leave room for")
            return replace(g, unread=(*g.unread, proof), raw={**g.raw, "ext4_csum_inferred": False})
    return g


def judge_ext4_unread(rec: DirRecord, g: Geometry) -> dict:
    """An ext4 directory when the superblock cannot be read (the device refused, even to
    root): the kernel still says whether it is indexed (EXT4_INDEX_FL) and how many blocks
    it has (st_size), so that is its structure. The names are judged under both values of
    the one unknown that matters, metadata_csum (a 12-byte tail in every block): where both
    give the same structure the names are checked against the flag as usual; where they
    differ the names cannot decide and the flag alone says. dir_index is known per
    directory: an indexed one proves it on; one of several blocks without the flag, off."""
    B = g.block_size_bytes or 4096
    name_bytes_median = int(np.median(rec.name_lengths)) if rec.name_lengths else 0
    out: dict = {"path": rec.path, "entries": rec.entries, "size_bytes": rec.size_bytes,
                 "name_bytes_median": name_bytes_median}
    if rec.indexed is None:
        return out | {"structure": None, "bytes_needed": None, "limit_bytes": None, "depth": None,
                      "account": {"structure": None, "how": "FS_IOC_GETFLAGS refused"}, "agrees": None,
                      "creates_until_change": None}
    features = frozenset({"dir_index"} if rec.indexed or rec.size_bytes <= B else ())
    plain, csum = (replace(g, features=features | extra) for extra in (frozenset(), frozenset({"metadata_csum"})))
    if g.raw.get("ext4_csum_inferred") is False:   # a directory proved it off: one geometry
        csum = plain
    shapes = [dirs.ext4_shape(geo, rec.name_lengths, size_bytes=rec.size_bytes) for geo in (plain, csum)]
    said: dict[str, Any] = {"structure": "htree" if rec.indexed else "linear", "how": EXT4_BY_FLAG_HOW,
                            "blocks": rec.size_bytes // B}
    decided = shapes[0].structure == shapes[1].structure and shapes[0].depth == shapes[1].depth
    shape = shapes[1] if decided or rec.indexed else shapes[0]   # the one the flag's state agrees with
    if rec.indexed:
        said["depth"] = shape.depth   # from st_size: the blocks the root indexes (no dx_root read)
    out |= {"structure": shape.structure if decided else said["structure"], "bytes_needed": shape.bytes_needed,
            "limit_bytes": shape.limit_bytes, "depth": shape.depth if decided or rec.indexed else None,
            "account": said}
    if not decided:
        return out | {"agrees": None, "creates_until_change": None,
                      "why": (f"the names need {shapes[0].bytes_needed} B of a {B} B block: whether they fit "
                              "depends on metadata_csum (12 B per block), which only the superblock says")}
    agrees, why = _agreement(shape, said, rec, plain)
    out |= {"agrees": agrees, "why": why}
    ahead = None
    if agrees:
        next_len = name_bytes_median or 8
        found = [dirs.creates_until_change(geo, rec.name_lengths, next_name_length=next_len,
                                           size_bytes=rec.size_bytes) for geo in (plain, csum)]
        if found[0] is not None and found[1] is not None:
            (k_plain, becomes), (k_csum, _) = found[0], found[1]
            if k_csum != k_plain:  # metadata_csum's tail takes room: the change comes sooner with it
                becomes += f" ({k_csum} creates with metadata_csum, {k_plain} without: not readable)"
            ahead = {"creates": min(k_plain, k_csum), "becomes": becomes, "name_bytes": next_len}
    out["creates_until_change"] = ahead
    return out


def _agreement(shape: dirs.DirShape, said: dict, rec: DirRecord, g: Geometry) -> tuple[bool | None, str]:
    if said.get("structure") is None:
        return None, said.get("how", "")
    if g.fs == "btrfs":
        ok = rec.size_bytes == shape.bytes_needed
        return ok, "" if ok else f"st_size {rec.size_bytes} != 2 x name bytes {shape.bytes_needed}"
    if said["structure"] != shape.structure:
        if g.fs.startswith("ext") and said["structure"] == "htree":
            return False, ("the directory once held more names: ext4 directories never shrink "
                           "or lose their index")
        if g.fs == "xfs" and shape.structure in ("block", "leaf") and said["structure"] in ("leaf", "node"):
            return False, ("XFS converts back only when the names fit again with room to spare "
                           "(or removed names left free space)")
        return False, f"names say {shape.structure}, the file system says {said['structure']}"
    if g.fs == "xfs" and shape.structure == "shortform" and rec.size_bytes != shape.bytes_needed:
        return False, f"short-form st_size {rec.size_bytes} != computed {shape.bytes_needed} B"
    if g.fs.startswith("ext") and shape.depth is not None and said.get("depth") is not None \
            and said["depth"] != shape.depth:
        return False, f"htree depth {said['depth']} on disk, {shape.depth} computed"
    return True, ""


# --- aging: the tree's profile against the shipped ones -------------------------------------

def _w1(xa: np.ndarray, wa: np.ndarray, xb: np.ndarray, wb: np.ndarray) -> float:
    """Wasserstein-1 distance of two weighted point sets on a line (area between the CDFs)."""
    xs = np.union1d(xa, xb)
    if len(xs) < 2:
        return 0.0
    cdf = lambda x, w: np.array([w[x <= v].sum() for v in xs]) / max(w.sum(), 1e-12)  # noqa: E731
    return float(np.sum(np.abs(cdf(xa, wa) - cdf(xb, wb))[:-1] * np.diff(xs)))


def profile_distances(mine, others) -> list[dict]:
    """How far a captured profile is from each shipped one, nearest first: file sizes (W1 on
    log2 bytes: 1.0 = sizes twice as large throughout), depths (W1 in levels), fullness."""
    def sizes(p):
        return np.log2(np.maximum(np.array(p.size_bytes, float), 1.0)), p.size_fractions()

    def depths(p):
        return np.array(p.depths, float), p.depth_fractions()

    rows = []
    for other in others:
        size_d = _w1(*sizes(mine), *sizes(other))
        depth_d = _w1(*depths(mine), *depths(other))
        full_d = abs(mine.fullness - other.fullness)
        rows.append({"profile": other.name, "distance": round(size_d + depth_d + 4 * full_d, 3),
                     "size_log2": round(size_d, 3), "depth_levels": round(depth_d, 3),
                     "fullness": round(full_d, 3), "description": other.description})
    return sorted(rows, key=lambda r: r["distance"])


def _aging(walk: Walk, root: str, now_s: float) -> dict:
    scan = P.TreeScan(root=root, size_bytes=np.array(walk.file_sizes, dtype=np.int64),
                      depth=np.array(walk.file_depths, dtype=np.int64),
                      age_s=np.maximum(0.0, now_s - np.array(walk.file_mtimes, dtype=np.float64)),
                      dirs_per_depth=tuple(walk.dirs_per_depth), fullness=_fullness(root),
                      errors=len(walk.errors), symlinks_skipped=walk.symlinks,
                      other_device_skipped=walk.other_device_skipped, now_s=now_s)
    try:
        mine = P.profile_from_scan(scan)
    except P.ProfileError as exc:
        return {"error": str(exc)}
    shipped = []
    for name in P.list_profiles():
        try:
            shipped.append(P.load_profile(name))
        except P.ProfileError:
            continue
    return {"profile": mine.to_dict(), "nearest": profile_distances(mine, shipped)}


def _fullness(root: str) -> float:
    """The profile's fullness: df's Use% as a fraction (blocks reserved for root are neither
    used nor free to the tree's writers)."""
    use = df_fullness(os.statvfs(root)).use_percent
    return (use or 0) / 100


# --- the scan --------------------------------------------------------------------------------

def scan(path: str | os.PathLike, *, near: int = dirs.NEAR_ENTRIES, largest: int = 10,
         free_space: bool = True, aging: bool = True) -> dict:
    """The read-only scan report of the tree at ``path`` (see the module docstring)."""
    try:
        root = trust.real_tree(path, "scan")  # never through a link another user made
        if not stat.S_ISDIR(os.stat(root).st_mode):
            raise FsscopeError(f"scan {path}: not a directory")
    except OSError as exc:
        raise FsscopeError(f"scan {path}: {exc.strerror}") from None
    found = existing_fs(root)
    geometry = read_geometry(found.fs, found.device, found.mountpoint, existing=True, sync=False)
    now_s = time.time()
    t0 = time.monotonic()
    walk = walk_tree(root, found.fs, dir_block_bytes=geometry.dir_block_size_bytes or 4096)
    if geometry.fs in EXT4_FAMILY and geometry.existing and not geometry.features:
        geometry = ext4_csum_from_dirs(walk.dirs, geometry)
    judged = [judge(rec, geometry, found.device) for rec in walk.dirs]
    known = [d for d in judged if d["agrees"] is not None]
    report = {
        "path": root, "existing": found.to_dict(),
        "geometry": {k: v for k, v in geometry.to_dict().items() if k != "raw"},
        "directories": len(judged), "files": len(walk.file_sizes),
        "walk_s": round(time.monotonic() - t0, 3),
        "read_only": {"noatime_refused": walk.noatime_refused,
                      "note": ("directories opened with O_NOATIME, no sync, no FIEMAP sync: nothing "
                               "written" if not walk.noatime_refused else
                               f"{walk.noatime_refused} directories not owned by this user were read "
                               "without O_NOATIME (only the owner or root may): their access times "
                               "may be updated (relatime), nothing else is written")},
        "structures": _count(judged),
        "checked": {"agree": sum(1 for d in known if d["agrees"]),
                    "disagree": sum(1 for d in known if not d["agrees"]),
                    "not_checked": len(judged) - len(known)},
        **_near_change(judged, near),
        "largest": sorted(judged, key=lambda d: -d["entries"])[:largest],
        "disagreements": [d for d in known if not d["agrees"]],
        "dirs": judged,
        "errors": walk.errors[:50], "errors_count": len(walk.errors),
        "swapped": walk.swapped[:50], "swapped_count": len(walk.swapped),
        "near_entries": near,
    }
    if free_space:
        try:
            report["free_space"] = free_space_live(found.fs, found.mountpoint).to_dict()
        except (FsscopeError, OSError) as exc:
            report["free_space_error"] = _short(exc)
    if aging:
        report["aging"] = _aging(walk, root, now_s)
    return report


#: the directories near a change listed by name; the rest are counted by what they become
NEAR_ROWS = 20


def _near_change(judged: list[dict], near: int) -> dict:
    """The directories within ``near`` creates of a structural change: the NEAR_ROWS largest
    listed (a change costs more the more entries it moves: a tree of tiny directories has
    hundreds a create from a cheap one), soonest first; the others counted by what they become."""
    close = [d for d in judged if d["creates_until_change"] and d["creates_until_change"]["creates"] <= near]
    listed = sorted(close, key=lambda d: -d["entries"])[:NEAR_ROWS]
    rest: dict[str, int] = {}
    for d in sorted(close, key=lambda d: -d["entries"])[NEAR_ROWS:]:
        becomes = d["creates_until_change"]["becomes"]
        rest[becomes] = rest.get(becomes, 0) + 1
    return {"near_change": sorted(listed, key=lambda d: (d["creates_until_change"]["creates"], -d["entries"])),
            "near_change_more": rest}


def _count(judged: list[dict]) -> dict:
    """How many directories are in each structure, by the file system's own account where it
    gave one (a directory that once held more names is what its blocks say), else by names."""
    counts: dict[str, int] = {}
    for d in judged:
        said = d.get("account") or {}
        structure, depth = ((said["structure"], said.get("depth")) if said.get("structure") is not None
                            else (d["structure"], d.get("depth")))
        if structure is None:
            key = "not classified"
        else:
            key = str(structure) + (f" depth {depth}" if depth else "")
        counts[key] = counts.get(key, 0) + 1
    return counts


def _short(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.EACCES:
        text += " (needs root)"
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__


__all__ = ["scan", "walk_tree", "judge", "profile_distances", "xfs_mapped_offsets", "ext4_htree_depth"]
