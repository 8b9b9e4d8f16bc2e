"""Who else did I/O on a device over an interval: /proc/PID/io of every process and
/proc/diskstats of the device, read at the start and the end (two passes over /proc, nothing per
call), so a job can name the processes that competed with it.

Pure readers of a root directory (``/`` on the real machine; tests may hand another) and pure
arithmetic on two snapshots. A process's name is chosen by whoever runs it, so it is kept as
:func:`fsscope.format.visible` text.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fsscope.format import visible

#: comm, read_bytes, write_bytes, rchar, wchar
ProcIo = tuple[str, int, int, int, int]

PF_KTHREAD = 0x00200000  # /proc/PID/stat flags: a kernel thread (its cwd is / but it opens nothing)


def proc_io(root: str | Path = "/", denied: list[int] | None = None) -> dict[int, ProcIo]:
    """/proc/PID/io of every process; pids we may not read (another user's, without root) go
    to ``denied``."""
    out = {}
    for io in sorted(Path(root).glob("proc/[0-9]*/io")):
        try:
            fields = dict(line.split(": ") for line in io.read_text().splitlines())
            # any user names their process (prctl, /proc/self/comm): its escapes shown, never sent
            comm = visible((io.parent / "comm").read_text().strip())
        except PermissionError:
            if denied is not None:
                denied.append(int(io.parent.name))
            continue
        except (OSError, ValueError):
            continue  # gone meanwhile
        out[int(io.parent.name)] = (comm, int(fields.get("read_bytes", 0)), int(fields.get("write_bytes", 0)),
                                    int(fields.get("rchar", 0)), int(fields.get("wchar", 0)))
    return out


def diskstats(root: str | Path, names: list[str]) -> dict[str, tuple[int, ...]]:
    """/proc/diskstats counters (from "reads completed" on) of the block devices ``names``."""
    try:
        text = (Path(root) / "proc/diskstats").read_text()
    except (OSError, UnicodeDecodeError):
        return {}
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 14 and f[2] in names:
            out[f[2]] = tuple(int(x) for x in f[3:])
    return out


def device_bytes(before: tuple[int, ...], after: tuple[int, ...]) -> tuple[int, int]:
    """I/Os and bytes (reads + writes) a device completed between two diskstats rows."""
    ios = (after[0] - before[0]) + (after[4] - before[4])
    sectors = (after[2] - before[2]) + (after[6] - before[6])
    return ios, sectors * 512


def devices_open(root: str | Path, pid: int) -> set[int]:
    """The st_dev and st_rdev of every file the process has open and of its cwd (empty for a
    kernel thread, whose cwd is / though it opens nothing, and for a process gone or not ours)."""
    base = Path(root) / f"proc/{pid}"
    try:
        stat = (base / "stat").read_text()
        if int(stat.rsplit(")", 1)[1].split()[6]) & PF_KTHREAD:
            return set()
    except (OSError, ValueError, IndexError):
        pass  # gone (then so is fd/ below) or a made-up root without stat: judged by its files
    try:
        names = os.listdir(base / "fd")
    except OSError:
        return set()
    found = set()
    for name in [*names, "../cwd"]:
        try:
            st = os.stat(base / "fd" / name)
        except OSError:
            continue
        found |= {st.st_dev, st.st_rdev} - {0}
    return found


def block_name(devno: int) -> str | None:
    """The /sys/class/block name of a block device number (loop3, sda1), None if not one."""
    try:
        return os.path.basename(os.readlink(f"/sys/dev/block/{os.major(devno)}:{os.minor(devno)}"))
    except OSError:
        return None


@dataclass
class IoSnapshot:
    """Every process's I/O counters and the device's at one instant."""

    t_s: float
    disks: dict[str, tuple[int, ...]]
    procs: dict[int, ProcIo]
    unreadable: int = 0     # processes whose /proc/PID/io this user may not read


def io_snapshot(root: str | Path, disks: list[str]) -> IoSnapshot:
    denied: list[int] = []
    procs = proc_io(root, denied)
    return IoSnapshot(time.monotonic(), diskstats(root, disks), procs, len(denied))


@dataclass(frozen=True)
class Mover:
    """A process that moved bytes between two snapshots on the watched device (or file system)."""

    pid: int
    comm: str
    read_bytes: int
    write_bytes: int
    seconds: float
    bytes_per_s: float                 # at most the device's own rate over the same interval
    counted_bytes_per_s: float         # as /proc/PID/io counted it (buffered writes: when dirtied)
    device_bytes_per_s: float | None   # the device's rate over the interval (None: not in diskstats)
    exited: bool = False               # gone by the interval's end (named from the block layer's trace)
    seen_by: str = "/proc/PID/io"
    tasks: int = 1                     # exited processes of one command counted as one row


@dataclass
class DeviceWatch:
    """The device and file system a job measures, watched from one snapshot to the next: the
    processes with a file open there (or their cwd) that moved at least ``min_bytes``."""

    disk: str | None                     # /sys/class/block name, None for a file system with none
    devnos: frozenset[int]               # st_dev of the file system and st_rdev of its device
    own_pids: frozenset[int] = frozenset()
    min_bytes: int = 1 << 20
    root: str = "/"
    before: IoSnapshot | None = field(default=None, repr=False)
    device_bytes_per_s: float | None = None   # the device's over the last interval (after :meth:`stop`)

    @classmethod
    def of(cls, mountpoint: str, device: str | None, own_pids: frozenset[int] = frozenset()) -> DeviceWatch:
        devnos = {os.stat(mountpoint).st_dev}
        disk = None
        if device and device.startswith("/dev/"):
            try:
                rdev = os.stat(device).st_rdev
            except OSError:
                rdev = 0
            if rdev:
                devnos.add(rdev)
                disk = block_name(rdev)
        if disk is None:
            disk = block_name(os.stat(mountpoint).st_dev)
        return cls(disk, frozenset(devnos), own_pids)

    def start(self) -> None:
        self.before = io_snapshot(self.root, [self.disk] if self.disk else [])

    def stop(self) -> list[Mover]:
        """The processes that moved bytes on the watched device since :meth:`start`, most first."""
        if self.before is None or self.disk is None:
            return []  # no block device (tmpfs): /proc/PID/io's bytes are storage I/O, elsewhere
        after = io_snapshot(self.root, [self.disk] if self.disk else [])
        if self.disk in self.before.disks and self.disk in after.disks:
            moved = device_bytes(self.before.disks[self.disk], after.disks[self.disk])[1]
            self.device_bytes_per_s = moved / max(after.t_s - self.before.t_s, 1e-3)
        return movers(self.before, after, self.disk, lambda pid: bool(devices_open(self.root, pid) & self.devnos),
                      self.own_pids, self.min_bytes)


def movers(before: IoSnapshot, after: IoSnapshot, disk: str | None, on_device: Callable[[int], bool],
           own_pids: frozenset[int] = frozenset(),
           min_bytes: int = 0) -> list[Mover]:
    """Processes present in both snapshots that moved more than ``min_bytes`` and for which
    ``on_device(pid)`` holds, their rates capped at the device's: /proc/PID/io counts a buffered
    write when the page is dirtied and the device when writeback sends it, so over one interval a
    process may count more than its device moved; what it did ON the device is at most that."""
    dt = max(after.t_s - before.t_s, 1e-3)
    device_s = None
    if disk is not None and disk in before.disks and disk in after.disks:
        device_s = device_bytes(before.disks[disk], after.disks[disk])[1] / dt
    out = []
    for pid, (comm, rb, wb, _, _) in after.procs.items():
        if pid in own_pids or pid not in before.procs:
            continue
        _, rb0, wb0, _, _ = before.procs[pid]
        moved = (rb - rb0) + (wb - wb0)
        if moved <= min_bytes or not on_device(pid):
            continue
        counted = moved / dt
        if device_s == 0:
            continue  # the device moved nothing: its bytes went to another device
        out.append(Mover(pid, comm, rb - rb0, wb - wb0, dt, counted if device_s is None else min(counted, device_s),
                         counted, device_s))
    return sorted(out, key=lambda m: -m.bytes_per_s)
