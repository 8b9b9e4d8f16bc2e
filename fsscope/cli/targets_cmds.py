"""devices, recipes, prepare, release, cleanup: putting file systems on targets and undoing it."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsscope import proctree, recipes
from fsscope.cli.common import add_target_args, recipe_from_args, target_from_args
from fsscope.format import format_bytes, visible
from fsscope.recipes import Prep
from fsscope.targets import Journal, Target, devices, filesystem, release, triage
from fsscope.targets.journal import undo_entries

# Piped output (scripts, logs) gets wide lines instead of columns folded to 80.
console = Console() if sys.stdout.isatty() else Console(width=200)
chatter = Console(stderr=True, soft_wrap=True)  # paths stay whole; so that stdout carries only what scripts read

DEVICES_DESCRIPTION = """\
List block devices (from /sys/block and psutil): size, model, rotational, I/O scheduler,
partitions, mount points, signature, and whether fsscope would format it.
"""

DEVICES_EPILOG = """\
A device is refused when it is mounted (itself or a partition), holds / or /boot, is swap, is held by
device-mapper/md/LVM, or is read-only (e.g. losetup -r); one that carries a file-system or
partition-table signature is formatted only with --yes-destroy naming it.
Images fsscope creates (--image NEW_PATH, --ram) are always allowed; an existing file it did not create
(a text file, an archive, someone's image) is used only with --yes-destroy naming that file.

example:
  fsscope devices
"""

RECIPES_DESCRIPTION = """\
List the shipped recipes (recipes/, or $FSSCOPE_RECIPES): file system, mkfs and
mount options, hygiene steps.
"""

RECIPES_EPILOG = """\
Use one with --recipe NAME, or --recipe ./mine.toml for your own file. One run can add options
(--mkfs-opts "-i size=1024", --mount-opts noatime) or switch a hygiene step (--prep drop_caches=false).
Hygiene steps: no_lazy_init, null_hash_seed (ext4), drop_caches, remount_after_populate,
io_scheduler, atime. A file system missing from the kernel is marked.

example:
  fsscope recipes
"""

PREPARE_DESCRIPTION = """\
Format and mount a target with a recipe's options and hygiene (default recipe: ext4-default),
and print the mount point. It stays mounted until 'fsscope release MOUNTPOINT': a plain
'fsscope cleanup' leaves it alone. An existing --image file fsscope did not create is refused
unless --yes-destroy names it; --ram needs its whole --size free in the RAM dir.
"""

PREPARE_EPILOG = """\
examples:
  fsscope prepare --ram --size 256M                 (ext4-default)
  fsscope prepare --recipe xfs-default --ram --size 1G
  fsscope prepare --recipe ext4-bench --image /var/tmp/t.img --mkfs-opts '-b 1024'
  fsscope prepare --recipe btrfs-default --device /dev/sdb --yes-destroy /dev/sdb
"""

RELEASE_DESCRIPTION = """\
Undo one 'fsscope prepare': unmount, detach its loop device, restore the I/O scheduler, remove
a RAM image and the mount point (and the parent directories) fsscope made. An image file you
named stays on disk. A running job's mount point is refused: the job cleans up after itself.
"""

RELEASE_EPILOG = """\
example:
  mp=$(fsscope prepare --recipe xfs-default --ram --size 1G)
  ...
  fsscope release "$mp"
"""

CLEANUP_DESCRIPTION = """\
Read fsscope's state journal and undo what crashed or killed jobs left: unmount, restore I/O
schedulers, detach loop devices, remove RAM images, scratch directories, the jobs' tracefs
instances and the named semaphores (/dev/shm/sem.fsscope-PID-*) of dead jobs.
"""

CLEANUP_EPILOG = """\
What it never touches (it says so, one 'left:' line each):
  - what a running fsscope job holds (owner pid + start time alive); --force undoes it anyway
  - targets kept on purpose by 'fsscope prepare': 'fsscope release MOUNTPOINT' removes one,
    --prepared removes them all
  - a dead job's leftovers that a live job may now hold (same image, same mount point)
It undoes only the exact resource the journal names: the same loop attachment (device,
diskseq, backing inode) and the same mount (mount id, device, mount point), never whatever
sits at that path now.

examples:
  fsscope cleanup
  fsscope cleanup --prepared      also release every prepared target
"""


def cmd_devices(args) -> int:
    table = Table(title="Block devices", title_justify="left")
    table.add_column("device", no_wrap=True)
    for col in ("size", "model", "rot", "sched", "partitions", "mounted at", "signature", "fsscope would format it?"):
        table.add_column(col, overflow="fold")
    for d in devices.discover():
        # a loop device's backing file, a mount point, a drive's model string: names someone
        # else may have chosen (udisksctl loop-setup, a USB stick's firmware), shown as text
        verdict = Text("yes", style="green") if d.usable else Text.assemble(("no", "red"), f": {visible(d.verdict())}")
        if d.usable is False and not d.hard_reasons():
            verdict = Text.assemble((f"only with --yes-destroy {visible(d.path)}", "yellow"), f": {visible(d.verdict())}")
        model = d.model or (f"loop → {d.backing_file}" if d.backing_file else "")
        rot = "" if d.rotational is None else ("hdd" if d.rotational else "ssd")
        table.add_row(Text(visible(d.path)), format_bytes(d.size_bytes), Text(visible(model)), rot,
                      Text(visible(d.scheduler or "-")), Text(visible(" ".join(d.partitions) or "-")),
                      Text(visible(" ".join(d.mountpoints) or "-")), Text(visible(d.signature or "-")), verdict)
    console.print(table)
    console.print("Images fsscope creates (--image, --ram) are always allowed; an existing file it did not "
                  "create is used only with --yes-destroy PATH. Other devices are formatted only when unused, "
                  "writable and blank, or when --yes-destroy names them.", style="dim")
    return 0


def cmd_recipes(args) -> int:
    table = Table(title="Recipes (use --recipe NAME, or a path to your own .toml)", title_justify="left")
    for col in ("name", "fs", "description", "mkfs options", "mount options", "hygiene"):
        table.add_column(col, overflow="fold")
    defaults = Prep()
    for r in recipes.available():
        fs_note = "" if filesystem.kernel_has(r.fs) else " (not in this kernel)"
        prep = [f"{k}={v}" for k, v in vars(r.prep).items() if v != getattr(defaults, k) or k == "drop_caches"]
        # a recipe is a file (FSSCOPE_RECIPES: a site's own set): its name and words are text
        table.add_row(Text(visible(r.name)), Text.assemble(visible(r.fs), (fs_note, "red")), Text(visible(r.description)),
                      Text(visible(" ".join(r.mkfs_opts) or "-")), Text(visible(",".join(r.effective_mount_opts()) or "-")),
                      Text(visible(" ".join(prep))))
    console.print(table)
    return 0


def cmd_prepare(args) -> int:
    spec = target_from_args(args)
    recipe = recipe_from_args(args, default="ext4-default")
    assert recipe is not None  # a default was given
    if spec.kind == "dir":
        console.print(Text(f"{visible(spec.path)} is a directory: nothing to prepare; jobs take --dir {visible(spec.path)}"))
        return 0
    target = Target(spec, recipe)
    with chatter.status(f"preparing {spec.describe()} with {recipe.name}…"):
        target.open()
        try:
            mounted = target.format_and_mount()
        except BaseException:
            target.close()
            raise
        target.journal.set_persistent(target.group)  # it now belongs to the user until 'release'
    for rec in target.commands:
        chatter.print(Text(f"$ {visible(rec.line)}", style="dim"))
    if target.direct_io is not None:
        chatter.print(Text(f"loop device {target.device}: direct I/O {'on' if target.direct_io else 'off (backing fs refused it)'}",
                       style="dim"))
    chatter.print(Text(f"kept until 'fsscope release {visible(mounted.mountpoint)}' ('fsscope cleanup' leaves it)",
                       style="dim"), soft_wrap=True)
    print(mounted.mountpoint)
    return 0


def cmd_release(args) -> int:
    for line in release(args.mountpoint):
        console.print(Text(visible(line)))
    return 0


def cmd_cleanup(args) -> int:
    journal = Journal()
    to_undo, left = triage(journal, force=args.force, prepared=args.prepared)
    done = undo_entries(journal, to_undo)
    swept = proctree.sweep_semaphores()
    if swept:
        done.append(f"removed {len(swept)} named semaphore(s) of dead jobs from {proctree.SEM_DIR}")
    for line in done:
        console.print(Text(visible(line)))
    for line in left:
        console.print(Text(f"left: {visible(line)}"))
    unreadable = journal.read()[1]
    for line in unreadable:
        console.print(Text(f"skipped: {visible(line)}"), soft_wrap=True)
    if not done and not left and not unreadable:
        console.print("nothing to clean up")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("devices", description=DEVICES_DESCRIPTION, epilog=DEVICES_EPILOG)
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("recipes", description=RECIPES_DESCRIPTION, epilog=RECIPES_EPILOG)
    p.set_defaults(func=cmd_recipes)

    p = sub.add_parser("prepare", description=PREPARE_DESCRIPTION, epilog=PREPARE_EPILOG)
    add_target_args(p, dir_allowed=False)
    p.set_defaults(func=cmd_prepare)

    p = sub.add_parser("release", description=RELEASE_DESCRIPTION, epilog=RELEASE_EPILOG)
    p.add_argument("mountpoint")
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("cleanup", description=CLEANUP_DESCRIPTION, epilog=CLEANUP_EPILOG)
    p.add_argument("--force", action="store_true", help="also undo what running fsscope jobs hold (they fail)")
    p.add_argument("--prepared", action="store_true",
                   help="also undo the targets 'fsscope prepare' kept (same as 'fsscope release' on each)")
    p.set_defaults(func=cmd_cleanup)
