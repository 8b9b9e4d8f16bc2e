"""Block-device discovery (sysfs + psutil) and the safety verdict: would fsscope format it?

fsscope formats disks as root, so the rules are strict: a device that is mounted (itself or
any partition), holds / or /boot, is swap, is held by device-mapper/md/LVM, or carries a
file-system or partition-table signature is refused unless the user names it again with
``--yes-destroy DEV``. Some devices (mounted, holding /, swap, held, read-only) are refused
even then: destroying them would take the running system down, or cannot work at all.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from fsscope import tools
from fsscope.errors import FsscopeError, SafetyRefusal

SYS_BLOCK = Path("/sys/block")


@dataclass(frozen=True)
class Device:
    name: str  # kernel name: sda, sda1, loop3, nvme0n1
    path: str  # /dev/NAME
    size_bytes: int
    model: str
    rotational: bool | None
    scheduler: str  # the active I/O scheduler, "" when the device has none
    partitions: tuple[str, ...]
    mountpoints: tuple[str, ...]  # of the device and its partitions
    signature: str  # e.g. "ext4", "gpt", "" for none
    holders: tuple[str, ...]  # dm-0, md0 ... (of the device and its partitions)
    swap: bool
    backing_file: str  # loop devices: the image behind it
    read_only: bool = False  # the kernel refuses writes (losetup -r, a write-protected disk)

    @property
    def usable(self) -> bool:
        return not self.hard_reasons() and not self.soft_reasons()

    def hard_reasons(self) -> list[str]:
        """Why formatting it would break the running system: never overridden."""
        reasons = []
        system = [m for m in self.mountpoints if m in ("/", "/boot", "/boot/efi")]
        if system:
            reasons.append(f"holds {', '.join(system)}")
        elif self.mountpoints:
            reasons.append(f"mounted at {', '.join(self.mountpoints)}")
        if self.swap:
            reasons.append("in use as swap")
        if self.holders:
            reasons.append(f"held by {', '.join(self.holders)} (device-mapper/md/LVM)")
        if self.read_only:
            reasons.append("read-only (the kernel refuses writes to it)")
        if self.size_bytes == 0:
            what = ("an unconfigured zram device: set its disksize first" if self.name.startswith("zram")
                    else "no medium or backing file")
            reasons.append(f"its size is 0 ({what})")
        return reasons

    def soft_reasons(self) -> list[str]:
        """Why it may hold data someone wants: overridden by --yes-destroy DEV."""
        if self.signature == "unreadable":
            return ["its signature cannot be read"]
        return [f"carries a {self.signature} signature"] if self.signature else []

    def verdict(self) -> str:
        reasons = self.hard_reasons() + self.soft_reasons()
        return "usable" if not reasons else "; ".join(reasons)


def _read(path: Path, default: str = "") -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return default


def _sys_dir(name: str) -> Path | None:
    """sysfs directory of a disk or a partition."""
    if (SYS_BLOCK / name).is_dir():
        return SYS_BLOCK / name
    for disk in SYS_BLOCK.iterdir():
        if (disk / name / "partition").exists():
            return disk / name
    return None


def _mounts_by_source() -> dict[str, list[str]]:
    """Mount points by device node, from every mount (psutil all=True includes bind mounts)."""
    by_dev: dict[str, list[str]] = {}
    import psutil  # here: the Setup screen imports this module and looks for devices only once it is whole

    for part in psutil.disk_partitions(all=True):
        if part.device.startswith("/dev/"):
            real = os.path.realpath(part.device)
            by_dev.setdefault(real, []).append(part.mountpoint)
    return by_dev


def _swaps() -> set[str]:
    lines = _read(Path("/proc/swaps")).splitlines()[1:]
    return {os.path.realpath(line.split()[0]) for line in lines if line.strip()}


def _signature(path: str) -> str:
    """File-system or partition-table type found by blkid's low-level probe, "" if none."""
    try:
        rec = tools.capture("blkid", "-p", "-o", "export", path, ok_codes=(0, 2))
    except FsscopeError:
        return "unreadable"
    if "error" in rec.stderr:  # could not open it: assume the worst
        return "unreadable"
    values = dict(line.split("=", 1) for line in rec.stdout.splitlines() if "=" in line)
    return values.get("TYPE") or values.get("PTTYPE") or ""


def describe(name: str, *, mounts: dict | None = None, swaps: set | None = None,
             probe_signature: bool = True) -> Device:
    sys_dir = _sys_dir(name)
    if sys_dir is None:
        raise FsscopeError(f"/dev/{name}: no such block device in /sys/block")
    mounts = _mounts_by_source() if mounts is None else mounts
    swaps = _swaps() if swaps is None else swaps
    is_partition = (sys_dir / "partition").exists()
    disk_dir = sys_dir.parent if is_partition else sys_dir
    partitions = () if is_partition else tuple(
        sorted(p.name for p in sys_dir.iterdir() if (p / "partition").exists()))
    members = [name, *partitions]
    path = f"/dev/{name}"
    mountpoints = tuple(m for member in members for m in mounts.get(f"/dev/{member}", []))
    holders = tuple(h.name for member in members
                    for h in ((sys_dir if member == name else sys_dir / member) / "holders").glob("*"))
    sched = _read(disk_dir / "queue" / "scheduler")
    active = sched[sched.find("[") + 1: sched.find("]")] if "[" in sched else sched
    rotational = _read(disk_dir / "queue" / "rotational")
    return Device(
        name=name, path=path,
        size_bytes=int(_read(sys_dir / "size", "0")) * 512,
        model=_read(disk_dir / "device" / "model"),
        rotational=None if rotational == "" else rotational == "1",
        scheduler=active, partitions=partitions, mountpoints=mountpoints,
        signature=_signature(path) if probe_signature and os.path.exists(path) else "",
        holders=holders, swap=any(f"/dev/{m}" in swaps for m in members),
        backing_file=_read(sys_dir / "loop" / "backing_file"),
        read_only=_read(sys_dir / "ro") == "1",
    )


def discover(*, probe_signature: bool = True) -> list[Device]:
    """Every disk in /sys/block with a size, and its verdict. Empty loop slots are left out."""
    mounts, swaps = _mounts_by_source(), _swaps()
    out = []
    for disk in sorted(SYS_BLOCK.iterdir()):
        if _read(disk / "size", "0") == "0":
            continue
        out.append(describe(disk.name, mounts=mounts, swaps=swaps, probe_signature=probe_signature))
    return out


def check_formattable(path: str, yes_destroy: str | None = None) -> Device:
    """The device at ``path`` if fsscope may format it; else SafetyRefusal saying why."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise SafetyRefusal(f"{path}: no such device") from None
    if not stat.S_ISBLK(mode):
        raise SafetyRefusal(f"{path}: not a block device (for an image file use --image {path})")
    name = Path(os.path.realpath(path)).name
    device = describe(name)
    hard = device.hard_reasons()
    if hard:
        raise SafetyRefusal(f"refusing to format {path}: {'; '.join(hard)}")
    soft = device.soft_reasons()
    if soft:
        named = yes_destroy is not None and os.path.realpath(yes_destroy) == os.path.realpath(path)
        if not named:
            hint = (f"--yes-destroy {yes_destroy} names another device" if yes_destroy
                    else f"pass --yes-destroy {path} to destroy its contents")
            raise SafetyRefusal(f"refusing to format {path}: {'; '.join(soft)} ({hint})")
    return device
