"""mkfs, mount and the recipe's hygiene steps, each through fsscope.tools (logged, checked)."""

from __future__ import annotations

import os
from pathlib import Path

from fsscope import tools
from fsscope.errors import FsscopeError, RecipeError, ToolError
from fsscope.recipes import Recipe

MKFS = {
    "ext4": ["mkfs.ext4", "-F", "-q"],
    "xfs": ["mkfs.xfs", "-f", "-q"],
    "btrfs": ["mkfs.btrfs", "-f", "-q"],
    "f2fs": ["mkfs.f2fs", "-f", "-q"],
}


def kernel_has(fs: str) -> bool:
    text = Path("/proc/filesystems").read_text()
    return any(line.split()[-1] == fs for line in text.splitlines() if line.strip())


def check_supported(recipe: Recipe) -> None:
    """A clear message before any device is touched if the kernel or tools lack the fs."""
    if not kernel_has(recipe.fs):
        raise FsscopeError(f"recipe {recipe.name}: this kernel has no {recipe.fs} support "
                           f"(not in /proc/filesystems; try 'modprobe {recipe.fs}')")
    if recipe.fs in MKFS:
        tools.require(MKFS[recipe.fs][0])


# the smallest file system mkfs makes ("Filesystem must be larger than 300MB": 300 MiB exactly)
MIN_SIZE_BYTES = {"xfs": 300 * 2**20}


def check_size(recipe: Recipe, size_bytes: int) -> None:
    """One line before anything is made when mkfs would refuse a target this small."""
    least = MIN_SIZE_BYTES.get(recipe.fs)
    if least is not None and 0 < size_bytes < least:
        raise FsscopeError(f"recipe {recipe.name}: {recipe.fs.upper()} needs at least {least // 2**20}M "
                           f"(mkfs.{recipe.fs} refuses less), not {size_bytes / 2**20:g}M: use --size "
                           f"{least // 2**20}M or more")


def device_bytes(device: str) -> int:
    """The size of a block device fsscope holds, from sysfs (512-byte sectors); 0 if unknown."""
    try:
        return int(Path(f"/sys/class/block/{Path(device).name}/size").read_text()) * 512
    except (OSError, ValueError):
        return 0


def mkfs_argv(recipe: Recipe, device: str) -> list[str]:
    argv = list(MKFS[recipe.fs])
    if recipe.fs == "ext4" and recipe.prep.no_lazy_init:
        argv += ["-E", "lazy_itable_init=0,lazy_journal_init=0"]
    return argv + list(recipe.mkfs_opts) + [device]


#: Always last, so no recipe option undoes them: what fsscope mounts is measured, never run or
#: opened as a device (an image another user made cannot carry a setuid binary or a device node
#: into root's reach). Neither changes how the file system performs.
SAFE_MOUNT_OPTS = ("nosuid", "nodev")


def mount_argv(recipe: Recipe, device: str, mountpoint: str, size_bytes: int = 0) -> list[str]:
    opts = [*recipe.effective_mount_opts(), *SAFE_MOUNT_OPTS]
    if recipe.fs == "tmpfs":
        opts = [f"size={size_bytes}", *opts]
        device = "tmpfs"
    return ["mount", "-t", recipe.fs, "-o", ",".join(opts), device, mountpoint]


def mkfs(recipe: Recipe, device: str) -> None:
    try:
        tools.run(*mkfs_argv(recipe, device))
    except ToolError as exc:
        raise RecipeError(f"recipe {recipe.name}: {exc.cmd[0]} failed: {exc.summary}") from None
    if recipe.fs == "ext4" and recipe.prep.null_hash_seed:
        tools.run("debugfs", "-w", "-R", "ssv hash_seed null", device)


def mount(recipe: Recipe, device: str, mountpoint: str, size_bytes: int = 0) -> None:
    try:
        tools.run(*mount_argv(recipe, device, mountpoint, size_bytes))
    except ToolError as exc:
        raise RecipeError(f"recipe {recipe.name}: mount failed: {exc.summary}") from None


def umount(mountpoint: str) -> None:
    tools.run("umount", mountpoint)


def scheduler_queue(device: str) -> Path | None:
    """/sys/block/DISK/queue/scheduler of the device (a partition's belongs to its disk)."""
    name = Path(os.path.realpath(device)).name
    queue = Path(f"/sys/block/{name}/queue/scheduler")
    if not queue.exists():
        parents = [d for d in Path("/sys/block").iterdir() if (d / name).is_dir()]
        queue = parents[0] / "queue" / "scheduler" if parents else queue
    return queue if queue.exists() else None


def read_scheduler(queue: Path) -> tuple[str, list[str]]:
    """(active scheduler, every one offered) from a queue/scheduler file: "[none] mq-deadline"."""
    text = queue.read_text()
    active = text[text.find("[") + 1:text.find("]")] if "[" in text else text.strip()
    return active, text.replace("[", " ").replace("]", " ").split()


def drop_caches() -> None:
    """Write back dirty data, then drop page cache, dentries and inodes."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        pass  # not root: the sync alone is what we can do


def mount_options(mountpoint: str) -> list[str]:
    """The options the kernel actually applied to the mount visible at ``mountpoint`` (the
    last one there), read back from /proc/mounts; none when it cannot be read."""
    from fsscope.targets import identity  # not for the Setup screen's first frame (issue 33)

    target = os.path.realpath(mountpoint)
    options: list[str] = []
    try:
        for line in Path("/proc/self/mounts").read_text(encoding="utf-8").splitlines():
            fields = line.split()
            if len(fields) >= 4 and identity.unescape(fields[1]) == target:  # a space reads \040
                options = fields[3].split(",")
    except OSError:
        pass
    return options
