"""The job engine: child processes, run records, cancel, SIGKILL and cleanup — on real targets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from pilot_wait import wait_for

from fsscope import recipes, store
from fsscope.engine import runner
from fsscope.engine.events import Log
from fsscope.engine.registry import spec_from_data
from fsscope.targets import TargetSpec
from fsscope.targets.journal import Journal


def _journal_has_mount():
    """A journaled mount that has really happened (the entry is written just before)."""
    return any(e.kind == "mount" and os.path.ismount(e.fields["mountpoint"]) for e in Journal().entries())


def mounted_smoke(recipe: str) -> runner.JobHandle:
    """A 60 s smoke job on a 256 MiB RAM image with ``recipe``, once its file system is mounted."""
    handle = runner.start("smoke", spec_from_data("smoke", {"duration_s": 60}), TargetSpec("ram", size_bytes=256 * 2**20),
                          recipes.load(recipe))
    if not wait_for(_journal_has_mount):
        handle.cancel()  # not left running for the leftover checks to find
        handle.drain()
        raise AssertionError("the smoke job never mounted its file system")
    return handle


def test_directory_target_needs_no_root_and_leaves_nothing(scratch):
    handle = runner.start("smoke", spec_from_data("smoke", {"duration_s": 0.3}), TargetSpec("dir", str(scratch)), None)
    events = list(handle.records())
    assert handle.returncode == 0
    kinds = [e.kind for e in events]
    assert kinds[0] == "phase" and "result" in kinds
    report = handle.run_dir.report()
    assert report["files"] > 0
    assert list(scratch.iterdir()) == []  # the fresh subdirectory is gone
    m = handle.run_dir.manifest()
    assert m["status"] == "ok" and m["job"] == "smoke" and m["environment"]["kernel"]
    assert handle.run_dir.load_array("latency_ns").shape == (report["files"],)
    logged = handle.run_dir.events()
    assert [e["kind"] for e in logged] == [k for k in kinds if k != "samples"]


@pytest.mark.privileged
def test_job_on_a_ram_image_records_commands_and_cleans_up():
    handle = runner.start("smoke", spec_from_data("smoke", {"duration_s": 0.3}), TargetSpec("ram", size_bytes=400 * 2**20),
                          recipes.load("xfs-default"))
    logs = [e.line for e in handle.records() if isinstance(e, Log)]
    assert handle.returncode == 0, (handle.run_dir.path / "child.log").read_text()
    assert any(line.startswith("$ mkfs.xfs") for line in logs)
    assert any(line.startswith("$ mount -t xfs") for line in logs)
    commands = handle.run_dir.manifest()["target"]["commands"]
    assert [c["argv"][0] for c in commands][:3] == ["losetup", "mkfs.xfs", "mount"]
    assert handle.run_dir.manifest()["target"]["direct_io"] is True
    assert Journal().entries() == []


@pytest.mark.privileged
def test_cancel_stops_the_job_keeps_data_and_cleans_up():
    handle = mounted_smoke("ext4-default")
    records = handle.records()
    next(e for e in records if e.kind == "progress")  # files are being written
    t0 = time.monotonic()
    handle.cancel()
    list(records)
    assert time.monotonic() - t0 < 30  # well before the 60 s it would run (a slow CI is slow, not wrong)
    assert handle.run_dir.status() == "cancelled"
    assert handle.run_dir.report()["files"] > 0  # what it measured is kept
    assert Journal().entries() == []


@pytest.mark.privileged
def test_sigkill_of_the_job_child_is_cleaned_up_by_the_parent():
    handle = mounted_smoke("btrfs-default")
    handle.kill()
    handle.drain()
    assert handle.returncode == -signal.SIGKILL
    assert handle.run_dir.status() == "interrupted"
    assert any("unmounted" in line for line in handle.leftovers)
    assert Journal().entries() == []


@pytest.mark.privileged
def test_sigkill_of_everything_then_fsscope_cleanup(cli):
    """The whole fsscope process group dies (nobody cleans up); 'fsscope cleanup' undoes it."""
    proc = subprocess.Popen([sys.executable, "-m", "fsscope", "run", "smoke", "-p", "duration_s=60",
                             "--recipe", "xfs-default", "--ram", "--size", "400M"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait_for(_journal_has_mount)
        entries = Journal().entries()
        mountpoint = next(e.fields["mountpoint"] for e in entries if e.kind == "mount")
        image = next(e.fields["image"] for e in entries if e.kind == "loop")
        run = store.list_runs()[-1]
        # The job child has its own session and cleans up when it sees its parent die: stop it
        # first, so that everything dies at once, as in a crash of the machine's fsscope.
        os.kill(run.manifest()["pid"], signal.SIGSTOP)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the CLI parent
        proc.wait()
    os.kill(run.manifest()["pid"], signal.SIGKILL)
    assert wait_for(lambda: run.status() == "interrupted")
    assert os.path.ismount(mountpoint)  # really left behind
    out = cli("cleanup")
    assert out.returncode == 0, out.stderr
    assert f"unmounted {mountpoint}" in out.stdout and "detached" in out.stdout
    assert not os.path.ismount(mountpoint) and not os.path.exists(image)
    assert Journal().entries() == []
    out = cli("report", run.id)
    assert out.returncode == 0 and "interrupted" in out.stdout


def test_runs_and_report_commands(cli, scratch):
    out = cli("run", "smoke", "-p", "duration_s=0.2", "--dir", str(scratch), "--json", str(scratch / "r.json"))
    assert out.returncode == 0, out.stderr
    assert '"files"' in (scratch / "r.json").read_text()
    listing = cli("runs")
    assert listing.returncode == 0 and "smoke" in listing.stdout
    latest = cli("report", "latest")
    assert latest.returncode == 0 and "files_per_s" in latest.stdout
    missing = cli("report", "no-such-run")
    assert missing.returncode == 2 and "no run 'no-such-run'" in missing.stderr


def test_runs_list_in_the_order_they_were_made_even_within_one_second(scratch):
    """'latest' and `fsscope runs` follow creation order: a sort by name put a smoke run made
    after a probe run of the same second first, and "-10" before "-2"."""
    root = scratch / "runs"
    made = []
    for job in ["smoke", "probe", "age", "smoke", "bench", "probe"] * 3:  # well within a second
        run = store.RunDir.create(job, root)
        (run.path / "manifest.json").write_text("{}")
        made.append(run.id)
    assert len(set(made)) == len(made)
    assert [run.id for run in store.list_runs(root)] == made
    assert store.find_run("latest", root).id == made[-1]


def test_sigint_to_the_headless_cli_cancels_cleanly(scratch):
    proc = subprocess.Popen([sys.executable, "-m", "fsscope", "run", "smoke", "-p", "duration_s=60", "--dir", str(scratch)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: any(d.is_dir() and any(d.iterdir()) for d in scratch.iterdir()))  # files written
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "cancelled" in err
    assert list(scratch.iterdir()) == []


STARTER = """
import sys, threading
from fsscope.engine import runner
from fsscope.engine.registry import spec_from_data
from fsscope.targets import TargetSpec
handles = []
# started from a thread that ends at once (as a TUI worker may): PR_SET_PDEATHSIG would kill the
# job right here; the job must live as long as this PROCESS does, and stop when it dies
starter = threading.Thread(target=lambda: handles.append(
    runner.start("smoke", spec_from_data("smoke", {"seconds": 120}), TargetSpec("dir", sys.argv[1]), None)))
