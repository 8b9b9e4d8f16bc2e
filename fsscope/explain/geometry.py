"""Read a mounted file system's geometry with its own tools.

The rules in :mod:`fsscope.explain.rules` turn these numbers into the file indices where
on-disk structures change (XFS short-form directory full, ext4 first directory block full,
btrfs first leaf full, ...). Every number here is what the file system itself reports --
``xfs_info``/``xfs_io``/``xfs_db``, ``dumpe2fs -h``, ``btrfs inspect-internal`` -- never a
default assumed from a man page, so a changed mkfs option moves the predictions with it.

Some quantities depend on the state of the probe's own directory, not on mkfs: how big the
XFS data fork of a *new* directory is (recent kernels preallocate an attribute fork when a
security module or ACL will add xattrs, which shrinks the fork from the inode's literal area
to 192 bytes), how many free inodes its allocation group still has in allocated chunks, how
much room the btrfs fs-tree leaf has left once the directory exists. Pass ``probe_dir`` (the
fresh, empty directory, after it was made) to read those exactly; without it they stay
``None`` and the rules fall back to stated assumptions.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from fsscope.errors import FsscopeError, ToolError
from fsscope.layout.btrfs_tree import subvolume_id
from fsscope.layout.freespace import syncfs
from fsscope.targets import filesystem, identity
from fsscope.tools import run

#: XFS allocates inodes in chunks of this many (XFS_INODES_PER_CHUNK, fixed by the format).
XFS_INODES_PER_CHUNK = 64
#: Size of the fixed inode core before the literal area: v5 (crc=1) and v4 inodes.
XFS_V5_INODE_CORE_BYTES = 176
XFS_V4_INODE_CORE_BYTES = 100
#: XFS_INODE_BIG_CLUSTER_SIZE: the inode cluster buffer before v5 scaling.
XFS_INODE_BIG_CLUSTER_BYTES = 8192
#: btrfs leaf/node header (struct btrfs_header).
BTRFS_HEADER_BYTES = 101


@dataclass(frozen=True)
class Geometry:
    """What a rule needs to know about one mounted file system (None: not knowable here)."""

    fs: str
    mountpoint: str
    device: str | None = None
    block_size_bytes: int | None = None
    inode_size_bytes: int | None = None
    dir_block_size_bytes: int | None = None
    inode_chunk_inodes: int | None = None
    node_size_bytes: int | None = None
    features: frozenset[str] = frozenset()
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    #: where the probe's files go: the file system's root directory (True: the papers'
    #: setup, made by mkfs) or a fresh subdirectory (False); None: no probe directory known.
    probe_dir_in_root: bool | None = None
    #: name lengths (bytes) of the entries already in the probe directory besides . and ..
    #: (ext4's root holds lost+found): they take room in the directory's first block.
    probe_dir_entry_name_bytes: tuple[int, ...] = ()
    #: a file system fsscope did not make (``--dir``, ``scan``): its state is what it is now
    #: (used, not fresh), and ``unread`` says which numbers could not be read and why.
    existing: bool = False
    unread: tuple[str, ...] = ()
    mount_options: tuple[str, ...] = ()

    # --- XFS -------------------------------------------------------------------------
    xfs_inode_core_bytes: int | None = None
    #: inode size - core: the most a local-format fork can hold (no attr fork).
    xfs_literal_area_bytes: int | None = None
    #: data fork of the probe directory, measured (bulkstat bs_forkoff); None: not measured.
    xfs_dir_data_fork_bytes: int | None = None
    xfs_ag_count: int | None = None
    xfs_ag_blocks: int | None = None
    #: bits of an inode number: log2(agcount) + agblklog + inopblog (> 32: 8-byte inumbers
    #: possible in directory entries).
    xfs_inode_number_bits: int | None = None
    xfs_agino_bits: int | None = None
    #: the probe directory's inode number and allocation group.
    xfs_dir_inode: int | None = None
    xfs_dir_ag: int | None = None
    #: free inodes in already allocated chunks of the directory's AG (measured with the
    #: directory in place) -- the files that fit before the first new chunk.
    xfs_dir_ag_free_inodes: int | None = None
    #: same, for AG 0, read whether or not a probe directory is known.
    xfs_ag0_free_inodes: int | None = None
    #: inodes per inode cluster buffer (the unit XFS reads/writes inodes in): the kernel's
    #: xfs_ialloc_setup_geometry -- 8 KiB, times inodesize/256 on v5 when sb_inoalignmt
    #: allows, at least one block. None: not known.
    xfs_inode_cluster_inodes: int | None = None
    #: sb_inoalignmt in blocks (xfs_db), which decides whether v5 clusters grow with inodes.
    xfs_inode_align_blocks: int | None = None
    #: the allocated inode chunks of the probe directory's AG before the probe, as
    #: (startino, allocmask, holemask) from XFS_IOC_INUMBERS; None: not measured.
    xfs_dir_ag_chunks: tuple[tuple[int, int, int], ...] | None = None
    #: the root directory's inode number (read at mount: its cluster is in memory).
    xfs_root_inode: int | None = None

    # --- ext4 ------------------------------------------------------------------------
    ext4_inodes_per_group: int | None = None
    #: bytes of the probe directory (one block when fresh); None: not measured.
    ext4_dir_size_bytes: int | None = None
    #: directory hash seed is all zeros (recipe prep null_hash_seed): htree leaf splits then
    #: land at the same indices on every fresh file system.
    ext4_hash_seed_null: bool | None = None
    #: the directory hash seed (s_hash_seed, four words) and the DX_HASH_* version new htrees
    #: use (3-5: unsigned char): with both, htree leaf splits are computed, not bounded
    ext4_hash_seed: tuple[int, int, int, int] | None = None
    ext4_hash_version: int | None = None

    # --- btrfs -----------------------------------------------------------------------
    btrfs_sector_size_bytes: int | None = None
    btrfs_fs_tree_level: int | None = None
    btrfs_fs_tree_leaf_free_bytes: int | None = None
    btrfs_max_inline_bytes: int | None = None
    #: True when the tree was read with the probe directory already in it.
    btrfs_tree_includes_dir: bool = False

    @property
    def files_where(self) -> str:
        """Where the probe's files go, as the start of an arithmetic ("" when not known):
        the indices depend on it (a new directory may get an attribute fork, the root holds
        what mkfs put there)."""
        if self.probe_dir_in_root is None:
            return ""
        if self.probe_dir_in_root:
            n = len(self.probe_dir_entry_name_bytes)
            held = f", beside the {n} entr{'y' if n == 1 else 'ies'} mkfs made there" if n else ""
            return f"files in the root directory (as in the papers){held}; "
        return "files in a fresh subdirectory (made just before the run); "

    @property
    def has_csum(self) -> bool:
        return "metadata_csum" in self.features

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready view (features sorted, raw tool output kept)."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            out[name] = sorted(value) if isinstance(value, frozenset) else value
        return out


def read_geometry(fs_type: str, device: str | None, mountpoint: str, *,
                  probe_dir: str | os.PathLike[str] | None = None, existing: bool = False,
                  sync: bool = True) -> Geometry:
    """Geometry of the file system mounted at ``mountpoint``.

    ``device`` may be None (looked up in /proc/self/mountinfo). ``probe_dir``: the fresh,
    empty directory the probe will fill, already created; it is synced and read but not
    changed. tmpfs or an unknown type gives a Geometry with what statvfs knows, no error.
    Tool failures raise :class:`~fsscope.errors.ToolError` -- unless ``existing`` (a file
    system fsscope did not make): then what can be read is returned and ``unread`` says what
    could not and why (a device only root may open, a tool missing). ``sync=False``: read
    without syncing it first (a read-only look; offline readers then see the last commit).
    """
    fs = fs_type.lower()
    mountpoint = str(mountpoint)
    if device is None:
        device = device_of(mountpoint)
    if existing:
        return _with_probe_dir(_read_existing(fs, device, mountpoint, probe_dir, sync), mountpoint, probe_dir)
    if fs in ("xfs", "ext4", "ext3", "ext2", "btrfs") and sync:
        syncfs(mountpoint)  # offline readers (xfs_db, dumpe2fs, dump-tree) see committed state only
    if fs == "xfs":
        geometry = _read_xfs(device, mountpoint, probe_dir)
    elif fs in ("ext4", "ext3", "ext2"):
        if device is None:
            raise FsscopeError(f"no block device found for {fs} at {mountpoint}: "
                               f"dumpe2fs needs one")
        geometry = _read_ext4(fs, device, mountpoint, probe_dir)
    elif fs == "btrfs":
        if device is None:
            raise FsscopeError(f"no block device found for btrfs at {mountpoint}: "
                               f"btrfs inspect-internal needs one")
        geometry = _read_btrfs(device, mountpoint, probe_dir)
    else:
        geometry = _read_generic(fs, device, mountpoint)
    return _with_probe_dir(geometry, mountpoint, probe_dir)


def _with_probe_dir(geometry: Geometry, mountpoint: str, probe_dir: Any) -> Geometry:
    """Where the probe's files go and what that directory already holds."""
    if probe_dir is None:
        return geometry
    in_root = os.path.realpath(probe_dir) == os.path.realpath(mountpoint)
    # a subdirectory is the probe's own (empty, or holding the files it populated); the root
    # holds what mkfs made there
    names = tuple(len(os.fsencode(n)) for n in sorted(os.listdir(probe_dir))) if in_root else ()
    return replace(geometry, probe_dir_in_root=in_root, probe_dir_entry_name_bytes=names)


