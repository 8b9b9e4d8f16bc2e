"""Audit readers of the target: the file system the benchmark will use, its block device and
its queue settings, lazy init, fullness, free-space fragmentation, loop direct I/O, and other
I/O on the same device during the check.

:func:`locate` finds the target from a path (a real ``stat``); every reader after it is a pure
function of a :class:`~fsscope.check.system.Root` and a :class:`TargetInfo`, so tests can give
them a made-up root. The few readers that need a tool (``dumpe2fs``, ``e2freefrag``) take its
output as text from the caller.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsscope.check.findings import Finding, unknown
from fsscope.check.system import REAL_ROOT, Root, throttle_counts, try_read, vmstat
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
from fsscope.targets.existing import ExistingFS, df_fullness, existing_fs
from fsscope.telemetry import procio
from fsscope.trace.writers import Submitted, Submitter, their_own

if TYPE_CHECKING:
    from fsscope.layout.freespace import FreeSpaceHistogram


@dataclass(frozen=True)
class TargetInfo:
    """The file system under a path and the block devices behind it."""

    path: str                       # what the user named (or the fresh fs fsscope made)
    mountpoint: str
    fs: str
    source: str                     # mount source as /proc/self/mountinfo says (/dev/loop3, tmpfs…)
    options: tuple[str, ...]        # per-mount and per-superblock options
    devno: str | None               # "MAJ:MIN" of a block device, None for tmpfs-like
    block: str | None               # its name in /sys/class/block (sda1, loop3, vda)
    disk: str | None                # the whole disk with a queue/ (sda for sda1)
    loop_backing: str | None = None  # the backing file of a loop device
    backing_disk: str | None = None  # the disk holding that backing file (None: RAM/tmpfs)
    backing_devno: str | None = None  # "MAJ:MIN" of the file system holding the backing file
    formatted_by_fsscope: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)
    fs_devno: str | None = None       # st_dev of the path ("MAJ:MIN"; btrfs, overlay: anonymous)
    under: TargetInfo | None = None   # overlay: the file system under its upper directory
    found: ExistingFS | None = None   # the mount account it was made from
    backing_fs: str | None = None     # the file system type holding a loop device's backing file

    @property
    def data(self) -> TargetInfo:
        """What holds the data written here: overlay's upper file system, else this one."""
        return self.under if self.under is not None else self

    @property
    def disks(self) -> list[str]:
        """Every block device whose other traffic would reach the benchmark."""
        return [d for d in dict.fromkeys((self.block, self.disk, self.backing_disk)) if d]


def _block_of(root: Root, devno: str) -> tuple[str | None, str | None]:
    """(name, whole disk) of a block device number through /sys/dev/block."""
    link = root.p(f"sys/dev/block/{devno}")
    if not link.exists():
        return None, None
    real = Path(os.path.realpath(link))
    name = real.name
    disk = real.parent.name if (real / "partition").exists() else name
    return name, disk


def locate(path: str, root: Root = REAL_ROOT, *, formatted_by_fsscope: bool = False) -> TargetInfo:
    """The file system holding ``path`` and the block devices behind it, from the one mount
    account (:func:`fsscope.targets.existing.existing_fs`: btrfs subvolumes, bind mounts,
    overlay's upper directory). An overlay is judged as the device under its upper directory:
    that is where its new files go. Nothing found: a TargetInfo of '?' with the reason."""
    try:
        found = existing_fs(path)
    except FsscopeError as exc:
        return TargetInfo(path, "?", "?", "?", (), None, None, None, notes=(str(exc),))
    return _info(path, found, root, formatted_by_fsscope)


