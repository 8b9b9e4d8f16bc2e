"""Every process a job starts dies with it: one cgroup per job, plus its process group.

The job child moves itself into a fresh cgroup ``fsscope-job-PID`` of the unified (v2)
hierarchy before it starts anything (:func:`enter_job_cgroup`). Everything it starts — mkfs,
badblocks, the workload's forkserver, resource tracker and workers — is born inside and cannot
leave by double-forking or ``setsid``. :func:`kill_job` writes ``cgroup.kill`` (Linux ≥ 5.14;
older kernels: SIGKILL to every listed pid until none is left) and also SIGKILLs the job's
process group, which covers machines without a writable v2 hierarchy and workers moved into a
v2 memory cgroup beside it. The cgroup needs no controllers, so it works on hybrid systems
(v1 controllers plus a bare ``/sys/fs/cgroup/unified``, like this one) and on pure v2.

The cgroup goes next to the caller's own cgroup (v2 allows no processes in a cgroup whose
children use controllers; siblings keep the memory cgroup of ``--mem-limit`` working), or at
the root when the caller is there. It is journalled (kind ``cgroup``) before it is made, so
``fsscope cleanup`` kills and removes what a crash left, before it unmounts anything.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import stat
import time
from pathlib import Path

# psutil is imported where it is used: the Setup screen imports this module (through the mount
# journal) and never calls those, and psutil was a tenth of its imports (bench/startup.py)

JOB_PREFIX = "fsscope-job-"


def mountinfo() -> list[tuple[str, str, str, list[str]]]:
    """(root, mount point, fs type, super options + mount options) per mount."""
    out = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) < 5 or len(rfields) < 1:
                continue
            opts = fields[5].split(",") + (rfields[2].split(",") if len(rfields) > 2 else [])
            out.append((fields[3], fields[4].replace("\\040", " "), rfields[0], opts))
    return out


def own_cgroups() -> dict[str, str]:
    """controller list ('' for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    out = {}
    with open("/proc/self/cgroup") as fh:
        for line in fh:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) == 3:
                out[parts[1]] = parts[2]
    return out


def cgroup_dir(mount_root: str, mount_point: str, path: str) -> Path | None:
    """Directory of cgroup ``path`` seen through a mount whose root is ``mount_root``."""
    rel = os.path.relpath(path, mount_root)
    if rel.startswith(".."):
        return None
    return Path(mount_point) / ("" if rel == "." else rel)


def own_v2_cgroup() -> tuple[Path, Path] | None:
    """(this process's v2 cgroup directory, the v2 mount point), if it can be seen."""
    try:
        own = own_cgroups().get("")
        mounts = mountinfo()
    except OSError:
        return None
    for root, point, fstype, _ in mounts:
        if fstype == "cgroup2" and own is not None:
            where = cgroup_dir(root, point, own)
            if where is not None and where.is_dir():
                return where, Path(point)
    return None


