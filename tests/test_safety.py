"""Target-side safety (issue 10): foreign images, cleanup never tearing down a live job or a
prepared target, the RAM-space check, journalled I/O scheduler changes, refusals before any
run record. Everything here runs on loop devices, images and a tmpfs the test makes itself."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from fsscope import paths
from fsscope.engine.registry import spec_from_data
from fsscope.targets import filesystem, identity
from fsscope.targets.journal import Journal

pytestmark = pytest.mark.privileged

# A job's target in its own process: open (attach, scheduler), format and mount, report the
# device, then wait for a line on stdin and format + mount again (mkfs on the device it holds).
HOLDER = r"""
import sys
from fsscope import recipes
from fsscope.errors import FsscopeError
from fsscope.targets import Target, TargetSpec
kind, path, mountpoint, prep = sys.argv[1:5]
recipe = recipes.load("ext4-default")
if prep:
    recipe = recipe.with_prep(io_scheduler=prep)
yes = path if kind == "device" else None  # the test's own loop device, formatted by an earlier run
target = Target(TargetSpec(kind, path, 64 * 2**20, mountpoint=mountpoint, yes_destroy=yes), recipe)
target.open()
target.format_and_mount()
print("ready", target.device, flush=True)
sys.stdin.readline()
try:
    target.format_and_mount()
    print("again", flush=True)
except FsscopeError as exc:
    print("refused", exc, flush=True)
finally:
    target.close()
