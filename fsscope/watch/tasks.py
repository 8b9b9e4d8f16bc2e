"""Which tasks ``watch`` follows, and what their descriptors name when it attaches.

A watched set is a list of thread ids for tracefs's ``set_event_pid``; with the instance's
``event-fork`` option the kernel adds every task they fork from then on (threads and child
processes alike: the event does not tell them apart), and a task that exits stays in the
record. A command (``watch -- CMD``) is forked here and held before its ``exec`` until the
tracing is on, so its first call is recorded.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsscope.errors import FsscopeError

CGROUP_ROOT = Path("/sys/fs/cgroup")


def threads(pid: int) -> list[int]:
    """The thread ids of process ``pid`` (empty when it has gone)."""
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except (FileNotFoundError, ProcessLookupError):
        return []


def children(pid: int) -> list[int]:
    """Every descendant process of ``pid`` now (children of each of its threads, recursively)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for tid in threads(parent):
            try:
                text = Path(f"/proc/{parent}/task/{tid}/children").read_text()
            except OSError:
                continue
            for child in map(int, text.split()):
                if child not in found:
                    found.append(child)
                    todo.append(child)
    return found


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def process_tids(pid: int, *, with_children: bool) -> list[int]:
    """The threads of ``pid`` (and of its descendants): one line if it does not exist."""
    tids = threads(pid)
    if not tids:
        raise FsscopeError(f"--pid {pid}: no such process")
    for child in children(pid) if with_children else []:
        tids += threads(child)
    return sorted(set(tids))


def cgroup_dir(path: str) -> Path:
    """The cgroup v2 directory ``path`` names (under /sys/fs/cgroup, or relative to it)."""
    given = Path(path)
    where = Path(os.path.realpath(given if given.is_absolute() else CGROUP_ROOT / given))
    if not where.is_relative_to(CGROUP_ROOT) or not (where / "cgroup.procs").is_file():
        raise FsscopeError(f"--cgroup {path}: not a cgroup (no cgroup.procs under {CGROUP_ROOT})")
    return where


def cgroup_pids(where: Path) -> list[int]:
    """The processes in cgroup ``where`` and below it now."""
    pids: list[int] = []
    for procs in [where / "cgroup.procs", *where.rglob("cgroup.procs")]:
        try:
            pids += [int(p) for p in procs.read_text().split()]
        except OSError:
            continue
    return sorted(set(pids))


def cgroup_tids(path: str) -> list[int]:
    """The threads of every process in the cgroup at ``path`` (see :func:`cgroup_dir`)."""
    tids = sorted({t for p in cgroup_pids(cgroup_dir(path)) for t in threads(p)})
    if not tids:
        raise FsscopeError(f"--cgroup {path}: no process in it")
    return tids


#: clone(2)'s flag for a thread: the new task shares its parent's process (thread group).
CLONE_THREAD = 0x00010000


def processes(events, names: list[str], known: dict[int, int]) -> dict[int, int]:
    """Thread -> process (tgid) for every task the record saw made, from the kernel's own
    ``task_newtask`` events (the new task and its clone flags), over ``known`` (read from
    /proc at attach and while watching): a thread that came and went between two reads of
    /proc belongs to its process all the same, and a tid reused later changes nothing."""
    out = dict(known)
    code = next((c for c, n in enumerate(names) if n == "task/task_newtask"), None)
    if code is None:
        return out
    for row in events[events["code"] == code]:  # time order: a parent's own is known first
        parent, child = int(row["pid"]), int(row["arg"])
        out[child] = out.get(parent, parent) if int(row["sector"]) & CLONE_THREAD else child
    return out


@dataclass(frozen=True)
class OpenFile:
    """What a descriptor of a watched process named when watch attached."""

    pid: int
    fd: int
    path: str
    dev: int
    ino: int


def open_files(pid: int) -> list[OpenFile]:
    """The regular files and directories process ``pid`` holds open now (``/proc/PID/fd``;
    each stat'ed through the descriptor's own link, so it names what the process holds even
    if the path has since been renamed; deleted files keep the kernel's ' (deleted)')."""
    out = []
    base = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(base)
    except OSError:
        return []
    for name in fds:
        try:
            target = os.readlink(f"{base}/{name}")
            st = os.stat(f"{base}/{name}")
        except OSError:
            continue
        if target.startswith("/"):
            out.append(OpenFile(pid, int(name), target, st.st_dev, st.st_ino))
    return out


class HeldCommand:
    """``watch -- COMMAND``: forked now, blocked before its exec until :meth:`release`.

    The job's own stdout/stderr (the run's child.log) take its output; stdin is /dev/null.
    It runs in the job's process group and cgroup, so a cancel reaches it and a kill takes it."""

    def __init__(self, argv: list[str], cwd: str | None = None, stdout: Any = None):
        if not argv:
            raise FsscopeError("watch: no command given after --")
        read_fd, self._go = os.pipe()
        # A shell that waits for one line on its stdin (our pipe), then becomes the command
        # (same pid) with /dev/null for stdin: a preexec_fn cannot wait (Popen itself waits
        # for the exec). No line (we died): it exits without running the command.
        hold = ["/bin/sh", "-c", 'read _ || exit 125; exec "$@" </dev/null', "fsscope-watch", *argv]
        try:
            self.proc = subprocess.Popen(hold, cwd=cwd, stdin=read_fd, stdout=stdout)
        except OSError as exc:
            os.close(self._go)
            raise FsscopeError(f"watch: cannot start {argv[0]}: {exc.strerror}") from None
        finally:
            os.close(read_fd)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> None:
        """Let it exec (tracing is on)."""
        if self._go >= 0:
            os.write(self._go, b"go\n")
            os.close(self._go)
            self._go = -1

    def stop(self, timeout_s: float = 5.0) -> int:
        """End it (the watch was cancelled or its time was up): SIGTERM, then SIGKILL. Never
        released (the watch failed to attach): its pipe closed without a line, it exits 125
        and the command never runs unwatched."""
        if self._go >= 0:
            os.close(self._go)
            self._go = -1
            try:
                return self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()