def _info(path: str, found: ExistingFS, root: Root, formatted_by_fsscope: bool) -> TargetInfo:
    data = found.data   # overlay: the file system under its upper directory
    devno = data.block_devno
    block, disk = _block_of(root, devno) if devno else (None, None)
    backing = backing_disk = backing_devno = backing_fs = None
    if block and block.startswith("loop"):
        backing = (try_read(root, f"sys/block/{block}/loop/backing_file") or "").removesuffix(" (deleted)") or None
        if backing:
            try:
                bst = os.stat(backing)
                backing_devno = f"{os.major(bst.st_dev)}:{os.minor(bst.st_dev)}"
                # the file system holding the image, by the same account (a btrfs image's
                # st_dev is anonymous: its disk is the mount's device)
                holder = existing_fs(os.path.dirname(backing)).data
                backing_fs = holder.fs
                if holder.block_devno:
                    backing_disk = _block_of(root, holder.block_devno)[1]
            except (OSError, FsscopeError):
                pass
    notes = list(found.notes)
    under = None
    if found.upper is not None:
        under = _info(found.upper.path, found.upper, root, formatted_by_fsscope)
        notes.append(f"overlay: new files go to {found.upperdir} on {found.upper.fs} {found.upper.source} at "
                     f"{found.upper.mountpoint}; judged as that file system and its device")
    elif found.fs == "overlay":
        notes.append("overlay without an upper directory found: its device is not known")
    options = found.mount_options + found.super_options
    return TargetInfo(path, found.mountpoint, found.fs, found.source, tuple(dict.fromkeys(options)),
                      devno if block else None, block, disk, backing, backing_disk,
                      backing_devno if backing_disk else None, formatted_by_fsscope, tuple(notes),
                      fs_devno=found.majmin, under=under, found=found, backing_fs=backing_fs)


def _queue(root: Root, disk: str, name: str) -> str | None:
    return try_read(root, f"sys/block/{disk}/queue/{name}")


def _what(t: TargetInfo) -> str:
    """The file system's type, and for an overlay the one under its upper directory."""
    return f"{t.fs} over {t.under.fs}" if t.under is not None else t.fs


def _no_device(id: str, title: str, t: TargetInfo, effect: str) -> Finding:
    return Finding(id, "ok", f"{title}: not applicable ({_what(t)} has no block device)",
                   f"{t.mountpoint}: {t.fs} from {t.source}", effect, "")


# ---------------------------------------------------------------------------------------------
# block queue
# ---------------------------------------------------------------------------------------------

def io_scheduler(root: Root, t: TargetInfo) -> Finding:
    effect = ("the scheduler reorders and merges requests: bfq idles per process and adds CPU cost, "
              "so results change with it; report it with the results")
    fix = f"echo none > /sys/block/{t.disk}/queue/scheduler   (or mq-deadline on a rotating disk)"
    if not t.disk:
        return _no_device("io-scheduler", "I/O scheduler", t, effect)
    text = _queue(root, t.disk, "scheduler")
    if text is None:
        return unknown("io-scheduler", "I/O scheduler", f"cannot read /sys/block/{t.disk}/queue/scheduler", effect)
    m = re.search(r"\[([\w-]+)\]", text)
    current = m.group(1) if m else text
    ev = f"/sys/block/{t.disk}/queue/scheduler = {text}"
    if current == "bfq":
        return Finding("io-scheduler", "warn", f"I/O scheduler bfq on {t.disk}", ev, effect, fix, {"scheduler": current})
    return Finding("io-scheduler", "ok", f"I/O scheduler {current} on {t.disk}", ev, effect, "", {"scheduler": current})


def read_ahead(root: Root, t: TargetInfo) -> Finding:
    effect = "read-ahead sets how much a sequential read fetches ahead: too little halves streaming reads"
    if not t.disk:
        return _no_device("read-ahead", "read-ahead", t, effect)
    text = _queue(root, t.disk, "read_ahead_kb")
    if text is None or not text.isdigit():
        return unknown("read-ahead", "read-ahead", f"cannot read /sys/block/{t.disk}/queue/read_ahead_kb", effect)
    kb = int(text)
    ev = f"/sys/block/{t.disk}/queue/read_ahead_kb = {kb}"
    if kb < 16:
        return Finding("read-ahead", "warn", f"read-ahead only {kb} KiB on {t.disk}", ev, effect,
                       f"echo 128 > /sys/block/{t.disk}/queue/read_ahead_kb", {"read_ahead_kb": kb})
    return Finding("read-ahead", "ok", f"read-ahead {kb} KiB on {t.disk}", ev, effect, "", {"read_ahead_kb": kb})


