"""``fsscope check`` against real state made on purpose: a writer on the same loop device, a
fresh ext4 whose lazy init is running, a scheduler set through sysfs, a loop device without
direct I/O, a dataset smaller/larger than RAM; and the command end to end with its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pilot_wait import wait_for
from short_writers import short_lived_writers

from fsscope.check import system as S
from fsscope.check import target as T
from fsscope.check.system import Root

ISSUE_IDS = {"cpu-governor", "turbo", "load", "other-io", "ext4-lazy-init", "io-scheduler", "read-ahead",
             "write-cache", "rotational", "discard", "atime", "dirty-settings", "dirty-pending", "swap", "thp",
             "page-cache-fit", "fullness", "free-space-fragmentation", "loop-direct-io", "cgroup-io-limit",
             "periodic-jobs", "thermal"}


@pytest.fixture
def mounted_loop(loop_device, scratch):
    """Factory: mkfs.ext4 (no lazy init unless asked) on a test-made loop device, mounted under
    scratch; the loop_device fixture unmounts and detaches it afterwards."""
    def make(size: str = "256M", mkfs: tuple[str, ...] = ("-E", "lazy_itable_init=0,lazy_journal_init=0"),
             mount_opts: str = "") -> tuple[str, Path]:
        dev = loop_device(size)
        subprocess.run(["mkfs.ext4", "-q", *mkfs, dev], check=True)
        mnt = scratch / f"m{Path(dev).name}"
        mnt.mkdir()
        subprocess.run(["mount", *(["-o", mount_opts] if mount_opts else []), dev, str(mnt)], check=True)
        return dev, mnt
    return make


WRITER = """
import os, sys
path = sys.argv[1]
buf = os.urandom(1 << 20)
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
while True:
    for _ in range(8):
        os.write(fd, buf)
    os.fsync(fd)
    os.lseek(fd, 0, 0)
