"""A file's physical layout from the FIEMAP ioctl, and Chopper's layout metrics on it.

Why FIEMAP and not ``filefrag``/``debugfs``/``xfs_db``: one ioctl works the same on ext4, xfs
and btrfs, needs no unmount or log flush, and costs no process per file -- so a job can read
the layout of thousands of files. Chopper (anchors §2.2) read ext4 through ``debugfs``, which
also counts the internal extent-tree nodes as extents; FIEMAP reports data extents only, so
``len(extents)`` here is Chopper's ``num_extents`` without the index nodes.

Extents are a numpy structured array (:data:`EXTENT_DTYPE`), one row per reported extent,
sorted by logical offset. Signed 64-bit fields so that differences never wrap.

On btrfs ``physical_bytes`` is a btrfs *logical* address (its chunk-mapped address space),
not a device offset; distances are still meaningful inside one chunk.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
from pathlib import Path

import numpy as np

from fsscope.errors import FsscopeError

# --- the kernel ABI (include/uapi/linux/fiemap.h, linux/fs.h) ------------------------------

FIEMAP_MAX_OFFSET = 2**64 - 1
FIEMAP_FLAG_SYNC = 0x0001  # write back dirty pages first: delayed allocation gets real blocks

FIEMAP_EXTENT_LAST = 0x0001
FIEMAP_EXTENT_UNKNOWN = 0x0002
FIEMAP_EXTENT_DELALLOC = 0x0004
FIEMAP_EXTENT_ENCODED = 0x0008
FIEMAP_EXTENT_DATA_ENCRYPTED = 0x0080
FIEMAP_EXTENT_NOT_ALIGNED = 0x0100
FIEMAP_EXTENT_DATA_INLINE = 0x0200
FIEMAP_EXTENT_DATA_TAIL = 0x0400
FIEMAP_EXTENT_UNWRITTEN = 0x0800
FIEMAP_EXTENT_MERGED = 0x1000
FIEMAP_EXTENT_SHARED = 0x2000

EXTENT_FLAG_NAMES: dict[int, str] = {
    FIEMAP_EXTENT_LAST: "last",
    FIEMAP_EXTENT_UNKNOWN: "unknown",
    FIEMAP_EXTENT_DELALLOC: "delalloc",
    FIEMAP_EXTENT_ENCODED: "encoded",
    FIEMAP_EXTENT_DATA_ENCRYPTED: "encrypted",
    FIEMAP_EXTENT_NOT_ALIGNED: "not_aligned",
    FIEMAP_EXTENT_DATA_INLINE: "inline",
    FIEMAP_EXTENT_DATA_TAIL: "tail",
    FIEMAP_EXTENT_UNWRITTEN: "unwritten",
    FIEMAP_EXTENT_MERGED: "merged",
    FIEMAP_EXTENT_SHARED: "shared",
}

#: Extents whose physical address does not name where the data lies on disk: no block yet
#: (delalloc/unknown) or data kept inside metadata (inline). Excluded from layout metrics.
NO_PHYSICAL_FLAGS = FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_DATA_INLINE


class _FiemapExtent(ctypes.Structure):
    _fields_ = [("fe_logical", ctypes.c_uint64), ("fe_physical", ctypes.c_uint64),
                ("fe_length", ctypes.c_uint64), ("fe_reserved64", ctypes.c_uint64 * 2),
                ("fe_flags", ctypes.c_uint32), ("fe_reserved", ctypes.c_uint32 * 3)]


class _FiemapHeader(ctypes.Structure):
    _fields_ = [("fm_start", ctypes.c_uint64), ("fm_length", ctypes.c_uint64),
                ("fm_flags", ctypes.c_uint32), ("fm_mapped_extents", ctypes.c_uint32),
                ("fm_extent_count", ctypes.c_uint32), ("fm_reserved", ctypes.c_uint32)]


def _iowr(kind: str, nr: int, size: int) -> int:
    return (3 << 30) | (size << 16) | (ord(kind) << 8) | nr


FS_IOC_FIEMAP = _iowr("f", 11, ctypes.sizeof(_FiemapHeader))  # 0xC020660B
assert ctypes.sizeof(_FiemapExtent) == 56 and FS_IOC_FIEMAP == 0xC020660B

#: Extents asked for per ioctl call; files with more are read in several calls.
BATCH_EXTENTS = 1024

EXTENT_DTYPE = np.dtype([("logical_bytes", np.int64), ("physical_bytes", np.int64),
                         ("length_bytes", np.int64), ("flags", np.uint32)])


# --- reading -------------------------------------------------------------------------------

def fs_type_of(path: str | os.PathLike) -> str:
    """File-system type of the mount holding ``path`` (for error messages)."""
    real = os.path.realpath(path)
    best, best_type = "", "unknown"
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return best_type
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        mnt = fields[1].replace("\\040", " ")
        if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, best_type = mnt, fields[2]
    return best_type


def extents_of_fd(fd: int, *, sync: bool = True, batch_extents: int = BATCH_EXTENTS,
                  label: str | None = None) -> np.ndarray:
    """All extents of an open file, by looping FS_IOC_FIEMAP from ``fm_start`` until the
    extent flagged LAST (or an empty answer). ``sync`` resolves delayed allocation first."""

    class _Request(ctypes.Structure):
        _fields_ = [("hdr", _FiemapHeader), ("extents", _FiemapExtent * batch_extents)]

    rows: list[tuple[int, int, int, int]] = []
    start = 0
    while True:
        req = _Request()
        req.hdr.fm_start = start
        req.hdr.fm_length = FIEMAP_MAX_OFFSET - start
        req.hdr.fm_flags = FIEMAP_FLAG_SYNC if sync else 0
        req.hdr.fm_extent_count = batch_extents
        try:
            fcntl.ioctl(fd, FS_IOC_FIEMAP, req, True)
        except OSError as exc:
            where = label or os.path.realpath(f"/proc/self/fd/{fd}")
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOTTY):
                raise FsscopeError(
                    f"{where}: this file system ({fs_type_of(where)}) does not support FIEMAP, "
                    "so fsscope cannot read where the file's data lies") from None
            raise FsscopeError(f"{where}: FIEMAP failed: {os.strerror(exc.errno or 0)}") from None
        mapped = req.hdr.fm_mapped_extents
        if mapped == 0:
            break
        done = False
        for ext in req.extents[:mapped]:
            end = ext.fe_logical + ext.fe_length
            if end <= start and rows:  # an extent already reported by the previous call
                continue
            rows.append((ext.fe_logical, ext.fe_physical, ext.fe_length, ext.fe_flags))
            done = done or bool(ext.fe_flags & FIEMAP_EXTENT_LAST)
        last = req.extents[mapped - 1]
        next_start = last.fe_logical + last.fe_length
        if done or mapped < batch_extents or next_start <= start or next_start >= FIEMAP_MAX_OFFSET:
            break
        start = next_start
    out = np.array(rows, dtype=EXTENT_DTYPE) if rows else np.zeros(0, dtype=EXTENT_DTYPE)
    return np.sort(out, order="logical_bytes", kind="stable")


def extents(path: str | os.PathLike, *, sync: bool = True) -> np.ndarray:
    """Extents of the file at ``path`` (logical_bytes, physical_bytes, length_bytes, flags).

    Raises FsscopeError naming the file system when it has no FIEMAP (tmpfs, some FUSE)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        return extents_of_fd(fd, sync=sync, label=str(path))
    finally:
        os.close(fd)


