"""What exactly a loop device or a mount is, so fsscope undoes only what it made itself.

A path names a resource only loosely: an image can be attached by another process after
ours was detached, and a mount point can hold someone else's mount. So the journal keeps
identities that cannot be reused:

- a loop attachment is (device, diskseq): the kernel bumps a block device's ``diskseq``
  on every attach and detach, so a later attachment of the same /dev/loopN differs; the
  backing file is (st_dev, st_ino), read from the loop driver itself (LOOP_GET_STATUS64);
- a mount is its mountinfo line: mount id, major:minor, source and mount point.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

LOOP_GET_STATUS64 = 0x4C05
LOOP_INFO64_SIZE = 232  # struct loop_info64; lo_device and lo_inode are its first two u64


def _block_name(dev: str) -> str:
    return Path(os.path.realpath(dev)).name


def diskseq(dev: str) -> int | None:
    """The device's disk sequence number (partitions: their disk's), None if unknown."""
    sys_dir = Path("/sys/class/block") / _block_name(dev)
    for candidate in (sys_dir / "diskseq", sys_dir.resolve().parent / "diskseq"):
        try:
            return int(candidate.read_text())
        except (OSError, ValueError):
            continue
    return None


def rdev(dev: str) -> str | None:
    """major:minor of a block device node, None if it is not one."""
    try:
        st = os.stat(dev)
    except OSError:
        return None
    if not stat.S_ISBLK(st.st_mode):
        return None
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def file_id(path: str | Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def path_id(path: str | os.PathLike) -> list[int]:
    """What a path names, for the journal: [st_dev, st_ino, st_uid] of the entry itself
    (a symbolic link is not followed)."""
    st = os.lstat(path)
    return [st.st_dev, st.st_ino, st.st_uid]


def still_names(path: str | os.PathLike, ident: list[int] | None) -> bool:
    """Is ``path`` still the very file or directory whose ``path_id`` was ``ident``?"""
    try:
        return ident is not None and path_id(path) == list(ident)
    except OSError:
        return False


@contextmanager
def opened(path: str | os.PathLike) -> Iterator[int | None]:
    """``path`` opened read-only without following a link to check what it is (None: it
    could not be opened so)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def loop_backing(dev: str) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file behind loop device ``dev``, None if it is free (or gone)."""
    try:
        fd = os.open(dev, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        buf = bytearray(LOOP_INFO64_SIZE)
        fcntl.ioctl(fd, LOOP_GET_STATUS64, buf)
    except OSError:  # ENXIO: nothing attached
        return None
    finally:
        os.close(fd)
    lo_device, lo_inode = struct.unpack_from("QQ", buf)
    return lo_device, lo_inode


def loops_backed_by(backing: tuple[int, int]) -> list[str]:
    """Every attached loop device whose backing file is the inode ``backing``."""
    found = []
    for sysfs in sorted(Path("/sys/block").glob("loop*/loop")):
        dev = "/dev/" + sysfs.parent.name
        if loop_backing(dev) == tuple(backing):
            found.append(dev)
    return found


@dataclass(frozen=True)
class Mount:
    mount_id: int
    majmin: str
    mountpoint: str
    fstype: str
    source: str  # what was mounted: /dev/loop3, tmpfs (btrfs's major:minor is not its device's)
    root: str = "/"                          # the mounted directory within its file system (a bind, a subvolume)
    mount_options: tuple[str, ...] = ()      # per-mount (ro/rw, relatime, ...)
    super_options: tuple[str, ...] = ()      # the file system's own (data=ordered, subvol=, upperdir=, ...)


def unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo (octal)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts(text: str | None = None) -> list[Mount]:
    """Every mount this process sees (or ``text``, a mountinfo), in mount order (a later one
    sits on top)."""
    out = []
    for line in (Path("/proc/self/mountinfo").read_text() if text is None else text).splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        tail = fields[sep + 1:]
        out.append(Mount(int(fields[0]), fields[2], unescape(fields[4]), tail[0],
                         unescape(tail[1]) if len(tail) > 1 else "", root=unescape(fields[3]),
                         mount_options=tuple(fields[5].split(",")),
                         super_options=tuple(tail[2].split(",")) if len(tail) > 2 else ()))
    return out


def top_mount(mountpoint: str) -> Mount | None:
    """The mount visible at ``mountpoint`` (the last one mounted there), None if none."""
    target = os.path.realpath(mountpoint)
    found = [m for m in mounts() if m.mountpoint == target]
    return found[-1] if found else None
