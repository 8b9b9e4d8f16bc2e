"""fsscope watch on real file systems made by hand (loop images, real mkfs and mount, real
tracefs): a maildir-like writer delivering into one directory, watched as a command and by
pid; the directories' format changes at the calls where the kernel's own tracepoints mark
them, with the arithmetic; the tracefs instances gone afterwards; lost events counted. And the
detectors on simulated worlds with and without the effect."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fsscope.engine import events as ev
from fsscope.engine import registry, runner
from fsscope.targets import TargetSpec
from fsscope.trace.tracefs import fsscope_instances

WRITER = Path(__file__).with_name("maildir_writer.py")
pytestmark = pytest.mark.privileged


def watch_command(cli, mnt: Path, messages: int, *extra: str) -> dict:
    out = mnt.parent / f"watch-{mnt.name}.json"
    proc = cli("watch", "--json", str(out), *extra, "--", sys.executable, str(WRITER), str(mnt / "mail"),
               str(messages), cwd=mnt)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert not fsscope_instances(), "the watch left a tracefs instance"
    return json.loads(out.read_text())


def changes_in(report: dict, directory: Path) -> list[dict]:
    return [c for c in report["format_changes"] if c["dir"] == str(directory)]


def test_watch_command_marks_xfs_directory_format_changes_with_the_arithmetic(cli, made_fs):
    mnt = made_fs("xfs")
    report = watch_command(cli, mnt, 600)
    assert report["exit_status"] == 0 and report["fs"] == "xfs"
    ops = {o["op"]: o for o in report["ops"]}
    assert ops["rename"]["calls"] == 600 and ops["rename"]["unnamed"] == 0
    new = changes_in(report, mnt / "mail" / "new")
    events = [c["event"] for c in new]
    # short form -> block -> leaf -> node, each once, in that order, every one where the kernel marked it
    conversions = [e for e in events if e != "xfs_dir2_grow_inode"]
    assert conversions == ["xfs_dir2_sf_to_block", "xfs_dir2_block_to_leaf", "xfs_dir2_leaf_to_node"], events
    for change in new:
        assert change["op"] == "rename" and change["name_bytes"] == 29
        assert change["matches"] is True, change  # the kernel's index is the arithmetic's
        assert change["entries_before"] == change["predicted"]
        assert f"{change['predicted']}" in change["arithmetic"]  # the arithmetic arrives at it
    grows = [c["entries_before"] for c in new if c["event"] == "xfs_dir2_grow_inode"]
    assert len(grows) >= 4 and len(set(np.diff(grows[:4]).tolist())) == 1  # one data block per 84 names
    assert report["lost_total"] == 0 and {x["instance"] for x in report["lost"]} == {"tasks", "device"}
    # the written files are named through their descriptors (opened in tmp/, renamed into new/)
    assert ops["write"]["unnamed"] == 0 and ops["write"]["bytes"] == 600 * 547  # the message: 35 B of headers + 512


def test_watch_command_marks_ext4_directory_growth_with_the_arithmetic(cli, made_fs):
    mnt = made_fs("ext4")
    report = watch_command(cli, mnt, 300, "--slow-factor", "3")
    new = changes_in(report, mnt / "mail" / "new")
    first = next(c for c in new if c["op"] == "rename")
    # block 0 of an ext4 directory holds (4096 - 12 - 24) // 40 = 101 names of 29 bytes
    assert first["event"] == "ext4_allocate_blocks" and first["entries_before"] == 101, new
    assert first["matches"] is True and "101 files fit" in first["arithmetic"]
    # the next block comes with a leaf split whose place depends on the names' hashes: a range
    later = [c for c in new if c["op"] == "rename" and c is not first]
    assert later and all(c["matches"] in (True, None) for c in later if c["entries_before"] <= 204)
    assert not fsscope_instances()


def test_watch_pid_of_a_running_process_until_it_exits(made_fs):
    mnt = made_fs("xfs")
    writer = subprocess.Popen([sys.executable, str(WRITER), str(mnt / "mail"), "200", "--wait", "--fsync"],
                              stdin=subprocess.PIPE, cwd=mnt)
    try:
        spec = registry.spec_from_data("watch", {"pid": writer.pid, "duration_s": 120})
        handle = runner.start("watch", spec, TargetSpec("dir", str(mnt.parent)), None)
        report, findings = None, []
        for event in handle.records():
            if isinstance(event, ev.Phase) and event.name == "watching":
                writer.stdin.write(b"go\n")  # tracing is on: deliver
                writer.stdin.close()
            elif isinstance(event, ev.Finding):
                findings.append(event)
            elif isinstance(event, ev.Result):
                report = event.report
        assert writer.wait(60) == 0
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert report is not None, (handle.run_dir.path / "child.log").read_text()[-2000:]
    assert handle.run_dir.status() == "ok"
    assert report.watched.startswith(f"pid {writer.pid}") and report.exit_status is None
    ops = {o.op: o for o in report.ops}
    assert ops["rename"].calls == 200 and ops["fsync"].calls == 200 and ops["fsync"].unnamed == 0
    assert [c.event for c in report.format_changes if c.event != "xfs_dir2_grow_inode"] == \
        ["xfs_dir2_sf_to_block", "xfs_dir2_block_to_leaf"]
    assert {f.flag for f in findings} >= {"format-change"}
    for s in report.slow:  # every slow call says why, or that nothing traced explains it
        assert s.causes and all(c.text for c in s.causes)
    assert not fsscope_instances()


def test_watch_counts_what_a_small_ring_buffer_lost(cli, made_fs):
    mnt = made_fs("ext4")
    report = watch_command(cli, mnt, 1500, "--buffer-kb", "4")
    assert report["lost_total"] > 0
    assert report["lost_total"] == sum(x["overrun"] + x["dropped"] for x in report["lost"])
    assert any("lost" in note for note in report["notes"])


def test_watch_without_root_is_one_line_and_exit_2(local_user):
    from test_threat_inputs import as_user_fsscope, one_line_refusal

    one_line_refusal(as_user_fsscope(local_user, "watch", "--pid", "1"), "fsscope watch needs root")


def test_watch_needs_one_thing_to_watch_and_that_it_exists(cli):
    for argv, says in ((["--for", "1s"], "exactly one of --pid PID, --cgroup PATH or -- COMMAND"),
                       (["--pid", "4194304"], "--pid 4194304: no such process"),
                       (["--cgroup", "no/such/group"], "--cgroup no/such/group: not a cgroup"),
                       (["--", "no-such-command-here"], "no-such-command-here: no such command")):
        proc = cli("watch", *argv)
        assert proc.returncode == 2 and says in proc.stderr, (argv, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "run " not in proc.stderr  # no run record


# ---------------------------------------------------------------- detectors on simulated worlds

def test_slow_judge_and_stride_in_a_world_without_the_effect_and_with_it():
    from fsscope.watch import calls as calls_mod
    from fsscope.watch import repeats, slow

    rng = np.random.default_rng(7)
    n = 4096
    calls = np.zeros(n, calls_mod.CALL_DTYPE)
    calls["op"] = 0
    group = np.ones(n, np.int64)
    found = []
    for seed in range(20):  # without: lognormal noise only -- no stride is found
        calls["duration_ns"] = (np.random.default_rng(seed).lognormal(np.log(20_000), 0.3, n)).astype(np.int64)
        judged = slow.judge(calls, group, factor=4.0, floor_ns=100_000)
        found.append(repeats.stride(np.flatnonzero(judged.slow)))
    assert found == [None] * 20
    base = rng.lognormal(np.log(20_000), 0.3, n)
    base[63::64] += 400_000  # with: every 64th call pays a new inode chunk
    calls["duration_ns"] = base.astype(np.int64)
    judged = slow.judge(calls, group, factor=4.0, floor_ns=100_000)
    assert repeats.stride(np.flatnonzero(judged.slow)) == (64, n // 64 - 1)


def test_format_change_arithmetic_says_when_the_kernel_disagrees():
    from fsscope.explain.geometry import Geometry
    from fsscope.watch.repeats import predicted

    g = Geometry(fs="ext4", mountpoint="/", block_size_bytes=4096, features=frozenset({"dir_index", "metadata_csum"}))
    at, text, ok = predicted(g, "ext4_allocate_blocks", 29, 101)
    assert (at, ok) == (101, True) and "101 files fit" in text
    at, _, ok = predicted(g, "ext4_allocate_blocks", 29, 90)  # a change where the rules put none
    assert (at, ok) == (101, False)
    assert predicted(None, "ext4_allocate_blocks", 29, 101)[2] is None  # no geometry: no verdict


def start_held_writer(mnt: Path, messages: int, *extra: str) -> subprocess.Popen:
    """The writer, waiting for a line on stdin before it delivers (the watch attaches first)."""
    return subprocess.Popen([sys.executable, str(WRITER), str(mnt / "mail"), str(messages), "--wait", *extra],
                            stdin=subprocess.PIPE, cwd=mnt)


def until_watching(handle) -> None:
    for event in handle.records():
        if isinstance(event, ev.Phase) and event.name == "watching":
            return
    raise AssertionError((handle.run_dir.path / "child.log").read_text()[-2000:])


def test_a_killed_watch_leaves_no_tracefs_instance(made_fs):
    mnt = made_fs("ext4")
    writer = start_held_writer(mnt, 10)
    try:
        spec = registry.spec_from_data("watch", {"pid": writer.pid, "duration_s": 300})
        handle = runner.start("watch", spec, TargetSpec("dir", str(mnt.parent)), None)
        until_watching(handle)
        assert len(fsscope_instances()) == 2  # the tasks' and the device's
        handle.kill("killed by the test")
        handle.wait()
        assert not fsscope_instances(), handle.leftovers
        assert any("tracefs" in line for line in handle.leftovers), handle.leftovers
    finally:
        writer.kill()
        writer.wait()


def test_watch_a_cgroup_until_it_is_empty(made_fs):
    from fsscope import proctree

    mnt = made_fs("xfs")
    parent = proctree.job_cgroup_parent()
    if parent is None:
        pytest.fail("no cgroup v2 directory to make a test cgroup in")
    group = parent / f"fsscope-{os.getpid()}-watchtest"
    group.mkdir()
    writer = start_held_writer(mnt, 100)
    try:
        (group / "cgroup.procs").write_text(str(writer.pid))
        spec = registry.spec_from_data("watch", {"cgroup": str(group), "duration_s": 120})
        handle = runner.start("watch", spec, TargetSpec("dir", str(mnt.parent)), None)
        until_watching(handle)
        writer.stdin.write(b"go\n")
        writer.stdin.close()
        assert writer.wait(60) == 0
        handle.drain()
        report = registry.report_from_data("watch", handle.run_dir.report())
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        group.rmdir()
    assert handle.run_dir.status() == "ok" and report.watched == f"cgroup {group}"
    assert {o.op: o.calls for o in report.ops}["rename"] == 100
    assert not fsscope_instances()


def test_a_command_the_watch_never_released_never_runs(tmp_path):
    """A watch that fails before tracing is on stops its held command: it must exit without
    exec'ing (125), not be let go and then killed -- that ran the command unwatched."""
    from fsscope.watch.tasks import HeldCommand

    ran = tmp_path / "ran"
    held = HeldCommand(["/bin/sh", "-c", f"touch {ran}; sleep 5"])
    assert held.stop() == 125
    assert not ran.exists()