def write_cache(root: Root, t: TargetInfo) -> Finding:
    effect = ("with a volatile write cache ('write back') fsync waits for a cache flush, whose cost is the "
              "device's; 'write through' makes the kernel skip flushes — fsync-heavy results differ by orders "
              "of magnitude between the two")
    if not t.disk:
        return _no_device("write-cache", "write cache", t, effect)
    text = _queue(root, t.disk, "write_cache")
    if text is None:
        return unknown("write-cache", "write cache", f"cannot read /sys/block/{t.disk}/queue/write_cache", effect)
    ev = f"/sys/block/{t.disk}/queue/write_cache = {text}"
    fua = _queue(root, t.disk, "fua")
    if fua is not None:
        ev += f"; fua = {fua}"
    for cache_type in root.glob(f"sys/block/{t.disk}/device/scsi_disk/*/cache_type"):  # the drive's own setting
        try:
            ev += f"; {root.show(cache_type)} = {cache_type.read_text().strip()}"
        except OSError:
            continue
    return Finding("write-cache", "ok", f"write cache: {text} on {t.disk} (report it with fsync results)", ev,
                   effect, "", {"write_cache": text})


def rotational(root: Root, t: TargetInfo) -> Finding:
    effect = ("on a rotating disk throughput depends on where data lands (outer tracks are faster) and on "
              "seeks: Cao et al. saw 16-19 % variation from ext4's random placement alone (fix: a null "
              "directory hash seed, as the ext4-bench recipe does); zoned devices rewrite in zones")
    disk = t.backing_disk if t.block and t.block.startswith("loop") else t.disk
    in_ram = t.backing_fs in ("tmpfs", "ramfs") if t.loop_backing else t.data.fs in ("tmpfs", "ramfs")
    if not disk and not in_ram:
        under = f" backed by {t.loop_backing}" if t.loop_backing else ""
        return unknown("rotational", "rotational/zoned", f"{t.mountpoint}: {t.fs} from {t.source}{under}: no "
                       "block device found under it", effect)
    if not disk:
        what = "a loop device over RAM (tmpfs)" if t.loop_backing else f"{_what(t)} in RAM"
        return Finding("rotational", "ok", f"rotational: no ({what})", f"{t.mountpoint}: {t.source}"
                       + (f" backed by {t.loop_backing}" if t.loop_backing else ""), effect, "")
    rot, zoned = _queue(root, disk, "rotational"), _queue(root, disk, "zoned")
    if rot is None:
        return unknown("rotational", "rotational/zoned", f"cannot read /sys/block/{disk}/queue/rotational", effect)
    ev = f"/sys/block/{disk}/queue/rotational = {rot}; zoned = {zoned}"
    if t.loop_backing:
        ev = f"{t.block} backed by {t.loop_backing} on {disk}: " + ev
    values = {"rotational": rot == "1", "zoned": zoned}
    if zoned and zoned != "none":
        return Finding("rotational", "warn", f"{disk} is a zoned ({zoned}) device", ev, effect,
                       "benchmark with a zone-aware file system (f2fs, btrfs) or on a conventional device", values)
    if rot == "1":
        return Finding("rotational", "warn", f"{disk} is a rotating disk (or says so)", ev, effect,
                       "use the ext4-bench recipe (null hash seed) and report the partition's position", values)
    return Finding("rotational", "ok", f"{disk} is not rotational; not zoned", ev, effect, "", values)


# ---------------------------------------------------------------------------------------------
# mount options
# ---------------------------------------------------------------------------------------------

