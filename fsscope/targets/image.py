"""Sparse image files attached as loop devices.

An image fsscope created carries the extended attribute ``user.fsscope.image`` (or, only
where the backing file system has no user xattrs at all, a root-owned ``.fsscope`` sidecar
naming the image's inode); such images, owned by root or the invoking user, may always be
formatted. Any other existing file is a foreign image -- a text file or an archive that
blkid does not recognise included -- and is used only when ``--yes-destroy PATH`` names it
(checked in :meth:`Target.preflight`). Images are created with O_EXCL|O_NOFOLLOW and
attached from the descriptor that was checked (``/proc/PID/fd/N``), never from their path
again. Loop devices are attached with direct I/O where the backing file system supports
it, so the backing file's page cache does not hide the device's behaviour.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from fsscope import tools, trust
from fsscope.errors import FsscopeError, SafetyRefusal, ToolError
from fsscope.format import format_bytes
from fsscope.targets import devices, identity
from fsscope.targets.journal import Journal

MARK_XATTR = "user.fsscope.image"
SIDECAR = ".fsscope"
NO_XATTRS = (errno.ENOTSUP, errno.EOPNOTSUPP)  # this file system has no user xattrs at all


def check_size(size_bytes: int) -> None:
    if size_bytes < 16 * 2**20:
        raise FsscopeError(f"--size {size_bytes} bytes is too small: use at least 16M")


def new_file(path: Path, mode: int = 0o600) -> int:
    """A new, empty file at ``path`` that nothing else was: O_CREAT|O_EXCL|O_NOFOLLOW, so a
    name another user planted first (a file, a link, a dangling link) fails instead of being
    followed. Returns an O_RDWR fd."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except FileExistsError:
        raise SafetyRefusal(f"{path}: something appeared at this new image's name meanwhile: not used") from None