def test_a_users_process_named_like_a_kernel_thread_is_not_the_kernels(local_user):
    """Which I/O beside a slow call is 'the kernel's own writers' is decided by the kernel's
    PF_KTHREAD flag, not the command name a user chose: a user's process calling itself
    'jbd2/loop0-8' was listed as the journal, hiding it among the kernel's writers."""
    import time

    from local_user import USER_PYTHON

    from fsscope.watch import causes
    from fsscope.watch.job import kernel_threads

    fake = subprocess.Popen([USER_PYTHON, "-I", "-c", "open('/proc/self/comm', 'w').write('jbd2/loop0-8'); "
                             "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, user=local_user.uid,
                            group=local_user.gid, extra_groups=[], env={"PATH": "/usr/bin:/bin"})
    try:
        deadline = time.monotonic() + 30
        while Path(f"/proc/{fake.pid}/comm").read_text().strip() != "jbd2/loop0-8":
            assert time.monotonic() < deadline and fake.poll() is None, "the user's process did not rename itself"
            time.sleep(0.01)
        w = causes.Window()
        w.others[(fake.pid, "jbd2/loop0-8")] = [3, 12288]
        w.others[(2, "kthreadd")] = [1, 4096]  # pid 2: a kernel thread by its flag
        kernel = kernel_threads(set(w.others))
        assert kernel == {2}
        kinds = {c.kind: c.text for c in causes.explain(w, 1_000_000, kernel_pids=kernel)}
        assert f"pid {fake.pid} (jbd2/loop0-8)" in kinds["other-io"] and "jbd2" not in kinds["kernel-io"]
        assert "kthreadd (pid 2)" in kinds["kernel-io"]
    finally:
        fake.kill()
        fake.wait()


def test_a_tree_named_through_a_users_link_is_not_walked(local_user, scratch, cli):
    """``--tree ~/tree`` where ~/tree is the user's link to a root-only directory: root's watch
    walked root's own tree (names and sizes into the report and the op log) as 'the user's'.
    One line, exit 2, no run; root's own link to the user's directory is still followed."""
    import shutil
    import tempfile

    private = Path(tempfile.mkdtemp(prefix="fsscope-private-", dir="/var/tmp"))
    try:
        private.chmod(0o700)
        (private / "root-secret-dir").mkdir()
        local_user.python(f"import os; os.symlink({str(private)!r}, 'tree'); os.mkdir('real')")
        tree = local_user.home / "tree"
        out = cli("watch", "--tree", str(tree), "--for", "1s", "--pid", str(os.getpid()))
        assert out.returncode == 2, out.stdout + out.stderr
        (line,) = out.stderr.strip().splitlines()
        assert f"{tree} is a symbolic link of uid {local_user.uid}'s" in line and "secret" not in out.stdout + line
        assert "run " not in out.stdout
    finally:
        shutil.rmtree(private, ignore_errors=True)
    from fsscope import trust

    (scratch / "roots-link").symlink_to(local_user.home / "real")
    assert trust.real_tree(scratch / "roots-link", "watch --tree") == str(local_user.home / "real")


def group_gone(pgid: int, timeout_s: float = 30.0) -> None:
    """Until no process of group ``pgid`` is left (a killed dd may still be finishing its I/O)."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process group {pgid} did not end")


def test_slow_sqlite_commits_name_the_journal_commit_and_the_other_writer(cli, made_fs):
    """SQLite in WAL mode with synchronous=FULL (an fdatasync per commit) beside a second
    writer's synchronous direct writes on the same device: the slow commits say they waited
    for a jbd2 commit and name the other writer by pid and command."""
    import signal

    mnt = made_fs("ext4")
    out = mnt.parent / "sqlite.json"
    # A commit is slow against its neighbours only when dd's writes land beside some commits
    # and not others; when every commit waited alike (or none did) no commit stands out, and
    # the world did not produce the effect this test explains: up to two more tries then.
    for _attempt in range(3):
        other = subprocess.Popen(["bash", "-c", f"while :; do dd if=/dev/zero of={mnt / 'big'} bs=256K count=200 "
                                                f"oflag=direct,dsync status=none; done"], start_new_session=True)
        try:
            for stale in mnt.glob("db*"):
                stale.unlink()
            proc = cli("watch", "--json", str(out), "--", sys.executable, str(WRITER.with_name("sqlite_writer.py")),
                       str(mnt / "db"), "300", cwd=mnt)
            assert proc.returncode == 0, proc.stderr[-3000:]
        finally:
            os.killpg(other.pid, signal.SIGKILL)
            other.wait()
            group_gone(other.pid)  # its dd too: the file system is unmounted after the test
        report = json.loads(out.read_text())
        # every commit's fdatasync was seen (300 commits, plus the setup's)
        fdatasync = [o for o in report["ops"] if o["op"] == "fdatasync"]
        assert fdatasync and fdatasync[0]["calls"] >= 300, report["ops"]
        syncs = [s for s in report["slow"] if s["op"] == "fdatasync"]
        if syncs:
            break
    else:  # a quiet machine where dd delayed every commit alike: nothing stood out to explain
        pytest.xfail("no commit stood out against its neighbours in three tries: the contention "
                     "this test explains did not happen (every fdatasync was recorded)")
    files = (str(mnt / "db-wal"), str(mnt / "db"), str(mnt / "db-journal"), str(mnt))  # + a directory's fsync
    assert syncs and all(s["file"] in files for s in syncs), [(s["file"], s["start_s"]) for s in syncs]
    commits = [s for s in syncs if s["file"] == str(mnt / "db-wal")]  # named, though deleted at close
    kinds = [{c["kind"] for c in s["causes"]} for s in commits]
    assert any("journal" in k for k in kinds), kinds
    named_dd = [c["text"] for s in commits for c in s["causes"] if c["kind"] == "other-io" and "(dd)" in c["text"]]
    assert named_dd and all("pid " in text for text in named_dd), [s["causes"] for s in commits]
    assert not fsscope_instances()