def discard(t: TargetInfo) -> Finding:
    effect = ("online discard sends a TRIM for every freed extent, so deletes cost device time and some SSDs "
              "stall on them; results depend on the option and the device's TRIM speed")
    opts = set(t.options)
    ev = f"{t.mountpoint} ({t.fs}) options: {','.join(t.options)}"
    found = sorted(o for o in opts if o == "discard" or o.startswith("discard="))
    if found and "nodiscard" not in opts:
        return Finding("discard", "warn", f"online discard on ({found[0]})", ev, effect,
                       f"mount -o remount,nodiscard {t.mountpoint}   (and run 'fstrim {t.mountpoint}' before each run)",
                       {"discard": found[0]})
    return Finding("discard", "ok", "no online discard", ev, effect, "", {"discard": None})


def atime(t: TargetInfo) -> Finding:
    effect = ("with strictatime every read writes the inode's access time; relatime writes it on the first "
              "read after a change — reads become writes the benchmark did not ask for")
    opts = set(t.options)
    mode = next((m for m in ("noatime", "strictatime", "relatime", "lazytime") if m in opts), "relatime (default)")
    ev = f"{t.mountpoint} ({t.fs}) options: {','.join(t.options)}"
    if mode == "strictatime":
        return Finding("atime", "warn", "strictatime: every read updates atime", ev, effect,
                       f"mount -o remount,noatime {t.mountpoint}", {"atime": mode})
    return Finding("atime", "ok", f"atime: {mode}", ev, effect, "", {"atime": mode})


# ---------------------------------------------------------------------------------------------
# ext4 lazy init
# ---------------------------------------------------------------------------------------------

def lazyinit_threads(root: Root) -> list[int]:
    """Pids of the kernel's ext4lazyinit thread (one for all ext4 file systems)."""
    out = []
    for comm in root.glob("proc/[0-9]*/comm"):
        try:
            if comm.read_text().strip() == "ext4lazyinit":
                out.append(int(comm.parent.name))
        except (OSError, ValueError):
            continue
    return out


def unzeroed_groups(dumpe2fs_text: str) -> tuple[int, int]:
    """(groups without ITABLE_ZEROED, groups) from ``dumpe2fs`` output."""
    groups = unzeroed = 0
    for line in dumpe2fs_text.splitlines():
        if re.match(r"Group \d+:", line):
            groups += 1
            if "ITABLE_ZEROED" not in line:
                unzeroed += 1
    return unzeroed, groups


def ext4_lazy_init(root: Root, t: TargetInfo, dumpe2fs_text: str | None, why_not: str = "",
                   seen_pids: list[int] | None = None) -> Finding:
    """``dumpe2fs_text``: the target's ``dumpe2fs DEV`` output (None if it could not run: ``why_not``);
    ``seen_pids``: ext4lazyinit pids seen earlier in the check (it may have finished since)."""
    effect = ("ext4lazyinit zeroes the inode tables after mount (starting up to 5 s after it, at a random "
              "moment), writing in the background for minutes on a large fresh file system: the first runs "
              "compete with it (Cao et al.'s 'no_lazy' fix)")
    fix = ("mkfs.ext4 -E lazy_itable_init=0,lazy_journal_init=0 (the ext4-bench recipe does), or wait until "
           "no ext4lazyinit thread is left")
    if t.fs != "ext4":
        return Finding("ext4-lazy-init", "ok", f"lazy init: not applicable ({t.fs})", f"{t.mountpoint}: {t.fs}",
                       effect, "")
    pids = lazyinit_threads(root)
    thread = (f"ext4lazyinit thread running (pid {', '.join(map(str, pids))}, /proc/PID/comm)" if pids
              else "no ext4lazyinit thread (/proc/*/comm)")
    values: dict = {"thread_pids": pids}
    if dumpe2fs_text is None:
        ev = f"{thread}; groups of {t.source}: unknown ({why_not})"
        if pids:
            return Finding("ext4-lazy-init", "warn", "ext4 lazy init running (which file system is not known)",
                           ev, effect, fix, values)
        return unknown("ext4-lazy-init", "ext4 lazy init", ev, effect, fix)
    zero, groups = unzeroed_groups(dumpe2fs_text)
    values |= {"groups": groups, "groups_not_zeroed": zero}
    ev = f"{thread}; dumpe2fs {t.source}: {zero} of {groups} groups without ITABLE_ZEROED"
    if seen_pids and not pids and not zero and t.formatted_by_fsscope:
        return Finding("ext4-lazy-init", "warn", "ext4 lazy init ran right after mkfs (finished during the check)",
                       f"ext4lazyinit thread seen at the start of the check (pid {seen_pids[0]}), gone at its end; "
                       f"dumpe2fs {t.source}: all {groups} groups zeroed now", effect
                       + " — with this recipe every run on a fresh file system starts with it", fix,
                       values | {"seen_pids": seen_pids})
    if zero and pids:
        return Finding("ext4-lazy-init", "bad", f"ext4 lazy init in progress: {zero} of {groups} inode tables "
                       "still to zero", ev, effect, fix, values)
    if zero:
        return Finding("ext4-lazy-init", "warn", f"{zero} of {groups} inode tables not zeroed (no thread now: "
                       "noinit_itable, or it starts at the next mount)", ev, effect, fix, values)
    if pids:
        return Finding("ext4-lazy-init", "warn", "ext4lazyinit is busy with another file system", ev,
                       effect + " — here another ext4 is being initialised; its writes compete if it shares a device",
                       "wait for it to finish (watch 'ps -C ext4lazyinit')", values)
    return Finding("ext4-lazy-init", "ok", "inode tables all zeroed; no lazy init running", ev, effect, "", values)


