"""The state journal: every loop attach, mount, I/O scheduler change and scratch path, written
down BEFORE it is made.

One small JSON file per resource under ``state/journal/``, fsync'd before the action, completed
with the resource's identity right after it (see :mod:`fsscope.targets.identity`), removed
after the action is undone. If fsscope is killed at any point, ``fsscope cleanup`` reads what
is left and undoes it (mounts first, then schedulers, loop devices, files and directories).

Undo touches only the resource the entry identifies — the same loop attachment (device +
diskseq + backing inode), the same mount (mount id + device + mount point) — never whatever
now happens to sit at the same path. Undo is idempotent: an entry whose action never happened
(crash between record and action) undoes to nothing.

Who may undo what: an entry whose owner (pid + start time) still runs belongs to that job;
one kept on purpose by ``fsscope prepare`` (no owner) belongs to the user until ``fsscope
release``. ``cleanup`` undoes neither (unless told to), and leaves a dead job's entry alone
when a live or kept entry might name the same resource.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fsscope import paths, proctree, tools
from fsscope.errors import ToolError
from fsscope.targets import identity

# Undo order: what sits on top goes first (a job's processes before anything they may hold);
# a loop's scheduler is restored while we still hold it.
UNDO_ORDER = {"cgroup": -1, "tracefs": 0, "mount": 0, "scheduler": 1, "loop": 2, "image": 3, "mountdir": 4,
              "workdir": 4}


@dataclass(frozen=True)
class Entry:
    id: str
    kind: str  # cgroup | mount | scheduler | loop | image | mountdir | workdir | tracefs
    group: str  # everything one prepared target made shares a group
    owner_pid: int | None  # None: meant to outlive its creator (``fsscope prepare``)
    fields: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"id": self.id, "kind": self.kind, "group": self.group,
                "owner_pid": self.owner_pid, **self.fields}


def _fsync_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class Journal:
    def __init__(self, directory: Path | None = None):
        if directory is None:
            paths.check_home()  # root undoes what this directory names: only root may write it
        self.directory = directory or paths.state_dir() / "journal"

    def record(self, kind: str, group: str, *, persistent: bool = False, **fields: object) -> Entry:
        self.directory.mkdir(parents=True, exist_ok=True)
        if not persistent:  # the start time tells a reused pid from the real owner
            fields = fields | {"owner_start_ticks": proctree.start_ticks(os.getpid())}
        entry = Entry(id=f"{time.time_ns()}-{uuid.uuid4().hex[:6]}", kind=kind, group=group,
                      owner_pid=None if persistent else os.getpid(), fields=fields)
        _fsync_write(self.directory / f"{entry.id}.json", json.dumps(entry.to_dict()))
        return entry

    def complete(self, entry: Entry, **fields: object) -> Entry:
        """Add what is known only after the action (the loop device, the mount id)."""
        done = Entry(entry.id, entry.kind, entry.group, entry.owner_pid, entry.fields | fields)
        _fsync_write(self.directory / f"{entry.id}.json", json.dumps(done.to_dict()))
        return done

    def forget(self, entry: Entry) -> None:
        (self.directory / f"{entry.id}.json").unlink(missing_ok=True)

    def set_persistent(self, group: str) -> None:
        """Hand a group over to the user: it outlives this process (``fsscope prepare``)."""
        for entry in self.entries(group=group):
            data = entry.to_dict() | {"owner_pid": None}
            data.pop("owner_start_ticks", None)
            data.pop("owner_start", None)
            _fsync_write(self.directory / f"{entry.id}.json", json.dumps(data))

    def entries(self, group: str | None = None) -> list[Entry]:
        return [e for e in self.read()[0] if group is None or e.group == group]

    def read(self) -> tuple[list[Entry], list[str]]:
        """Every entry, and one line per file that is not one (garbage, ``[]``, a field of the
        wrong type): skipped, never fatal -- ``fsscope cleanup`` reports them."""
        out: list[Entry] = []
        bad: list[str] = []
        if not self.directory.is_dir():
            return out, bad
        for path in sorted(self.directory.glob("*.json")):
            try:
                out.append(parse_entry(json.loads(path.read_text())))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
                bad.append(f"{path}: not a journal entry ({str(exc).splitlines()[0][:120]}): "
                           "skipped; remove it once you have checked it")
        return out, bad


# What each kind must carry (strings), and the optional fields' types.
REQUIRED = {"cgroup": ("path",), "mount": ("mountpoint",), "scheduler": ("device", "queue", "previous"),
            "loop": ("image",), "image": ("path",), "mountdir": (), "workdir": ("path",), "tracefs": ("path",)}
OPTIONAL = {"home": str, "source": str, "device": str, "majmin": str, "path": str, "mount_id": int,
            "diskseq": int, "source_diskseq": int, "owner_start_ticks": int, "owner_start": float,
            "backing": list, "ident": list, "paths": list, "idents": list}


def parse_entry(data: object) -> Entry:
    """An Entry from a journal file's JSON; ValueError naming what is wrong with its shape."""
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    for key in ("id", "kind", "group"):
        if not isinstance(data.get(key), str):
            raise ValueError(f"no text field '{key}'")
    kind, owner = data["kind"], data.get("owner_pid")
    if kind not in REQUIRED:
        raise ValueError(f"unknown kind '{kind}'")
    if owner is not None and (type(owner) is not int or owner <= 0):
        raise ValueError("owner_pid is not a process id")
    for key in REQUIRED[kind]:
        if not isinstance(data.get(key), str):
            raise ValueError(f"a {kind} entry without a text '{key}'")
    for key, kind_of in OPTIONAL.items():
        value = data.get(key)
        if value is not None and not (isinstance(value, kind_of) and not isinstance(value, bool)
                                      or kind_of is float and type(value) is int):
            raise ValueError(f"'{key}' is not a {kind_of.__name__}")
    if not all(isinstance(p, str) for p in data.get("paths") or ()) or kind == "mountdir" and not (
            data.get("paths") or data.get("path")):
        raise ValueError("a mountdir entry without its paths")
    for key in ("backing", "ident"):
        if data.get(key) is not None and not all(type(x) is int for x in data[key]):
            raise ValueError(f"'{key}' is not a list of numbers")
    data = dict(data)
    base = {k: data.pop(k) for k in ("id", "kind", "group")} | {"owner_pid": data.pop("owner_pid", None)}
    return Entry(fields=data, **base)


