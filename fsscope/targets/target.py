"""A target's whole life: safety check, image, loop attach, mkfs, hygiene, mount, and undo.

    with Target(spec, recipe) as target:      # safety checks, image created and attached
        fs = target.format_and_mount()        # fresh file system (or fresh directory)
        ...                                   # measure in fs.workdir
        target.unmount()
        fs = target.format_and_mount()        # another fresh one on the same device
    # everything undone, in reverse order, even on error or signal

With ``TargetSpec.snapshot`` (an aged image kept by ``fsscope age``) every
``format_and_mount()`` restores the snapshot instead of running mkfs: image and RAM targets
detach their loop device, copy the snapshot over the image (``cp --reflink=auto
--sparse=always``) and attach again; device targets get it written onto the device. So every
run starts from the same aged state. ``mount_existing()`` mounts what the target already
holds (resuming an aging run on a kept image).

Every attach, mount, I/O scheduler change and scratch path is written to the state journal
before it is made, so a killed process leaves nothing that ``fsscope cleanup`` cannot undo.
Every check that can refuse runs in :meth:`Target.preflight`, which touches nothing: the job
runner calls it before it creates a run record, and :meth:`Target.open` again before acting.
Right before each mkfs, restore and mount the target checks that it still holds its device
(the same loop attachment or block device): if something else detached it, it stops.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from fsscope import paths, tools, trust
from fsscope.errors import FsscopeError, SafetyRefusal
from fsscope.format import format_bytes
from fsscope.recipes import Recipe
from fsscope.records import plain
from fsscope.targets import devices, filesystem, identity, image
from fsscope.targets.existing import ExistingFS, existing_fs
from fsscope.targets.journal import Entry, Journal, undo_group

# the spec's names, at home in targets/spec.py (light, for the TUI's first frame), still import from here
from fsscope.targets.spec import DEFAULT_SIZE_BYTES as DEFAULT_SIZE_BYTES
from fsscope.targets.spec import RAM_DIR, TargetSpec
from fsscope.targets.spec import TARGET_KINDS as TARGET_KINDS
from fsscope.targets.spec import ReportTarget as ReportTarget

INHERITED_IMAGE_FD = "FSSCOPE_IMAGE_FD"  # the image a job's parent claimed (opened, checked, locked)


@dataclass
class MountedFS:
    """A file system ready for a job (or, for directory targets, a fresh subdirectory of the
    existing file system that holds it: ``found`` says which, and ``fs``/``device``/
    ``mountpoint`` are that file system's)."""

    fs: str
    device: str | None
    mountpoint: str
    workdir: Path
    mount_options: list[str] = field(default_factory=list)
    found: ExistingFS | None = None  # a --dir target: the file system fsscope did not make

    def to_dict(self) -> dict:
        return {"fs": self.fs, "device": self.device, "mountpoint": self.mountpoint,
                "workdir": str(self.workdir), "mount_options": self.mount_options,
                "existing": self.found.to_dict() if self.found else None}


class Target:
    def __init__(self, spec: TargetSpec, recipe: Recipe | None, *, journal: Journal | None = None):
        if spec.kind != "dir" and recipe is None:
            raise FsscopeError(f"a {spec.kind} target needs a recipe (--recipe)")
        if spec.kind == "dir" and recipe is not None and recipe.fs == "tmpfs":
            recipe = None  # a directory is measured as it is
        if recipe is not None and recipe.fs == "tmpfs" and spec.kind == "device":
            raise FsscopeError("the tmpfs recipe needs no device: use --ram (with --size)")
        self.spec, self.recipe = spec, recipe
        self.journal = journal or Journal()
        self.group = uuid.uuid4().hex[:10]
        self.device: str | None = None
        self.device_seq: int | None = None  # the device's diskseq when we took it
        self.device_rdev: str | None = None
        self.backing: tuple[int, int] | None = None  # the image's (st_dev, st_ino)
        self._mount_entry: Entry | None = None
        self.direct_io: bool | None = None
        self.image_path: Path | None = None
        self.image_fd: int | None = None  # the image, opened once: attached, locked and restored through it
        self.mounted: MountedFS | None = None
        self.found: ExistingFS | None = None  # a --dir target: the file system holding it
        self.commands: list[tools.CommandRecord] = []
        self.formats = 0
        self.restores: list[dict] = []  # one per snapshot restore: how, and inodes in use after

    @property
    def fs_recipe(self) -> Recipe:
        """The recipe of a target fsscope formats (every kind but a directory, which __init__
        lets go without one)."""
        if self.recipe is None:
            raise FsscopeError(f"a {self.spec.kind} target has no recipe: nothing to format or mount")
        return self.recipe

    @property
    def held_device(self) -> str:
        """The block device this target holds (set once it is opened or attached)."""
        if self.device is None:
            raise FsscopeError(f"{self.spec.describe()}: no device attached")
        return self.device

    @property
    def held_image(self) -> tuple[Path, int]:
        """The image file this target holds open (image and RAM targets, once opened)."""
        if self.image_path is None or self.image_fd is None:
            raise FsscopeError(f"{self.spec.describe()}: no image opened")
        return self.image_path, self.image_fd

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> Target:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _record(self, rec: tools.CommandRecord) -> None:
        self.commands.append(rec)

    def open(self) -> None:
        """Safety checks, then create/attach whatever the target needs. Touches nothing on refusal."""
        tools.listeners.append(self._record)
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def preflight(self) -> None:
        """Every check that can refuse this target, touching nothing: run it before anything
        is started or recorded. Raises FsscopeError/SafetyRefusal with one line."""
        spec = self.spec
        if spec.kind == "dir":
            root = Path(spec.path)
            if not root.is_dir():
                raise FsscopeError(f"--dir {root}: not a directory")
            if not os.access(root, os.W_OK | os.X_OK):
                raise FsscopeError(f"--dir {root}: not writable by this user")
            trust.check_work_dir(root, "--dir")
            return
        recipe = self.fs_recipe
        filesystem.check_supported(recipe)
        if os.geteuid() != 0:
            raise FsscopeError(f"formatting a {spec.kind} target needs root; without root use --dir PATH")
        if spec.snapshot:
            self._check_snapshot()
        self._check_mountpoint()
        if recipe.fs == "tmpfs":
            return  # mounted straight from RAM, no device
        if spec.kind == "device":
            device = devices.check_formattable(spec.path, spec.yes_destroy)
            if spec.snapshot and os.path.getsize(spec.snapshot) > device.size_bytes:
                raise FsscopeError(f"--from-snapshot {spec.snapshot} ({os.path.getsize(spec.snapshot)} bytes) "
                                   f"does not fit on {spec.path} ({device.size_bytes} bytes)")
        elif spec.kind == "ram":
            trust.check_work_dir(RAM_DIR, "FSSCOPE_RAM_DIR")
            image.check_size(spec.size_bytes)
            _check_ram_space(spec.size_bytes)
        else:
            self._check_image_path()

    def claim(self) -> int | None:
        """:meth:`preflight`, then for an image target the image itself: opened (created if
        new), checked and locked. The job runner hands this fd to the job's process (which
        then holds the lock), so a second job on the image is refused here, in one line,
        before it has a run record. None for other targets."""
        self.preflight()
        if self.spec.kind != "image" or self.fs_recipe.fs == "tmpfs":
            return None
        return self._image()[1]

    def _open(self) -> None:
        spec = self.spec
        self.preflight()
        if spec.kind == "dir" or self.fs_recipe.fs == "tmpfs":
            return
        if spec.kind == "device":
            self.device = spec.path
            self.device_seq, self.device_rdev = identity.diskseq(spec.path), identity.rdev(spec.path)
            self._set_scheduler()
        else:
            self.image_path, self.image_fd = self._image()
            st = os.fstat(self.image_fd)
            self.backing = (st.st_dev, st.st_ino)
            if not spec.snapshot:  # with a snapshot, the restore attaches the copied image
                self._attach()

    def _attach(self) -> None:
        path, fd = self.held_image
        self.device, self.direct_io, self.device_seq = image.attach(path, self.journal, self.group, fd=fd)
        self._set_scheduler()

    def _set_scheduler(self) -> None:
        """Switch the device's I/O scheduler, journalled first so that normal exit and
        'fsscope cleanup' after a kill both put the previous one back."""
        wanted = self.fs_recipe.prep.io_scheduler
        device = self.held_device
        queue = filesystem.scheduler_queue(device) if wanted else None
        if queue is None:
            return
        active, offered = filesystem.read_scheduler(queue)
        if active == wanted:
            return
        if wanted not in offered:
            raise FsscopeError(f"{device}: I/O scheduler '{wanted}' not offered (has: {', '.join(offered)})")
        self.journal.record("scheduler", self.group, device=device, queue=str(queue), previous=active,
                            diskseq=identity.diskseq(device))
        queue.write_text(wanted)

    def _check_still_held(self, action: str) -> None:
        """Refuse to go on when the device is no longer the one this target took (someone
        detached our loop device, or attached another file to it)."""
        dev = self.device
        if dev is None:
            return
        if self.image_path is not None:
            held = identity.diskseq(dev) == self.device_seq and identity.loop_backing(dev) == self.backing
            what = f"attached to {self.image_path}"
        else:
            held = identity.rdev(dev) == self.device_rdev and identity.diskseq(dev) == self.device_seq
            what = "the device checked at start"
        if not held:
            raise FsscopeError(f"{dev} is no longer {what} (something else detached or changed it): "
                               f"stopped before {action}, nothing written to it")

    def _check_mountpoint(self) -> None:
        if self.spec.mountpoint:
            _mountpoint_place(self.spec.mountpoint)

    def _check_image_path(self) -> None:
        """An existing file is used only if fsscope created it (its mark) or --yes-destroy names
        it; never through a symbolic link, and in a directory other users may write only if it
        is root's own fsscope image (or a new one fsscope makes there)."""
        place = trust.locate(self.spec.path, "--image")
        path = Path(place.parent, *place.missing)
        if len(place.missing) > 1 or not os.path.lexists(path):
            if place.shared and not place.sticky:
                raise SafetyRefusal(f"--image {self.spec.path}: directory {place.parent} is {place.shared}, so "
                                    "another user could swap the image fsscope makes there; use a directory only "
                                    "root can write")
            image.check_size(self.spec.size_bytes)
            return
        fd = _open_existing(self.spec.path, path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            self._check_image_fd(place, path, fd)
            if INHERITED_IMAGE_FD not in os.environ:  # else this process holds the lock already
                _lock(fd, self.spec.path, test=True)
        finally:
            os.close(fd)

    def _check_image_fd(self, place: trust.Place, path: Path, fd: int) -> None:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SafetyRefusal(f"--image {self.spec.path}: not a regular file (for a block device use --device)")
        if place.shared:
            if st.st_uid != os.geteuid() or st.st_nlink != 1 or not image.is_fsscope_image(path, fd):
                raise SafetyRefusal(f"refusing to use --image {self.spec.path}: directory {place.parent} is "
                                    f"{place.shared}, and only an image fsscope made there as root is used in such "
                                    "a place (move the file to a directory only root can write)")
            return
        image.check_not_foreign(path, self.spec.yes_destroy, "use", fd)

    def _check_snapshot(self) -> None:
        """Refuse, before anything is touched, a snapshot that is missing or not the recipe's fs."""
        snap = Path(self.spec.snapshot)
        recipe = self.fs_recipe
        if recipe.fs == "tmpfs":
            raise FsscopeError("--from-snapshot: the tmpfs recipe has no image to restore; "
                               "use the recipe the snapshot was aged with")
        if not snap.is_file():
            raise FsscopeError(f"--from-snapshot {snap}: no such image file "
                               "(make one with 'fsscope age ... --snapshot PATH')")
        trust.check_input_file(snap, "--from-snapshot")
        if self.spec.kind == "image" and snap.resolve() == Path(self.spec.path).resolve():
            raise FsscopeError(f"--from-snapshot {snap} is the target image itself: "
                               "restore it into another --image")
        found = devices._signature(str(snap))  # noqa: SLF001 - the same blkid probe
        if found != recipe.fs:
            what = f"holds {found}" if found else "carries no file-system signature"
            raise FsscopeError(f"--from-snapshot {snap} {what}, but recipe {recipe.name} "
                               f"is {recipe.fs}: pass the recipe it was aged with")

    def _image(self) -> tuple[Path, int]:
        """The image, opened once (created with O_EXCL if new) and locked for this target's
        life: (its path, its fd)."""
        spec = self.spec
        if spec.kind == "ram":
            path = RAM_DIR / f"fsscope-{self.group}.img"
            return path, image.create_image(path, spec.size_bytes, journal=self.journal, group=self.group)
        place = trust.locate(spec.path, "--image")
        path = Path(place.parent, *place.missing)
        inherited = os.environ.pop(INHERITED_IMAGE_FD, None)
        if inherited is not None:  # claimed by the job's parent: the same file, still at its path
            fd = int(inherited)
            st = os.fstat(fd)
            if not os.path.lexists(path) or identity.path_id(path)[:2] != [st.st_dev, st.st_ino]:
                os.close(fd)
                raise SafetyRefusal(f"--image {spec.path} is no longer the file fsscope checked: not used")
        elif os.path.lexists(path):
            fd = _open_existing(spec.path, path, os.O_RDWR)
        else:
            fd = image.create_image(path, spec.size_bytes)
        try:
            place = trust.locate(spec.path, "--image")  # the directories it made are still trusted
            if Path(place.parent, *place.missing) != path:
                raise SafetyRefusal(f"--image {spec.path}: its directories changed while fsscope opened it")
            self._check_image_fd(place, path, fd)  # the file we hold is the one we checked
            _lock(fd, spec.path)
        except BaseException:
            os.close(fd)
            raise
        return path, fd

    def format_and_mount(self) -> MountedFS:
        """A fresh file system on the target (mkfs + hygiene + mount), or a fresh directory.
        With a snapshot: the snapshot restored and mounted, no mkfs."""
        return self._mount(make_fs=True)

    def mount_existing(self) -> MountedFS:
        """Mount the file system the target already holds, without mkfs (e.g. to resume aging
        a kept image). Refuses when it holds no file system of the recipe's type."""
        if self.spec.kind == "dir" or self.fs_recipe.fs == "tmpfs":
            raise FsscopeError(f"a {self.spec.kind if self.spec.kind == 'dir' else 'tmpfs'} target "
                               "keeps no file system between runs: nothing to mount again")
        if self.device is None and self.image_path is not None:
            self._attach()
        self._check_still_held("probing it")
        found = devices._signature(self.held_device)  # noqa: SLF001 - the same blkid probe
        if found != self.fs_recipe.fs:
            what = f"holds {found}" if found else "holds no file system"
            raise FsscopeError(f"{self.spec.path or self.device} {what}, not {self.fs_recipe.fs}: "
                               "nothing to mount again (age it first, or pass its recipe)")
        return self._mount(make_fs=False)

    def _restore_snapshot(self) -> None:
        """Put the snapshot on the target: detach, copy over the image, attach (image/RAM),
        or write it onto the device. The loop attach is journalled before it happens."""
        snap = Path(self.spec.snapshot)
        if self.spec.kind == "device":
            self._check_still_held("writing the snapshot onto it")
            method = image.write_onto_device(snap, self.held_device)
        else:
            undo_group(self.journal, self.group, kinds=("scheduler", "loop"))
            self.device = None
            method = image.copy_image(snap, Path(image.fd_path(self.held_image[1])))
            self._attach()
        self.restores.append({"snapshot": str(snap), "method": method})

    def _mount(self, *, make_fs: bool) -> MountedFS:
        if self.mounted is not None:
            self.unmount()
        self.formats += 1
        if self.spec.kind == "dir":
            workdir = Path(self.spec.path) / f"fsscope-{self.group}-{self.formats}"
            entry = self.journal.record("workdir", self.group, path=str(workdir))
            workdir.mkdir()
            self.journal.complete(entry, ident=identity.path_id(workdir))
            found = self.found = existing_fs(workdir)
            self.mounted = MountedFS(found.fs, found.device, found.mountpoint, workdir,
                                     list(found.mount_options), found=found)
            return self.mounted
        recipe = self.fs_recipe
        mountpoint, missing = _mountpoint_place(self.spec.mountpoint or paths.state_dir() / "mnt" / self.group)
        if missing:  # deepest first: undo removes the parents it made too (each by identity)
            entry = self.journal.record("mountdir", self.group, paths=[str(p) for p in missing])
            for made in reversed(missing):
                made.mkdir()
            self.journal.complete(entry, idents=[identity.path_id(p) for p in missing])
            mountpoint, _ = _mountpoint_place(mountpoint)  # what we made is still what we checked
        checked = identity.path_id(mountpoint)
        if make_fs and self.spec.snapshot:
            self._restore_snapshot()
        elif make_fs and recipe.fs != "tmpfs":
            self._check_still_held("mkfs")
            # one line, not mkfs's usage text (Setup refuses it before a job that formats starts)
            filesystem.check_size(recipe, filesystem.device_bytes(self.held_device))
            filesystem.mkfs(recipe, self.held_device)
        if not identity.still_names(mountpoint, checked):  # mkfs or a restore took a while
            raise SafetyRefusal(f"--mountpoint {mountpoint} changed since fsscope checked it: not mounted")
        self._mount_fs(str(mountpoint))
        self.mounted = MountedFS(recipe.fs, self.device, str(mountpoint), mountpoint,
                                 filesystem.mount_options(str(mountpoint)))
        if make_fs and self.spec.snapshot:
            vfs = os.statvfs(mountpoint)
            self.restores[-1]["inodes_used"] = vfs.f_files - vfs.f_ffree
            self.restores[-1]["used_bytes"] = (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize
        return self.mounted

    def remount(self) -> None:
        """Unmount and mount again (recipe hygiene after populating a data set)."""
        if self.mounted is None or self.spec.kind == "dir" or self.fs_recipe.fs == "tmpfs":
            return
        # Until the new mount id is journalled, cleanup knows the mount by its source device.
        if self._mount_entry is not None:
            self._mount_entry = self.journal.complete(self._mount_entry, mount_id=None, majmin=None)
        filesystem.umount(self.mounted.mountpoint)
        self._mount_fs(self.mounted.mountpoint, record=False)

    def _mount_fs(self, mountpoint: str, *, record: bool = True) -> None:
        """Mount, journalled before (mount point, source and its diskseq) and after (mount id)."""
        source = self.device or "tmpfs"
        if record:
            self._mount_entry = self.journal.record(
                "mount", self.group, mountpoint=mountpoint, source=source,
                source_diskseq=self.device_seq if self.device else None)
        self._check_still_held("mount")
        filesystem.mount(self.fs_recipe, source, mountpoint, self.spec.size_bytes)
        top = identity.top_mount(mountpoint)
        if top is not None and self._mount_entry is not None:
            self._mount_entry = self.journal.complete(self._mount_entry, mount_id=top.mount_id, majmin=top.majmin)

    def unmount(self) -> None:
        if self.mounted is None:
            return
        undo_group(self.journal, self.group, kinds=("mount", "workdir"))
        self.mounted = None

    def close(self) -> list[str]:
        """Undo everything this target made, in reverse order; returns what was done."""
        try:
            return undo_group(self.journal, self.group)
        finally:
            self.mounted = None
            if self.image_fd is not None:
                os.close(self.image_fd)  # the image's lock goes with it
                self.image_fd = None
            if self._record in tools.listeners:
                tools.listeners.remove(self._record)

    def describe(self) -> dict:
        """What went into this target, for the run manifest."""
        return {"spec": plain(self.spec),
                "recipe": plain(self.recipe),
                "device": self.device, "direct_io": self.direct_io, "restores": self.restores,
                "image": str(self.image_path) if self.image_path else None,
                "mounted": self.mounted.to_dict() if self.mounted else None,
                "existing": self.found.to_dict() if self.found else None,
                "commands": [{"argv": list(c.argv), "rc": c.rc, "duration_s": round(c.duration_s, 4),
                              "stdout": c.stdout[-2000:], "stderr": c.stderr[-2000:]}
                             for c in self.commands]}


def _open_existing(given: str, path: Path, flags: int) -> int:
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SafetyRefusal(f"--image {given} is a symbolic link: fsscope does not follow links as "
                                f"root; pass the file it points to") from None
        raise


def _lock(fd: int, given: str, *, test: bool = False) -> None:
    """One job per image: an exclusive lock on the image for the target's life (``test``:
    only see whether it is free)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise FsscopeError(f"--image {given} is in use by another fsscope job: wait for it to end "
                           "(or give this job another image)") from None
    if test:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _mountpoint_place(given: str | Path) -> tuple[Path, list[Path]]:
    """The mount point as a real path only root can change, and the directories to make
    (deepest first). Refuses a symbolic link, a non-directory, a directory that is not
    empty (a mount would hide what is in it) or already a mount point, and a place other
    users may change."""
    place = trust.locate(given, "--mountpoint")
    path = Path(place.parent, *place.missing)
    missing = [path, *path.parents][:len(place.missing)]
    if place.shared and not place.sticky:
        raise SafetyRefusal(f"--mountpoint {given}: directory {place.parent} is {place.shared}, so another user "
                            "could swap the mount point for a link; use a directory only root can change")
    if len(place.missing) > 1 or not os.path.lexists(path):
        return path, missing
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise SafetyRefusal(f"--mountpoint {given} is a symbolic link: fsscope does not mount through links "
                            "as root; pass the directory itself")
    if not stat.S_ISDIR(st.st_mode):
        raise FsscopeError(f"--mountpoint {given}: not a directory")
    if place.shared and st.st_uid not in trust.trusted_uids():
        raise SafetyRefusal(f"--mountpoint {given}: owned by uid {st.st_uid} in {place.parent}, which is "
                            f"{place.shared}; use a directory only root can change")
    if identity.top_mount(str(path)) is not None:
        raise FsscopeError(f"--mountpoint {given}: something is already mounted there")
    if os.listdir(path):
        raise FsscopeError(f"--mountpoint {given}: not empty (a mount would hide what is in it); "
                           "give an empty directory")
    return path, []


def _check_ram_space(size_bytes: int) -> None:
    """A RAM image can fill all of its size (mkfs, the journal and the job write into it), and
    a RAM dir that runs out mid-run gives loop I/O errors and a read-only file system: so the
    whole size must be free up front, after what the other (sparse) RAM images there may
    still claim as their jobs write."""
    where = RAM_DIR
    while not where.exists():
        where = where.parent
    vfs = os.statvfs(where)
    free = vfs.f_bavail * vfs.f_frsize
    promised, others = _sparse_images(RAM_DIR)
    if free - promised < size_bytes:
        fits = max((free - promised) * 9 // 10 // 2**20, 0)
        held = (f" ({len(others)} other RAM image{'s' if len(others) != 1 else ''} there may still grow by "
                f"{format_bytes(promised)})" if promised else "")
        raise FsscopeError(f"--ram --size {format_bytes(size_bytes)}: the RAM dir {RAM_DIR} has only "
                           f"{format_bytes(free)} free{held}, and a RAM image may fill its whole size; use --size "
                           f"{fits}M or less, free RAM there (FSSCOPE_RAM_DIR picks the dir), or --image PATH on disk")


def _sparse_images(directory: Path) -> tuple[int, list[Path]]:
    """(bytes the sparse fsscope images in ``directory`` have not allocated yet, those images)."""
    promised, images = 0, []
    for path in directory.glob("fsscope-*.img") if directory.is_dir() else ():
        try:
            st = path.stat()
        except OSError:  # removed meanwhile: its job ended
            continue
        if stat.S_ISREG(st.st_mode):
            promised += max(st.st_size - st.st_blocks * 512, 0)
            images.append(path)
    return promised, images