def create_image(path: Path, size_bytes: int, *, journal: Journal | None = None, group: str = "") -> int:
    """A new sparse file of size_bytes, marked as fsscope's own; returns its O_RDWR fd (the
    caller closes it). With ``journal``, an ``image`` entry is written before the file is made
    and completed with its identity right after."""
    check_size(size_bytes)
    path.parent.mkdir(parents=True, exist_ok=True)
    free = os.statvfs(path.parent)
    if free.f_bavail * free.f_frsize < size_bytes // 16:
        raise FsscopeError(f"{path.parent}: not enough free space even for a sparse {size_bytes}-byte image")
    fd = new_journalled(path, journal, group) if journal is not None else new_file(path)
    try:
        os.ftruncate(fd, size_bytes)
        mark(path, fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def new_journalled(path: Path, journal: Journal, group: str) -> int:
    """:func:`new_file`, with an ``image`` entry written before it is made and completed
    with its identity right after (cleanup removes that file only while it is still it)."""
    entry = journal.record("image", group, path=str(path))
    fd = new_file(path)
    st = os.fstat(fd)
    journal.complete(entry, ident=[st.st_dev, st.st_ino, st.st_uid])
    return fd


def mark(path: Path, fd: int | None = None) -> None:
    """Mark a file fsscope made (an image, a snapshot) as its own to format or overwrite: the
    xattr, or where this file system has no user xattrs a root-owned ``.fsscope`` sidecar
    that names the file's inode. ``fd``: the file already open (else ``path`` is opened)."""
    own = fd is None
    if fd is None:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.setxattr(fd, MARK_XATTR, b"1")
    except OSError as exc:
        if exc.errno not in NO_XATTRS:
            raise
        sidecar = path.with_name(path.name + SIDECAR)
        st = os.fstat(fd)
        tmp = sidecar.with_name(f".{sidecar.name}.{os.getpid()}")
        side = new_file(tmp, 0o644)
        try:
            os.write(side, f"created by fsscope: dev {st.st_dev} ino {st.st_ino}\n".encode())
        finally:
            os.close(side)
        os.replace(tmp, sidecar)
    finally:
        if own:
            os.close(fd)


def is_fsscope_image(path: Path, fd: int | None = None) -> bool:
    """Does the file (``fd``, or ``path`` opened without following a link) carry fsscope's
    mark? Only a file root (or the user fsscope runs as) owns: any owner may set a user.*
    xattr. The sidecar counts only where the file system really has no user xattrs, when
    such a user owns it and it names this very inode: anyone could drop a ``.fsscope`` file
    next to a file."""
    if fd is None:
        with identity.opened(path) as fd:
            return fd is not None and is_fsscope_image(path, fd)
    st = os.fstat(fd)
    if st.st_uid not in trust.trusted_uids():
        return False
    try:
        return os.getxattr(fd, MARK_XATTR) == b"1"
    except OSError as exc:
        if exc.errno not in NO_XATTRS:
            return False
    with identity.opened(path.with_name(path.name + SIDECAR)) as side:
        if side is None:
            return False
        sst, text = os.fstat(side), os.read(side, 4096).decode(errors="replace")
    return (stat.S_ISREG(sst.st_mode) and sst.st_uid in trust.trusted_uids()
            and f"dev {st.st_dev} ino {st.st_ino}\n" in text)


def foreign_reason(path: Path, fd: int | None = None) -> str:
    """Why an existing file is not fsscope's to destroy ("" when it is, or does not exist)."""
    if fd is None:
        path = path.resolve()
        if not path.exists():
            return ""
    if is_fsscope_image(path, fd):
        return ""
    sig = devices._signature(str(path)) if path.is_file() else ""  # noqa: SLF001 - the same blkid probe
    size = os.fstat(fd).st_size if fd is not None else path.stat().st_size
    what = f"carries a {sig} signature" if sig else f"{format_bytes(size)} of unknown content"
    return f"not created by fsscope, {what}"


def check_not_foreign(path: Path, yes_destroy: str | None, use: str, fd: int | None = None) -> None:
    """Refuse ``use`` (e.g. "use" or "overwrite") of an existing file fsscope did not create,
    unless --yes-destroy names it: blkid finding no signature does not make a text file or
    an archive fsscope's to destroy."""
    path = path if fd is not None else path.resolve()
    if yes_destroy and Path(yes_destroy).resolve() == path.resolve():
        return
    reason = foreign_reason(path, fd)
    if reason:
        hint = (f"--yes-destroy {yes_destroy} names another path" if yes_destroy
                else f"pass --yes-destroy {path} to {use} it anyway: its contents are lost")
        raise SafetyRefusal(f"refusing to {use} {path}: {reason} ({hint})")


def fd_path(fd: int) -> str:
    """A path that opens exactly the file behind this process's ``fd``, for a tool we run
    (losetup, cp): it cannot be swapped for another file, as the image's own path could."""
    return f"/proc/{os.getpid()}/fd/{fd}"


def attach(image: Path, journal: Journal, group: str, fd: int | None = None) -> tuple[str, bool, int | None]:
    """Attach ``image`` to a free loop device; returns (device, direct_io_on, diskseq).

    The loop device is attached from the open file ``fd`` (or ``image`` opened now without
    following a link), never from the path again, and the kernel's backing inode is checked
    against it before anyone formats the device. The journal entry names the backing inode
    before the attach and the device with its diskseq right after, so cleanup can tell this
    attachment from any later one."""
    own = fd is None
    if fd is None:
        fd = os.open(image, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SafetyRefusal(f"{image}: not a regular file: not attached")
        backing = (st.st_dev, st.st_ino)
        busy = identity.loops_backed_by(backing)
        if busy:
            raise FsscopeError(f"{image} is already attached as {', '.join(busy)} "
                               f"(release it first, or run 'fsscope cleanup')")
        entry = journal.record("loop", group, image=str(image), backing=list(backing))
        try:
            dev = tools.run("losetup", "--find", "--show", "--direct-io=on", fd_path(fd)).strip()
        except ToolError:
            # Some backing file systems refuse O_DIRECT with this block size: go buffered.
            dev = tools.run("losetup", "--find", "--show", fd_path(fd)).strip()
        seq = identity.diskseq(dev)
        journal.complete(entry, device=dev, diskseq=seq)
        if identity.loop_backing(dev) != backing:
            raise SafetyRefusal(f"{dev} is not backed by {image} after attaching it: stopped, nothing written")
    finally:
        if own:
            os.close(fd)
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
    # here, not at the top: FIEMAP's extents are numpy arrays, and the Setup screen and the
    # command line's --help (which import the targets) start without numpy
    from fsscope.layout import fiemap

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