"""


def measure_other_io(pid: int, mnt: Path):
    """(the target at ``mnt``, its other-I/O finding) once the writer ``pid`` has written."""
    wait_for(lambda: S.try_read(Root(), f"proc/{pid}/io") and
             T.proc_io(Root()).get(pid, ("", 0, 0))[2] > 0, what="the writer's first bytes")
    t = T.locate(str(mnt))
    before = T.snapshot(Root(), t.disks)
    written = T.proc_io(Root()).get(pid, ("", 0, 0))[2]
    time.sleep(1.5)  # the measurement interval itself (at least)
    # the writer can spend all of it in one fsync of the image's backing file on the shared disk
    # (no bytes written, so none to name it by): the interval ends once it has written again
    wait_for(lambda: T.proc_io(Root()).get(pid, ("", 0, 0))[2] > written, what="the writer's next bytes")
    after = T.snapshot(Root(), t.disks)
    return t, T.other_io(Root(), t, before, after)


@pytest.mark.privileged
def test_other_io_names_the_writer_on_the_same_loop_device_and_buffered_loop_warns(mounted_loop):
    dev, mnt = mounted_loop()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(mnt / "busy.dat")])
    try:
        t, f = measure_other_io(writer.pid, mnt)
        assert t.block == Path(dev).name and t.fs == "ext4"
        assert t.loop_backing and t.backing_disk in t.disks   # the image's own disk is watched too
    finally:
        writer.kill()
        writer.wait()
    assert f.severity in ("warn", "bad"), f
    assert f"pid {writer.pid} (python" in f.title
    mine = [p for p in f.values["processes"] if p["pid"] == writer.pid]
    assert mine and mine[0]["on_target"] and mine[0]["bytes_per_s"] > 0
    assert f.values["processes"][0]["pid"] == writer.pid   # users of the target itself come first
    assert f"/proc/diskstats {Path(dev).name}" in f.evidence
    assert not f.values["kernel_only"]
    # the fixture attaches without --direct-io: double caching
    dio = T.loop_direct_io(Root(), t)
    assert dio.severity == "warn" and f"/sys/block/{t.block}/loop/dio = 0" in dio.evidence


@pytest.mark.privileged
def test_scheduler_set_through_sysfs_is_read_back(mounted_loop):
    dev, mnt = mounted_loop()
    t = T.locate(str(mnt))
    sched = Path(f"/sys/block/{t.disk}/queue/scheduler")
    available = sched.read_text().replace("[", "").replace("]", "").split()
    for name in [n for n in ("mq-deadline", "bfq", "none") if n in available]:
        sched.write_text(name)
        f = T.io_scheduler(Root(), t)
        assert f"[{name}]" in f.evidence and f.values["scheduler"] == name
        assert f.severity == ("warn" if name == "bfq" else "ok")


@pytest.mark.privileged
def test_ext4_lazy_init_warns_while_the_thread_runs(loop_device, scratch):
    # a RAM-backed sparse image big enough, with a slow zeroing pace (init_itable=200 waits 200x
    # the time one group took before the next), so ext4lazyinit is still busy when we look
    image = Path(os.environ["FSSCOPE_RAM_DIR"]) / "lazy.img"
    subprocess.run(["truncate", "-s", "8G", str(image)], check=True)
    dev = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", str(image)], check=True,
                         capture_output=True, text=True).stdout.strip()
    mnt = scratch / "lazy"
    mnt.mkdir()
    try:
        subprocess.run(["mkfs.ext4", "-q", dev], check=True)  # the default: lazy_itable_init
        subprocess.run(["mount", "-o", "init_itable=200", dev, str(mnt)], check=True)
        t = T.locate(str(mnt))
        wait_for(lambda: T.lazyinit_threads(Root()), what="an ext4lazyinit thread")
        dump = subprocess.run(["dumpe2fs", dev], capture_output=True, text=True, check=True).stdout
        f = T.ext4_lazy_init(Root(), t, dump)
        assert f.severity == "bad", f
        assert f.values["groups_not_zeroed"] > 0 and f.values["thread_pids"]
        assert "ext4lazyinit thread running" in f.evidence and "without ITABLE_ZEROED" in f.evidence
        assert "lazy_itable_init=0" in f.fix
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
        subprocess.run(["losetup", "-d", dev], check=False)
        image.unlink(missing_ok=True)


def _json_check(report: dict) -> None:
    """The keys the issue fixes, exactly as named."""
    assert report["verdict"] in ("fit", "caution", "unfit")
    ids = set()
    for f in report["findings"]:
        assert {"id", "severity", "title", "evidence", "effect", "fix"} <= set(f)
        assert f["severity"] in ("ok", "warn", "bad", "unknown") and f["evidence"]
        ids.add(f["id"])
    assert ids >= ISSUE_IDS, ISSUE_IDS - ids


def test_dataset_larger_than_ram_is_ok_and_partly_cached_warns():
    # smaller than RAM: the --dir end-to-end test passes --dataset 1M through the command
    ram = S.meminfo(Root())["MemTotal"]
    large = S.page_cache_fit(Root(), 4 * ram)
    assert large.severity == "ok" and "MemTotal" in large.evidence and "--dataset" in large.evidence
    assert S.page_cache_fit(Root(), int(1.5 * ram)).severity == "warn"


def _e2e(cli, tmp: Path, *args: str) -> tuple[dict, subprocess.CompletedProcess, float]:
    path = tmp / "check.json"
    t0 = time.monotonic()
    run = cli("check", *args, "--budget", "40", "--sample", "1", "--json", str(path), timeout_s=240)
    wall = time.monotonic() - t0
    report = json.loads(path.read_text())
    return report, run, wall


def _assert_e2e(report: dict, run: subprocess.CompletedProcess) -> None:
    _json_check(report)
    assert run.returncode == {"fit": 0, "caution": 1, "unfit": 2}[report["verdict"]], run.stderr
    cal = report["calibration"]
    for key in ("personality", "runs", "cv", "precision", "confidence", "runs_needed", "duration_s_needed",
                "window_s_needed", "criterion"):
        assert key in cal
    assert cal["personality"] == "fileserver" and cal["precision"] == 0.05 and cal["confidence"] == 0.95
    assert len(cal["runs"]) >= 2 and all(r["ops_per_s"] > 0 for r in cal["runs"])
    assert isinstance(cal["runs_needed"], int) and cal["runs_needed"] >= 2
    assert "Student-t" in cal["runs_needed_method"] and "last 5 samples" in cal["criterion"]
    assert report["headline"] in run.stdout.replace("\n", " ") or report["verdict"] in run.stdout


@pytest.mark.privileged
def test_check_dir_mountpoint_end_to_end(cli, mounted_loop, tmp_path):
    dev, mnt = mounted_loop("512M")
    report, run, wall = _e2e(cli, tmp_path, "--dir", str(mnt), "--dataset", "1M")
    _assert_e2e(report, run)
    cache = next(f for f in report["findings"] if f["id"] == "page-cache-fit")
    assert cache["severity"] == "bad" and "fits in" in cache["title"]   # a dataset smaller than RAM
    assert run.returncode != 0 and "page-cache-fit" in run.stdout
    assert report["checked"]["mountpoint"] == str(mnt) and report["checked"]["source"] == dev
    assert [p.name for p in mnt.iterdir() if p.name.startswith("fsscope-")] == []  # scratch dirs removed
    assert wall < 90, wall


@pytest.mark.privileged
def test_check_ram_recipe_end_to_end(cli, tmp_path):
    report, run, wall = _e2e(cli, tmp_path, "--ram", "--size", "512M", "--recipe", "ext4-default")
    _assert_e2e(report, run)
    assert report["recipe"] == "ext4-default" and report["checked"]["fs"] == "ext4"
    dio = next(f for f in report["findings"] if f["id"] == "loop-direct-io")
    assert dio["severity"] == "ok"  # fsscope attaches its images with direct I/O
    assert wall < 90, wall


@pytest.mark.parametrize("argv", [["check"], ["check", "--dir", "/nonexistent-fsscope"],
                                  ["check", "--dir", "/tmp", "--precision", "0"], ["check", "--dir", "/tmp", "--runs", "1"],
                                  ["check", "--dir", "/tmp", "--quick", "--budget", "30"]])
def test_bad_target_or_option_is_one_line_exit_2(argv, capsys):
    from fsscope.cli import main

    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own errors
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1, err


def test_bench_points_to_check_on_a_busy_machine(cli, scratch):
    # three spinning processes on this machine make "load" bad (runnable tasks count at once);
    # the bench then fails on its target, after the pointer line — nothing is formatted
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range((os.cpu_count() or 1) + 1)]
    try:
        wait_for(lambda: S.load(Root()).severity == "bad", what="a bad load reading")
        run = cli("bench", "--dir", str(scratch / "missing"), "--runs", "1", "--duration", "1")
    finally:
        for p in spin:
            p.kill()
            p.wait()
    assert "run 'fsscope check' first" in run.stderr and "load" in run.stderr


@pytest.mark.privileged
def test_other_io_names_short_lived_writers_from_the_block_layer(mounted_loop):
    """Processes born and gone between the check's two /proc passes are named from the block
    layer's record of who submitted I/O to the device (block_bio_queue), rate capped at the
    device's; the null world (the same check, no writer) names nobody."""
    from fsscope.check.audit import run_audit
    from fsscope.trace.tracefs import unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(f"tracefs: {unavailable_reason()}")
    dev, mnt = mounted_loop(mkfs=("-E", "lazy_itable_init=0,lazy_journal_init=0"))
    t = T.locate(str(mnt))
    (quiet,) = [f for f in run_audit(t, sample_s=1.0) if f.id == "other-io"]
    assert not [p for p in quiet.values.get("processes", []) if p.get("exited")], quiet
    with short_lived_writers(mnt / "short.dat") as writer:
        (f,) = [f for f in run_audit(t, sample_s=1.5) if f.id == "other-io"]
    (row,) = [p for p in f.values["processes"] if p["name"] == "short-writer"]
    assert row["exited"] and row["tasks"] > 3 and row["on_target"]
    assert 0 < row["bytes_per_s"] <= f.values["disks"][Path(dev).name]["bytes_per_s"]
    assert f.severity in ("warn", "bad") and "(short-writer)" in f.title and not f.values["kernel_only"]
    assert "seen by block_bio_queue" in f.evidence
    # the parent submitted nothing to the target (its /proc/PID/io holds its reaped children's bytes)
    assert not [p for p in f.values["processes"] if p["pid"] == writer.pid and p["on_target"]]
