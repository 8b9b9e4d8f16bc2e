"""btrfs' own account of its space, read live from the mounted file system through the
tree-search ioctl (BTRFS_IOC_TREE_SEARCH_V2; root only): no device is opened, nothing is
synced, so it works where the block device is refused and on a file system in use.

The chunk tree gives every chunk (logical range, DATA/METADATA/SYSTEM, stripes on devices)
and every device's size; the extent tree gives every allocated extent (EXTENT_ITEM: start
and length; skinny METADATA_ITEM: start and tree level, one node long). From those,
:func:`fsscope.layout.freespace.btrfs_free_extents` derives the free extents file data can
use, exactly as from ``btrfs inspect-internal dump-tree``. Extents of the transaction still
open (delayed references) reach the extent tree at its commit (within commit=30 s).
"""

from __future__ import annotations

import fcntl
import os
import struct
from collections.abc import Iterator

import numpy as np

from fsscope.errors import FsscopeError
from fsscope.layout.freespace import BtrfsChunk  # freespace imports this module only when it runs

_IOC_WRITE, _IOC_READ = 1, 2
BTRFS_IOCTL_MAGIC = 0x94
SEARCH_KEY = "=7Q4I4Q"            # struct btrfs_ioctl_search_key (104 bytes)
SEARCH_KEY_BYTES = struct.calcsize(SEARCH_KEY)
SEARCH_HEADER = "=3Q2I"           # struct btrfs_ioctl_search_header: transid, objectid, offset, type, len
SEARCH_HEADER_BYTES = struct.calcsize(SEARCH_HEADER)
#: _IOWR(0x94, 17, struct btrfs_ioctl_search_args_v2): the key and a u64 buffer size
BTRFS_IOC_TREE_SEARCH_V2 = ((_IOC_READ | _IOC_WRITE) << 30) | ((SEARCH_KEY_BYTES + 8) << 16) \
    | (BTRFS_IOCTL_MAGIC << 8) | 17
#: _IOR(0x94, 31, struct btrfs_ioctl_fs_info_args): 1 KiB
BTRFS_IOC_FS_INFO = (_IOC_READ << 30) | (1024 << 16) | (BTRFS_IOCTL_MAGIC << 8) | 31
SEARCH_BUFFER_BYTES = 1 << 20
U64_MAX = 2**64 - 1

EXTENT_TREE, CHUNK_TREE = 2, 3
DEV_ITEMS_OBJECTID, FIRST_CHUNK_TREE_OBJECTID = 1, 256
EXTENT_ITEM, METADATA_ITEM, DEV_ITEM, CHUNK_ITEM = 168, 169, 216, 228
#: chunk type bits (BTRFS_BLOCK_GROUP_*) -> the names dump-tree prints
CHUNK_FLAGS = {1: "DATA", 2: "SYSTEM", 4: "METADATA", 8: "RAID0", 16: "RAID1", 32: "DUP", 64: "RAID10",
               128: "RAID5", 256: "RAID6", 512: "RAID1C3", 1024: "RAID1C4"}
CHUNK_HEAD = "=4Q3I2H"            # struct btrfs_chunk before its stripes (48 bytes)
CHUNK_STRIPE = "=2Q16x"           # struct btrfs_stripe: devid, offset, dev_uuid


#: _IOWR(0x94, 18, struct btrfs_ioctl_ino_lookup_args): treeid, objectid, name[4080]
BTRFS_IOC_INO_LOOKUP = ((_IOC_READ | _IOC_WRITE) << 30) | (4096 << 16) | (BTRFS_IOCTL_MAGIC << 8) | 18
BTRFS_FS_TREE_OBJECTID, BTRFS_FIRST_FREE_OBJECTID = 5, 256