# ---------------------------------------------------------------------------------------------
# space
# ---------------------------------------------------------------------------------------------

def fullness(t: TargetInfo, statvfs: os.statvfs_result | None) -> Finding:
    """Blocks as ``df`` counts them (Use%: reserved blocks neither used nor available) and
    inodes as ``df -i`` does, each labelled; the worse of the two sets the severity."""
    effect = ("a fuller file system allocates into smaller, scattered free extents: fresh and aged (or full) "
              "file systems give different throughput and can rank differently")
    if statvfs is None:
        return unknown("fullness", "fullness", f"statvfs({t.mountpoint}) failed", effect)
    full = df_fullness(statvfs)
    if full.use_percent is None:
        return unknown("fullness", "fullness", f"statvfs({t.mountpoint}) reports no blocks ({t.fs})", effect)
    ev = f"statvfs({t.mountpoint}): {full.text}"
    values = {"used_bytes": full.used_bytes, "total_bytes": full.size_bytes,
              "available_bytes": full.available_bytes, "reserved_bytes": full.reserved_bytes,
              "use_percent": full.use_percent, "inodes_use_percent": full.inodes_use_percent}
    blocks = f"{full.use_percent}% full (blocks, as df counts)"
    inodes = full.inodes_use_percent or 0
    title = blocks if inodes <= full.use_percent else f"inodes {inodes}% used; blocks {full.use_percent}% (df)"
    if t.formatted_by_fsscope:
        ev += " (fresh: fsscope formats it before each run)"
    worst = max(full.use_percent, inodes)
    if worst >= 90:
        return Finding("fullness", "bad", title, ev, effect,
                       "free space or use another target; or age on purpose and say so ('fsscope age')", values)
    if worst >= 70:
        return Finding("fullness", "warn", title, ev, effect,
                       "report the fullness with the results, or benchmark a fresh file system too", values)
    return Finding("fullness", "ok", title, ev, effect, "", values)


SMALL_EXTENT_BYTES = 1 << 20


