"""What file system holds a directory fsscope did not make (``--dir``, ``fsscope scan``) --
the one account of "what is mounted here" that every job uses (check, scan, probe, frag,
bench, age).

A directory on an existing file system IS that file system: its type, source device, mount
point and options come from /proc/self/mountinfo (the deepest mount above the directory,
of its own device number when one matches), its size, fullness and inodes from statfs.
Three kinds of mount need more than that line:

- **btrfs** (top level or a subvolume): a subvolume's ``st_dev`` is an anonymous device of
  its own that mountinfo does not show, so the deepest btrfs mount above the path is the one;
  the block device is the mount's source, the subvolume the nearest directory above the path
  with btrfs' subvolume root inode number (256).
- **a bind mount**: mountinfo's root field says which directory of the file system is
  mounted there (not ``/``); the device and the file system are the original's.
- **overlay**: its upper and lower directories come from its mount options; new files go to
  the upper directory, so the file system under it (and its device) is what a benchmark
  measures -- ``upper`` is that file system's own account.

Fullness is computed as ``df`` computes it (:func:`df_fullness`): used = blocks - free,
use% = used / (used + available to users), rounded up; the blocks reserved for root and
the inode use are separate numbers, each labelled. Nothing here writes, opens a device or
needs root.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
from fsscope.targets.identity import Mount, mounts, rdev, unescape

#: btrfs: the inode number of every subvolume's root directory (BTRFS_FIRST_FREE_OBJECTID).
BTRFS_SUBVOL_ROOT_INO = 256


@dataclass(frozen=True)
class Fullness:
    """How full a file system is, as ``df`` counts it (``df -i`` for the inodes)."""

    size_bytes: int          # f_blocks
    used_bytes: int          # f_blocks - f_bfree (what df's Used column shows)
    available_bytes: int     # f_bavail: what an unprivileged writer may still use
    reserved_bytes: int      # f_bfree - f_bavail: free, but only for root (ext4's -m)
    use_percent: int | None  # df's Use%: ceil(100 x used / (used + available)); None: no blocks
    inodes: int
    inodes_used: int
    inodes_use_percent: int | None   # df -i's IUse%; None: the file system has no inode count

    @property
    def text(self) -> str:
        """'18% used as df counts (1.2 GiB of 7 GiB; 358.4 MiB reserved for root); inodes 3% used'."""
        if self.use_percent is None:
            return "size not reported (statfs gives no blocks)"
        reserved = (f"; {format_bytes(self.reserved_bytes)} reserved for root"
                    if self.reserved_bytes > 0 else "")
        inodes = (f"; inodes {self.inodes_use_percent}% used" if self.inodes_use_percent is not None
                  else "; inodes: not counted by this file system")
        return (f"{self.use_percent}% used as df counts ({format_bytes(self.used_bytes)} of "
                f"{format_bytes(self.size_bytes)}{reserved}){inodes}")

    def to_dict(self) -> dict:
        return {"size_bytes": self.size_bytes, "used_bytes": self.used_bytes,
                "available_bytes": self.available_bytes, "reserved_bytes": self.reserved_bytes,
                "use_percent": self.use_percent, "inodes": self.inodes, "inodes_used": self.inodes_used,
                "inodes_use_percent": self.inodes_use_percent, "text": self.text}


def _ceil_percent(part: int, whole: int) -> int | None:
    return math.ceil(100 * part / whole) if whole > 0 else None


def df_fullness(vfs: os.statvfs_result) -> Fullness:
    """``df``'s arithmetic (coreutils df.c): used = f_blocks - f_bfree; Use% = used /
    (used + f_bavail) rounded up, so blocks reserved for root count as neither used nor
    available; IUse% = (f_files - f_ffree) / f_files rounded up."""
    frsize = vfs.f_frsize or vfs.f_bsize
    used = vfs.f_blocks - vfs.f_bfree
    inodes_used = vfs.f_files - vfs.f_ffree
    return Fullness(size_bytes=vfs.f_blocks * frsize, used_bytes=used * frsize,
                    available_bytes=vfs.f_bavail * frsize,
                    reserved_bytes=max(0, vfs.f_bfree - vfs.f_bavail) * frsize,
                    use_percent=_ceil_percent(used, used + vfs.f_bavail),
                    inodes=vfs.f_files, inodes_used=inodes_used,
                    inodes_use_percent=_ceil_percent(inodes_used, vfs.f_files))


@dataclass(frozen=True)
class ExistingFS:
    """The mount a path lives on, as the kernel shows it."""

    path: str            # the directory asked about (absolute, symlinks resolved)
    fs: str              # fstype from mountinfo (ext4, xfs, btrfs, tmpfs, overlay, ...)
    source: str          # what was mounted (/dev/loop3, tmpfs, server:/export)
    device: str | None   # source when it is a block device node, else None
    mountpoint: str
    majmin: str          # st_dev of the path (btrfs: an anonymous device, not its disk's)
    mount_options: tuple[str, ...]   # per-mount (ro/rw, relatime, ...)
    super_options: tuple[str, ...]   # the file system's own (data=ordered, inode64, ...)
    block_size_bytes: int
    size_bytes: int
    free_bytes: int      # available to users (f_bavail), as df's Avail
    inodes: int
    inodes_free: int
    #: the directory of the file system mounted at the mount point (mountinfo's root field):
    #: "/" for a whole file system, the bound directory for a bind mount, the subvolume for btrfs
    mount_root: str = "/"
    #: "MAJ:MIN" of the block device holding the data (the device node's rdev; overlay: the
    #: upper directory's), None when there is none (tmpfs, a network file system)
    block_devno: str | None = None
    #: btrfs: the subvolume holding the path, as a path inside the file system ("/" top level)
    subvolume: str | None = None
    #: overlay: where new files go and what lies below
    upperdir: str | None = None
    lowerdirs: tuple[str, ...] = ()
    #: overlay: the file system holding the upper directory (what a benchmark measures)
    upper: ExistingFS | None = None
    fullness: Fullness | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def bind(self) -> bool:
        """A bind mount: a directory of the file system mounted elsewhere (not a btrfs
        subvolume mounted with subvol=)."""
        if self.mount_root == "/":
            return False
        return not (self.fs == "btrfs" and f"subvol={self.mount_root}" in self.super_options)

    @property
    def data(self) -> ExistingFS:
        """The file system that holds what is written here: overlay's upper, else this one."""
        return self.upper if self.upper is not None else self

    def summary(self) -> str:
        """One line: 'ext4 on /dev/loop3 at /mnt (rw,relatime), 12% used as df counts (…)'."""
        where = f"on {self.source} " if self.source and self.source != self.fs else ""
        opts = ",".join(self.mount_options)
        text = f"{self.fs} {where}at {self.mountpoint} ({opts})"
        if self.bind:
            text += f", a bind mount of its {self.mount_root}"
        if self.subvolume is not None:
            text += f", subvolume {self.subvolume}"
        if self.fs == "overlay":
            if self.upper is not None:
                text += (f", new files in the upper directory {self.upperdir} on "
                         f"{self.upper.fs} {self.upper.source} at {self.upper.mountpoint}")
            elif self.upperdir:
                text += f", upper directory {self.upperdir} (its file system not found)"
            else:
                text += ", read-only (no upper directory)"
        if self.fullness is None:
            return f"{text}, {format_bytes(self.size_bytes)}, fullness not read"
        return f"{text}, {self.fullness.text}"

    def to_dict(self) -> dict:
        return {"path": self.path, "fs": self.fs, "source": self.source, "device": self.device,
                "mountpoint": self.mountpoint, "majmin": self.majmin,
                "mount_options": list(self.mount_options), "super_options": list(self.super_options),
                "block_size_bytes": self.block_size_bytes, "size_bytes": self.size_bytes,
                "free_bytes": self.free_bytes, "inodes": self.inodes, "inodes_free": self.inodes_free,
                "mount_root": self.mount_root, "bind": self.bind, "block_devno": self.block_devno,
                "subvolume": self.subvolume, "upperdir": self.upperdir, "lowerdirs": list(self.lowerdirs),
                "upper": self.upper.to_dict() if self.upper is not None else None,
                "fullness": self.fullness.to_dict() if self.fullness is not None else None,
                "notes": list(self.notes), "summary": self.summary()}


