"""What can be watched now: the processes doing file-system I/O (by rate, as iotop ranks them:
/proc/PID/io read twice, a short interval apart) and the cgroups with processes in them (the
services). Read-only; the Setup screen's Watch panel lists them to pick one.

Names are chosen by whoever runs a process or names a cgroup: they are kept as
:func:`fsscope.format.visible` text (procio's comm already is)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from fsscope.format import visible
from fsscope.telemetry.procio import PF_KTHREAD, proc_io
from fsscope.watch.tasks import CGROUP_ROOT


@dataclass(frozen=True)
class Busy:
    """One process's I/O over the interval: bytes the device moved for it (``read_bytes``,
    ``write_bytes``: what iotop shows) and bytes its read/write calls moved (``rchar``,
    ``wchar``: page-cache hits and writes not yet flushed count here)."""

    pid: int
    comm: str
    disk_bytes_per_s: float
    calls_bytes_per_s: float

    @property
    def rate_bytes_per_s(self) -> float:
        """What it is ranked and shown by: the device's bytes when it moved any, else the calls'."""
        return self.disk_bytes_per_s or self.calls_bytes_per_s


def busy_processes(interval_s: float = 0.5, root: str | Path = "/", *,
                   skip: frozenset[int] = frozenset()) -> list[Busy]:
    """The processes (not kernel threads) that did I/O during ``interval_s``, the busiest first
    (:attr:`Busy.rate_bytes_per_s`); ``skip``: pids left out (the UI itself)."""
    before = proc_io(root)
    t0 = time.monotonic()
    time.sleep(interval_s)  # the interval the rates are over (iotop's refresh, shortened)
    after = proc_io(root)
    elapsed_s = max(time.monotonic() - t0, 1e-6)
    out = []
    for pid, (comm, rb, wb, rc, wc) in after.items():
        if pid in skip or pid not in before:
            continue
        _, rb0, wb0, rc0, wc0 = before[pid]
        disk, calls = (rb - rb0) + (wb - wb0), (rc - rc0) + (wc - wc0)
        if (disk > 0 or calls > 0) and not _kernel_thread(root, pid):
            out.append(Busy(pid, comm, disk / elapsed_s, calls / elapsed_s))
    return sorted(out, key=lambda b: (-b.rate_bytes_per_s, b.pid))


def _kernel_thread(root: str | Path, pid: int) -> bool:
    """A kernel thread (a kworker flushing someone's pages) does I/O but makes no system call
    to watch; its flags say so (never its name: anyone can name a process "kworker")."""
    try:
        return bool(int((Path(root) / f"proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[6]) & PF_KTHREAD)
    except (OSError, ValueError, IndexError):
        return False


def services(root: Path = CGROUP_ROOT, max_depth: int = 3) -> list[tuple[str, int]]:
    """The cgroups (v2) holding processes themselves, as paths relative to ``root`` with their
    process count, services (``*.service``) first: what ``watch --cgroup`` takes."""
    out: list[tuple[str, int]] = []
    base_depth = len(root.parts)
    for where, dirs, files in os.walk(root):
        here = Path(where)
        if len(here.parts) - base_depth >= max_depth:
            dirs.clear()
        # cgroup.events: a v2 cgroup below its hierarchy's root (a v1 hierarchy, or a v2 root
        # mounted below /sys/fs/cgroup, holds every process: nothing to pick)
        if here == root or "cgroup.procs" not in files or "cgroup.events" not in files:
            continue
        try:
            count = len((here / "cgroup.procs").read_text().split())
        except OSError:
            continue
        if count:
            out.append((visible(str(here.relative_to(root))), count))
    return sorted(out, key=lambda s: (not s[0].endswith(".service"), s[0]))