def job_cgroup_parent() -> Path | None:
    """Where job cgroups go (None: no writable v2 hierarchy that shows our cgroup)."""
    found = own_v2_cgroup()
    if found is None:
        return None
    where, point = found
    parent = where if where == point else where.parent
    return parent if os.access(parent, os.W_OK) else None


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def cgroup_pids(path: Path) -> list[int]:
    try:
        return [int(x) for x in (path / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def enter_job_cgroup(journal, pid: int | None = None) -> Path | None:
    """Create this job's cgroup (journalled first) and move the calling process into it.
    None when the machine offers none; the process group is then the only net."""
    parent, found = job_cgroup_parent(), own_v2_cgroup()
    if parent is None or found is None:
        return None
    path = parent / f"{JOB_PREFIX}{pid or os.getpid()}"
    # home: where the job goes back to when it removes its own cgroup
    entry = journal.record("cgroup", f"cgroup-{path.name}", path=str(path), home=str(found[0]))
    try:
        path.mkdir()
        _write(path / "cgroup.procs", "0")  # "0": the writing process itself
    except OSError:
        try:
            path.rmdir()
        except OSError:
            pass
        journal.forget(entry)
        return None
    return path


def describe(pids) -> list[str]:
    """['mkfs.ext4 (pid 12)', ...] for those still running."""
    import psutil

    names = []
    for pid in sorted(pids):
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                names.append(f"{proc.name()} (pid {pid})")
        except psutil.Error:
            continue
    return names


def group_members(pgid: int, *, session: bool = False) -> list[int]:
    """Live (non-zombie) processes of a process group; with ``session``, of the session it
    leads too (a job child leads both: its undo tools lead their own groups in its session)."""
    import psutil

    out = []
    for proc in psutil.process_iter(["pid"]):
        try:
            ours = os.getpgid(proc.pid) == pgid or session and os.getsid(proc.pid) == pgid
            if ours and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc.pid)
        except (OSError, psutil.Error):
            continue
    return out


def kill_job(cgroup: Path | None, pgid: int | None, timeout_s: float = 5.0,
             home: Path | None = None) -> list[str]:
    """SIGKILL every process of a job (its cgroup and its process group) except the caller,
    and wait until they are gone. Returns what was running ('mkfs.ext4 (pid 12)', ...).
    A caller inside the cgroup (the job cleaning up after itself) first moves to ``home``."""
    me = os.getpid()
    inside = False
    if cgroup is not None and me in cgroup_pids(cgroup):
        try:
            _write((home or cgroup.parent) / "cgroup.procs", str(me))
        except OSError:
            inside = True  # then cgroup.kill would kill us too: signal the others one by one
    victims = set(cgroup_pids(cgroup) if cgroup is not None else [])
    if pgid is not None and pgid != os.getpgid(0):
        victims |= set(group_members(pgid, session=True))
    victims.discard(me)
    alive = describe(victims)
    deadline = time.monotonic() + timeout_s
    while True:
        left = cgroup_pids(cgroup) if cgroup is not None and cgroup.is_dir() else []
        if cgroup is not None and left:
            try:
                if inside:
                    raise OSError
                _write(cgroup / "cgroup.kill", "1")
            except OSError:  # no cgroup.kill (Linux < 5.14): one pid at a time
                for pid in left:
                    if pid != me:
                        _signal(pid, signal.SIGKILL)
        if pgid is not None and pgid != os.getpgid(0):
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            others = group_members(pgid, session=True)  # the undo tools' own groups (no cgroup)
            for pid in others:
                if pid != me:
                    _signal(pid, signal.SIGKILL)
            left = left or others
        left = [p for p in left if p != me and _is_running(p)]
        if not left or time.monotonic() > deadline:
            return alive
        time.sleep(0.02)


def remove_cgroup(path: Path, timeout_s: float = 5.0) -> None:
    """rmdir once the kernel has let go of its (killed) members."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def kill_and_remove(path: Path, home: Path | None = None) -> list[str]:
    """Kill what is left in a job cgroup and remove it (the journal's undo of a ``cgroup``)."""
    if not path.is_dir():
        return []
    killed = kill_job(path, None, home=home)
    remove_cgroup(path)
    return killed


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _is_running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# ---------------------------------------------------------------------------------------------
# Who a recorded pid is: the pid and when it started, in clock ticks since boot. Not psutil's
# create_time, which is the boot time read from the wall clock plus those ticks: a stepped
# clock (NTP's first sync on a fresh VM, an admin's `date -s`) moves it, and a live owner
# would then look like a reused pid, its mounts fair game for `fsscope cleanup`.
# ---------------------------------------------------------------------------------------------

def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (/proc/PID/stat field 22); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return int(stat.rsplit(b")", 1)[1].split()[19])  # fields after "(comm)" start at field 3


def same_process(pid: int | None, started: int | float | None) -> bool:
    """Whether ``pid`` is still the process that was recorded with ``started``: its
    :func:`start_ticks` (an int), or an older record's create_time (a float)."""
    if pid is None or started is None:
        return False
    if isinstance(started, int):
        return start_ticks(pid) == started
    import psutil

    try:
        return psutil.Process(pid).create_time() == started
    except psutil.Error:
        return False


# ---------------------------------------------------------------------------------------------
# Named semaphores: multiprocessing under forkserver/spawn makes its Queue/Event/Lock from
# POSIX named semaphores (/dev/shm/sem.*), unlinked by its resource tracker -- which dies with
# a killed job's process group. Named after the job's pid, they can be swept after it.
# ---------------------------------------------------------------------------------------------

SEM_DIR = Path("/dev/shm")


def name_semaphores_after_job() -> None:
    """In the job process, before anything makes a semaphore: /dev/shm/sem.fsscope-PID-*.
    (``semprefix`` is the knob multiprocessing reads for the names; no public setter exists.)"""
    import multiprocessing.process

    # names: PREFIX-RANDOM; _config is private (and so not in the typeshed stubs)
    multiprocessing.process.current_process()._config["semprefix"] = f"/fsscope-{os.getpid()}"  # type: ignore[attr-defined]


#: how a job's semaphores are named: sem.fsscope-PID-RANDOM (multiprocessing's random part)
SEM_NAME = re.compile(r"sem\.fsscope-(\d+)-[A-Za-z0-9_]+")


def job_semaphores() -> list[tuple[int, Path]]:
    """(job pid, path) of every named semaphore that is fsscope's own: named as its jobs name
    them and a regular file of this user's (/dev/shm is world-writable: another user may make
    a file of any name there, never one owned by root; it is sticky, so no one else can rename
    ours either)."""
    found = []
    for path in SEM_DIR.glob("sem.fsscope-*-*"):
        match = SEM_NAME.fullmatch(path.name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if match and stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
            found.append((int(match[1]), path))
    return found


def sweep_semaphores(owner_pid: int | None = None) -> list[str]:
    """Remove fsscope's own named semaphores (:func:`job_semaphores`: this user's, named as
    its jobs name them) of job ``owner_pid`` (the runner's own child, dead), or of every job
    no longer running."""
    removed = []
    for pid, path in job_semaphores():
        if (pid == owner_pid) if owner_pid else not _is_running(pid):
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed
