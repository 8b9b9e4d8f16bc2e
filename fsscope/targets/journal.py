"""The state journal: every loop attach, mount and scratch path, written down BEFORE it is made.

One small JSON file per resource under ``state/journal/``, fsync'd before the action, removed
after the action is undone. If fsscope is killed at any point, ``fsscope cleanup`` reads what
is left and undoes it (mounts first, then loop devices, then files and directories). Undo is
idempotent: an entry whose action never happened (crash between record and action) undoes to
nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from fsscope import paths, proctree, tools
from fsscope.errors import ToolError

# Undo order: what sits on top goes first; a job's processes before anything they may hold.
UNDO_ORDER = {"cgroup": -1, "mount": 0, "loop": 1, "image": 2, "mountdir": 3, "workdir": 3}


@dataclass(frozen=True)
class Entry:
    id: str
    kind: str  # cgroup | mount | loop | image | mountdir | workdir
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
        self.directory = directory or paths.state_dir() / "journal"

    def record(self, kind: str, group: str, *, persistent: bool = False, **fields) -> Entry:
        self.directory.mkdir(parents=True, exist_ok=True)
        if not persistent:  # the start time tells a reused pid from the real owner
            fields = fields | {"owner_start": _start_time(os.getpid())}
        entry = Entry(id=f"{time.time_ns()}-{uuid.uuid4().hex[:6]}", kind=kind, group=group,
                      owner_pid=None if persistent else os.getpid(), fields=fields)
        _fsync_write(self.directory / f"{entry.id}.json", json.dumps(entry.to_dict()))
        return entry

    def forget(self, entry: Entry) -> None:
        (self.directory / f"{entry.id}.json").unlink(missing_ok=True)

    def set_persistent(self, group: str) -> None:
        """Hand a group over to the user: it outlives this process (``fsscope prepare``)."""
        for entry in self.entries(group=group):
            data = entry.to_dict() | {"owner_pid": None}
            data.pop("owner_start", None)
            _fsync_write(self.directory / f"{entry.id}.json", json.dumps(data))

    def entries(self, group: str | None = None) -> list[Entry]:
        out = []
        if not self.directory.is_dir():
            return out
        for path in sorted(self.directory.glob("*.json")):
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError):
                continue  # a torn write: the action it announced never happened
            base = {k: data.pop(k) for k in ("id", "kind", "group", "owner_pid")}
            entry = Entry(fields=data, **base)
            if group is None or entry.group == group:
                out.append(entry)
        return out


def _start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def owner_alive(entry: Entry) -> bool:
    if entry.owner_pid is None:
        return False
    started = _start_time(entry.owner_pid)
    return started is not None and started == entry.fields.get("owner_start", started)


def mounted_at(mountpoint: str) -> bool:
    target = os.path.realpath(mountpoint)
    with open("/proc/self/mounts") as fh:
        return any(line.split()[1] == target for line in fh)


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


def undo(entry: Entry) -> str | None:
    """Undo one entry if its action took effect; return a line saying what was done."""
    f = entry.fields
    if entry.kind == "cgroup":  # a job's cgroup: kill what it left running, then remove it
        killed = proctree.kill_and_remove(Path(f["path"]), Path(f["home"]) if f.get("home") else None)
        if killed:
            return f"killed what the job left running: {', '.join(killed)}"
    elif entry.kind == "mount":
        if mounted_at(f["mountpoint"]):
            try:
                tools.run("umount", f["mountpoint"])
            except ToolError:
                tools.run("umount", "-l", f["mountpoint"])  # busy: detach now, free when unused
            return f"unmounted {f['mountpoint']}"
    elif entry.kind == "loop":
        done = []
        for dev in loops_backing(f["image"]):
            tools.run("losetup", "-d", dev)
            done.append(dev)
        if done:
            # losetup -d on a busy device only sets autoclear: say "detached" once it is true
            deadline = time.monotonic() + 5.0
            while loops_backing(f["image"]) and time.monotonic() < deadline:
                time.sleep(0.05)
            busy = loops_backing(f["image"])
            if busy:
                return (f"asked to detach {', '.join(busy)} ({f['image']}), but it is still in use: "
                        "the kernel detaches it when the last user closes it")
            return f"detached {', '.join(done)} ({f['image']})"
    elif entry.kind == "image":
        if os.path.exists(f["path"]):
            os.unlink(f["path"])
            return f"removed image {f['path']}"
    elif entry.kind == "mountdir":
        try:
            os.rmdir(f["path"])
            return f"removed mount point {f['path']}"
        except FileNotFoundError:
            pass
    elif entry.kind == "workdir" and os.path.isdir(f["path"]):
        shutil.rmtree(f["path"], ignore_errors=True)
        return f"removed work directory {f['path']}"
    return None


def undo_group(journal: Journal, group: str) -> list[str]:
    return undo_entries(journal, journal.entries(group=group))


def undo_entries(journal: Journal, entries: list[Entry]) -> list[str]:
    lines = []
    for entry in sorted(entries, key=lambda e: (UNDO_ORDER.get(e.kind, 9), e.id)):
        line = undo(entry)
        journal.forget(entry)
        if line:
            lines.append(line)
    return lines


def cleanup(journal: Journal | None = None, *, force: bool = False,
            owner_pid: int | None = None) -> list[str]:
    """Undo everything whose owner is gone (or everything, with force), or only what the
    (dead) process ``owner_pid`` made. Returns what was done."""
    journal = journal or Journal()
    entries = [e for e in journal.entries()
               if (owner_pid is None or e.owner_pid == owner_pid) and (force or not owner_alive(e))]
    return undo_entries(journal, entries)
