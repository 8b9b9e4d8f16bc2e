"""Per-task delay accounting through the kernel's taskstats netlink family (pyroute2).

Why: a slow window is explained differently when the workers spent it waiting for block I/O
(``blkio_delay``) than when they waited for a CPU (``cpu_delay``, run-queue time) or for
swap-in. Only taskstats reports these per task.

Kernel facts this module checks and explains (reference: textual-and-libraries.md §3):

- ``TASKSTATS_CMD_GET`` needs CAP_NET_ADMIN (root).
- Block-I/O and swap-in delays are accounted only with delay accounting on:
  ``kernel.task_delayacct = 1`` (sysctl, for tasks started *afterwards*) or the ``delayacct``
  boot option. It is off by default; then ``blkio_delay`` stays 0. ``cpu_delay`` comes from
  scheduler statistics and is reported either way.
- A request for a pid returns that one thread; a process is the sum over /proc/PID/task.
- I/O byte fields are rounded down to KiB by the kernel: use /proc/PID/io (psutil) for bytes.
- pyroute2 returns ``ac_comm`` NUL-padded; it is stripped here.
- The sync ``TaskStats`` socket cannot be used inside a running asyncio loop: call this from
  a plain thread (the telemetry sampler does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TASK_DELAYACCT = Path("/proc/sys/kernel/task_delayacct")


def delayacct_enabled() -> bool | None:
    """True/False from the sysctl; None where the kernel has no such switch."""
    try:
        return TASK_DELAYACCT.read_text().strip() == "1"
    except OSError:
        return None


def delayacct_note() -> str | None:
    """Why block-I/O delay will read 0 here, if it will."""
    state = delayacct_enabled()
    if state is False:
        return ("kernel.task_delayacct = 0: the kernel does not account block-I/O or swap-in delay, "
                "so blkio_delay reads 0 (cpu_delay still works). Enable with "
                "`sysctl kernel.task_delayacct=1` before the job starts (only tasks started "
                "afterwards are accounted) or boot with `delayacct`.")
    if state is None:
        return ("this kernel has no kernel.task_delayacct switch: block-I/O delay is available only "
                "if it was built with CONFIG_TASK_DELAY_ACCT and booted with `delayacct`.")
    return None


@dataclass(frozen=True)
class TaskDelays:
    """Cumulative delays of one task (thread) or the sum over a process's threads, in ns."""

    pid: int
    comm: str
    cpu_count: int
    cpu_delay_ns: int           # time runnable but waiting for a CPU
    cpu_run_real_ns: int
    blkio_count: int
    blkio_delay_ns: int         # time waiting for synchronous block I/O (needs delayacct)
    swapin_delay_ns: int
    read_bytes: int             # KiB-rounded by the kernel
    write_bytes: int

    def __add__(self, other: TaskDelays) -> TaskDelays:
        return TaskDelays(self.pid, self.comm, *(getattr(self, f) + getattr(other, f) for f in _SUMMED))


_SUMMED = ("cpu_count", "cpu_delay_ns", "cpu_run_real_ns", "blkio_count", "blkio_delay_ns",
           "swapin_delay_ns", "read_bytes", "write_bytes")


class TaskStatsReader:
    """A taskstats socket; ``available`` and ``notes`` say what works on this machine.

    Use ``with TaskStatsReader() as ts: ts.read_process(pid)``. Never raises for a missing
    capability or a vanished pid: it returns None and records a note instead."""

    def __init__(self) -> None:
        self._sock: Any = None
        self.available = False
        self.notes: list[str] = []

    def open(self) -> TaskStatsReader:
        try:
            from pyroute2 import TaskStats
        except ImportError as exc:                      # pragma: no cover - declared dependency
            self.notes.append(f"pyroute2 is not importable ({exc}): no per-task delays")
            return self
        sock = None
        try:
            sock = TaskStats()
            sock.bind()
            sock.get_pid_stat(os.getpid())              # proves the capability, not just the bind
            self._sock, self.available = sock, True
        except Exception as exc:                        # NetlinkError(EPERM), OSError, ...
            code = getattr(exc, "code", None)
            if code in (1, 13) or isinstance(exc, PermissionError):
                self.notes.append("taskstats needs CAP_NET_ADMIN (run as root): no per-task delays")
            else:
                self.notes.append(f"taskstats is not available here ({exc}): no per-task delays")
            try:
                if sock is not None:  # TaskStats() itself may have failed
                    sock.close()
            except Exception:
                pass
        note = delayacct_note()
        if note and self.available:
            self.notes.append(note)
        return self

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self.available = False

    def __enter__(self) -> TaskStatsReader:
        return self.open()

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def read(self, tid: int) -> TaskDelays | None:
        """Delays of one thread; None if it is gone or taskstats is unavailable."""
        if not self.available:
            return None
        try:
            msg = self._sock.get_pid_stat(int(tid))[0]
            stats = msg.get_attr("TASKSTATS_TYPE_AGGR_PID").get_attr("TASKSTATS_TYPE_STATS")
        except Exception:
            return None
        if stats is None:
            return None
        comm = stats["ac_comm"]
        if isinstance(comm, bytes):
            comm = comm.split(b"\0", 1)[0].decode(errors="replace")
        return TaskDelays(int(tid), str(comm), int(stats["cpu_count"]), int(stats["cpu_delay_total"]),
                          int(stats["cpu_run_real_total"]), int(stats["blkio_count"]),
                          int(stats["blkio_delay_total"]), int(stats["swapin_delay_total"]),
                          int(stats["read_bytes"]), int(stats["write_bytes"]))

    def read_process(self, pid: int) -> TaskDelays | None:
        """Sum over the process's threads (the kernel's per-pid answer covers one thread)."""
        try:
            tids = sorted(int(t) for t in os.listdir(f"/proc/{int(pid)}/task"))
        except OSError:
            tids = [int(pid)]
        total: TaskDelays | None = None
        for tid in tids:
            one = self.read(tid)
            if one is not None:
                total = one if total is None else total + one
        if total is not None and total.pid != pid:
            total = TaskDelays(int(pid), total.comm, *(getattr(total, f) for f in _SUMMED))
        return total