def mount_of(real: str, majmin: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding the absolute path ``real`` whose device is ``majmin``: the deepest
    mount above it (a later one at the same place sits on top) of that device if one
    matches, else of any device -- a btrfs subvolume's st_dev is an anonymous device
    mountinfo does not show."""
    best: dict[bool, tuple[int, Mount]] = {}
    for m in mounts:
        if not _contains(m.mountpoint, real):
            continue
        same = m.majmin == majmin
        if same not in best or len(m.mountpoint) >= best[same][0]:
            best[same] = (len(m.mountpoint), m)
    found = best.get(True) or best.get(False)
    return found[1] if found else None


def existing_fs(path: str | os.PathLike[str], *, _depth: int = 0) -> ExistingFS:
    """The file system holding ``path`` (a directory that exists). Raises FsscopeError with
    the reason when the path or its mount cannot be found."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        vfs = os.statvfs(real)
    except OSError as exc:
        raise FsscopeError(f"{path}: {exc.strerror}") from None
    majmin = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    try:
        text = Path("/proc/self/mountinfo").read_text(encoding="utf-8")
    except OSError as exc:
        raise FsscopeError(f"/proc/self/mountinfo: {exc.strerror}") from None
    m = mount_of(real, majmin, mounts(text))
    if m is None:
        raise FsscopeError(f"{path}: no mount above it in /proc/self/mountinfo")
    device = m.source if m.source.startswith("/dev/") and _is_block(m.source) else None
    block_devno = rdev(device) if device else None
    notes: list[str] = []
    subvolume = _btrfs_subvolume(real, m) if m.fstype == "btrfs" else None
    upperdir: str | None = None
    lowerdirs: tuple[str, ...] = ()
    upper: ExistingFS | None = None
    if m.fstype == "overlay":
        upperdir, lowerdirs = overlay_dirs(m.super_options)
        if upperdir and not os.path.isabs(upperdir):  # as mounted, relative to a cwd we do not know
            notes.append(f"overlay upper directory given as the relative path {upperdir!r}: not resolved")
        elif upperdir and _depth < 4:  # an overlay whose upper is on an overlay: followed a few levels
            try:
                upper = existing_fs(upperdir, _depth=_depth + 1)
                block_devno = upper.block_devno
            except FsscopeError as exc:
                notes.append(f"overlay upper directory {upperdir}: {exc}")
    return ExistingFS(
        path=real, fs=m.fstype, source=m.source, device=device, mountpoint=m.mountpoint,
        majmin=majmin, mount_options=m.mount_options, super_options=m.super_options,
        block_size_bytes=vfs.f_bsize, size_bytes=vfs.f_blocks * vfs.f_frsize,
        free_bytes=vfs.f_bavail * vfs.f_frsize, inodes=vfs.f_files, inodes_free=vfs.f_ffree,
        mount_root=m.root, block_devno=block_devno, subvolume=subvolume, upperdir=upperdir,
        lowerdirs=lowerdirs, upper=upper, fullness=df_fullness(vfs), notes=tuple(notes))


def overlay_dirs(super_options: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """(upperdir, lowerdirs) of an overlay from its options; the kernel escapes ',' and ':'
    in them with a backslash (and lowerdirs are ':'-separated)."""
    upper: str | None = None
    lowers: tuple[str, ...] = ()
    for opt in super_options:  # seq_show_option escapes ",= \t\n\\" in a value as \ooo
        key, _, value = opt.partition("=")
        value = unescape(value)
        if key == "upperdir":
            upper = _unescape_ovl(value)
        elif key == "lowerdir":
            lowers = tuple(_unescape_ovl(p) for p in _split_unescaped(value, ":"))
        elif key == "lowerdir+":  # the new API lists one lower per option
            lowers = (*lowers, _unescape_ovl(value))
    return upper, lowers


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], "", 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            cur += text[i:i + 2]
            i += 2
            continue
        if text[i] == sep:
            parts.append(cur)
            cur = ""
        else:
            cur += text[i]
        i += 1
    parts.append(cur)
    return parts


def _unescape_ovl(text: str) -> str:
    out, i = "", 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in ",:\\":
            out += text[i + 1]
            i += 2
        else:
            out += text[i]
            i += 1
    return out


def _btrfs_subvolume(real: str, m: Mount) -> str:
    """The btrfs subvolume holding ``real``, as a path in the file system: the nearest
    directory at or above it that is a subvolume root (inode 256), joined to the subvolume
    mounted there (mountinfo's root)."""
    here = real
    while _contains(m.mountpoint, here):
        try:
            if os.stat(here).st_ino == BTRFS_SUBVOL_ROOT_INO:
                break
        except OSError:
            break
        if here == m.mountpoint:
            break
        here = os.path.dirname(here)
    rel = os.path.relpath(here, m.mountpoint)
    base = m.root.rstrip("/")
    return (base + ("" if rel == "." else "/" + rel)) or "/"


def _contains(mountpoint: str, path: str) -> bool:
    return path == mountpoint or path.startswith(mountpoint.rstrip("/") + "/")


def _is_block(dev: str) -> bool:
    try:
        return stat.S_ISBLK(os.stat(dev).st_mode)
    except OSError:
        return False

