"""Disk states for layout exploration: base images made once, cloned for every treatment.

A *base image* is a file system in a sparse RAM-backed image file, one per (recipe,
DiskSize, UsedRatio, FreeSpaceLayout), made as Chopper made them (anchors §2.4):

1. mkfs on a sparse image of DiskSize bytes;
2. a placeholder file of UsedRatio x DiskSize bytes, fallocated (no data written, so a
   64 GiB image stays sparse in RAM);
3. unless FreeSpaceLayout is 6 (not fragmented): a "punch file" fallocated over 99 % of the
   free space, then holes punched in it (FALLOC_FL_PUNCH_HOLE) of lognormal sizes -- each
   hole becomes a free extent, neighbours separated by one allocated 4 KiB block;
4. unmount, detach; the image is cached (``cache_dir``) under a name that says what it is.

Every treatment then works on a *clone* (``cp --sparse=always``, or a reflink where the RAM
directory's file system offers one), so all treatments of a state start from the same bytes.

Hole sizes: free extents of 4096 x 2**i bytes, i = 0..29, with probability P(i < X < i+1)
for X ~ lognormal(mu, sigma) of the layout; layout 1 is the most fragmented (median about 4
blocks), layout 5 the least. Building takes a lock, so worker processes sharing a host build
each state once.

Every attach, mount and scratch file is journalled before it is made (owner: this process),
so a worker killed mid-build or mid-treatment leaves nothing ``cleanup`` cannot undo.
"""

from __future__ import annotations

import ctypes
import fcntl
import math
import os
import stat
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fsscope import paths, trust
from fsscope.errors import FsscopeError, SafetyRefusal
from fsscope.layout.freespace import syncfs
from fsscope.recipes import Recipe
from fsscope.targets import filesystem, identity, image
from fsscope.targets.journal import Journal, undo_entries, undo_group

BLOCK_BYTES = 4096
NOT_FRAGMENTED = 6
#: (mu, sigma) of log2(free extent blocks) per FreeSpaceLayout (Chopper's filepuncher).
LAYOUT_LOGNORMAL = {1: (0.6931472, 1.0), 2: (1.9095425, 0.775), 3: (2.442347, 0.55),
                    4: (2.7880929, 0.325), 5: (3.0445224, 0.1)}
PUNCH_FILL = 0.99  # the punch file takes 99 % of the free space, as in Chopper
BTRFS_PUNCH_FILL = 0.9  # btrfs keeps a metadata reserve that statvfs counts as available
FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]


def _fallocate(fd: int, mode: int, offset: int, length: int, what: str) -> None:
    if _libc.fallocate(fd, mode, offset, length) != 0:
        raise FsscopeError(f"{what}: fallocate failed: {os.strerror(ctypes.get_errno())}")


def _lognorm_cdf(x: float, mu: float, sigma: float) -> float:
    return 0.0 if x <= 0 else math.erfc(-(math.log(x) - mu) / (sigma * math.sqrt(2))) / 2


def hole_size_probabilities(layout: int) -> np.ndarray:
    """P(extent = 4096 * 2**i bytes) for i = 0..29 (sums to about 1)."""
    mu, sigma = LAYOUT_LOGNORMAL[layout]
    return np.array([_lognorm_cdf(i + 1, mu, sigma) - _lognorm_cdf(i, mu, sigma) for i in range(30)])


def hole_sizes(layout: int, budget_bytes: int, seed: int = 1) -> np.ndarray:
    """The holes to punch (bytes each), shuffled with ``seed``: per size class
    ``int(available * p_i / size_i)`` of them, where ``available`` leaves room for the one
    separator block each hole needs (``budget / (1 + sum p_i / 2**i)``)."""
    p = hole_size_probabilities(layout)
    sizes = BLOCK_BYTES * 2 ** np.arange(30, dtype=np.int64)
    available = budget_bytes / (1 + float((p / 2.0 ** np.arange(30)).sum()))
    counts = (available * p / sizes).astype(np.int64)
    holes = np.repeat(sizes, counts)
    np.random.default_rng(seed).shuffle(holes)
    return holes


def punch_holes(path: Path, holes: np.ndarray) -> int:
    """Punch ``holes`` (bytes) into the allocated file at ``path``, each after one kept block.
    Returns the bytes freed."""
    fd = os.open(path, os.O_RDWR)
    try:
        offset = 0
        for size in holes.tolist():
            offset += BLOCK_BYTES  # the separator
            _fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset, size, str(path))
            offset += size
    finally:
        os.close(fd)
    return int(holes.sum())