starter.start()
starter.join()
print(handles[0].run_dir.path, flush=True)
for event in handles[0].records():
    print(event.kind, flush=True)
"""


def test_the_job_outlives_the_thread_that_started_it_but_not_the_process(scratch):
    proc = subprocess.Popen([sys.executable, "-c", STARTER, str(scratch)], stdout=subprocess.PIPE, text=True)
    try:
        run = store.RunDir(Path(proc.stdout.readline().strip()))
        while proc.stdout.readline().strip() != "progress":  # the job works after its starter thread ended
            pass
        child = psutil.Process(run.manifest()["pid"])
        proc.kill()
        proc.wait()
        t0 = time.monotonic()
        child.wait(timeout=15)  # it saw its event pipe lose its reader: cancelled, cleaned up
        assert time.monotonic() - t0 < 10
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
    assert run.status() == "interrupted" and "started it died" in run.manifest()["error"]
    assert run.report()["files"] > 0  # what it measured is kept
    assert list(scratch.iterdir()) == []


CLEANUP_TOOL = """
import os, signal, threading
import psutil
from fsscope import errors, tools

signal.signal(signal.SIGTERM, lambda *_: None)  # a handler, not SIG_IGN: exec resets it for the tool

def tool_has_execd(me) -> bool:  # exec'd, not just forked (a forked Python would swallow it)
    for child in me.children():
        try:
            if child.name() == "sleep":
                return True
        except psutil.NoSuchProcess:
            pass
    return False