def free_space_fragmentation(t: TargetInfo, histogram: FreeSpaceHistogram | None = None, why_not: str = "") -> Finding:
    """``histogram``: a :class:`fsscope.layout.freespace.FreeSpaceHistogram` of the target."""
    effect = ("chopped-up free space makes new files fragment: an aged file system reads and writes slower "
              "than a fresh one, and file systems rank differently aged vs fresh")
    if histogram is None:
        if t.data.fs in ("tmpfs", "ramfs"):
            return Finding("free-space-fragmentation", "ok", f"free-space fragmentation: not applicable ({_what(t)})",
                           f"{t.mountpoint}: {t.fs}", effect, "")
        return unknown("free-space-fragmentation", "free-space fragmentation", why_not or "not measured", effect)
    small = sum(b for b, upper in zip(histogram.bucket_free_bytes, histogram.bucket_upper_bytes)
                if upper <= SMALL_EXTENT_BYTES)
    total = histogram.total_free_bytes or 0
    share = small / total if total else 0.0
    mean = total / histogram.free_extent_count if histogram.free_extent_count else 0
    ev = (f"{histogram.source}: {histogram.free_extent_count} free extents, mean {format_bytes(mean)}, largest "
          f"{format_bytes(histogram.largest_free_extent_bytes)}; {share:.1%} of free space in extents < 1 MiB")
    values = {"free_extents": histogram.free_extent_count, "small_extent_share": share, "mean_extent_bytes": mean}
    if share >= 0.5:
        return Finding("free-space-fragmentation", "bad", f"free space fragmented ({share:.0%} in extents < 1 MiB)",
                       ev, effect, "benchmark a fresh file system as well, and report both", values)
    if share >= 0.1:
        return Finding("free-space-fragmentation", "warn", f"free space partly fragmented ({share:.0%} in "
                       "extents < 1 MiB)", ev, effect, "report it with the results ('fsscope frag')", values)
    return Finding("free-space-fragmentation", "ok", f"free space in large extents ({share:.1%} in extents < 1 MiB)",
                   ev, effect, "", values)


def loop_direct_io(root: Root, t: TargetInfo) -> Finding:
    effect = ("a loop device without direct I/O goes through the backing file's page cache as well: "
              "double caching, so writes are absorbed and reads served from RAM the benchmark cannot see")
    if not (t.block and t.block.startswith("loop")):
        return Finding("loop-direct-io", "ok", "not a loop device", f"{t.mountpoint}: {t.source}", effect, "")
    dio = try_read(root, f"sys/block/{t.block}/loop/dio")
    if dio is None:
        return unknown("loop-direct-io", "loop direct I/O", f"cannot read /sys/block/{t.block}/loop/dio", effect)
    ev = f"/sys/block/{t.block}/loop/dio = {dio}; backing_file = {t.loop_backing}"
    if dio == "1":
        return Finding("loop-direct-io", "ok", f"{t.block} does direct I/O to its backing file", ev, effect, "")
    return Finding("loop-direct-io", "warn", f"{t.block} is buffered (no direct I/O): double caching", ev, effect,
                   f"losetup --direct-io=on /dev/{t.block}   (fsscope attaches its images with direct I/O)",
                   {"dio": False})


# ---------------------------------------------------------------------------------------------
# other I/O during the check
# ---------------------------------------------------------------------------------------------

@dataclass
class Snapshot:
    """Counters at one instant: /proc/diskstats of the target's disks, /proc/PID/io of every
    process, /proc/vmstat (swapping) and thermal throttle counts."""

    t_s: float
    disks: dict[str, tuple[int, ...]]
    procs: dict[int, tuple[str, int, int, int, int]]   # pid -> comm, read_bytes, write_bytes, rchar, wchar
    vm: dict[str, int]
    throttle: dict[str, int]
    lazyinit: list[int] = field(default_factory=list)
    unreadable: int = 0     # processes whose /proc/PID/io this user may not read


def diskstats(root: Root, names: list[str]) -> dict[str, tuple[int, ...]]:
    return procio.diskstats(root.path, names)


def proc_io(root: Root, denied: list[int] | None = None) -> dict[int, tuple[str, int, int, int, int]]:
    """/proc/PID/io of every process; pids we may not read (another user's, without root) go
    to ``denied``."""
    return procio.proc_io(root.path, denied)


def snapshot(root: Root, disks: list[str]) -> Snapshot:
    denied: list[int] = []
    procs = proc_io(root, denied)
    return Snapshot(time.monotonic(), diskstats(root, disks), procs, vmstat(root), throttle_counts(root),
                    lazyinit_threads(root), len(denied))