"""


def _holder(kind: str, path: str, mountpoint: str = "", prep: str = "") -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, kind, path, mountpoint, prep], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = proc.stdout.readline().split()
    assert line[:1] == ["ready"], proc.stderr.read() if proc.poll() is not None else line
    return proc, line[1]


def _finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate("\n", timeout=60)
    assert proc.returncode == 0, err
    return out


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _runs() -> list[str]:
    return sorted(p.name for p in paths.runs_dir().glob("*")) if paths.runs_dir().is_dir() else []


def _one_line_refusal(out: subprocess.CompletedProcess, needle: str) -> None:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], (out.returncode, out.stderr)


@pytest.fixture
def foreign_files(scratch):
    """A text file and a tar archive: blkid finds no signature in either."""
    text = scratch / "notes.txt"
    text.write_text("my notes, not an image\n" * 2000)
    payload = scratch / "payload.bin"
    payload.write_bytes(os.urandom(64 * 1024))
    tar = scratch / "backup.tar"
    with tarfile.open(tar, "w") as archive:
        archive.add(payload, arcname="payload.bin")
    return [text, tar]


def test_foreign_files_are_refused_as_images_before_any_run_record(cli, scratch, foreign_files):
    snapshot = scratch / "aged.img"
    subprocess.run(["truncate", "-s", "32M", str(snapshot)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(snapshot)], check=True)
    runs_before = _runs()
    text, tar = foreign_files
    for path, commands in ((text, (["prepare", "--recipe", "ext4-default"],)),
                           (tar, (["prepare", "--recipe", "ext4-default"], ["probe", "--files", "10"], ["age"],
                                  ["probe", "--from-snapshot", str(snapshot)]))):
        before = _sha(path)
        for argv in ([*command, "--image", str(path)] for command in commands):
            out = cli(*argv)
            _one_line_refusal(out, f"refusing to use {path}: not created by fsscope")
            assert f"--yes-destroy {path}" in out.stderr
            assert _sha(path) == before, argv  # untouched
        out = cli("prepare", "--recipe", "ext4-default", "--image", str(path), "--yes-destroy", str(scratch / "x"))
        _one_line_refusal(out, "names another path")
    assert _runs() == runs_before  # no failed run records for refusals
    assert Journal().entries() == []


def test_a_named_foreign_file_and_fsscope_images_are_used(cli, scratch):
    victim = scratch / "old.img"
    victim.write_bytes(b"x" * 4096)
    os.truncate(victim, 32 * 2**20)
    out = cli("prepare", "--recipe", "ext4-default", "--image", str(victim), "--yes-destroy", str(victim))
    assert out.returncode == 0, out.stderr
    assert cli("release", out.stdout.strip()).returncode == 0
    new = scratch / "new.img"  # a new path is created, marked, and reused without asking
    for _ in range(2):
        out = cli("prepare", "--recipe", "ext4-default", "--image", str(new), "--size", "32M")
        assert out.returncode == 0, out.stderr
        assert cli("release", out.stdout.strip()).returncode == 0


def test_an_image_in_directories_not_made_yet_lands_at_its_path(cli, scratch):
    """Every missing directory on the way is part of the path: the first one was dropped, so a
    new image went one directory up (the first run on a new data directory then failed)."""
    from fsscope import trust

    place = trust.locate(scratch / "a" / "b" / "new.img", "--image")
    assert (place.parent, place.missing) == (str(scratch), ("a", "b", "new.img"))
    image = scratch / "a" / "b" / "new.img"
    out = cli("prepare", "--recipe", "ext4-default", "--image", str(image), "--size", "32M")
    assert out.returncode == 0, out.stderr
    assert cli("release", out.stdout.strip()).returncode == 0
    assert image.is_file() and not (scratch / "b").exists() and not (scratch / "new.img").exists()


def _boot_time_s() -> int:
    return int(next(ln.split()[1] for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime")))


def test_cleanup_leaves_a_live_job_alone_after_the_clock_steps(cli):
    """A stepped wall clock (NTP's first sync on a fresh VM, `date -s`) moves the boot time the
    kernel reports, so a start time taken from the wall clock no longer matched: the live job
    looked like a reused pid, `fsscope cleanup` killed its cgroup and tore down its mount and
    loop device, and `fsscope runs` called it interrupted."""
    from fsscope import recipes
    from fsscope.engine import runner
    from fsscope.targets import TargetSpec

    handle = runner.start("smoke", spec_from_data("smoke", {"duration_s": 120}), TargetSpec("ram", size_bytes=256 * 2**20),
                          recipes.load("ext4-default"))
    records = handle.records()
    next(e for e in records if e.kind == "progress")             # mounted, writing files
    mount = next(e for e in Journal().entries() if e.kind == "mount")
    boot_before = _boot_time_s()
    subprocess.run(["date", "-s", "120 seconds"], check=True, capture_output=True)
    try:
        assert _boot_time_s() != boot_before        # the step moved what psutil's create_time adds
        mount_before = identity.top_mount(mount.fields["mountpoint"])
        out = cli("cleanup")
        assert out.returncode == 0, out.stderr
        assert identity.top_mount(mount.fields["mountpoint"]) == mount_before, out.stdout  # still mounted
        assert handle.run_dir.status() == "running"
    finally:
        subprocess.run(["date", "-s", "-120 seconds"], check=True, capture_output=True)
        handle.cancel()
        list(records)
    assert handle.run_dir.status() == "cancelled" and handle.run_dir.report()["files"] > 0  # it lived on


def test_a_journal_owner_is_its_pid_and_start_not_its_pid_alone():
    """A live pid counts as the owner only with the start recorded for it: a reused pid does
    not (its entries are fair game), and entries of an older fsscope (a create_time) still work."""
    import psutil

    from fsscope import proctree
    from fsscope.targets.journal import Entry, owner_alive

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        ticks = proctree.start_ticks(sleeper.pid)
        def owned(**fields) -> bool:
            return owner_alive(Entry("e", "mount", "g", sleeper.pid, fields))
        assert owned(owner_start_ticks=ticks)
        assert not owned(owner_start_ticks=ticks + 1)                      # the pid, reused
        assert owned(owner_start=psutil.Process(sleeper.pid).create_time())  # an older record
        assert not owned(owner_start=psutil.Process(sleeper.pid).create_time() + 1)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not owner_alive(Entry("e", "mount", "g", sleeper.pid, {"owner_start_ticks": ticks}))


def test_cleanup_never_tears_down_a_live_job(cli, scratch):
    """The issue's scenario: a job is killed, someone undoes its mount and loop by hand (a
    reboot would), a new job runs on the same image and mount point; cleanup must leave it."""
    image, mountpoint = scratch / "shared.img", scratch / "mnt"
    first, first_dev = _holder("image", str(image), str(mountpoint))
    first.kill()
    first.communicate()
    subprocess.run(["umount", str(mountpoint)], check=True)
    subprocess.run(["losetup", "-d", first_dev], check=True)
    stale = Journal().entries()
    assert {e.kind for e in stale} >= {"loop", "mount"}

    job, dev = _holder("image", str(image), str(mountpoint))
    try:
        mount_before = identity.top_mount(str(mountpoint))
        out = cli("cleanup")
        assert out.returncode == 0, out.stderr
        assert identity.loop_backing(dev) == identity.file_id(image), out.stdout  # still attached
        assert identity.top_mount(str(mountpoint)) == mount_before, out.stdout  # still mounted
        out = cli("release", str(mountpoint))
        _one_line_refusal(out, "belongs to running fsscope process")
        assert "again" in _finish(job)  # its second mkfs ran on the device it still held
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    assert cli("cleanup").returncode == 0
    assert Journal().entries() == []
    assert identity.loops_backed_by(identity.file_id(image)) == []


def test_a_job_stops_before_mkfs_on_a_loop_device_it_no_longer_holds(scratch):
    image, mountpoint = scratch / "mine.img", scratch / "mnt"
    bystander = scratch / "bystander.img"
    subprocess.run(["truncate", "-s", "32M", str(bystander)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(bystander)], check=True)
    uuid = subprocess.run(["blkid", "-p", "-s", "UUID", "-o", "value", str(bystander)],
                          capture_output=True, text=True).stdout
    job, dev = _holder("image", str(image), str(mountpoint))
    taken = False
    try:
        subprocess.run(["umount", str(mountpoint)], check=True)  # someone else's hands
        subprocess.run(["losetup", "-d", dev], check=True)
        taken = subprocess.run(["losetup", dev, str(bystander)]).returncode == 0
        out = _finish(job)
        assert "refused" in out and f"{dev} is no longer attached to {image}" in out
        assert "stopped before mkfs" in out
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
        if taken:
            assert identity.loop_backing(dev) == identity.file_id(bystander)  # left attached
            subprocess.run(["losetup", "-d", dev], check=True)
    assert subprocess.run(["blkid", "-p", "-s", "UUID", "-o", "value", str(bystander)],
                          capture_output=True, text=True).stdout == uuid  # not formatted
    assert Journal().entries() == []


def test_cleanup_leaves_prepared_targets_until_release_or_the_flag(cli):
    out = cli("prepare", "--recipe", "ext4-default", "--ram", "--size", "32M")
    assert out.returncode == 0, out.stderr
    mountpoint, said = out.stdout.strip(), out.stderr
    out = cli("cleanup")
    assert out.returncode == 0 and os.path.ismount(mountpoint), out.stdout
    assert f"fsscope release {mountpoint}" in said  # prepare says how it goes away
    assert f"fsscope release {mountpoint}" in out.stdout and "--prepared" in out.stdout
    out = cli("cleanup", "--prepared")
    assert out.returncode == 0 and f"unmounted {mountpoint}" in out.stdout, out
    assert Journal().entries() == []


def test_prepare_defaults_its_recipe_and_removes_the_mountpoint_parents_it_made(cli, scratch):
    out = cli("prepare", "--ram", "--size", "32M", "--mountpoint", str(scratch / "a" / "b c" / "d"))
    assert out.returncode == 0, out.stderr  # no --recipe: ext4-default, like the job commands
    mountpoint = out.stdout.strip()
    assert identity.top_mount(mountpoint).fstype == "ext4"
    assert "rw" in filesystem.mount_options(mountpoint)
    assert cli("release", mountpoint).returncode == 0
    assert not (scratch / "a").exists()  # the parents --mountpoint made are gone too (a space: \040)
    assert Journal().entries() == []


def test_a_ram_image_needs_its_whole_size_free_in_the_ram_dir(cli, scratch):
    """The issue's case: 1 GiB on a RAM dir with less free (the old check wanted size/16)."""
    ram_dir = scratch / "ram"
    ram_dir.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=80M", "tmpfs", str(ram_dir)], check=True)
    try:
        env = os.environ | {"FSSCOPE_RAM_DIR": str(ram_dir)}
        runs_before = _runs()
        for argv in (["prepare", "--recipe", "ext4-default", "--ram", "--size", "1G"],
                     ["probe", "--ram", "--size", "1G", "--files", "10"]):
            out = cli(*argv, env=env)
            _one_line_refusal(out, f"the RAM dir {ram_dir} has only")
            assert "may fill its whole size" in out.stderr
        assert _runs() == runs_before and list(ram_dir.iterdir()) == []
        # another job's sparse RAM image may still grow into what is free today: it counts
        other = ram_dir / "fsscope-other.img"
        with other.open("wb") as f:
            f.truncate(60 * 2**20)
        out = cli("prepare", "--recipe", "ext4-default", "--ram", "--size", "32M", env=env)
        _one_line_refusal(out, "(1 other RAM image there may still grow by 60 MiB)")
        other.unlink()
        out = cli("prepare", "--recipe", "ext4-default", "--ram", "--size", "32M", env=env)  # what fits works
        assert out.returncode == 0, out.stderr
        assert cli("release", out.stdout.strip(), env=env).returncode == 0
    finally:
        subprocess.run(["umount", str(ram_dir)], check=True)