def _read_existing(fs: str, device: str | None, mountpoint: str, probe_dir: Any,
                   sync: bool) -> Geometry:
    """A file system in use: its own tools first, then what the kernel shows without the
    device (statfs, sysfs); every gap is named in ``unread``."""
    unread: list[str] = []
    options = tuple(filesystem.mount_options(mountpoint))
    if fs in ("xfs", "ext4", "ext3", "ext2", "btrfs"):
        if sync:
            syncfs(mountpoint)
        read: Callable[[], Geometry] | None = None
        if fs == "xfs":  # xfs_info reads a mounted xfs without its device
            read = partial(_read_xfs, device, mountpoint, probe_dir, device_reads=sync)
        elif device is None:
            unread.append(f"{fs} geometry: the mount's source is not a block device here, so "
                          f"its superblock cannot be read")
        elif fs == "btrfs":
            read = partial(_read_btrfs, device, mountpoint, probe_dir)
        else:
            read = partial(_read_ext4, fs, device, mountpoint, probe_dir, native=True)
        if read is not None:
            try:
                found = read()
                unread += [f"{fs}: {e}" for e in found.raw.get("errors", [])]
                return replace(found, existing=True, unread=tuple(unread), mount_options=options)
            except (FsscopeError, OSError) as exc:
                unread.append(f"{fs} superblock ({_tool_of(fs)} {device or mountpoint}): "
                              f"{_why(exc)}")
    base = _read_generic(fs, device, mountpoint)
    extra: dict[str, Any] = {}
    if fs == "btrfs":
        extra = _btrfs_from_sysfs(device)
        if extra:
            unread.append("btrfs fs-tree level and leaf fill: read from sysfs only "
                          "(dump-tree needs the device)")
    elif fs in ("ext4", "ext3", "ext2"):
        unread.append("ext4 features (dir_index, metadata_csum), inode size and inodes per "
                      "group: only the superblock has them; block size is statfs's; a "
                      "directory's structure is the kernel's indexed flag and st_size")
        extra = {"dir_block_size_bytes": base.block_size_bytes}
        if probe_dir is not None:
            extra["ext4_dir_size_bytes"] = os.stat(probe_dir).st_size
    elif fs not in ("xfs",):
        unread.append(f"{fs}: fsscope has no structure rules for it (no on-disk directory "
                      f"formats to predict); block size is statfs's")
    return replace(base, **extra, existing=True, unread=tuple(unread), mount_options=options)