def flag_names(flags: int) -> list[str]:
    """Names of the FIEMAP_EXTENT_* bits in ``flags`` (unknown bits as hex)."""
    names = [name for bit, name in EXTENT_FLAG_NAMES.items() if flags & bit]
    rest = flags & ~sum(EXTENT_FLAG_NAMES)
    if rest:
        names.append(hex(rest))
    return names


# --- Chopper's metrics (pure functions of an extent array) ---------------------------------

def placed(exts: np.ndarray) -> np.ndarray:
    """The extents that have a real physical location (not delalloc, unknown or inline)."""
    return exts[(exts["flags"] & NO_PHYSICAL_FLAGS) == 0]


def physical_runs(exts: np.ndarray) -> np.ndarray:
    """Physically contiguous runs, in logical order: (start_bytes, length_bytes) int64 rows.

    Consecutive extents (by logical offset) merge when the next starts physically where the
    previous ended -- file systems split extents for reasons that are not fragmentation
    (ext4's 128 MiB extent limit, unwritten/written boundaries, FIEMAP batch borders)."""
    ex = placed(exts)
    if len(ex) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    phys, length = ex["physical_bytes"], ex["length_bytes"]
    new_run = np.ones(len(ex), dtype=bool)
    new_run[1:] = phys[1:] != phys[:-1] + length[:-1]
    run_id = np.cumsum(new_run) - 1
    starts = phys[new_run]
    lengths = np.bincount(run_id, weights=length).astype(np.int64)
    return np.column_stack([starts, lengths])


