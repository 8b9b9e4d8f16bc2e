"""Sparse image files attached as loop devices.

An image fsscope created carries the extended attribute ``user.fsscope.image`` (or, where
the backing file system has no user xattrs, a ``.fsscope`` sidecar file); such images may
always be formatted. Any other existing file is a foreign image — a text file or an archive
that blkid does not recognise included — and is used only when ``--yes-destroy PATH`` names
it (checked in :meth:`Target.preflight`). Loop devices are attached with direct I/O where the backing file system
supports it, so the backing file's page cache does not hide the device's behaviour.
"""

from __future__ import annotations

import os
from pathlib import Path

from fsscope import tools
from fsscope.errors import FsscopeError, SafetyRefusal, ToolError
from fsscope.format import format_bytes
from fsscope.targets import devices, identity
from fsscope.targets.journal import Journal

MARK_XATTR = "user.fsscope.image"


def check_size(size_bytes: int) -> None:
    if size_bytes < 16 * 2**20:
        raise FsscopeError(f"--size {size_bytes} bytes is too small: use at least 16M")


def create_image(path: Path, size_bytes: int) -> None:
    """A new sparse file of size_bytes, marked as fsscope's own."""
    check_size(size_bytes)
    path.parent.mkdir(parents=True, exist_ok=True)
    free = os.statvfs(path.parent)
    if free.f_bavail * free.f_frsize < size_bytes // 16:
        raise FsscopeError(f"{path.parent}: not enough free space even for a sparse {size_bytes}-byte image")
    with open(path, "xb") as fh:
        fh.truncate(size_bytes)
    mark(path)


def mark(path: Path) -> None:
    """Mark a file fsscope made (an image, a snapshot) as its own to format or overwrite."""
    try:
        os.setxattr(path, MARK_XATTR, b"1")
    except OSError:
        path.with_name(path.name + ".fsscope").write_text("created by fsscope\n")


def is_fsscope_image(path: Path) -> bool:
    try:
        return os.getxattr(path, MARK_XATTR) == b"1"
    except OSError:
        return path.with_name(path.name + ".fsscope").exists()


def foreign_reason(path: Path) -> str:
    """Why an existing file is not fsscope's to destroy ("" when it is, or does not exist)."""
    path = path.resolve()
    if not path.exists() or is_fsscope_image(path):
        return ""
    sig = devices._signature(str(path)) if path.is_file() else ""  # noqa: SLF001 - the same blkid probe
    what = f"carries a {sig} signature" if sig else f"{format_bytes(path.stat().st_size)} of unknown content"
    return f"not created by fsscope, {what}"


def check_not_foreign(path: Path, yes_destroy: str | None, use: str) -> None:
    """Refuse ``use`` (e.g. "use" or "overwrite") of an existing file fsscope did not create,
    unless --yes-destroy names it: blkid finding no signature does not make a text file or
    an archive fsscope's to destroy."""
    path = path.resolve()
    if yes_destroy and Path(yes_destroy).resolve() == path:
        return
    reason = foreign_reason(path)
    if reason:
        hint = (f"--yes-destroy {yes_destroy} names another path" if yes_destroy
                else f"pass --yes-destroy {path} to {use} it anyway: its contents are lost")
        raise SafetyRefusal(f"refusing to {use} {path}: {reason} ({hint})")


def attach(image: Path, journal: Journal, group: str) -> tuple[str, bool, int]:
    """Attach ``image`` to a free loop device; returns (device, direct_io_on, diskseq).

    The journal entry names the backing inode before the attach and the device with its
    diskseq right after, so cleanup can tell this attachment from any later one."""
    backing = identity.file_id(image)
    busy = identity.loops_backed_by(backing)
    if busy:
        raise FsscopeError(f"{image} is already attached as {', '.join(busy)} "
                           f"(release it first, or run 'fsscope cleanup')")
    entry = journal.record("loop", group, image=str(image.resolve()), backing=list(backing))
    try:
        dev = tools.run("losetup", "--find", "--show", "--direct-io=on", str(image)).strip()
    except ToolError:
        # Some backing file systems refuse O_DIRECT with this block size: go buffered.
        dev = tools.run("losetup", "--find", "--show", str(image)).strip()
    seq = identity.diskseq(dev)
    journal.complete(entry, device=dev, diskseq=seq)
    dio = Path(f"/sys/block/{Path(dev).name}/loop/dio")
    direct_io = dio.exists() and dio.read_text().strip() == "1"
    return dev, direct_io, seq


def copy_image(source: Path, dest: Path) -> str:
    """Copy an image file (a snapshot, or a restore from one) with ``cp --reflink=auto
    --sparse=always``; returns "reflink" when the copy shares the source's blocks (the
    backing file system cloned it: instant, no extra space) or "copy" (a sparse byte copy).
    Which one it was is read back from the copy's extents (FIEMAP's shared flag)."""
    tools.run("cp", "--reflink=auto", "--sparse=always", str(source), str(dest))
    return "reflink" if _shares_blocks(dest) else "copy"


def _shares_blocks(path: Path) -> bool:
    from fsscope.layout import fiemap  # lazy: numpy, only when a copy is made

    try:
        exts = fiemap.extents(path, sync=False)
    except (OSError, FsscopeError):  # no FIEMAP here (tmpfs): then nothing can be shared either
        return False
    return bool(len(exts)) and bool((exts["flags"] & fiemap.FIEMAP_EXTENT_SHARED).any())


def write_onto_device(source: Path, device: str) -> str:
    """Make a block device hold exactly an image's bytes, flushed.

    A loop device is discarded first -- its backing file's blocks punched out, so they read
    back as zeros -- and then only the image's non-zero blocks are written: a sparse dataset
    stays sparse on a RAM-backed target and a restore costs what the data costs (the ladder's
    alloc step does one per run). Anywhere else every byte is written, holes as zeros: a
    real device's discard need not read back as zeros. Returns "sparse device write" or
    "device write"."""
    if Path(device).name.startswith("loop") and _discard(device):
        tools.run("dd", f"if={source}", f"of={device}", "bs=64K", "conv=sparse,fsync,notrunc", "status=none")
        return "sparse device write"
    tools.run("dd", f"if={source}", f"of={device}", "bs=4M", "conv=fsync,notrunc", "status=none")
    return "device write"


def _discard(device: str) -> bool:
    """Discard all of a loop device (exclusive open: refused while mounted); False where its
    backing file system cannot punch holes, or blkdiscard is missing (every byte is written
    then)."""
    try:
        tools.run("blkdiscard", device)
    except FsscopeError:  # ToolError included
        return False
    return True
