"""What file system holds a directory fsscope did not make (``--dir``, ``fsscope scan``).

A directory on an existing file system IS that file system: its type, source device, mount
point and options come from /proc/self/mountinfo (the mount whose device number is the
directory's own ``st_dev`` and whose mount point is the deepest one above it), its size and
free inodes from statfs. Nothing here writes, opens a device or needs root.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fsscope.errors import FsscopeError
from fsscope.targets.identity import unescape


@dataclass(frozen=True)
class ExistingFS:
    """The mount a path lives on, as the kernel shows it."""

    path: str            # the directory asked about (absolute, symlinks resolved)
    fs: str              # fstype from mountinfo (ext4, xfs, btrfs, tmpfs, overlay, ...)
    source: str          # what was mounted (/dev/loop3, tmpfs, server:/export)
    device: str | None   # source when it is a block device node, else None
    mountpoint: str
    majmin: str          # st_dev of the mount (btrfs: an anonymous device, not its disk's)
    mount_options: tuple[str, ...]   # per-mount (ro/rw, relatime, ...)
    super_options: tuple[str, ...]   # the file system's own (data=ordered, inode64, ...)
    block_size_bytes: int
    size_bytes: int
    free_bytes: int
    inodes: int
    inodes_free: int

    def summary(self) -> str:
        """One line: 'ext4 on /dev/loop3 at /mnt (rw,relatime), 1.9 GiB, 12% used'."""
        used = 1 - self.free_bytes / self.size_bytes if self.size_bytes else 0.0
        where = f"on {self.source} " if self.source and self.source != self.fs else ""
        opts = ",".join(self.mount_options)
        return (f"{self.fs} {where}at {self.mountpoint} ({opts}), "
                f"{self.size_bytes / 2**30:.1f} GiB, {used:.0%} used")

    def to_dict(self) -> dict:
        return {"path": self.path, "fs": self.fs, "source": self.source, "device": self.device,
                "mountpoint": self.mountpoint, "majmin": self.majmin,
                "mount_options": list(self.mount_options), "super_options": list(self.super_options),
                "block_size_bytes": self.block_size_bytes, "size_bytes": self.size_bytes,
                "free_bytes": self.free_bytes, "inodes": self.inodes, "inodes_free": self.inodes_free,
                "summary": self.summary()}


def existing_fs(path: str | os.PathLike[str]) -> ExistingFS:
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
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise FsscopeError(f"/proc/self/mountinfo: {exc.strerror}") from None
    # the deepest mount above the path (a later one sits on top); of its device if one
    # matches -- a btrfs subvolume's st_dev is an anonymous device mountinfo does not show
    best: dict[bool, tuple[int, list[str], list[str]]] = {}
    for line in lines:
        fields = line.split()
        sep = fields.index("-")
        mountpoint = unescape(fields[4])
        if not _contains(mountpoint, real):
            continue
        same = fields[2] == majmin
        if same not in best or len(mountpoint) >= best[same][0]:
            best[same] = (len(mountpoint), fields, fields[sep + 1:])
    found = best.get(True) or best.get(False)
    if found is None:
        raise FsscopeError(f"{path}: no mount above it in /proc/self/mountinfo")
    _, fields, tail = found
    source = unescape(tail[1]) if len(tail) > 1 else ""
    device = source if source.startswith("/dev/") and _is_block(source) else None
    return ExistingFS(
        path=real, fs=tail[0], source=source, device=device, mountpoint=unescape(fields[4]),
        majmin=majmin, mount_options=tuple(fields[5].split(",")),
        super_options=tuple(tail[2].split(",")) if len(tail) > 2 else (),
        block_size_bytes=vfs.f_bsize, size_bytes=vfs.f_blocks * vfs.f_frsize,
        free_bytes=vfs.f_bavail * vfs.f_frsize, inodes=vfs.f_files, inodes_free=vfs.f_ffree)


def _contains(mountpoint: str, path: str) -> bool:
    return path == mountpoint or path.startswith(mountpoint.rstrip("/") + "/")


def _is_block(dev: str) -> bool:
    import stat

    try:
        return stat.S_ISBLK(os.stat(dev).st_mode)
    except OSError:
        return False