def _scheduler(dev: str) -> str:
    return Path(f"/sys/block/{Path(dev).name}/queue/scheduler").read_text()


def test_the_io_scheduler_change_is_journalled_and_undone_after_kill_9(cli, loop_device, scratch):
    dev = loop_device("64M")
    queue = Path(f"/sys/block/{Path(dev).name}/queue/scheduler")
    if "mq-deadline" not in queue.read_text():
        pytest.skip(f"{dev} offers no mq-deadline scheduler to switch away from")
    queue.write_text("mq-deadline")
    job, _ = _holder("device", dev, "", "none")
    assert "[none]" in _scheduler(dev)
    assert any(e.kind == "scheduler" and e.fields["previous"] == "mq-deadline" for e in Journal().entries())
    job.send_signal(signal.SIGKILL)
    job.communicate()
    out = cli("cleanup")
    assert out.returncode == 0 and f"restored I/O scheduler mq-deadline on {dev}" in out.stdout, out
    assert "[mq-deadline]" in _scheduler(dev)
    job, _ = _holder("device", dev, "", "none")  # and a normal exit restores it too
    assert "[none]" in _scheduler(dev)
    assert "again" in _finish(job)
    assert "[mq-deadline]" in _scheduler(dev)
    assert Journal().entries() == []


