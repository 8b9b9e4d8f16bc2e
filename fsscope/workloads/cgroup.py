"""A memory cgroup for workload worker processes, so the page cache they use is bounded.

Why: with tens of GiB of RAM a file set of a few GiB lives entirely in the page cache and the
storage stack is never exercised; the FAST'17 study limited RAM to 4 GiB for that reason.
Limiting only the workers (not the machine) gives the same effect without a reboot.

How: one new cgroup per run, nested under the calling process's own cgroup (so it stays inside
whatever limits and accounting the caller already has), the limit written before any worker
does I/O, and the directory removed afterwards. cgroup v1 (``memory`` hierarchy) and v2
(unified hierarchy with the ``memory`` controller) are both supported, whichever this machine
offers. Page cache is charged to the cgroup that first touches a page, so a file set populated
*outside* the cgroup stays cached outside it: populate with cache eviction (see
``personalities.populate``) or remount before the run.

Notes: in v1 the limit covers anonymous memory + page cache (+ kernel memory on old kernels);
the workers' own interpreter pages count too (a few MiB each). On tmpfs the file data itself is
charged and cannot be reclaimed without swap, so a tight limit there means OOM kills, not a
smaller cache.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from fsscope.errors import FsscopeError
from fsscope.proctree import cgroup_dir as _under
from fsscope.proctree import mountinfo as _mountinfo
from fsscope.proctree import own_cgroups as _own_cgroups
from fsscope.targets.journal import Entry, Journal


class CgroupUnavailable(FsscopeError):
    """No usable memory cgroup on this machine (the message says why and what to do)."""




@dataclass(frozen=True)
class CgroupSupport:
    """Which memory cgroup interface is usable here, and where new cgroups would go."""

    version: int | None          # 1, 2 or None
    parent: Path | None          # directory under which fsscope creates its cgroups
    note: str


def detect() -> CgroupSupport:
    """Find a memory cgroup interface we can create children in (v1 preferred when its memory
    hierarchy is mounted, because on hybrid systems v2 then has no memory controller)."""
    try:
        mounts = _mountinfo()
        own = _own_cgroups()
    except OSError as exc:
        return CgroupSupport(None, None, f"cannot read /proc/self cgroup information: {exc}")
    problems = []
    for root, point, fstype, opts in mounts:
        if fstype == "cgroup" and "memory" in opts:
            path = next((p for ctrls, p in own.items() if "memory" in ctrls.split(",")), None)
            where = _under(root, point, path) if path is not None else None
            if where is None or not where.is_dir():
                problems.append(f"cgroup v1 memory hierarchy at {point} does not show this process's cgroup")
                continue
            if not os.access(where, os.W_OK):
                problems.append(f"no write permission on {where} (run as root)")
                continue
            return CgroupSupport(1, where, f"cgroup v1 memory controller at {point}")
    for root, point, fstype, _opts in mounts:
        if fstype != "cgroup2":
            continue
        path = own.get("")
        where = _under(root, point, path) if path is not None else None
        if where is None or not where.is_dir():
            problems.append(f"cgroup v2 at {point} does not show this process's cgroup")
            continue
        controllers = (where / "cgroup.controllers").read_text().split() if (where / "cgroup.controllers").exists() else []
        if "memory" not in controllers:
            problems.append(f"cgroup v2 at {point} has no memory controller for {where} "
                            f"(controllers: {' '.join(controllers) or 'none'})")
            continue
        # v2 forbids processes in inner cgroups: our own cgroup holds us, so new cgroups go next
        # to it, unless we are at the root.
        parent = where if where == Path(point) else where.parent
        if not os.access(parent, os.W_OK):
            problems.append(f"no write permission on {parent} (run as root, or delegate it)")
            continue
        return CgroupSupport(2, parent, f"cgroup v2 memory controller at {point}")
    why = "; ".join(problems) if problems else "no cgroup file system is mounted"
    return CgroupSupport(None, None, f"no usable memory cgroup: {why}")


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return None if text == "max" else int(text)


def _read_kv(path: Path) -> dict[str, int]:
    try:
        pairs = (line.split() for line in path.read_text().splitlines())
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].lstrip("-").isdigit()}
    except OSError:
        return {}


class MemoryCgroup:
    """One memory cgroup with a limit; add worker pids, read usage, remove it afterwards.

    Use as a context manager: ``with MemoryCgroup(64 << 20) as cg: cg.add(pid)``. The cgroup is
    removed on exit; any process still inside is first moved back to the creator's cgroup."""

    def __init__(self, limit_bytes: int, name: str | None = None,
                 support: CgroupSupport | None = None):
        if limit_bytes <= 0:
            raise FsscopeError(f"--mem-limit must be positive, got {limit_bytes}")
        self.limit_bytes = int(limit_bytes)
        self.support = support or detect()
        if self.support.version is None or self.support.parent is None:
            raise CgroupUnavailable(
                f"--mem-limit needs a memory cgroup: {self.support.note}. Run as root on a machine "
                "with the cgroup v1 memory hierarchy or cgroup v2 with the memory controller "
                "enabled, or drop --mem-limit.")
        self.version = self.support.version
        self.parent: Path = self.support.parent  # known to exist from here on
        self.name = name or f"fsscope-{os.getpid()}-{time.monotonic_ns() % 10**9}"
        self.path = self.parent / self.name
        self._home = self._own_dir()
        self._created = False
        self._entry: Entry | None = None

    def _own_dir(self) -> Path:
        """The creator's own cgroup directory (where stragglers are moved back to)."""
        return self.parent if self.version == 1 else self._v2_own()

    def _v2_own(self) -> Path:
        own = _own_cgroups().get("", "/")
        for root, point, fstype, _ in _mountinfo():
            if fstype == "cgroup2":
                where = _under(root, point, own)
                if where is not None:
                    return where
        return self.parent  # pragma: no cover

    # -- lifecycle ------------------------------------------------------------------------------
    def create(self) -> MemoryCgroup:
        # journalled first, like a mount: if the job is killed, whoever cleans up after it
        # (the runner, 'fsscope cleanup') kills what is inside and removes the cgroup
        self._entry = Journal().record("cgroup", f"cgroup-{self.name}", path=str(self.path), home=str(self._home))
        try:
            if self.version == 2:
                subtree = self.parent / "cgroup.subtree_control"
                if "memory" not in subtree.read_text().split():
                    _write(subtree, "+memory")
            self.path.mkdir()
            self._created = True
            if self.version == 1:
                _write(self.path / "memory.limit_in_bytes", str(self.limit_bytes))
            else:
                _write(self.path / "memory.max", str(self.limit_bytes))
        except OSError as exc:
            self.remove()
            raise CgroupUnavailable(f"cannot set up memory cgroup {self.path}: {exc.strerror or exc}") from exc
        return self

    def add(self, pid: int) -> None:
        """Move a process (all its threads) into the cgroup."""
        try:
            _write(self.path / "cgroup.procs", str(pid))
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                return                                    # already gone
            raise CgroupUnavailable(f"cannot move pid {pid} into {self.path}: {exc.strerror}") from exc

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def remove(self, timeout_s: float = 5.0) -> None:
        """Move any remaining process home, then rmdir (retrying while the kernel lets go)."""
        if not self._created:
            self._forget()
            return
        deadline = time.monotonic() + timeout_s
        while True:
            for pid in self.pids():
                try:
                    _write(self._home / "cgroup.procs", str(pid))
                except OSError:
                    pass
            try:
                self.path.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY) or time.monotonic() > deadline:
                    raise CgroupUnavailable(f"cannot remove memory cgroup {self.path}: {exc.strerror}") from exc
                time.sleep(0.05)
                continue
            self._created = False
            self._forget()
            return

    def _forget(self) -> None:
        if self._entry is not None:
            Journal().forget(self._entry)
            self._entry = None

    def __enter__(self) -> MemoryCgroup:
        return self.create()

    def __exit__(self, *exc_info) -> None:
        self.remove()

    # -- readings -------------------------------------------------------------------------------
    def usage_bytes(self) -> int | None:
        return _read_int(self.path / ("memory.usage_in_bytes" if self.version == 1 else "memory.current"))

    def peak_bytes(self) -> int | None:
        """High-water mark (v1 max_usage_in_bytes; v2 memory.peak on kernels >= 5.19)."""
        return _read_int(self.path / ("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"))

    def oom_kills(self) -> int:
        if self.version == 1:
            return _read_kv(self.path / "memory.oom_control").get("oom_kill", 0)
        return _read_kv(self.path / "memory.events").get("oom_kill", 0)

    def cache_bytes(self) -> int | None:
        stat = _read_kv(self.path / "memory.stat")
        return stat.get("cache" if self.version == 1 else "file")

    def stats(self) -> dict[str, int | None]:
        return {"limit_bytes": self.limit_bytes, "usage_bytes": self.usage_bytes(),
                "peak_bytes": self.peak_bytes(), "cache_bytes": self.cache_bytes(),
                "oom_kills": self.oom_kills()}


def fsscope_cgroups(support: CgroupSupport | None = None) -> Iterator[Path]:
    """Leftover fsscope cgroups under the parent (for ``fsscope cleanup``)."""
    support = support or detect()
    if support.parent is None:
        return iter(())
    return (p for p in support.parent.glob("fsscope-*") if p.is_dir())