def owner_alive(entry: Entry) -> bool:
    if entry.owner_pid is None:
        return False
    started = entry.fields.get("owner_start_ticks", entry.fields.get("owner_start"))  # the latter: an older fsscope
    if started is None:  # no start recorded: the pid is all we have
        return proctree.start_ticks(entry.owner_pid) is not None
    return proctree.same_process(entry.owner_pid, started)


def loops_backing(image: str) -> list[str]:
    """Loop devices whose backing file is ``image`` (from sysfs; no need for losetup -j)."""
    image = os.path.realpath(image)
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            name = backing.read_text().strip()
        except OSError:
            continue
        if name.removesuffix(" (deleted)") == image:
            found.append("/dev/" + backing.parent.parent.name)
    return found


# -- which resource an entry names ----------------------------------------------------------
def _backing(fields: dict) -> tuple[int, int] | None:
    if fields.get("backing"):
        return tuple(fields["backing"])
    try:  # an entry from before identities were journalled: the image as it is now
        return identity.file_id(fields["image"])
    except OSError:
        return None


def held_loops(entry: Entry) -> list[str]:
    """The loop devices that are still this entry's attachment."""
    f, backing = entry.fields, _backing(entry.fields)
    if backing is None:
        return []
    if f.get("device"):  # known attachment: the same device, diskseq and backing inode
        same = (identity.diskseq(f["device"]) == f.get("diskseq")
                and identity.loop_backing(f["device"]) == backing)
        return [f["device"]] if same else []
    # Killed between attach and journalling the device: any attachment of our image (cleanup
    # leaves those a live or kept entry may hold; see _may_share).
    return identity.loops_backed_by(backing)


def held_mount(entry: Entry) -> identity.Mount | None:
    """The mount this entry made, if it is still the one visible at its mount point."""
    f = entry.fields
    top = identity.top_mount(f["mountpoint"])
    if top is None:
        return None
    if f.get("mount_id") is not None:
        if (top.mount_id, top.majmin) != (f["mount_id"], f.get("majmin")):
            return None
    elif f.get("source", "tmpfs") == "tmpfs":
        if top.fstype != "tmpfs":
            return None
    elif os.path.realpath(top.source) != os.path.realpath(f["source"]):
        return None
    # A mount id is reused once freed: the source must still be the attachment we mounted.
    if f.get("source_diskseq") is not None and identity.diskseq(f["source"]) != f["source_diskseq"]:
        return None
    return top


def _may_share(a: Entry, b: Entry) -> bool:
    """Could entries a and b (of different groups) name the same resource?"""
    if a.kind != b.kind:
        return False
    fa, fb = a.fields, b.fields
    if a.kind == "loop":
        if _backing(fa) != _backing(fb):
            return False
        if fa.get("device") and fb.get("device"):
            return (fa["device"], fa.get("diskseq")) == (fb["device"], fb.get("diskseq"))
        return True
    if a.kind == "mount":
        if os.path.realpath(fa["mountpoint"]) != os.path.realpath(fb["mountpoint"]):
            return False
        if fa.get("mount_id") is not None and fb.get("mount_id") is not None:
            return (fa["mount_id"], fa.get("majmin"), fa.get("source_diskseq")) == \
                   (fb["mount_id"], fb.get("majmin"), fb.get("source_diskseq"))
        return True
    if a.kind == "scheduler":
        return os.path.realpath(fa["device"]) == os.path.realpath(fb["device"])
    return os.path.realpath(_path(a)) == os.path.realpath(_path(b))


def _path(entry: Entry) -> str:
    """What an entry is about, for messages and path comparisons (a mountdir: its deepest dir)."""
    f = entry.fields
    return f.get("device") or f.get("mountpoint") or f.get("path") or (f.get("paths") or [""])[0]


# -- undo -------------------------------------------------------------------------------------
def undo(entry: Entry) -> str | None:
    """Undo one entry if its action took effect and the resource is still the one it made;
    return a line saying what was done."""
    action = _UNDO.get(entry.kind)
    return action(entry) if action is not None else None


def _undo_cgroup(entry: Entry) -> str | None:
    """A job's cgroup: kill what it left running, then remove it."""
    f = entry.fields
    if not _fsscope_named(f["path"], ("cgroup2", "cgroup")):
        return f"left {f['path']} alone: not a cgroup fsscope makes"
    killed = proctree.kill_and_remove(Path(f["path"]), Path(f["home"]) if f.get("home") else None)
    if killed:
        return f"killed what the job left running: {', '.join(killed)}"
    return None


def _undo_mount(entry: Entry) -> str | None:
    f = entry.fields
    if held_mount(entry) is None:
        return None
    try:
        tools.run("umount", f["mountpoint"], own_group=True)
    except ToolError:
        try:
            tools.run("umount", "-l", f["mountpoint"], own_group=True)  # busy: detach now, free when unused
        except ToolError:
            if held_mount(entry) is not None:  # not a killed umount whose unmount took effect
                raise
    return f"unmounted {f['mountpoint']}"


def _undo_scheduler(entry: Entry) -> str | None:
    f = entry.fields
    queue = Path(f["queue"])
    still_ours = identity.diskseq(f["device"]) == f.get("diskseq") and queue.exists()
    if still_ours and f"[{f['previous']}]" not in queue.read_text():
        queue.write_text(f["previous"])
        return f"restored I/O scheduler {f['previous']} on {f['device']}"
    return None