def uses_device(root: Root, pid: int, t: TargetInfo) -> str | None:
    """Where the process has a file open (or its cwd): "target" (the target's file system or its
    device node), "backing" (for a loop device, the file system holding its backing file) or None."""
    def devno(text: str | None) -> int | None:
        return os.makedev(*(int(x) for x in text.split(":"))) if text else None

    # the device, and the file system's own st_dev (btrfs, overlay: an anonymous one)
    targets = {d for d in (devno(t.devno), devno(t.fs_devno), devno(t.under.fs_devno) if t.under else None)
               if d is not None}
    backing = devno(t.backing_devno)
    if not targets and backing is None:
        return None
    devices = procio.devices_open(root.path, pid)
    if targets & devices:
        return "target"
    return "backing" if backing is not None and backing in devices else None


MB = 1e6


def _join_submitted(procs: list[dict[str, Any]], others: list[Submitter], seconds: float, cap_s: float) -> None:
    """The block layer's submitters of the target's device into ``procs`` (one row per pid):
    they are on the target by definition, their rate over the trace's interval capped at the
    device's as /proc's are."""
    dt = max(seconds, 1e-3)
    rows = {p["pid"]: p for p in procs}
    for s in others:
        moved = s.read_bytes + s.write_bytes
        rate = min(moved / dt, cap_s)
        row = rows.get(s.pid)
        if row is not None:
            row["bytes_per_s"], row["on_target"] = max(row["bytes_per_s"], rate), True
            continue
        procs.append({"pid": s.pid, "name": s.comm, "bytes_per_s": rate, "counted_bytes_per_s": moved / dt,
                      "read_bytes_per_s": s.read_bytes / dt, "write_bytes_per_s": s.write_bytes / dt,
                      "on_target": True, "on_backing": False, "exited": s.exited, "tasks": s.tasks})


