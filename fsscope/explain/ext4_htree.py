"""ext4's directory hash and htree growth, as the kernel computes them, so the first leaf
split of a directory on a file system whose hash seed is known (an existing one: read from
its superblock; or a null seed) is an exact file index rather than a window.

- :func:`dirhash` is fs/ext4/hash.c's ``ext4fs_dirhash`` for the legacy, half-MD4 and TEA
  versions (signed and unsigned char), with the superblock's ``s_hash_seed`` (all zeros: the
  MD4 initial values).
- :class:`Htree` replays fs/ext4/namei.c for names added one at a time to a fresh directory:
  entries appended to block 0 while they fit (``add_dirent_to_buf``), ``make_indexed_dir``
  moving them to block 1 and splitting it, then each name going to the leaf ``dx_probe``
  picks (the last index entry whose hash is at most the name's) and a full leaf split by
  ``do_split``: its entries sorted by hash, the upper ones moved while the moved bytes stay
  within half a block (the map's sizes are the on-disk record lengths, so the block's last
  entry counts with the slack after it), the new name to the half its hash selects.

Pure: names and parameters in, events out. Only a single-level index (until the root's
entries are all used) is followed.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

MASK = 0xFFFFFFFF
#: the superblock's s_def_hash_version values (DX_HASH_*); +3 is the unsigned-char variant
DX_HASH_LEGACY, DX_HASH_HALF_MD4, DX_HASH_TEA = 0, 1, 2
DX_HASH_UNSIGNED_OFFSET = 3
HASH_NAMES = {0: "legacy", 1: "half_md4", 2: "tea", 3: "legacy (unsigned)", 4: "half_md4 (unsigned)",
              5: "tea (unsigned)"}
EXT4_HTREE_EOF_32BIT = (1 << 31) - 1
MD4_INIT = (0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476)
TEA_DELTA = 0x9E3779B9
K2, K3 = 0o13240474631, 0o15666365641

#: '.' and '..' in block 0 (12 B each); the dx_root header; a dx_entry; csum tails
DOTS_BYTES = 24
DX_ROOT_HEADER_BYTES = 32
DX_ENTRY_BYTES = 8
DIRENT_TAIL_BYTES = 12
DX_TAIL_BYTES = 8


def rec_len(name_bytes: int) -> int:
    """ext4_dir_rec_len: 8 bytes of header and the name, rounded up to 4."""
    return (8 + name_bytes + 3) & ~3


def _rol(x: int, s: int) -> int:
    return ((x << s) | (x >> (32 - s))) & MASK


def _str2hashbuf(msg: bytes, num: int, signed: bool) -> list[int]:
    length = len(msg)
    pad = (length | (length << 8)) & MASK
    pad = (pad | (pad << 16)) & MASK
    val = pad
    out: list[int] = []
    for i, byte in enumerate(msg[:num * 4]):
        c = byte - 256 if signed and byte >= 128 else byte
        val = (c + (val << 8)) & MASK
        if i % 4 == 3:
            out.append(val)
            val = pad
    if len(out) < num:
        out.append(val)
    while len(out) < num:
        out.append(pad)
    return out


def _half_md4(buf: list[int], x: list[int]) -> None:
    a, b, c, d = buf

    def f(x_: int, y: int, z: int) -> int:
        return z ^ (x_ & (y ^ z))

    def g(x_: int, y: int, z: int) -> int:
        return ((x_ & y) + ((x_ ^ y) & z)) & MASK

    def h(x_: int, y: int, z: int) -> int:
        return x_ ^ y ^ z

    for fn, k, order, shifts in ((f, 0, (0, 1, 2, 3, 4, 5, 6, 7), (3, 7, 11, 19)),
                                 (g, K2, (1, 3, 5, 7, 0, 2, 4, 6), (3, 5, 9, 13)),
                                 (h, K3, (3, 7, 2, 6, 1, 5, 0, 4), (3, 9, 11, 15))):
        for step, idx in enumerate(order):
            s = shifts[step % 4]
            if step % 4 == 0:
                a = _rol((a + fn(b, c, d) + x[idx] + k) & MASK, s)
            elif step % 4 == 1:
                d = _rol((d + fn(a, b, c) + x[idx] + k) & MASK, s)
            elif step % 4 == 2:
                c = _rol((c + fn(d, a, b) + x[idx] + k) & MASK, s)
            else:
                b = _rol((b + fn(c, d, a) + x[idx] + k) & MASK, s)
    buf[0] = (buf[0] + a) & MASK
    buf[1] = (buf[1] + b) & MASK
    buf[2] = (buf[2] + c) & MASK
    buf[3] = (buf[3] + d) & MASK


def _tea(buf: list[int], x: list[int]) -> None:
    total, b0, b1 = 0, buf[0], buf[1]
    a, b, c, d = x
    for _ in range(16):
        total = (total + TEA_DELTA) & MASK
        b0 = (b0 + ((((b1 << 4) + a) & MASK) ^ ((b1 + total) & MASK) ^ (((b1 >> 5) + b) & MASK))) & MASK
        b1 = (b1 + ((((b0 << 4) + c) & MASK) ^ ((b0 + total) & MASK) ^ (((b0 >> 5) + d) & MASK))) & MASK
    buf[0] = (buf[0] + b0) & MASK
    buf[1] = (buf[1] + b1) & MASK


def _legacy(name: bytes, signed: bool) -> int:
    hash0, hash1 = 0x12A3FE2D, 0x37ABE8F9
    for byte in name:
        c = byte - 256 if signed and byte >= 128 else byte
        value = (hash1 + (hash0 ^ ((c * 7152373) & MASK))) & MASK
        if value & 0x80000000:
            value = (value - 0x7FFFFFFF) & MASK
        hash1, hash0 = hash0, value
    return (hash0 << 1) & MASK


def dirhash(name: bytes, version: int, seed: tuple[int, int, int, int] | None = None) -> int:
    """The major hash ext4 files ``name`` under (ext4fs_dirhash), for DX_HASH_* ``version``
    (0-2 signed char, 3-5 unsigned) and the superblock's hash seed (None or zeros: MD4's
    initial values)."""
    signed = version < DX_HASH_UNSIGNED_OFFSET
    base = version % DX_HASH_UNSIGNED_OFFSET
    buf = list(seed) if seed and any(seed) else list(MD4_INIT)
    if base == DX_HASH_LEGACY:
        value = _legacy(name, signed)
    elif base == DX_HASH_HALF_MD4:
        for at in range(0, max(len(name), 1), 32):
            _half_md4(buf, _str2hashbuf(name[at:], 8, signed))
        value = buf[1]
    else:
        for at in range(0, max(len(name), 1), 16):
            _tea(buf, _str2hashbuf(name[at:], 4, signed))
        value = buf[0]
    value &= ~1 & MASK
    if value == EXT4_HTREE_EOF_32BIT << 1:
        value = (EXT4_HTREE_EOF_32BIT - 1) << 1
    return value


@dataclass
class Htree:
    """A fresh ext4 directory growing one name at a time (single-level index)."""

    block_bytes: int
    csum: bool
    hash_of: Callable[[bytes], int]
    block0: list[bytes] = field(default_factory=list)         # the names after '.' and '..'
    index: list[tuple[int, int]] = field(default_factory=list)   # (hash, leaf), sorted by hash
    leaves: list[list[tuple[int, int]]] = field(default_factory=list)  # (hash, rec_len), in block order
    names: int = 0

    @property
    def room(self) -> int:
        """Bytes of a leaf (or block 0) that entries may use."""
        return self.block_bytes - (DIRENT_TAIL_BYTES if self.csum else 0)

    @property
    def root_limit(self) -> int:
        """dx_root_limit: index entries the root block holds."""
        return (self.block_bytes - DX_ROOT_HEADER_BYTES - (DX_TAIL_BYTES if self.csum else 0)) // DX_ENTRY_BYTES

    def add(self, name: bytes) -> str | None:
        """Add one name; what it did: "linear", "convert", "insert", "split", or None when
        the root's index is full (a second level: not followed)."""
        size = rec_len(len(name))
        self.names += 1
        if not self.index:
            if DOTS_BYTES + sum(rec_len(len(n)) for n in self.block0) + size <= self.room:
                self.block0.append(name)
                return "linear"
            return self._convert(name, size)
        h = self.hash_of(name)
        at = bisect.bisect_right([k for k, _ in self.index[1:]], h)
        leaf = self.leaves[self.index[at][1]]
        if sum(s for _, s in leaf) + size <= self.room:
            leaf.append((h, size))
            return "insert"
        if len(self.index) >= self.root_limit:
            return None
        self._split(at, h, size)
        return "split"

    def _convert(self, name: bytes, size: int) -> str:
        # make_indexed_dir: block 0's entries move to block 1 in their order; hashed there
        self.leaves = [[(self.hash_of(n), rec_len(len(n))) for n in self.block0]]
        self.index = [(0, 0)]
        self._split(0, self.hash_of(name), size)
        return "convert"

    def _split(self, at: int, h: int, size: int) -> None:
        """do_split of the leaf under index entry ``at``; the new entry (hash ``h``) then goes
        to the half its hash selects."""
        leaf = self.leaves[self.index[at][1]]
        # the map's sizes are on-disk rec_len: the block's last entry runs to its tail
        sizes = [s for _, s in leaf]
        sizes[-1] = self.room - sum(sizes[:-1])
        order = sorted(range(len(leaf)), key=lambda i: leaf[i][0])
        count, moved_bytes, move = len(order), 0, 0
        i = count - 1
        while i >= 0:
            if moved_bytes + sizes[order[i]] // 2 > self.block_bytes // 2:
                break
            moved_bytes += sizes[order[i]]
            move += 1
            i -= 1
        split = count - move if i > 0 else count // 2
        hash2 = leaf[order[split]][0]
        continued = int(hash2 == leaf[order[split - 1]][0])
        moving = set(order[split:])
        new_leaf = [leaf[j] for j in order[split:]]            # in hash order (dx_move_dirents)
        kept = [e for j, e in enumerate(leaf) if j not in moving]  # packed in place
        self.leaves[self.index[at][1]] = kept
        self.leaves.append(new_leaf)
        self.index.insert(at + 1, (hash2 + continued, len(self.leaves) - 1))
        (new_leaf if h >= hash2 else kept).append((h, size))


def grow(names: Iterable[bytes], *, block_bytes: int, csum: bool,
         hash_of: Callable[[bytes], int]) -> tuple[Htree, list[str | None]]:
    """A fresh directory after ``names`` were created in order, and what each create did."""
    tree = Htree(block_bytes, csum, hash_of)
    events: list[str | None] = []
    for name in names:
        event = tree.add(name)
        events.append(event)
        if event is None:
            break
    return tree, events


def first_leaf_split(names: Iterable[bytes], *, block_bytes: int, csum: bool,
                     hash_of: Callable[[bytes], int]) -> int | None:
    """The index of the create that splits a leaf for the first time after the conversion
    (None: not within ``names``, or the index filled first)."""
    _, events = grow(names, block_bytes=block_bytes, csum=csum, hash_of=hash_of)
    return next((i for i, e in enumerate(events) if e == "split"), None)