def _undo_loop(entry: Entry) -> str | None:
    f = entry.fields
    done = []
    for dev in held_loops(entry):
        try:
            tools.run("losetup", "-d", dev, own_group=True)
        except ToolError:
            if dev in held_loops(entry):  # not one another cleanup detached meanwhile
                raise
        done.append(dev)
    if not done:
        return None
    # losetup -d on a busy device only sets autoclear: say "detached" once it is true
    deadline = time.monotonic() + 5.0
    while held_loops(entry) and time.monotonic() < deadline:
        time.sleep(0.05)
    busy = held_loops(entry)
    if busy:
        return (f"asked to detach {', '.join(busy)} ({f['image']}), but it is still in use: "
                "the kernel detaches it when the last user closes it")
    return f"detached {', '.join(done)} ({f['image']})"


def _undo_image(entry: Entry) -> str | None:
    f = entry.fields
    if not os.path.lexists(f["path"]):
        return None
    if not _still_ours(f["path"], f.get("ident"), image=True):
        return f"left {f['path']} alone: it is not the image fsscope made there"
    os.unlink(f["path"])
    return f"removed image {f['path']}"


def _undo_mountdir(entry: Entry) -> str | None:
    f = entry.fields
    removed = []
    paths, idents = f.get("paths") or [f["path"]], f.get("idents") or []
    for i, path in enumerate(paths):  # deepest first: the parents fsscope made too
        if not os.path.lexists(path):
            continue
        if not _still_ours(path, idents[i] if i < len(idents) else None):
            break  # not the directory fsscope made: neither it nor its parents are ours
        try:
            os.rmdir(path)
            removed.append(path)
        except OSError:  # not empty or in use: it is no longer only ours
            break
    return f"removed mount point {', '.join(removed)}" if removed else None


def _undo_tracefs(entry: Entry) -> str | None:
    """A job's tracefs instance (fsscope.trace)."""
    f = entry.fields
    if not os.path.isdir(f["path"]):
        return None
    if not _fsscope_named(f["path"], ("tracefs",)):
        return f"left {f['path']} alone: not an fsscope tracefs instance"
    _remove_trace_instance(f["path"])
    return f"removed tracefs instance {f['path']}"


def _undo_workdir(entry: Entry) -> str | None:
    f = entry.fields
    if not os.path.lexists(f["path"]):
        return None
    if f.get("ident") is None:  # removed recursively only when it is the very directory made
        return (f"left {f['path']} alone: fsscope recorded no identity for it (killed between "
                "recording and making it?), so it cannot tell it made it; remove it yourself if it did")
    if not _still_ours(f["path"], f.get("ident")):
        return f"left {f['path']} alone: it is not the work directory fsscope made there"
    shutil.rmtree(f["path"], ignore_errors=True)
    return f"removed work directory {f['path']}"


_UNDO: dict[str, Callable[[Entry], str | None]] = {
    "cgroup": _undo_cgroup, "mount": _undo_mount, "scheduler": _undo_scheduler, "loop": _undo_loop,
    "image": _undo_image, "mountdir": _undo_mountdir, "tracefs": _undo_tracefs, "workdir": _undo_workdir,
}


def _still_ours(path: str, ident: list[int] | None, *, image: bool = False) -> bool:
    """Is ``path`` still what fsscope made (its recorded [dev, ino, owner])? An entry written
    just before the file was made has no identity yet: then only a root-owned image that
    carries fsscope's mark (its names are random, made with O_EXCL) or a root-owned directory."""
    if ident is not None:
        return identity.still_names(path, ident)
    with identity.opened(path) as fd:
        if fd is None:
            return False
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            return False
        if not image:
            return stat.S_ISDIR(st.st_mode)
        try:
            return stat.S_ISREG(st.st_mode) and os.getxattr(fd, "user.fsscope.image") == b"1"
        except OSError:
            return False


def _fsscope_named(path: str, fstypes: tuple[str, ...]) -> bool:
    """A cgroup or tracefs instance fsscope made: named fsscope-*, on a file system of that
    kind (which only root can make directories in)."""
    real = os.path.realpath(path)
    under = [m for m in identity.mounts() if real == m.mountpoint or real.startswith(m.mountpoint.rstrip("/") + "/")]
    fstype = max(under, key=lambda m: len(m.mountpoint)).fstype if under else ""
    return os.path.basename(real).startswith("fsscope-") and fstype in fstypes