def test_a_read_only_loop_device_is_listed_unusable_and_refused_up_front(cli, scratch):
    image = scratch / "ro.img"
    subprocess.run(["truncate", "-s", "32M", str(image)], check=True)
    dev = subprocess.run(["losetup", "-r", "--find", "--show", str(image)], check=True,
                         capture_output=True, text=True).stdout.strip()
    try:
        listing = cli("devices")
        row = next(line for line in listing.stdout.splitlines() if line.split("│")[1:2] and dev in line.split("│")[1])
        assert "read-only" in row and "yes" not in row.split("│")[-2], row
        runs_before = _runs()
        for argv in (["prepare", "--recipe", "ext4-default", "--device", dev],
                     ["probe", "--device", dev, "--files", "10"]):
            _one_line_refusal(cli(*argv), f"refusing to format {dev}: read-only")
        assert _runs() == runs_before
    finally:
        subprocess.run(["losetup", "-d", dev], check=True)


def test_bad_target_and_recipe_input_is_one_line(cli, scratch):
    cases = [
        (["prepare", "--recipe", "ext4-default", "--ram", "--prep", "atime=never"], "--prep atime: 'never' is not one of"),
        (["probe", "--ram", "--prep", "drop_caches=maybe"], "--prep drop_caches: expected true or false"),
        (["prepare", "--ram", "--recipe", str(scratch)], "is a directory, not a recipe file"),
    ]
    for argv, message in cases:
        _one_line_refusal(cli(*argv), message)