def cancel_once_the_tool_runs():  # what a cancel does: SIGTERM to the job's process group
    me = psutil.Process()
    while not tool_has_execd(me):
        pass
    os.killpg(os.getpgrp(), signal.SIGTERM)
    print("sent", flush=True)

for own_group in (False, True):
    cancel = threading.Thread(target=cancel_once_the_tool_runs, daemon=True)
    cancel.start()
    try:
        tools.run("sleep", "3", own_group=own_group)   # ample time for the cancel to land
        outcome = "finished"
    except errors.ToolError as exc:
        outcome = f"killed ({exc.rc})"
    cancel.join()
    print(outcome, flush=True)
"""


def test_a_cancel_does_not_reach_the_tools_of_a_cleanup():
    """The undo's tools run with own_group: a cancel's SIGTERM to the job's process group does
    not kill the tool undoing the target (a sleep stands in for umount or losetup -d)."""
    proc = subprocess.run([sys.executable, "-c", CLEANUP_TOOL], capture_output=True, text=True,
                          timeout=60, start_new_session=True)
    assert proc.returncode == 0, proc.stderr
    # without own_group the cancel kills the tool; with it the tool, signalled too, finishes
    assert proc.stdout.splitlines() == ["sent", "killed (-15)", "sent", "finished"]


INTERRUPTED_TOOL = """
import os, signal, threading
import psutil
from fsscope import tools

me = psutil.Process()

def interrupt_once_we_wait():  # the watcher's second SIGTERM, or a Ctrl-C, while we wait for it
    main_thread = f"/proc/self/task/{os.getpid()}/wchan"
    while not (any(child.name() == "sleep" for child in me.children())
               and open(main_thread).read() == "do_wait"):
        pass
    os.kill(os.getpid(), signal.SIGINT)

threading.Thread(target=interrupt_once_we_wait).start()
try:
    tools.run("sleep", "30")
except KeyboardInterrupt:
    print("interrupted; tools left:", len(me.children()), flush=True)
"""


def test_a_tool_interrupted_while_we_wait_is_killed_and_reaped():
    """Not left running, unwaited, into the cleanup that follows (an umount still flushing
    would race the cleanup's own)."""
    proc = subprocess.run([sys.executable, "-c", INTERRUPTED_TOOL], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "interrupted; tools left: 0", proc.stderr


def test_a_tool_past_its_timeout_fails_as_killed_and_leaves_no_process():
    from fsscope import errors, tools

    started = time.monotonic()
    with pytest.raises(errors.ToolError) as failure:
        tools.run("sleep", "30", timeout_s=0.3)
    assert failure.value.rc == -9 and "timed out after 0.3 s" in str(failure.value)
    assert time.monotonic() - started < 25                 # killed, not waited out
    assert not [p for p in psutil.Process().children() if p.name() == "sleep"]


def test_tools_run_untranslated_whatever_the_users_locale(monkeypatch):
    """dumpe2fs' "Block size:" and the other parsed outputs are English only in the C locale."""
    from fsscope import tools

    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    assert tools.run("sh", "-c", 'echo "$LC_ALL"').strip() == "C"
    assert tools.run("sh", "-c", 'echo "$FSSCOPE_HOME"').strip() == os.environ["FSSCOPE_HOME"]  # the rest is kept


@pytest.mark.privileged
def test_a_scan_of_an_image_target_names_the_target_in_words():
    """scan reads a tree that exists; on a RAM image it fails in one line naming the target as
    the live screen does, not by its kind ("not a image", "not a ram": the walk, issue 33 item 10)."""
    from fsscope.engine.events import Error

    handle = runner.start("scan", spec_from_data("scan", {}), TargetSpec("ram", size_bytes=64 * 2**20),
                          recipes.load("ext4-default"))
    errors = [e.message for e in handle.records() if isinstance(e, Error)]
    assert handle.returncode != 0 and errors, (handle.run_dir.path / "child.log").read_text()[-2000:]
    assert "not RAM image (64 MiB in " in errors[-1] and "which fsscope would format" in errors[-1], errors
    assert Journal().entries() == []