def _tool_of(fs: str) -> str:
    return {"xfs": "xfs_info", "btrfs": "btrfs inspect-internal dump-super"}.get(fs, "pread of")


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = next((t for t in reversed(text) if t.strip()), type(exc).__name__)
    if "ermission denied" in str(exc) and os.geteuid() != 0:
        line += " (reading the device needs root or its group)"
    elif "ot permitted" in str(exc) and os.geteuid() == 0:
        line += " (refused even to root: a device cgroup, a container or a security module)"
    return line[:300]


def _btrfs_from_sysfs(device: str | None) -> dict[str, Any]:
    """nodesize/sectorsize/features of the btrfs whose devices/ lists ``device``."""
    if device is None:
        return {}
    name = Path(os.path.realpath(device)).name
    for fsid in Path("/sys/fs/btrfs").glob("*-*"):
        if not (fsid / "devices" / name).exists():
            continue
        try:
            node = int((fsid / "nodesize").read_text())
            sector = int((fsid / "sectorsize").read_text())
        except (OSError, ValueError):
            return {}
        features = frozenset(p.name for p in (fsid / "features").iterdir()) \
            if (fsid / "features").is_dir() else frozenset()
        return {"node_size_bytes": node, "btrfs_sector_size_bytes": sector,
                "block_size_bytes": sector, "features": features,
                "btrfs_tree_includes_dir": False}
    return {}