def test_entries_journalled_just_before_a_kill_still_undo(scratch):
    """Killed after losetup/mount but before the device or mount id was journalled: cleanup
    finds them by backing inode and by mount source (btrfs's major:minor is not its device's)."""
    from fsscope import recipes
    from fsscope.targets import Target, TargetSpec, cleanup

    target = Target(TargetSpec("ram", size_bytes=256 * 2**20), recipes.load("btrfs-default"))
    try:
        target.open()
        mounted = target.format_and_mount()
        journal = target.journal
        for entry in journal.entries(group=target.group):
            if entry.kind == "mount":
                journal.complete(entry, mount_id=None, majmin=None)
            elif entry.kind == "loop":
                journal.complete(entry, device=None, diskseq=None)
        done = cleanup(journal, force=True)
        assert f"unmounted {mounted.mountpoint}" in done and any(line.startswith("detached") for line in done)
        assert identity.top_mount(mounted.mountpoint) is None and identity.loops_backed_by(target.backing) == []
    finally:
        target.close()


def test_an_undo_that_fails_stays_journalled_and_does_not_stop_the_rest(scratch):
    """A failed step of a cleanup (here: the "image" is a directory, unlink gets EISDIR) keeps
    its entry for `fsscope cleanup` to retry, and the later steps still run."""
    from fsscope.targets.journal import undo_group

    journal = Journal(scratch / "journal")
    not_an_image, mountdir = scratch / "not-an-image", scratch / "mnt"
    not_an_image.mkdir()
    mountdir.mkdir()
    # the entry names this very inode (a directory only another inode would be left alone)
    journal.record("image", "g", path=str(not_an_image), ident=identity.path_id(not_an_image))
    journal.record("mountdir", "g", path=str(mountdir))
    with pytest.raises(OSError):
        undo_group(journal, "g")
    assert not mountdir.exists()
    assert [e.kind for e in journal.entries()] == ["image"]


def test_age_never_replaces_a_foreign_file_with_its_snapshot(cli, scratch, foreign_files):
    text = foreign_files[0]
    before, runs_before = _sha(text), _runs()
    out = cli("age", "--recipe", "ext4-default", "--ram", "--size", "32M", "--snapshot", str(text))
    _one_line_refusal(out, f"refusing to overwrite {text}: not created by fsscope")
    assert _sha(text) == before and _runs() == runs_before


async def test_the_investigator_asks_before_formatting_a_foreign_image(scratch, foreign_files):
    """The TUI's Start on an existing file fsscope did not create opens the type-its-name
    confirmation (as for a device); Escape leaves the file untouched and starts nothing."""
    from pilot_wait import until, until_screen

    from fsscope.targets import TargetSpec
    from fsscope.tui import AppConfig, make_app
    from fsscope.tui.screens.confirm import ConfirmDestroyScreen

    text = foreign_files[0]
    before, runs_before = _sha(text), _runs()
    app = make_app(AppConfig(target=TargetSpec("image", str(text)), jobs=("smoke",)))
    async with app.run_test(size=(140, 45)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+r")
        confirm = await until_screen(pilot, app, ConfirmDestroyScreen, "the type-its-name confirmation")
        assert "not created by fsscope" in confirm.verdict
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmDestroyScreen), "the confirmation to close")
    assert _sha(text) == before and _runs() == runs_before