def subvolume_id(path: str) -> int:
    """The id of the subvolume (its tree) holding ``path``: 5 for the top level. Asked with
    BTRFS_IOC_INO_LOOKUP of treeid 0, which answers with the tree of the open file."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        buf = bytearray(struct.pack("=2Q", 0, BTRFS_FIRST_FREE_OBJECTID) + bytes(4080))
        fcntl.ioctl(fd, BTRFS_IOC_INO_LOOKUP, buf)
    finally:
        os.close(fd)
    return struct.unpack_from("=Q", buf, 0)[0]


def fs_info(fd: int) -> tuple[int, int]:
    """(nodesize, sectorsize) from BTRFS_IOC_FS_INFO."""
    buf = bytearray(1024)
    fcntl.ioctl(fd, BTRFS_IOC_FS_INFO, buf)
    nodesize, sectorsize = struct.unpack_from("=2I", buf, 8 + 8 + 16)
    return nodesize, sectorsize


def search(fd: int, tree: int, min_key: tuple[int, int, int],
           max_key: tuple[int, int, int]) -> Iterator[tuple[int, int, int, bytes]]:
    """Every item of ``tree`` with min_key <= (objectid, type, offset) <= max_key, in key
    order, as (objectid, type, offset, data)."""
    lo = list(min_key)
    while True:
        key = struct.pack(SEARCH_KEY, tree, lo[0], max_key[0], lo[2], max_key[2], 0, U64_MAX,
                          lo[1], max_key[1], 2**32 - 1, 0, 0, 0, 0, 0)
        buf = bytearray(key + struct.pack("=Q", SEARCH_BUFFER_BYTES) + bytes(SEARCH_BUFFER_BYTES))
        fcntl.ioctl(fd, BTRFS_IOC_TREE_SEARCH_V2, buf)
        found = struct.unpack_from(SEARCH_KEY, buf, 0)[9]   # nr_items: how many came back
        if found == 0:
            return
        at = SEARCH_KEY_BYTES + 8
        last = (0, 0, 0)
        for _ in range(found):
            _, objectid, offset, kind, length = struct.unpack_from(SEARCH_HEADER, buf, at)
            at += SEARCH_HEADER_BYTES
            yield objectid, kind, offset, bytes(buf[at:at + length])
            at += length
            last = (objectid, kind, offset)
        # the next key after the last one returned (offset, then type, then objectid carry)
        objectid, kind, offset = last
        if offset < U64_MAX:
            lo = [objectid, kind, offset + 1]
        elif kind < 255:
            lo = [objectid, kind + 1, 0]
        elif objectid < U64_MAX:
            lo = [objectid + 1, 0, 0]
        else:
            return
        if tuple(lo) > max_key:
            return


def chunks_and_devices(fd: int) -> tuple[list[BtrfsChunk], dict[int, int]]:
    """The chunk tree's chunks (as :class:`~fsscope.layout.freespace.BtrfsChunk`) and the
    devices' sizes (devid -> total bytes)."""
    devices: dict[int, int] = {}
    for _, kind, _, data in search(fd, CHUNK_TREE, (DEV_ITEMS_OBJECTID, DEV_ITEM, 0),
                                   (DEV_ITEMS_OBJECTID, DEV_ITEM, U64_MAX)):
        if kind == DEV_ITEM:
            devid, total = struct.unpack_from("=2Q", data, 0)
            devices[devid] = total
    chunks = []
    for _, kind, logical, data in search(fd, CHUNK_TREE, (FIRST_CHUNK_TREE_OBJECTID, CHUNK_ITEM, 0),
                                         (FIRST_CHUNK_TREE_OBJECTID, CHUNK_ITEM, U64_MAX)):
        if kind != CHUNK_ITEM:
            continue
        length, _, _, flags, _, _, _, num_stripes, sub_stripes = struct.unpack_from(CHUNK_HEAD, data, 0)
        head = struct.calcsize(CHUNK_HEAD)
        stripes = tuple(struct.unpack_from(CHUNK_STRIPE, data, head + i * struct.calcsize(CHUNK_STRIPE))
                        for i in range(num_stripes))
        names = frozenset(name for bit, name in CHUNK_FLAGS.items() if flags & bit)
        chunks.append(BtrfsChunk(logical, length, names, stripes, sub_stripes or 1))
    return chunks, devices


def allocated_extents(fd: int, node_size_bytes: int) -> np.ndarray:
    """Allocated ranges (start_bytes, length_bytes), sorted, from the extent tree."""
    rows = [(objectid, offset if kind == EXTENT_ITEM else node_size_bytes)
            for objectid, kind, offset, _ in search(fd, EXTENT_TREE, (0, EXTENT_ITEM, 0),
                                                     (U64_MAX, METADATA_ITEM, U64_MAX))
            if kind in (EXTENT_ITEM, METADATA_ITEM)]
    arr = np.array(rows, dtype=np.int64).reshape(-1, 2)
    return arr[np.argsort(arr[:, 0], kind="stable")]


def space_account(mountpoint: str) -> tuple[list[BtrfsChunk], dict[int, int], np.ndarray, int]:
    """(chunks, device sizes, allocated extents, sector size) of the btrfs mounted at
    ``mountpoint``, read through the tree-search ioctl."""
    fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            nodesize, sectorsize = fs_info(fd)
            chunks, devices = chunks_and_devices(fd)
            allocated = allocated_extents(fd, nodesize)
        except OSError as exc:
            raise FsscopeError(f"btrfs tree search on {mountpoint}: {os.strerror(exc.errno or 0)}"
                               + (" (needs root: CAP_SYS_ADMIN)" if exc.errno == 1 else "")) from None
    finally:
        os.close(fd)
    if not chunks:
        raise FsscopeError(f"btrfs tree search on {mountpoint}: no chunk found")
    return chunks, devices, allocated, sectorsize