def device_of(mountpoint: str) -> str | None:
    """Source device of the mount at ``mountpoint`` (the last mount there), or None."""
    try:
        mount = identity.top_mount(mountpoint)
    except OSError:
        return None
    return mount.source if mount is not None and mount.source.startswith("/dev/") else None


def _read_generic(fs: str, device: str | None, mountpoint: str) -> Geometry:
    try:
        st = os.statvfs(mountpoint)
        block_size = st.f_bsize
    except OSError:
        block_size = None
    return Geometry(fs=fs, mountpoint=mountpoint, device=device, block_size_bytes=block_size,
                    raw={"statvfs_bsize": block_size})


# --- XFS -------------------------------------------------------------------------------

def parse_xfs_info(text: str) -> dict[str, dict[str, str]]:
    """``xfs_info`` output as {section: {key: value}} (sections: meta-data, data, naming,
    log, realtime; continuation lines belong to the section above)."""
    sections: dict[str, dict[str, str]] = {}
    current = "meta-data"
    for line in text.splitlines():
        head = re.match(r"^(\S+?)\s*=", line)
        if head and not line.startswith(" "):
            current = head.group(1)
            line = line[head.end():]
            # "naming   =version 2  bsize=..." -> keep "version 2" as a value
            version = re.match(r"\s*version\s+(\S+)", line)
            if version:
                sections.setdefault(current, {})["version"] = version.group(1)
        else:
            line = line.split("=", 1)[1] if line.lstrip().startswith("=") else line
        for key, value in re.findall(r"([A-Za-z][\w-]*)=([^\s,]+)", line):
            sections.setdefault(current, {})[key] = value
        external = re.match(r"\s*(internal log|external)", line)
        if external and current == "log":
            sections.setdefault(current, {})["where"] = external.group(1)
    return sections


def parse_bulkstat(text: str) -> dict[str, str]:
    """``xfs_io -c 'bulkstat_single INO'`` output as {field: value}."""
    return {k: v for k, v in re.findall(r"^\s*(bs_\w+)\s*=\s*(\S+)", text, flags=re.M)}


def parse_inumbers(text: str) -> list[dict[str, int]]:
    """``xfs_io -c inumbers`` output as a list of chunks (startino, alloccount, ...)."""
    chunks: list[dict[str, int]] = []
    for key, value in re.findall(r"^\s*xi_(\w+)\s*=\s*(\S+)", text, flags=re.M):
        if key == "startino":
            chunks.append({})
        if chunks:
            chunks[-1][key] = int(value, 0)
    return chunks


def _int(value: str | None) -> int | None:
    try:
        return int(value, 0) if value is not None else None
    except ValueError:
        return None


def _xfs_ag_chunks(mountpoint: str, ag: int, agino_bits: int) -> tuple[tuple[int, int, int], ...]:
    """(startino, allocmask, holemask) of the allocated chunks of AG ``ag`` (XFS_IOC_INUMBERS)."""
    chunks = parse_inumbers(run("xfs_io", "-c", f"inumbers -a {ag}", mountpoint))
    return tuple((c.get("startino", 0), c.get("allocmask", 0), c.get("holemask", 0))
                 for c in chunks if c.get("startino", 0) >> agino_bits == ag)


