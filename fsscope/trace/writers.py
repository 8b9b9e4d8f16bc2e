"""Who submitted I/O to a device over an interval, from the block layer's own tracepoint.

/proc/PID/io names only the processes alive at both ends of an interval: a ``dd`` or a ``cp``
that starts and exits inside a probe's run leaves no trace there. ``block/block_bio_queue``
fires in the context of the task that submits the I/O and carries its pid and command name in
the event, so a process that has exited by the end of the interval is still named, with every
byte it submitted. (``block_rq_issue`` carries a comm too, but a request is often dispatched by
``kblockd`` rather than its submitter, and ``block_rq_insert`` does not fire for requests issued
directly; the bio is the submitter's own.) ``sched/sched_process_fork`` adds which tasks the
job's own processes started meanwhile (its workers, their threads), which are not others.

A buffered writer's pages are written back by the kernel's flusher, so its bytes appear under a
kernel thread here; :mod:`fsscope.telemetry.procio` names such writers while they live (they
counted the bytes when dirtying them). Both are joined in
:mod:`fsscope.workloads.probe_writers`.

Pure arithmetic on the decoded event arrays (:func:`submitters`) and one tracefs instance per
interval (:class:`BlockSubmitters`). Root only, like all tracing.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fsscope.errors import FsscopeError
from fsscope.format import visible
from fsscope.targets.journal import Journal
from fsscope.trace.catalog import CatalogEvent
from fsscope.trace.decode import RWBS_WRITE
from fsscope.trace.session import Tracer
from fsscope.trace.tracefs import unavailable_reason

SUBMIT = CatalogEvent("block/block_bio_queue", "io", "dev",
                      "a task submitted I/O to the device (its pid and command are in the event: named "
                      "even after it exits)",
                      columns={"dev": "dev", "bytes": "nr_sector", "flags": "rwbs"}, texts={"arg": "comm"})
FORK = CatalogEvent("sched/sched_process_fork", "sched", "none",
                    "a task started a process or thread (the job's own children are not others)",
                    columns={"arg": "child_pid", "sector": "parent_pid"})
EVENTS = (SUBMIT, FORK)

SECTOR_BYTES = 512  # block_bio_queue's nr_sector counts 512-byte sectors whatever the device's

#: Names of the kernel's own I/O threads, for a task gone before it could be asked its flags.
KERNEL_THREADS = ("jbd2/", "kworker/", "xfsaild/", "xfs-", "ksoftirqd/", "flush-", "btrfs-", "loop", "ext4lazyinit",
                  "kswapd", "kcompactd", "khugepaged")

#: /proc/PID/stat's flags: the task is a kernel thread (include/linux/sched.h).
PF_KTHREAD = 0x00200000


@dataclass(frozen=True)
class Submitter:
    """A process that submitted I/O to the device in the interval (not the job's, not the kernel's)."""

    pid: int            # its process (thread group) when still alive to ask, else the task that submitted
    comm: str           # the command name in the event: the submitter's, even after it exited
    read_bytes: int
    write_bytes: int
    exited: bool        # gone by the end of the interval: /proc could not have named it
    tasks: int = 1      # exited processes of one command are one row (a loop of short ``dd``s): how many


@dataclass(frozen=True)
class Submitted:
    """Everything submitted to the device over one traced interval."""

    seconds: float
    device_bytes: int               # every task's bios, the job's and the kernel's included
    kernel_bytes: int               # submitted by kernel threads (writeback, journal, loop workers)
    others: list[Submitter]         # most bytes first
    lost: int                       # events the trace lost: the counts are lower bounds then


def task_flags(pid: int, proc: str = "/proc") -> int | None:
    """/proc/PID/stat's flags, None when the task is gone."""
    try:
        return int(Path(f"{proc}/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[6])
    except (OSError, ValueError, IndexError):
        return None


def thread_group(tid: int, proc: str = "/proc") -> int | None:
    """The process a task belongs to (Tgid), None when it is gone."""
    try:
        for line in Path(f"{proc}/{tid}/status").read_text().splitlines():
            if line.startswith("Tgid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def is_kernel(pid: int, comm: str) -> bool:
    """A kernel thread, by the kernel's PF_KTHREAD flag -- a user's process may call itself
    "kworker/0:1". A task gone by now is judged by its name (kworkers come and go)."""
    flags = task_flags(pid)
    if flags is None:
        return comm.startswith(KERNEL_THREADS)
    return bool(flags & PF_KTHREAD)


def own_closure(events: np.ndarray, fork_code: int, own: Iterable[int]) -> set[int]:
    """``own`` and every task any of them forked during the trace (in time order: a grandchild
    too)."""
    out = set(own)
    forks = events[events["code"] == fork_code]
    for parent, child in zip(forks["sector"].tolist(), forks["arg"].tolist()):
        if int(parent) in out:
            out.add(int(child))
    return out


def submitters(events: np.ndarray, names: list[str], texts: list[str], own: Iterable[int], seconds: float,
               *, kernel: Callable[[int, str], bool] = is_kernel,
               group: Callable[[int], int | None] = thread_group, lost: int = 0) -> Submitted:
    """Bytes submitted per process from decoded ``block_bio_queue`` events: the job's own tasks
    (``own`` and what they forked) and kernel threads set apart. By construction no process
    submitted more than the device was sent over the same interval."""
    submit_code, fork_code = names.index(SUBMIT.event), names.index(FORK.event)
    mine = own_closure(events, fork_code, own)
    bios = events[events["code"] == submit_code]
    device = int(bios["bytes"].sum()) * SECTOR_BYTES
    per: dict[int, list] = {}   # pid -> [comm, read, write, exited, its tasks]
    gone: dict[str, int] = {}   # command -> the first exited task of it
    kernel_bytes = 0
    for tid in np.unique(bios["pid"]).tolist():
        rows = bios[bios["pid"] == tid]
        comm = visible(texts[int(rows["arg"][-1])]) if len(texts) > int(rows["arg"][-1]) else "?"
        nbytes = int(rows["bytes"].sum()) * SECTOR_BYTES
        if tid in mine:
            continue
        if kernel(tid, comm):
            kernel_bytes += nbytes
            continue
        tgid = group(tid)
        if tgid is not None and tgid in mine:
            continue
        written = int(rows["bytes"][(rows["flags"] & RWBS_WRITE) != 0].sum()) * SECTOR_BYTES
        # a live process is one row; the exited ones of one command are one (the first's pid)
        key = tgid if tgid is not None else gone.setdefault(comm, tid)
        entry = per.setdefault(key, [comm, 0, 0, tgid is None, set()])
        entry[1] += nbytes - written
        entry[2] += written
        entry[4].add(tid)
    others = [Submitter(pid, comm, r, w, exited, len(tids) if exited else 1)
              for pid, (comm, r, w, exited, tids) in per.items()]
    return Submitted(seconds, device, kernel_bytes, sorted(others, key=lambda s: -(s.read_bytes + s.write_bytes)),
                     lost)


def their_own(others: list[Submitter], uses_device: Callable[[int], bool], min_bytes: int = 0) -> list[Submitter]:
    """The submitters whose I/O was their own: sync(2) or syncfs(2) anywhere on the machine
    writes this device's dirty pages in the caller's context, so a live process submitting
    bios here without a file (or its cwd) on the device flushed someone else's data -- left
    out. An exited one cannot be asked and is kept; ``min_bytes`` drops the trickles."""
    return [s for s in others if s.read_bytes + s.write_bytes > min_bytes and (s.exited or uses_device(s.pid))]


class BlockSubmitters:
    """One interval traced: ``with BlockSubmitters(device, own) as b: ...`` then ``b.result``.
    ``own`` may grow inside the body (a bench's workers, known once started)."""

    def __init__(self, device: str, own: set[int], *, journal: Journal | None = None, avoid_cpu: int | None = None):
        self.device = device
        self.own = own
        self.journal = journal
        self.avoid_cpu = avoid_cpu   # the reader stays off the measured process's CPU
        self.result: Submitted | None = None
        self._tracer: Tracer | None = None
        self._raw: tempfile.TemporaryDirectory[str] | None = None

    @staticmethod
    def unavailable() -> str | None:
        """Why no interval can be traced here, or None."""
        return unavailable_reason()

    def __enter__(self) -> BlockSubmitters:
        self._raw = tempfile.TemporaryDirectory(prefix="fsscope-writers-")
        self._tracer = Tracer(Path(self._raw.name) / "raw", fs="", job="writers", pid=None, device=self.device,
                              journal=self.journal, events=EVENTS, avoid_cpu=self.avoid_cpu)
        try:
            self._tracer.__enter__()
        except BaseException:
            self._raw.cleanup()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        tracer, raw = self._tracer, self._raw
        if tracer is None or raw is None:
            return
        try:
            tracer.__exit__(exc_type, *exc)
        finally:
            raw.cleanup()
        result = tracer.result
        if result is not None and exc_type is None:
            self.result = submitters(result.events, result.names, result.texts, self.own | {os.getpid()},
                                     result.duration_s, lost=result.lost)


def trace_error(exc: BaseException) -> str:
    """One line saying why an interval could not be traced."""
    if isinstance(exc, FsscopeError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"