def _remove_trace_instance(path: str, wait_s: float = 5.0) -> None:
    """rmdir of a tracefs instance; EBUSY while a killed job's reader still holds a file of
    it open, so retry briefly (the reader exits when its parent's pipe closes)."""
    try:
        with open(os.path.join(path, "tracing_on"), "w") as fh:
            fh.write("0")
    except OSError:
        pass
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def undo_group(journal: Journal, group: str, kinds: tuple[str, ...] | None = None) -> list[str]:
    entries = journal.entries(group=group)
    return undo_entries(journal, [e for e in entries if kinds is None or e.kind in kinds])


def undo_entries(journal: Journal, entries: list[Entry]) -> list[str]:
    """Undo ``entries`` in order. One that fails stays in the journal (``fsscope cleanup``
    retries it) and does not stop the rest; the first failure is raised once all were tried."""
    lines, failure = [], None
    for entry in sorted(entries, key=lambda e: (UNDO_ORDER.get(e.kind, 9), e.id)):
        try:
            line = undo(entry)
        except (OSError, ToolError) as exc:
            failure = failure or exc
            continue
        journal.forget(entry)
        if line:
            lines.append(line)
    if failure is not None:
        raise failure
    return lines


def _kept_mountpoint(entries: list[Entry]) -> str:
    return next((e.fields["mountpoint"] for e in entries if e.kind == "mount"), "")


def triage(journal: Journal, *, force: bool = False, prepared: bool = False,
           owner_pid: int | None = None) -> tuple[list[Entry], list[str]]:
    """What cleanup may undo now, and one line per group it leaves (and why).

    Left alone: groups whose owner still runs (unless ``force``), targets kept by
    ``fsscope prepare`` (unless ``prepared``), and a dead job's group when a live or kept
    entry of another group may name the same loop device, mount or path."""
    everyone = journal.entries()
    groups: dict[str, list[Entry]] = {}
    for entry in everyone:
        if owner_pid is None or entry.owner_pid == owner_pid:
            groups.setdefault(entry.group, []).append(entry)
    held = [e for e in everyone if e.owner_pid is None or owner_alive(e)]
    to_undo, left = [], []
    for group, entries in groups.items():
        if all(e.owner_pid is None for e in entries):
            mp = _kept_mountpoint(entries)
            if not prepared:
                how = f"'fsscope release {mp}' (or 'fsscope cleanup --prepared')" if mp else \
                    "'fsscope cleanup --prepared'"
                left.append(f"kept by 'fsscope prepare': {mp or group} — remove it with {how}")
                continue
        elif any(owner_alive(e) for e in entries) and not force:
            pid = next(e.owner_pid for e in entries if owner_alive(e))
            left.append(f"in use by running fsscope process {pid}: {_kept_mountpoint(entries) or group} "
                        "(it cleans up when it ends; --force undoes it now)")
            continue
        shared = [(e, h) for e in entries for h in held if h.group != group and _may_share(e, h)]
        if shared and not force:
            e, h = shared[0]
            who = "'fsscope prepare'" if h.owner_pid is None else f"running fsscope process {h.owner_pid}"
            left.append(f"{e.kind} {_path(e)} of a dead job: {who} may hold the same resource now "
                        "(run cleanup again after it ends)")
            continue
        to_undo += entries
    return to_undo, left


def cleanup(journal: Journal | None = None, *, force: bool = False, prepared: bool = False,
            owner_pid: int | None = None) -> list[str]:
    """Undo what dead fsscope processes left (see :func:`triage` for what is left alone), or
    only what the (dead) process ``owner_pid`` made. Returns what was done."""
    journal = journal or Journal()
    to_undo, _ = triage(journal, force=force, prepared=prepared, owner_pid=owner_pid)
    return undo_entries(journal, to_undo)