def xfs_inode_cluster_inodes(*, inode_size_bytes: int, block_size_bytes: int, crc: bool,
                             inode_align_blocks: int | None) -> int:
    """Inodes per cluster buffer, as the kernel computes it (xfs_ialloc_setup_geometry):
    XFS_INODE_BIG_CLUSTER_SIZE 8192 B; v5 scales it by inodesize/256 when sb_inoalignmt
    (blocks) covers the scaled size (None: assumed, mkfs aligns v5 chunks so it does); at
    least one block; at most a chunk."""
    raw = XFS_INODE_BIG_CLUSTER_BYTES
    if crc:
        scaled = raw * inode_size_bytes // 256
        if inode_align_blocks is None or inode_align_blocks >= scaled // block_size_bytes:
            raw = scaled
    blocks = max(1, raw // block_size_bytes)
    return min(XFS_INODES_PER_CHUNK, blocks * block_size_bytes // inode_size_bytes)


def _xfs_inode_align_blocks(device: str | None) -> int | None:
    if device is None:
        return None
    text = run("xfs_db", "-r", "-c", "sb 0", "-c", "print inoalignmt", device)
    return _int((re.search(r"inoalignmt = (\d+)", text) or [None, None])[1])


def _xfs_ag_free_inodes(mountpoint: str, ag: int, agino_bits: int) -> int:
    """Free inodes in the allocated chunks of allocation group ``ag`` (live, via the
    XFS_IOC_INUMBERS ioctl -- no offline read of a mounted device)."""
    chunks = parse_inumbers(run("xfs_io", "-c", f"inumbers -a {ag}", mountpoint))
    free = 0
    for chunk in chunks:
        if chunk.get("startino", 0) >> agino_bits != ag:
            continue
        holes = bin(chunk.get("holemask", 0)).count("1") * 4  # 4 inodes per holemask bit
        free += XFS_INODES_PER_CHUNK - holes - chunk.get("alloccount", 0)
    return free


def xfs_geometry_from_info(info_text: str, *, mountpoint: str = "",
                           device: str | None = None) -> Geometry:
    """Geometry from ``xfs_info`` text alone (works for an unmounted image too: ``xfs_info``
    accepts one); nothing about a probe directory or free inodes is known."""
    info = parse_xfs_info(info_text)
    meta, data, naming = info.get("meta-data", {}), info.get("data", {}), info.get("naming", {})
    inode_size = _int(meta.get("isize"))
    block_size = _int(data.get("bsize"))
    ag_count = _int(meta.get("agcount"))
    ag_blocks = _int(meta.get("agsize"))
    crc = meta.get("crc") == "1"
    features = {k for k in ("crc", "finobt", "sparse", "rmapbt", "reflink", "bigtime",
                            "inobtcount", "nrext64") if meta.get(k) == "1"}
    if naming.get("ftype") == "1":
        features.add("ftype")
    core = XFS_V5_INODE_CORE_BYTES if crc else XFS_V4_INODE_CORE_BYTES
    agino_bits = number_bits = None
    if ag_blocks and inode_size and block_size and ag_count:
        agblklog = math.ceil(math.log2(ag_blocks))
        inopblog = int(math.log2(block_size // inode_size))
        agino_bits = agblklog + inopblog
        number_bits = agino_bits + (math.ceil(math.log2(ag_count)) if ag_count > 1 else 0)
    return Geometry(
        fs="xfs", mountpoint=mountpoint, device=device, block_size_bytes=block_size,
        inode_size_bytes=inode_size, dir_block_size_bytes=_int(naming.get("bsize")),
        inode_chunk_inodes=XFS_INODES_PER_CHUNK, features=frozenset(features),
        raw={"xfs_info": info}, xfs_inode_core_bytes=core,
        xfs_literal_area_bytes=inode_size - core if inode_size else None,
        xfs_ag_count=ag_count, xfs_ag_blocks=ag_blocks, xfs_inode_number_bits=number_bits,
        xfs_agino_bits=agino_bits)


def _optional(read: Any, raw: dict[str, Any]) -> Any:
    """``read()``, or None (with the tool's complaint kept in raw["errors"]) if it fails."""
    try:
        return read()
    except ToolError as exc:
        raw.setdefault("errors", []).append(str(exc))
        return None


def _read_xfs(device: str | None, mountpoint: str, probe_dir: Any, *,
              device_reads: bool = True) -> Geometry:
    base = xfs_geometry_from_info(run("xfs_info", mountpoint), mountpoint=mountpoint,
                                  device=device)
    raw = dict(base.raw)
    agino_bits, literal = base.xfs_agino_bits, base.xfs_literal_area_bytes
    # The live per-directory reads are optional: an xfs_io without bulkstat_single/inumbers
    # (xfsprogs < 5.3) leaves them None and the rules state their assumptions instead.
    dir_fork = dir_ino = dir_ag = dir_free = ag0_free = dir_chunks = None
    if agino_bits is not None:
        ag0_free = _optional(lambda: _xfs_ag_free_inodes(mountpoint, 0, agino_bits), raw)
    if probe_dir is not None:
        dir_ino = os.stat(probe_dir).st_ino
        bulk = _optional(lambda: parse_bulkstat(
            run("xfs_io", "-c", f"bulkstat_single {dir_ino}", mountpoint)), raw) or {}
        raw["probe_dir_bulkstat"] = bulk
        forkoff = _int(bulk.get("bs_forkoff"))
        if forkoff is not None and literal is not None:
            dir_fork = forkoff if forkoff > 0 else literal  # bs_forkoff is in bytes
        if agino_bits is not None:
            dir_ag = dir_ino >> agino_bits
            dir_free = (ag0_free if dir_ag == 0 else _optional(
                lambda: _xfs_ag_free_inodes(mountpoint, dir_ag, agino_bits), raw))
            dir_chunks = _optional(lambda: _xfs_ag_chunks(mountpoint, dir_ag, agino_bits), raw)
    # xfs_db opens the device (and flushes it on close): not on a read-only look
    align = _optional(lambda: _xfs_inode_align_blocks(device), raw) if device_reads else None
    cluster = None
    if base.inode_size_bytes and base.block_size_bytes:
        cluster = xfs_inode_cluster_inodes(
            inode_size_bytes=base.inode_size_bytes, block_size_bytes=base.block_size_bytes,
            crc="crc" in base.features, inode_align_blocks=align)
    try:
        root_ino = os.stat(mountpoint).st_ino
    except OSError:
        root_ino = None
    return replace(base, raw=raw, xfs_dir_data_fork_bytes=dir_fork, xfs_dir_inode=dir_ino,
                   xfs_dir_ag=dir_ag, xfs_dir_ag_free_inodes=dir_free,
                   xfs_ag0_free_inodes=ag0_free, xfs_inode_cluster_inodes=cluster,
                   xfs_inode_align_blocks=align, xfs_dir_ag_chunks=dir_chunks,
                   xfs_root_inode=root_ino)

# --- ext4 ------------------------------------------------------------------------------

def parse_dumpe2fs(text: str) -> dict[str, str]:
    """``dumpe2fs -h`` output as {"Block size": "4096", ...}."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key and not key.startswith(" "):
            fields.setdefault(key.strip(), value.strip())
    return fields


#: ext4 feature bits (fs/ext4/ext4.h) -> the names dumpe2fs prints: (compat, incompat, ro_compat)
EXT4_FEATURES = (
    {0x1: "dir_prealloc", 0x4: "has_journal", 0x8: "ext_attr", 0x10: "resize_inode",
     0x20: "dir_index", 0x200: "sparse_super2", 0x400: "fast_commit", 0x1000: "orphan_file"},
    {0x2: "filetype", 0x4: "needs_recovery", 0x8: "journal_dev", 0x10: "meta_bg", 0x40: "extent",
     0x80: "64bit", 0x100: "mmp", 0x200: "flex_bg", 0x400: "ea_inode", 0x1000: "dirdata",
     0x2000: "metadata_csum_seed", 0x4000: "large_dir", 0x8000: "inline_data",
     0x10000: "encrypt", 0x20000: "casefold"},
    {0x1: "sparse_super", 0x2: "large_file", 0x8: "huge_file", 0x10: "uninit_bg",
     0x20: "dir_nlink", 0x40: "extra_isize", 0x100: "quota", 0x200: "bigalloc",
     0x400: "metadata_csum", 0x1000: "read-only", 0x2000: "project", 0x8000: "verity"},
)
EXT4_SUPER_OFFSET = 1024
EXT4_SUPER_MAGIC = 0xEF53


def ext4_superblock(device: str) -> dict[str, str]:
    """The fields of :func:`parse_dumpe2fs` that the rules use, read straight from the
    superblock with one pread: no library opens (and fsyncs) the device, so a look at a
    mounted file system sends it no request but a read. The kernel writes the superblock
    through the device's page cache, so this is current."""
    import struct

    fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC)
    try:
        sb = os.pread(fd, 1024, EXT4_SUPER_OFFSET)
    finally:
        os.close(fd)
    if len(sb) < 256 or struct.unpack_from("<H", sb, 56)[0] != EXT4_SUPER_MAGIC:
        raise FsscopeError(f"{device}: no ext2/3/4 superblock at 1024")
    log_block, = struct.unpack_from("<I", sb, 24)
    per_group, = struct.unpack_from("<I", sb, 40)
    rev, = struct.unpack_from("<I", sb, 76)
    inode_size = struct.unpack_from("<H", sb, 88)[0] if rev else 128
    words = struct.unpack_from("<III", sb, 92)
    names = [name for word, table in zip(words, EXT4_FEATURES)
             for bit, name in table.items() if word & bit]
    seed = sb[236:252].hex()
    flags, = struct.unpack_from("<I", sb, 352)
    return {"Block size": str(1024 << log_block), "Inode size": str(inode_size),
            "Inodes per group": str(per_group), "Filesystem features": " ".join(names),
            "Directory Hash Seed": f"{seed[:8]}-{seed[8:12]}-{seed[12:16]}-{seed[16:20]}-{seed[20:]}",
            "Default directory hash": EXT4_HASH_NAMES.get(sb[252], str(sb[252])),
            "Filesystem flags": " ".join(name for bit, name in EXT4_SB_FLAGS.items() if flags & bit)}


#: s_def_hash_version -> the name dumpe2fs prints; s_flags bits dumpe2fs names
EXT4_HASH_NAMES = {0: "legacy", 1: "half_md4", 2: "tea"}
EXT4_SB_FLAGS = {0x1: "signed_directory_hash", 0x2: "unsigned_directory_hash", 0x4: "test_filesystem"}


def _hash_of(fields: dict[str, str]) -> tuple[tuple[int, int, int, int] | None, int | None]:
    """(s_hash_seed as the kernel's four words, the DX_HASH_* version new htrees use: the
    default hash, +3 where the file system hashes unsigned char)."""
    import struct

    seed_text = fields.get("Directory Hash Seed", "").replace("-", "")
    try:
        seed = struct.unpack("<4I", bytes.fromhex(seed_text)) if len(seed_text) == 32 else None
    except ValueError:
        seed = None
    by_name = {v: k for k, v in EXT4_HASH_NAMES.items()}
    version = by_name.get(fields.get("Default directory hash", "").strip())
    if version is not None and "unsigned_directory_hash" in fields.get("Filesystem flags", ""):
        version += 3
    return (seed if seed is None else (seed[0], seed[1], seed[2], seed[3])), version


def _read_ext4(fs: str, device: str, mountpoint: str, probe_dir: Any, *,
               native: bool = False) -> Geometry:
    fields = ext4_superblock(device) if native else parse_dumpe2fs(run("dumpe2fs", "-h", device))
    block_size = _int(fields.get("Block size"))
    features = frozenset(fields.get("Filesystem features", "").split())
    dir_size = os.stat(probe_dir).st_size if probe_dir is not None else None
    seed, version = _hash_of(fields)
    return Geometry(
        fs=fs, mountpoint=mountpoint, device=device, block_size_bytes=block_size,
        inode_size_bytes=_int(fields.get("Inode size")),
        dir_block_size_bytes=block_size,  # ext4 directory blocks are file-system blocks
        features=features, raw={"dumpe2fs": fields},
        ext4_inodes_per_group=_int(fields.get("Inodes per group")),
        ext4_dir_size_bytes=dir_size, ext4_hash_seed_null=_null_seed(fields),
        ext4_hash_seed=seed, ext4_hash_version=version)


def _null_seed(fields: dict[str, str]) -> bool | None:
    seed = fields.get("Directory Hash Seed")
    if seed is None:
        return None
    return set(seed.replace("-", "")) <= {"0"}


# --- btrfs -----------------------------------------------------------------------------

def parse_dump_super(text: str) -> dict[str, str]:
    """``btrfs inspect-internal dump-super`` output as {"nodesize": "16384", ...}."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"^([a-z_]+)\s+(.*\S)\s*$", line)
        if match:
            fields.setdefault(match.group(1), match.group(2))
    return fields


def btrfs_flag_names(text: str, key: str) -> list[str]:
    """Names of the flags ``dump-super -f`` lists under ``key`` ("( MIXED_BACKREF | ... )")."""
    match = re.search(rf"^{key}\s+\S+\s*\n?\s*\(([^)]*)\)", text, flags=re.M)
    return re.findall(r"[A-Z][A-Z0-9_]+", match.group(1)) if match else []


def _fs_tree_root(tree_id: int) -> re.Pattern[str]:
    """The root tree's ROOT_ITEM of a subvolume's tree (5, the top level, prints as FS_TREE;
    a snapshot's key offset is its generation)."""
    name = "FS_TREE" if tree_id == 5 else str(tree_id)
    return re.compile(rf"key \({name} ROOT_ITEM \d+\).*?\bbytenr (\d+)\b.*?\n\s+level (\d+)\b", re.S)
_BLOCK_HEAD = re.compile(r"^(leaf|node) \d+ (?:level (\d+) )?items (\d+) free space (\d+)", re.M)


def _read_btrfs(device: str, mountpoint: str, probe_dir: Any) -> Geometry:
    super_text = run("btrfs", "inspect-internal", "dump-super", "-f", device)
    fields = parse_dump_super(super_text)
    node_size = _int(fields.get("nodesize"))
    sector = _int(fields.get("sectorsize"))
    features = frozenset(f.lower() for f in btrfs_flag_names(super_text, "incompat_flags")
                         + btrfs_flag_names(super_text, "compat_ro_flags"))
    raw: dict[str, Any] = {"dump_super": fields}
    level = leaf_free = None
    # The root tree is small; it says where the fs tree's root block is and its level.
    # the tree of the subvolume the files go in (a subvolume is a tree of its own)
    try:
        tree_id = subvolume_id(str(probe_dir if probe_dir is not None else mountpoint))
    except OSError as exc:
        tree_id = 5
        raw.setdefault("errors", []).append(f"subvolume id (BTRFS_IOC_INO_LOOKUP): {exc.strerror}; "
                                            "the top-level tree assumed")
    raw["fs_tree_id"] = tree_id
    root_tree = run("btrfs", "inspect-internal", "dump-tree", "-t", "root", device)
    found = _fs_tree_root(tree_id).search(root_tree)
    if found:
        bytenr, level = int(found.group(1)), int(found.group(2))
        raw["fs_tree_root_bytenr"] = bytenr
        if level == 0:
            block = run("btrfs", "inspect-internal", "dump-tree", "-b", str(bytenr), device)
            head = _BLOCK_HEAD.search(block)
            if head:
                leaf_free = int(head.group(4))
                raw["fs_tree_leaf_items"] = int(head.group(3))
    # max_inline mount option (default 2048), as the kernel shows it in /proc/mounts
    max_inline = 2048
    for option in filesystem.mount_options(mountpoint):
        if option.startswith("max_inline="):
            max_inline = _int(option.split("=", 1)[1]) or 0
    return Geometry(
        fs="btrfs", mountpoint=mountpoint, device=device, block_size_bytes=sector,
        node_size_bytes=node_size, features=features, raw=raw, btrfs_sector_size_bytes=sector,
        btrfs_fs_tree_level=level, btrfs_fs_tree_leaf_free_bytes=leaf_free,
        btrfs_max_inline_bytes=max_inline, btrfs_tree_includes_dir=probe_dir is not None)


__all__ = ["Geometry", "read_geometry", "device_of", "xfs_geometry_from_info",
           "parse_xfs_info", "parse_dumpe2fs", "parse_dump_super", "parse_bulkstat",
           "parse_inumbers", "btrfs_flag_names"]
