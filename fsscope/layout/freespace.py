"""Free-space fragmentation of a file system: a histogram of free extents, in bytes.

Aging is judged by how chopped up the free space is, so fresh and aged file systems must be
measured the same way. Each file system is read with the tool that sees its own allocator's
view, and every result lands on one grid: power-of-two byte buckets
``[block * 2**i, block * 2**(i+1))``.

- **ext4** -- ``e2freefrag DEV``. On a mounted file system it asks the kernel (GETFSMAP),
  so the answer is live; its histogram already uses this grid.
- **xfs** -- mounted: ``xfs_spaceman -c "freesp -s -d" MNT`` (GETFSMAP, live). Not mounted:
  ``xfs_db -r -c "freesp -s -d" DEV``. Same output format. Why not ``xfs_db`` on a mounted
  xfs: it reads the on-disk AGF B-trees, which lag the log (measured: 21 free extents from
  xfs_db vs 5 live on a fresh fs, the extra ones being AGFL blocks and stale records).
  ``-d`` lists every free extent, so the histogram, largest and mean are exact.
- **btrfs** -- no GETFSMAP and no free-space tool, so fsscope derives free extents from
  ``btrfs inspect-internal dump-tree`` (read-only, after syncfs commits the transaction):
  gaps between allocated extent items inside DATA chunks, plus device space that no chunk
  uses ("unallocated", where new data chunks go; reported separately too). Metadata and
  system chunks' free room is not counted: file data cannot go there.
- **anything else** -- FsscopeError "not available": a FIEMAP-only estimate cannot see
  metadata and would report holes that are not free.

Parsing is pure (text in, dataclass out) and tested on real captured output.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Protocol

import numpy as np

from fsscope import tools
from fsscope.errors import FsscopeError


@dataclass(frozen=True)
class FreeSpaceHistogram:
    """Free extents of one file system on a power-of-two byte grid.

    Bucket i holds free extents with ``lower_bytes[i] <= size < upper_bytes[i]``; the grid
    starts at one block and runs to the bucket of the largest extent (empty buckets kept, so
    two histograms of the same file system line up index by index)."""

    fs: str
    source: str  # the command line(s) the numbers came from
    block_size_bytes: int
    bucket_lower_bytes: tuple[int, ...]
    bucket_upper_bytes: tuple[int, ...]
    bucket_extent_counts: tuple[int, ...]
    bucket_free_bytes: tuple[int, ...]
    free_extent_count: int
    total_free_bytes: int
    largest_free_extent_bytes: int
    smallest_free_extent_bytes: int
    #: btrfs only: device bytes in no chunk (already included in the extents above).
    unallocated_bytes: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def mean_free_extent_bytes(self) -> float:
        return self.total_free_bytes / self.free_extent_count if self.free_extent_count else 0.0

    def to_dict(self) -> dict:
        out = asdict(self)
        out["mean_free_extent_bytes"] = self.mean_free_extent_bytes
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        return out


# --- the grid --------------------------------------------------------------------------------

def bucket_index(size_bytes: np.ndarray | int, block_size_bytes: int) -> np.ndarray:
    """Grid bucket of each size: floor(log2(size / block)), sizes below a block in bucket 0."""
    blocks = np.maximum(np.asarray(size_bytes, dtype=np.int64) // block_size_bytes, 1)
    _, exponent = np.frexp(blocks.astype(np.float64))  # exact: blocks < 2**53
    return (exponent - 1).astype(np.int64)


def _grid(n_buckets: int, block_size_bytes: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lower = tuple(block_size_bytes << i for i in range(n_buckets))
    return lower, tuple(b * 2 for b in lower)


def histogram_from_lengths(fs: str, lengths_bytes: np.ndarray, block_size_bytes: int, *,
                           source: str, unallocated_bytes: int = 0,
                           notes: tuple[str, ...] = ()) -> FreeSpaceHistogram:
    """The histogram of an exact list of free-extent sizes (xfs ``-d``, btrfs)."""
    lengths = np.asarray(lengths_bytes, dtype=np.int64)
    lengths = lengths[lengths > 0]
    if len(lengths) == 0:
        return FreeSpaceHistogram(fs, source, block_size_bytes, (), (), (), (), 0, 0, 0, 0,
                                  unallocated_bytes, notes)
    idx = bucket_index(lengths, block_size_bytes)
    n = int(idx.max()) + 1
    counts = np.bincount(idx, minlength=n)
    free = np.bincount(idx, weights=lengths, minlength=n)
    lower, upper = _grid(n, block_size_bytes)
    return FreeSpaceHistogram(
        fs, source, block_size_bytes, lower, upper,
        tuple(int(c) for c in counts), tuple(int(round(b)) for b in free),
        int(len(lengths)), int(lengths.sum()), int(lengths.max()), int(lengths.min()),
        unallocated_bytes, notes)


# --- ext4: e2freefrag ------------------------------------------------------------------------

_UNIT_BYTES = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
_E2_BUCKET = re.compile(r"^\s*(\d+)([KMGTP]?)\.\.\.\s*(\d+)([KMGTP]?)-\s*:\s*(\d+)\s+(\d+)\s+[\d.]+%")
_E2_FIELD = re.compile(r"^(Blocksize|Free blocks|Min\. free extent|Max\. free extent|"
                       r"Avg\. free extent|Num\. free extent):\s*(\d+)")


def parse_e2freefrag(text: str, *, source: str = "e2freefrag") -> FreeSpaceHistogram:
    """Parse ``e2freefrag DEV`` output (header lines and HISTOGRAM OF FREE EXTENT SIZES)."""
    fields: dict[str, int] = {}
    rows: list[tuple[int, int, int]] = []  # (lower_bytes, extents, blocks)
    for line in text.splitlines():
        if m := _E2_FIELD.match(line.strip()):
            fields[m.group(1)] = int(m.group(2))
        elif m := _E2_BUCKET.match(line):
            rows.append((int(m.group(1)) * _UNIT_BYTES[m.group(2)], int(m.group(5)), int(m.group(6))))
    if "Blocksize" not in fields or "Free blocks" not in fields:
        raise FsscopeError("e2freefrag output not understood: no 'Blocksize:'/'Free blocks:' lines")
    block = fields["Blocksize"]
    total_free_bytes = fields["Free blocks"] * block
    count = fields.get("Num. free extent", sum(r[1] for r in rows))
    if count and not rows:
        raise FsscopeError("e2freefrag output not understood: free extents but no histogram rows")
    n = max((int(bucket_index(lo, block)) for lo, _, _ in rows), default=-1) + 1
    counts, free = [0] * n, [0] * n
    for lo, extents, blocks in rows:
        i = int(bucket_index(lo, block))
        counts[i] += extents
        free[i] += blocks * block
    lower, upper = _grid(n, block)
    return FreeSpaceHistogram(
        "ext4", source, block, lower, upper, tuple(counts), tuple(free), count, total_free_bytes,
        fields.get("Max. free extent", 0) * 1024 if count else 0,
        fields.get("Min. free extent", 0) * 1024 if count else 0)


# --- xfs: freesp (xfs_spaceman or xfs_db) ----------------------------------------------------

_XFS_EXTENT = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s*$")  # agno agbno len  (-d lines)
_XFS_TOTAL = re.compile(r"^total free (extents|blocks)\s+(\d+)")


def parse_xfs_freesp(text: str, block_size_bytes: int, *, source: str = "xfs freesp") -> FreeSpaceHistogram:
    """Parse ``freesp -s -d`` output (xfs_spaceman or xfs_db; the latter adds a header line).

    The per-extent ``agno agbno len`` lines give the exact sizes; the ``total free`` lines
    are checked against them so a format change is caught rather than misread."""
    lengths: list[int] = []
    totals: dict[str, int] = {}
    in_histogram = False
    for line in text.splitlines():
        if line.split()[:2] == ["from", "to"]:
            in_histogram = True  # the summary table: 'from to extents blocks pct'
            continue
        if m := _XFS_TOTAL.match(line.strip()):
            totals[m.group(1)] = int(m.group(2))
        elif not in_histogram and (m := _XFS_EXTENT.match(line)):
            lengths.append(int(m.group(3)))
    if "extents" not in totals or "blocks" not in totals:
        raise FsscopeError("xfs freesp output not understood: no 'total free extents/blocks' lines")
    if totals["extents"] != len(lengths) or totals["blocks"] != sum(lengths):
        raise FsscopeError(
            f"xfs freesp output not understood: {len(lengths)} extent lines with {sum(lengths)} "
            f"blocks, but totals say {totals['extents']} and {totals['blocks']} (was -d given?)")
    return histogram_from_lengths("xfs", np.array(lengths, dtype=np.int64) * block_size_bytes,
                                  block_size_bytes, source=source)


# --- btrfs: dump-tree ------------------------------------------------------------------------

@dataclass(frozen=True)
class BtrfsChunk:
    """One chunk: a range of btrfs logical addresses and where its stripes lie on devices."""

    logical_bytes: int
    length_bytes: int
    type_flags: frozenset[str]  # e.g. {"DATA", "SINGLE"} / {"METADATA", "DUP"}
    stripes: tuple[tuple[int, int], ...]  # (devid, device offset bytes)
    sub_stripes: int = 1

    @property
    def profile(self) -> str:
        for name in ("RAID10", "RAID1C4", "RAID1C3", "RAID1", "RAID0", "RAID5", "RAID6", "DUP"):
            if name in self.type_flags:
                return name
        return "SINGLE"

    @property
    def device_stripe_bytes(self) -> int:
        """Bytes each stripe occupies on its device."""
        n = len(self.stripes)
        data_stripes = {"RAID0": n, "RAID10": n // max(self.sub_stripes, 1), "RAID5": n - 1,
                        "RAID6": n - 2}.get(self.profile, 1)
        return self.length_bytes // max(data_stripes, 1)


_CHUNK_KEY = re.compile(r"item \d+ key \(FIRST_CHUNK_TREE CHUNK_ITEM (\d+)\)")
_CHUNK_LEN = re.compile(r"^\s*length (\d+) owner \d+ stripe_len \d+ type (\S+)")
_CHUNK_SUB = re.compile(r"num_stripes (\d+) sub_stripes (\d+)")
_CHUNK_STRIPE = re.compile(r"^\s*stripe \d+ devid (\d+) offset (\d+)")
_DEV_ITEM = re.compile(r"^\s*devid (\d+) total_bytes (\d+) bytes_used (\d+)")


def parse_btrfs_chunk_tree(text: str) -> tuple[list[BtrfsChunk], dict[int, int]]:
    """Chunks and device sizes (devid -> total bytes) from ``dump-tree -t chunk``."""
    chunks: list[BtrfsChunk] = []
    devices: dict[int, int] = {}
    cur: dict | None = None

    def flush() -> None:
        if cur is not None and "length" in cur:
            chunks.append(BtrfsChunk(cur["logical"], cur["length"], cur["type"],
                                     tuple(cur["stripes"]), cur.get("sub", 1)))

    for line in text.splitlines():
        if m := _CHUNK_KEY.search(line):
            flush()
            cur = {"logical": int(m.group(1)), "stripes": []}
        elif " key (" in line:
            flush()
            cur = None
            continue
        if m := _DEV_ITEM.match(line):
            devices[int(m.group(1))] = int(m.group(2))
        if cur is None:
            continue
        if m := _CHUNK_LEN.match(line):
            cur["length"] = int(m.group(1))
            cur["type"] = frozenset(m.group(2).upper().split("|"))
        elif m := _CHUNK_SUB.search(line):
            cur["sub"] = int(m.group(2))
        elif m := _CHUNK_STRIPE.match(line):
            cur["stripes"].append((int(m.group(1)), int(m.group(2))))
    flush()
    if not chunks:
        raise FsscopeError("btrfs chunk tree output not understood: no CHUNK_ITEM found")
    return chunks, devices


_EXTENT_KEY = re.compile(r"item \d+ key \((\d+) (EXTENT_ITEM|METADATA_ITEM) (\d+)\)")


def parse_btrfs_extent_tree(text: str, node_size_bytes: int) -> np.ndarray:
    """Allocated ranges (start_bytes, length_bytes) from ``dump-tree -t extent``, sorted.

    EXTENT_ITEM keys carry the length; skinny METADATA_ITEM keys carry the tree level, and
    the length is one node."""
    rows = []
    for m in _EXTENT_KEY.finditer(text):
        start, kind, offset = int(m.group(1)), m.group(2), int(m.group(3))
        rows.append((start, offset if kind == "EXTENT_ITEM" else node_size_bytes))
    arr = np.array(rows, dtype=np.int64).reshape(-1, 2)
    return arr[np.argsort(arr[:, 0], kind="stable")]


def _gaps(start: int, end: int, used: np.ndarray) -> list[int]:
    """Lengths of the gaps in [start, end) not covered by sorted (start, length) rows."""
    gaps, pos = [], start
    for s, length in used.tolist():
        if s > pos:
            gaps.append(min(s, end) - pos)
        pos = max(pos, s + length)
        if pos >= end:
            break
    if pos < end:
        gaps.append(end - pos)
    return [g for g in gaps if g > 0]


#: btrfs never allocates the first MiB of a device (boot loader room, primary superblock).
BTRFS_DEVICE_RESERVED_BYTES = 2**20


def btrfs_free_extents(chunks: list[BtrfsChunk], device_bytes: dict[int, int],
                       allocated: np.ndarray) -> tuple[np.ndarray, int]:
    """Free extents usable for file data: gaps in DATA chunks plus unallocated device ranges.

    Returns (lengths_bytes, unallocated_bytes). Pure."""
    lengths: list[int] = []
    starts = allocated[:, 0] if len(allocated) else np.zeros(0, dtype=np.int64)
    for chunk in chunks:
        if "DATA" not in chunk.type_flags:
            continue
        lo, hi = chunk.logical_bytes, chunk.logical_bytes + chunk.length_bytes
        first = max(int(np.searchsorted(starts, lo, side="right")) - 1, 0)
        last = int(np.searchsorted(starts, hi, side="left"))
        lengths += _gaps(lo, hi, allocated[first:last])
    unallocated = 0
    for devid, total in device_bytes.items():
        used = sorted((off, chunk.device_stripe_bytes) for chunk in chunks
                      for dev, off in chunk.stripes if dev == devid)
        holes = _gaps(BTRFS_DEVICE_RESERVED_BYTES, total, np.array(used, dtype=np.int64).reshape(-1, 2))
        lengths += holes
        unallocated += sum(holes)
    return np.array(lengths, dtype=np.int64), unallocated


_SUPER_FIELD = re.compile(r"^(nodesize|sectorsize)\s+(\d+)", re.M)


def parse_btrfs_super(text: str) -> dict[str, int]:
    """nodesize and sectorsize from ``btrfs inspect-internal dump-super``."""
    found = {k: int(v) for k, v in _SUPER_FIELD.findall(text)}
    if "nodesize" not in found or "sectorsize" not in found:
        raise FsscopeError("btrfs dump-super output not understood: no nodesize/sectorsize")
    return found


# --- reading a live file system --------------------------------------------------------------

class _MountedLike(Protocol):
    fs: str
    device: str | None
    mountpoint: str


BLKFLSBUF = 0x1261  # _IO(0x12, 97): drop a block device's buffer cache


def syncfs(mountpoint: str) -> None:
    """Write back this one file system (not every mount, as sync(2) would): delayed
    allocation gets real blocks and btrfs commits its transaction before we look."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if libc.syncfs(fd) != 0:
            raise FsscopeError(f"syncfs {mountpoint} failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def _drop_device_cache(device: str) -> None:
    """A tool reading the device through its page cache could see blocks cached before the
    file system rewrote them (it writes around that cache). A precaution: with btrfs-progs 6.2
    the extent tree read after new writes was current even without it (checked)."""
    try:
        fd = os.open(device, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.ioctl(fd, BLKFLSBUF, 0)
    except OSError:
        pass
    finally:
        os.close(fd)


# --- GETFSMAP straight from Python: the read-only path (no tool opens the device) -----------

FSMAP_RECORD = "=IIQQQQ24x"          # struct fsmap: device, flags, physical, owner, offset, length
FSMAP_HEAD = "=IIII48x"              # struct fsmap_head before its two keys
FSMAP_RECORD_BYTES, FSMAP_HEAD_BYTES = 64, 64 + 2 * 64
FS_IOC_GETFSMAP = (3 << 30) | (FSMAP_HEAD_BYTES << 16) | (ord("X") << 8) | 59  # _IOWR('X', 59, head)
FMR_OF_SPECIAL_OWNER, FMR_OF_LAST = 0x10, 0x20
FMR_OWN_FREE = 1                     # FMR_OWNER(0, 1)
FSMAP_BATCH = 512


def getfsmap_free_lengths(mountpoint: str) -> np.ndarray:
    """Every free extent's length in bytes, as the kernel's reverse map reports it
    (FS_IOC_GETFSMAP: ext4 and xfs, root only). Reads nothing from the device itself."""
    import struct

    fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    lengths: list[int] = []
    low = struct.pack(FSMAP_RECORD, 0, 0, 0, 0, 0, 0)
    high = struct.pack(FSMAP_RECORD, 2**32 - 1, 2**32 - 1, 2**64 - 1, 2**64 - 1, 2**64 - 1, 0)
    try:
        while True:
            buf = bytearray(struct.pack(FSMAP_HEAD, 0, 0, FSMAP_BATCH, 0) + low + high
                            + bytes(FSMAP_RECORD_BYTES * FSMAP_BATCH))
            try:
                fcntl.ioctl(fd, FS_IOC_GETFSMAP, buf)
            except OSError as exc:
                raise FsscopeError(f"GETFSMAP on {mountpoint}: {os.strerror(exc.errno or 0)}"
                                   + (" (needs root)" if exc.errno == 1 else "")) from None
            entries = struct.unpack_from(FSMAP_HEAD, buf, 0)[3]
            last_flags = 0
            for i in range(entries):
                at = FSMAP_HEAD_BYTES + i * FSMAP_RECORD_BYTES
                _, flags, _, owner, _, length = struct.unpack_from(FSMAP_RECORD, buf, at)
                if flags & FMR_OF_SPECIAL_OWNER and owner == FMR_OWN_FREE:
                    lengths.append(length)
                last_flags = flags
            if entries == 0 or last_flags & FMR_OF_LAST:
                break
            at = FSMAP_HEAD_BYTES + (entries - 1) * FSMAP_RECORD_BYTES
            low = bytes(buf[at:at + FSMAP_RECORD_BYTES])  # continue after the last record
    finally:
        os.close(fd)
    return np.array(lengths, dtype=np.int64)


def free_space_live(fs: str, mountpoint: str) -> FreeSpaceHistogram:
    """The free-space histogram of a mounted ext4 or xfs (GETFSMAP) or btrfs (its chunk and
    extent trees through the tree-search ioctl), read-only and live, for a look at a file
    system in use: no sync, no tool opening the device."""
    if fs == "btrfs":
        from fsscope.layout.btrfs_tree import space_account

        chunks, devices, allocated, sector = space_account(mountpoint)
        lengths, unallocated = btrfs_free_extents(chunks, devices, allocated)
        return histogram_from_lengths(
            "btrfs", lengths, sector, unallocated_bytes=unallocated, notes=(_btrfs_note(devices),),
            source=f"BTRFS_IOC_TREE_SEARCH_V2 {mountpoint} (chunk and extent trees)")
    if fs not in ("ext4", "xfs"):
        raise FsscopeError(f"a live read-only free-space histogram needs GETFSMAP (ext4, xfs) or btrfs' "
                           f"tree search, not {fs}")
    lengths = getfsmap_free_lengths(mountpoint)
    return histogram_from_lengths(fs, lengths, os.statvfs(mountpoint).f_bsize,
                                  source=f"FS_IOC_GETFSMAP {mountpoint}")


def _need_device(fs: str, device: str | None) -> str:
    if not device:
        raise FsscopeError(f"a free-space histogram of {fs} needs its block device (none known)")
    return device


def free_space(fs: str, *, device: str | None, mountpoint: str | None = None) -> FreeSpaceHistogram:
    """Free-space histogram of an ext4, xfs or btrfs file system (mounted or not).

    With ``mountpoint`` the file system is synced first and, where the tool can, read live."""
    if mountpoint:
        syncfs(mountpoint)
    if fs == "ext4":
        dev = _need_device(fs, device)
        if not mountpoint:
            _drop_device_cache(dev)
        return parse_e2freefrag(tools.run("e2freefrag", dev), source=f"e2freefrag {dev}")
    if fs == "xfs":
        if mountpoint:
            block = os.statvfs(mountpoint).f_bsize
            out = tools.run("xfs_spaceman", "-c", "freesp -s -d", mountpoint)
            return parse_xfs_freesp(out, block, source=f"xfs_spaceman -c 'freesp -s -d' {mountpoint}")
        dev = _need_device(fs, device)
        _drop_device_cache(dev)
        block = _xfs_db_block_size(tools.run("xfs_db", "-r", "-c", "sb 0", "-c", "print blocksize", dev))
        out = tools.run("xfs_db", "-r", "-c", "freesp -s -d", dev)
        return parse_xfs_freesp(out, block, source=f"xfs_db -r -c 'freesp -s -d' {dev}")
    if fs == "btrfs":
        dev = _need_device(fs, device)
        _drop_device_cache(dev)
        sizes = parse_btrfs_super(tools.run("btrfs", "inspect-internal", "dump-super", dev))
        chunks, devices = parse_btrfs_chunk_tree(
            tools.run("btrfs", "inspect-internal", "dump-tree", "-t", "chunk", dev))
        allocated = parse_btrfs_extent_tree(
            tools.run("btrfs", "inspect-internal", "dump-tree", "-t", "extent", dev), sizes["nodesize"])
        lengths, unallocated = btrfs_free_extents(chunks, devices, allocated)
        return histogram_from_lengths(
            "btrfs", lengths, sizes["sectorsize"], unallocated_bytes=unallocated, notes=(_btrfs_note(devices),),
            source=f"btrfs inspect-internal dump-tree -t chunk/-t extent {dev}")
    raise FsscopeError(f"a free-space histogram is not available for {fs} (fsscope reads ext4 "
                       "with e2freefrag, xfs with freesp and btrfs from its extent tree)")


def _btrfs_note(devices: dict[int, int]) -> str:
    if len(devices) > 1:
        return f"{len(devices)} devices: device holes of all devices are counted"
    return "free = gaps in DATA chunks + unallocated device space; metadata chunks excluded"


def free_space_of(mounted: _MountedLike) -> FreeSpaceHistogram:
    """:func:`free_space` of a MountedFS (anything with ``fs``, ``device``, ``mountpoint``)."""
    return free_space(mounted.fs, device=mounted.device, mountpoint=mounted.mountpoint)


def _xfs_db_block_size(text: str) -> int:
    m = re.search(r"blocksize = (\d+)", text)
    if not m:
        raise FsscopeError("xfs_db output not understood: no 'blocksize = N'")
    return int(m.group(1))