def fallocate_pieces(path: Path, holes: np.ndarray) -> np.ndarray:
    """The punch file allocated piece by piece -- a separator block, then each hole's range,
    one fallocate each -- for btrfs, which frees a data extent only when nothing references
    any of it: punching part of one big preallocated extent would free nothing. Stops at the
    first ENOSPC (btrfs's metadata reserve); returns the holes that were allocated."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    done, offset = 0, 0
    try:
        for size in holes.tolist():
            if _libc.fallocate(fd, 0, offset, BLOCK_BYTES + size) != 0:
                break
            offset += BLOCK_BYTES + size
            done += 1
    finally:
        os.close(fd)
    return holes[:done]


def fallocate_file(path: Path, size_bytes: int) -> None:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        if size_bytes > 0:
            _fallocate(fd, 0, 0, size_bytes, str(path))
    finally:
        os.close(fd)


@dataclass(frozen=True)
class DiskState:
    recipe: Recipe
    disk_size_bytes: int
    used_ratio: float
    layout: int

    @property
    def name(self) -> str:
        return (f"{self.recipe.name}.{self.recipe.fs}.disk{self.disk_size_bytes}"
                f".used{self.used_ratio:g}.layout{self.layout}.img")


def _undo_all_but_image(journal: Journal, group: str) -> None:
    """Unmount, detach, remove the mount point -- keep the image file (the caller's)."""
    undo_entries(journal, [e for e in journal.entries(group=group) if e.kind != "image"])


@contextmanager
def mounted_image(img: Path, recipe: Recipe, journal: Journal, group: str, *,
                  make_fs: bool = False, timing: dict | None = None) -> Iterator[Path]:
    """Attach ``img``, optionally mkfs it, mount it (all journalled); yields the mount point;
    unmounted and detached on exit. ``timing`` gets attach_s and mount_s."""
    timing = {} if timing is None else timing
    try:
        t = time.monotonic()
        dev = image.attach(img, journal, group)[0]  # (device, direct_io, diskseq) since safety
        timing["attach_s"] = time.monotonic() - t
        t = time.monotonic()
        if make_fs:
            filesystem.mkfs(recipe, dev)
        mnt = paths.state_dir() / "mnt" / group
        entry = journal.record("mountdir", group, paths=[str(mnt)])
        mnt.mkdir(parents=True)
        journal.complete(entry, idents=[identity.path_id(mnt)])
        journal.record("mount", group, mountpoint=str(mnt), source=dev)
        filesystem.mount(recipe, dev, str(mnt))
        timing["mount_s"] = time.monotonic() - t
        yield mnt
    finally:
        _undo_all_but_image(journal, group)


def build(state: DiskState, dest: Path, *, seed: int = 1) -> dict:
    """Make the base image of ``state`` at ``dest`` (via a journalled scratch file)."""
    filesystem.check_supported(state.recipe)
    recipe = state.recipe
    if recipe.fs == "ext4" and "-b" not in recipe.mkfs_opts:
        recipe = recipe.with_extra("-b 4096")  # as Chopper: mke2fs picks 1 KiB blocks below 512 MiB
    journal, group = Journal(), "study-" + uuid.uuid4().hex[:10]
    scratch = dest.with_name(f".{dest.name}.{group}.building")
    info: dict = {"state": state.name}
    t0 = time.monotonic()
    try:
        os.close(image.create_image(scratch, state.disk_size_bytes, journal=journal, group=group))
        with mounted_image(scratch, recipe, journal, group, make_fs=True) as mnt:
            used = int(state.disk_size_bytes * state.used_ratio) // BLOCK_BYTES * BLOCK_BYTES
            fallocate_file(mnt / "placeholder", used)
            info["placeholder_bytes"] = used
            if state.layout != NOT_FRAGMENTED:
                vfs = os.statvfs(mnt)
                fill = BTRFS_PUNCH_FILL if recipe.fs == "btrfs" else PUNCH_FILL
                budget = int(vfs.f_bavail * vfs.f_frsize * fill) // BLOCK_BYTES * BLOCK_BYTES
                holes = hole_sizes(state.layout, budget, seed)
                info["budget_bytes"] = budget
                punch = mnt / "punchfile"
                if recipe.fs == "btrfs":
                    holes = fallocate_pieces(punch, holes)
                else:
                    fallocate_file(punch, int(holes.sum()) + BLOCK_BYTES * (len(holes) + 1))
                info["holes"] = int(len(holes))
                info["hole_bytes"] = punch_holes(punch, holes)
            syncfs(str(mnt))
        os.replace(scratch, dest)
        for entry in journal.entries(group=group):  # only the scratch image's: now the cache's
            journal.forget(entry)
    finally:
        undo_group(journal, group)  # the scratch image, if we did not get to the rename
    info["build_s"] = round(time.monotonic() - t0, 3)
    return info


def private_dir(path: Path) -> Path:
    """``path`` made now as this user's private directory (0700, a name no one else may have
    made first: the caller makes it unguessable), or the one another worker of the same job
    made: accepted only if it is a real directory this user owns that no one else may enter.
    Other users can write the RAM dir (/dev/shm): a directory they planted is refused."""
    trust.locate(path, "disk-state cache")  # the directories above it: only trusted users change them
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise SafetyRefusal(f"{path}: not the private directory fsscope made (owner uid {st.st_uid}, "
                                f"mode {stat.S_IMODE(st.st_mode):o}): no disk state is built in it") from None
    return path


def base_image(state: DiskState, cache_dir: Path) -> Path:
    """The cached base image of ``state``, built on first use (one builder per host: flock on
    a lock file in the cache's private directory)."""
    cache_dir = private_dir(cache_dir)
    dest = cache_dir / state.name
    if dest.exists():
        return dest
    fd = os.open(cache_dir / (state.name + ".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if not dest.exists():
            build(state, dest)
    finally:
        os.close(fd)
    return dest


@contextmanager
def clone(base: Path, recipe: Recipe, timing: dict) -> Iterator[Path]:
    """A private copy of ``base``, attached and mounted; yields the mount point. Times each
    step into ``timing`` (clone, attach, mount, release) and undoes everything on exit."""
    journal, group = Journal(), "study-" + uuid.uuid4().hex[:10]
    img = paths.ram_dir() / f"fsscope-{group}.img"
    t = time.monotonic()
    try:
        fd = image.new_journalled(img, journal, group)  # made with O_EXCL: root's own, then
        try:                                             # filled through that descriptor
            image.copy_image(base, Path(image.fd_path(fd)))
        finally:
            os.close(fd)
        timing["clone_s"] = time.monotonic() - t
        with mounted_image(img, recipe, journal, group, timing=timing) as mnt:
            yield mnt
            t = time.monotonic()
    finally:
        undo_group(journal, group)
        timing["release_s"] = time.monotonic() - t