def fragments(exts: np.ndarray) -> int:
    """Number of physically discontiguous pieces of the file's data (1 = contiguous)."""
    return int(len(physical_runs(exts)))


def d_span_bytes(exts: np.ndarray) -> int:
    """Chopper's d-span: max(physical end) - min(physical start) over the data extents.

    Pass one file's extents for Chopper's per-file ``datafiles_dspan``, or the concatenation
    of several files' extents (:func:`concat`) for its ``dspan`` over all data files."""
    ex = placed(exts)
    if len(ex) == 0:
        return 0
    ends = ex["physical_bytes"] + ex["length_bytes"]
    return int(ends.max() - ex["physical_bytes"].min())


def concat(extent_arrays: list[np.ndarray]) -> np.ndarray:
    """Several files' extents as one array (for set-wide d-span and layout index)."""
    if not extent_arrays:
        return np.zeros(0, dtype=EXTENT_DTYPE)
    return np.concatenate(extent_arrays)


SECTOR_BYTES = 512


def _unique_sector_intervals(exts: np.ndarray) -> list[tuple[int, int]]:
    """Physical extents as merged, non-overlapping [start, end) sector intervals."""
    ex = placed(exts)
    if len(ex) == 0:
        return []
    start = ex["physical_bytes"] // SECTOR_BYTES
    end = -(-(ex["physical_bytes"] + ex["length_bytes"]) // SECTOR_BYTES)
    order = np.argsort(start, kind="stable")
    merged: list[tuple[int, int]] = []
    for s, e in zip(start[order].tolist(), end[order].tolist()):
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def _path_distance_sum(n_sectors: int) -> int:
    """Sum of pairwise distances among n consecutive vertices of a path graph."""
    return n_sectors * (n_sectors - 1) * (n_sectors + 1) // 6


def layout_index(exts: np.ndarray) -> float:
    """Chopper's layout score: distance_sum / ideal_distance_sum (1 = one contiguous extent;
    larger is worse). Sectors (512 B) are path-graph vertices; the ideal is one contiguous
    extent of the same number of unique sectors. Exact integer arithmetic, O(extents).

    Pairs across extents are summed with running totals instead of Chopper's all-pairs
    m*n*(m+n+2k)/2, which gives the same number."""
    intervals = _unique_sector_intervals(exts)
    if not intervals:
        return float("nan")
    total = 0
    prev_count = 0  # sectors in earlier intervals
    prev_sum = 0  # sum of their sector indices
    for s, e in intervals:
        n = e - s
        total += _path_distance_sum(n)
        index_sum = n * s + n * (n - 1) // 2
        total += prev_count * index_sum - n * prev_sum
        prev_count += n
        prev_sum += index_sum
    ideal = _path_distance_sum(prev_count)
    return total / ideal if ideal else 1.0


def layout_summary(path: str | os.PathLike, *, sync: bool = True) -> dict:
    """One file's layout as plain JSON-ready numbers (what a report row needs)."""
    exts = extents(path, sync=sync)
    all_flags = int(np.bitwise_or.reduce(exts["flags"])) if len(exts) else 0
    unwritten = (exts["flags"] & FIEMAP_EXTENT_UNWRITTEN) != 0
    return {
        "path": str(path),
        "size_bytes": os.stat(path).st_size,
        "extent_count": int(len(exts)),
        "fragment_count": fragments(exts),
        "d_span_bytes": d_span_bytes(exts),
        "layout_index": layout_index(exts),
        "mapped_bytes": int(exts["length_bytes"].sum()),
        "unwritten_bytes": int(exts["length_bytes"][unwritten].sum()),
        "unplaced_extent_count": int(len(exts) - len(placed(exts))),
        "flags_seen": flag_names(all_flags),
    }