def other_io(root: Root, t: TargetInfo, before: Snapshot, after: Snapshot, own_pids: frozenset[int] = frozenset(),
             top: int = 5, submitted: Submitted | None = None) -> Finding:
    """Device traffic between two snapshots and the processes that moved bytes meanwhile
    (pid, name, bytes/s from /proc/PID/io; 'on target' when one has a file or the device open),
    and those the block layer saw submit I/O to the target's device (``submitted``: from
    :class:`fsscope.trace.writers.BlockSubmitters` over the same interval), exited ones too."""
    effect = ("another process's I/O on the same device shares its bandwidth and queue with the benchmark: "
              "throughput drops and varies with that process, not with the storage stack")
    fix_base = "stop or pause it for the benchmark (kill -STOP PID / systemctl stop UNIT), or use another device"
    dt = max(after.t_s - before.t_s, 1e-3)
    if not t.disks:
        return Finding("other-io", "ok", f"other I/O: not applicable ({_what(t)} has no block device)",
                       f"{t.mountpoint}: {t.fs}", effect, "")
    rates = {}
    for name in t.disks:
        a, b = before.disks.get(name), after.disks.get(name)
        if a is None or b is None:
            continue
        ios, moved_bytes = procio.device_bytes(a, b)
        rates[name] = (ios / dt, moved_bytes / dt)
    if not rates:
        return unknown("other-io", "other I/O", f"{', '.join(t.disks)} not in /proc/diskstats", effect)
    procs: list[dict[str, Any]] = []
    device_bytes_s = {"target": rates[t.block][1] if t.block in rates else None,
                      "backing": rates[t.backing_disk][1] if t.backing_disk in rates else None}
    most_s = max(r[1] for r in rates.values())
    for pid, (comm, rb, wb, _, _) in after.procs.items():
        if pid in own_pids or pid not in before.procs:
            continue
        _, rb0, wb0, _, _ = before.procs[pid]
        moved = (rb - rb0) + (wb - wb0)
        if moved > 0:
            where = uses_device(root, pid, t)
            # /proc/PID/io counts a buffered write when the page is dirtied and the device
            # when writeback sends it: over one interval a process may count more than its
            # device moved. What it did ON the device is at most the device's own rate.
            cap = device_bytes_s.get(where or "")
            cap = most_s if cap is None else cap
            procs.append({"pid": pid, "name": comm, "bytes_per_s": min(moved / dt, cap),
                          "counted_bytes_per_s": moved / dt,
                          "read_bytes_per_s": (rb - rb0) / dt, "write_bytes_per_s": (wb - wb0) / dt,
                          "on_target": where == "target", "on_backing": where == "backing"})
    if submitted is not None:
        _join_submitted(procs, their_own(submitted.others, lambda pid: uses_device(root, pid, t) == "target", 1 << 20),
                        submitted.seconds,
                        device_bytes_s["target"] if device_bytes_s["target"] is not None else most_s)
    # who uses the target itself first, then the backing file's file system, then the rest
    procs.sort(key=lambda p: (not p["on_target"], not p["on_backing"], -p["bytes_per_s"]))
    procs = procs[:top]
    ios_s = max(r[0] for r in rates.values())
    bytes_s = max(r[1] for r in rates.values())
    ev = "; ".join(f"/proc/diskstats {name}: {r[0]:,.0f} IO/s, {r[1] / MB:,.2f} MB/s over {dt:.1f} s"
                   for name, r in rates.items())
    psi = try_read(root, "proc/pressure/io")
    if psi:
        ev += f"; /proc/pressure/io: {psi.splitlines()[0]}"
    if procs:
        ev += "; /proc/PID/io: " + ", ".join(
            f"pid {p['pid']} ({p['name']}) {p['bytes_per_s'] / MB:,.2f} MB/s"
            + (f" (counted {p['counted_bytes_per_s'] / MB:,.2f} MB/s, dirtied ahead of writeback: at most "
               "the device's)" if p["counted_bytes_per_s"] > p["bytes_per_s"] else "")
            + (f" ({p['tasks']} short-lived processes of that name)" if p.get("tasks", 1) > 1 else "")
            + (" -- exited, seen by block_bio_queue" if p.get("exited") else "")
            + (" on the target" if p["on_target"] else
               f" on the file system holding {t.loop_backing}" if p["on_backing"] else "")
            for p in procs)
    values = {"disks": {k: {"ios_per_s": v[0], "bytes_per_s": v[1]} for k, v in rates.items()},
              "processes": procs, "seconds": dt}
    who = next((p for p in procs if p["on_target"] or p["on_backing"]), None)
    if who:
        name = f" — pid {who['pid']} ({who['name']}) {who['bytes_per_s'] / MB:,.1f} MB/s"
        fix = f"{fix_base}: pid {who['pid']} ({who['name']})"
    else:
        kernel = "ext4lazyinit, " if (before.lazyinit or after.lazyinit) else ""
        name = f" — no process has the target open: kernel threads ({kernel}journal, writeback) or another partition"
        fix = fix_base + " (iotop -o shows who; a fresh file system is busy for a few seconds after mount)"
        ev += "; no process with a file or the device open on the target moved bytes"
    if after.unreadable:
        ev += (f"; {after.unreadable} processes' /proc/PID/io not readable " +
               ("even to root (another PID namespace's, or a ptrace policy: Yama, an LSM)" if os.geteuid() == 0
                else "by this user (run as root to see every process)"))
    values["kernel_only"] = who is None
    if bytes_s >= 10 * MB or ios_s >= 200:
        return Finding("other-io", "bad", f"other I/O on the device: {bytes_s / MB:,.1f} MB/s, {ios_s:,.0f} IO/s{name}",
                       ev, effect, fix, values)
    if bytes_s >= 0.5 * MB or ios_s >= 10:
        return Finding("other-io", "warn", f"some other I/O on the device: {bytes_s / MB:,.2f} MB/s{name}",
                       ev, effect, fix, values)
    return Finding("other-io", "ok", f"device quiet during the check ({bytes_s / MB:,.2f} MB/s)", ev, effect, "", values)
