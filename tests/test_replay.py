"""watch --capture and fsscope replay, for real: a maildir-like delivery watched on an XFS loop
image made by hand, its op log replayed on ext4-default and xfs-default RAM targets (real
mkfs, mounts, syscalls), the recipes compared per call type; an anonymized log keeps name
lengths and directory sizes; a truncated or corrupted log is one line and exit 2."""

from __future__ import annotations

import gzip
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from fsscope import oplog
from fsscope.trace.tracefs import fsscope_instances

WRITER = Path(__file__).with_name("maildir_writer.py")
MESSAGES = 120


@pytest.fixture
def xfs_mount(made_fs):
    return made_fs("xfs")


@pytest.fixture
def ext4_mount(made_fs):
    return made_fs("ext4")


def capture(cli, mnt: Path, log: Path, *extra: str) -> dict:
    # a few messages already there: the starting tree has entries of its own
    (mnt / "mail" / "new").mkdir(parents=True)
    for i in range(5):
        (mnt / "mail" / "new" / f"old-message-{i:03d}").write_bytes(b"m" * (100 * (i + 1)))
    out = log.with_suffix(".json")
    proc = cli("watch", "--capture", str(log), "--json", str(out), *extra, "--", sys.executable, str(WRITER),
               str(mnt / "mail"), str(MESSAGES), "--fsync", cwd=mnt)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert not fsscope_instances()
    return json.loads(out.read_text())


@pytest.mark.privileged
def test_capture_on_xfs_and_replay_on_ext4_and_xfs(cli, xfs_mount, scratch):
    log = scratch / "mail.oplog.gz"
    watched = capture(cli, xfs_mount, log)
    read = oplog.read(log)
    assert read.header.fs == "xfs" and not read.header.anonymized and read.header.version == oplog.VERSION
    ops = [o for o in read.ops if o.path and o.path.startswith("mail/")]
    renames = [o for o in read.ops if o.op == "rename"]
    assert len(renames) == MESSAGES
    # each message is created in tmp/ and renamed from there into new/ under the same name
    for r in renames:
        assert r.path.startswith("mail/tmp/") and r.path2 == "mail/new/" + r.path.rsplit("/", 1)[1], r
    creates = [o for o in read.ops if o.op == "open" and o.flags & 0o100 and o.path and o.path.startswith("mail/tmp/")]
    assert len(creates) == MESSAGES and all(o.flags & 0o200 for o in creates)  # O_CREAT | O_EXCL as the writer asked
    writes = [o for o in read.ops if o.op == "write" and o.path and o.path.startswith("mail/tmp/")]
    assert len(writes) == MESSAGES and {o.size for o in writes} == {547}
    assert ops and all(o.think_ns >= 0 and o.duration_ns > 0 for o in ops)
    tree = {e.path: e for e in read.entries}
    assert tree["mail/new/old-message-002"].size_bytes == 300 and tree["mail/new"].kind == "dir"
    watched_ops = {o["op"]: o for o in watched["ops"]}
    assert any("op log:" in n for n in watched["notes"])

    out = scratch / "replay.json"
    proc = cli("replay", str(log), "--recipes", "ext4-default,xfs-default", "--ram", "--size", "512M",
               "--runs", "2", "--json", str(out), timeout_s=600)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    doc = json.loads(out.read_text())
    assert doc["recipes"] == ["ext4-default", "xfs-default"]
    for name, fs in (("ext4-default", "ext4"), ("xfs-default", "xfs")):
        report = doc["reports"][name]
        assert report["fs"] == fs and len(report["runs"]) == 2
        by_op = {o["op"]: o for o in report["ops"]}
        for op in ("open", "write", "fsync", "rename", "close"):
            in_tree = [o for o in read.ops if o.op == op and o.path and o.path.startswith("mail/")]
            assert by_op[op]["calls"] == 2 * len(in_tree) and by_op[op]["captured_calls"] == len(in_tree), op
            assert len(in_tree) >= MESSAGES and watched_ops[op]["calls"] >= len(in_tree)
            assert by_op[op]["failed"] == 0 and 0 < by_op[op]["p50_us"] <= by_op[op]["p99_us"]
            assert by_op[op]["captured_p50_us"] is not None
        assert by_op["write"]["bytes"] == 2 * MESSAGES * 547
        assert all(r["differs"] == 0 and r["timeouts"] == 0 for r in report["runs"])
        assert report["files"] and report["tree_entries"] == len(read.entries)
    pairs = {(p["op"], p["a"], p["b"]): p for p in doc["comparison"]["pairs"]}
    for op in ("open", "write", "fsync", "rename"):
        pair = pairs[(op, "ext4-default", "xfs-default")]
        assert pair["p"] is not None and ("Welch" in pair["note"])
    assert "recipes compared per call type" in proc.stdout
    # fsscope compare on two replays: per call type, B / A
    from fsscope.engine.registry import compare_reports

    per_type = compare_reports("replay", doc["reports"]["ext4-default"], doc["reports"]["xfs-default"])[0]
    rows = {r.metric: r for r in per_type.rows}
    ext4 = {o["op"]: o for o in doc["reports"]["ext4-default"]["ops"]}
    assert rows["rename p50 µs"].a == ext4["rename"]["p50_us"] and rows["rename p50 µs"].ratio is not None


@pytest.mark.privileged
def test_anonymized_log_keeps_name_lengths_and_directory_sizes(cli, xfs_mount, scratch):
    plain_log, anon_log = scratch / "plain.oplog.gz", scratch / "anon.oplog.gz"
    capture(cli, xfs_mount, anon_log, "--anonymize")
    anon = oplog.read(anon_log)
    assert anon.header.anonymized and anon.header.source == "" and anon.header.tree == ""
    assert any("pseudonym" in d for d in anon.header.dropped) and any("contents" in d for d in anon.header.dropped)
    assert all(c == "" for c in anon.header.threads.values())
    # a second capture of the same delivery, names kept, to set beside it
    subprocess.run(["rm", "-rf", str(xfs_mount / "mail")], check=True)
    capture(cli, xfs_mount, plain_log)
    named = oplog.read(plain_log)
    assert any(o.path and o.path.split("/")[0] == "mail" for o in named.ops)
    assert not any(part == "mail" for o in anon.ops for part in (o.path or "").split("/"))
    lengths = sorted(tuple(len(p) for p in e.path.split("/")) for e in anon.entries)
    assert lengths == sorted(tuple(len(p) for p in e.path.split("/")) for e in named.entries)
    assert sorted(e.size_bytes for e in anon.entries if e.kind == "file") == \
        sorted(e.size_bytes for e in named.entries if e.kind == "file")
    renames = [o for o in anon.ops if o.op == "rename"]
    assert len(renames) == MESSAGES
    # the same name in tmp/ and new/ gets the same pseudonym; every name keeps its length (29 bytes)
    for r in renames:
        assert r.path.rsplit("/", 1)[1] == r.path2.rsplit("/", 1)[1] and len(r.path.rsplit("/", 1)[1]) == 29
    # the directory new/ ends with as many names in both
    ends = {o.path2.rsplit("/", 1)[0] for o in renames}
    assert len(ends) == 1 and len({o.path2 for o in renames}) == MESSAGES


def _log(tmp_path: Path) -> Path:
    path = tmp_path / "small.oplog.gz"
    ops = [oplog.Op(seq=0, tid=1, proc=1, op="open", syscall="openat", path="d/f", flags=0o101, result=3,
                    start_ns=0, duration_ns=5000),
           oplog.Op(seq=1, tid=1, proc=1, op="close", syscall="close", fd=3, start_ns=6000, duration_ns=1000)]
    oplog.write(path, oplog.Header(fs="xfs"), [oplog.Entry(path="d", kind="dir")], ops)
    return path


def test_a_truncated_or_corrupted_log_is_one_line_and_exit_2(cli, tmp_path):
    good = _log(tmp_path)
    assert len(oplog.read(good).ops) == 2
    data = good.read_bytes()
    raw = gzip.decompress(data)
    newer = tmp_path / "newer.oplog.gz"
    oplog.write(newer, oplog.Header(version=oplog.VERSION + 1), [], [])
    cases = {
        "truncated-gzip": data[: len(data) // 2],
        "truncated-records": gzip.compress(raw[:-12]),  # a whole gzip stream, the end record cut off
        "corrupted": data[:12] + bytes(b ^ 0xFF for b in data[12:20]) + data[20:],
        "not-a-log": b"hello, world\n",
        "bad-version": newer.read_bytes(),
        "garbage": bytes(random.Random(37).randrange(256) for _ in range(4096)),
        "garbage-in-gzip": gzip.compress(bytes(random.Random(38).randrange(256) for _ in range(4096))),
    }
    expect = {"truncated-gzip": "truncated", "truncated-records": "truncated", "bad-version": "version",
              "garbage": "not an fsscope op log", "garbage-in-gzip": "corrupted"}
    for name, content in cases.items():
        bad = tmp_path / f"{name}.oplog.gz"
        bad.write_bytes(content)
        with pytest.raises(oplog.OpLogError):
            oplog.read(bad)
        proc = cli("replay", str(bad), "--ram", "--size", "64M")
        assert proc.returncode == 2, (name, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and str(bad) in lines[0], (name, proc.stderr)
        assert expect.get(name, "") in lines[0], (name, lines[0])
        assert "Traceback" not in proc.stderr and not list(tmp_path.glob("*.json"))


def test_a_log_naming_outside_its_tree_is_refused(tmp_path):
    path = tmp_path / "escape.oplog.gz"
    ops = [oplog.Op(seq=0, tid=1, proc=1, op="unlink", syscall="unlink", path="../../etc/x", start_ns=0,
                    duration_ns=1)]
    oplog.write(path, oplog.Header(), [], ops)
    with pytest.raises(oplog.OpLogError, match="not a relative path"):
        oplog.read(path)


def test_a_starting_tree_that_is_not_a_tree_is_refused_before_anything_is_made(cli, tmp_path):
    """A crafted log whose starting tree has a name under a file (or a name twice) read as
    valid, then stopped replay with a traceback after the target was formatted."""
    cases = {
        "under-a-file": [oplog.Entry(path="a", kind="file", size_bytes=3), oplog.Entry(path="a/b", kind="file")],
        "file-over-a-dir": [oplog.Entry(path="a/b", kind="file"), oplog.Entry(path="a", kind="file")],
        "twice": [oplog.Entry(path="a", kind="dir"), oplog.Entry(path="a", kind="file")],
        "the-tree-itself": [oplog.Entry(path=".", kind="file")],
    }
    for name, entries in cases.items():
        bad = tmp_path / f"{name}.oplog.gz"
        oplog.write(bad, oplog.Header(), entries, [])
        with pytest.raises(oplog.OpLogError, match="starting tree"):
            oplog.read(bad)
        proc = cli("replay", str(bad), "--ram", "--size", "64M")
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and "starting tree" in lines[0], (name, proc.stderr)
    fine = tmp_path / "fine.oplog.gz"  # a name before its directory's own entry is still a tree
    oplog.write(fine, oplog.Header(), [oplog.Entry(path="a/b", kind="file"), oplog.Entry(path="a", kind="dir")], [])
    assert [e.path for e in oplog.read(fine).entries] == ["a/b", "a"]


def test_a_read_or_write_larger_than_linux_makes_is_skipped_alone(tmp_path):
    """A crafted write of 2**50 bytes (Linux moves at most MAX_RW_COUNT in one call): that call
    is skipped with the reason; the thread's other calls and the other thread still play (it
    used to ask a buffer of that size, and skip the whole thread when it could not have one)."""
    from fsscope.replay.play import play

    path = tmp_path / "huge.oplog.gz"
    ops = [oplog.Op(seq=0, tid=1, proc=1, op="open", syscall="openat", path="f", flags=0o101, result=3,
                    start_ns=0, duration_ns=1),
           oplog.Op(seq=1, tid=2, proc=1, op="mkdir", syscall="mkdir", path="d", start_ns=1, duration_ns=1),
           oplog.Op(seq=2, tid=1, proc=1, op="write", syscall="write", fd=3, size=1 << 50, result=1 << 50,
                    start_ns=2, duration_ns=1),
           oplog.Op(seq=3, tid=1, proc=1, op="close", syscall="close", fd=3, start_ns=3, duration_ns=1)]
    oplog.write(path, oplog.Header(), [], ops)
    root = tmp_path / "root"
    root.mkdir()
    played = play(root, oplog.read(path))
    assert list(played.played) == [True, True, False, True] and (root / "d").is_dir()
    assert (root / "f").stat().st_size == 0
    (why, n), = played.skipped.items()
    assert n == 1 and "more than Linux moves in one call" in why


def test_a_write_larger_than_the_buffer_is_the_buffer_over_and_over(tmp_path):
    """The thread's buffer is bounded whatever the log's largest call: a write of many buffers
    is one writev of the same buffer repeated (several past IOV_MAX of them), a read likewise,
    and they move every recorded byte at the recorded offsets."""
    from fsscope.replay.play import IOV_MAX, play

    buffer_bytes = 4096
    big = IOV_MAX * buffer_bytes * 2 + 123   # three calls' worth of iovecs, the last one short
    mid = 5 * buffer_bytes + 7               # one writev, its last iovec a part of the buffer
    path = tmp_path / "big.oplog.gz"
    ops = [oplog.Op(seq=0, tid=1, proc=1, op="open", syscall="openat", path="f", flags=0o102, result=3,
                    start_ns=0, duration_ns=1),
           oplog.Op(seq=1, tid=1, proc=1, op="write", syscall="write", fd=3, size=big, result=big,
                    start_ns=1, duration_ns=1),
           oplog.Op(seq=2, tid=1, proc=1, op="write", syscall="pwrite64", fd=3, size=mid, offset=big, result=mid,
                    start_ns=2, duration_ns=1),
           oplog.Op(seq=3, tid=1, proc=1, op="read", syscall="pread64", fd=3, size=big + mid + 99, offset=0,
                    result=big + mid, start_ns=3, duration_ns=1),
           oplog.Op(seq=4, tid=1, proc=1, op="close", syscall="close", fd=3, start_ns=4, duration_ns=1)]
    oplog.write(path, oplog.Header(), [], ops)
    root = tmp_path / "root"
    root.mkdir()
    played = play(root, oplog.read(path), buffer_bytes=buffer_bytes)
    assert played.played.all() and played.skipped == {} and played.differs == 0
    # the read asked for more than the file holds: it stops at the end, as the recorded one did
    assert list(played.calls["result"]) == [played.calls["result"][0], big, mid, big + mid, 0]
    data = (root / "f").read_bytes()
    assert len(data) == big + mid and data[:4096] == data[4096:8192] and data.startswith(b"fsscope replay")


THREADED = """
import os, queue, sys, threading
root, count = sys.argv[1], int(sys.argv[2])
for sub in ("tmp", "new"):
    os.makedirs(os.path.join(root, sub), exist_ok=True)
made = queue.Queue()
def writer():
    for i in range(count):
        name = f"message-{i:05d}"
        fd = os.open(os.path.join(root, "tmp", name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.pwrite(fd, b"y" * 300, 0)
        os.close(fd)
        made.put(name)
    made.put(None)
def mover():
    while (name := made.get()) is not None:
        os.rename(os.path.join(root, "tmp", name), os.path.join(root, "new", name))
threads = [threading.Thread(target=writer), threading.Thread(target=mover)]
for t in threads: t.start()
for t in threads: t.join()
"""


@pytest.mark.privileged
def test_a_rename_in_another_thread_waits_for_the_create_when_replayed(cli, xfs_mount, scratch):
    log = scratch / "threads.oplog.gz"
    script = scratch / "threaded_writer.py"
    script.write_text(THREADED)
    proc = cli("watch", "--capture", str(log), "--", sys.executable, str(script), str(xfs_mount / "q"), "40",
               cwd=xfs_mount)
    assert proc.returncode == 0, proc.stderr[-3000:]
    read = oplog.read(log)
    renames = [o for o in read.ops if o.op == "rename"]
    creates = {o.path: o for o in read.ops if o.op == "open" and o.flags & 0o100}
    assert len(renames) == 40 and len(read.threads()) >= 2
    for r in renames:
        made = creates[r.path]
        assert made.tid != r.tid and r.after and max(r.after) >= made.seq, (r, made)  # waits for the create
    writes = [o for o in read.ops if o.op == "write" and o.path and o.path.startswith("q/tmp/")]
    assert len(writes) == 40 and all(o.syscall == "pwrite64" and o.offset == 0 and o.size == 300 for o in writes)
    out = scratch / "threads.json"
    proc = cli("replay", str(log), "--recipe", "ext4-default", "--ram", "--size", "256M", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    by_op = {o["op"]: o for o in report["ops"]}
    assert by_op["rename"]["calls"] == 40 and by_op["rename"]["failed"] == 0
    assert report["runs"][0]["differs"] == 0 and report["runs"][0]["timeouts"] == 0, \
        [n for n in report["notes"] if "succeeded here" in n]


def _capture_script(cli, scratch: Path, mnt: Path, name: str, text: str, count: int) -> tuple[Path, oplog.OpLog]:
    """``text`` run as a script on ``mnt/f`` and ``count``, captured by watch: the log, read."""
    log, script = scratch / f"{name}.oplog.gz", scratch / f"{name}.py"
    script.write_text(text)
    proc = cli("watch", "--capture", str(log), "--", sys.executable, str(script), str(mnt / "f"), str(count), cwd=mnt)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return log, oplog.read(log)


DUPLICATING = """
import fcntl, os, sys
path = sys.argv[1]
for i in range(int(sys.argv[2])):
    fd = os.open(f"{path}-{i}", os.O_CREAT | os.O_WRONLY, 0o644)
    a = os.dup(fd)
    b = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100)
    c = os.dup2(fd, 200)
    os.close(fd)
    for k, d in enumerate((a, b, c)):
        os.write(d, b"x" * (100 * (k + 1)))
        os.fsync(d)
        os.close(d)
"""


@pytest.mark.privileged
def test_calls_on_a_duplicated_descriptor_replay_on_its_file(cli, xfs_mount, scratch):
    """dup, dup2 and fcntl(F_DUPFD_CLOEXEC) make a descriptor for the same file: replay makes
    one too, and the calls on it (after the original is closed) play on that file -- they were
    skipped as calls on a descriptor never opened."""
    files = 10
    log, read = _capture_script(cli, scratch, xfs_mount, "dup", DUPLICATING, files)
    made = [o for o in read.ops if o.op in ("dup", "fcntl") and o.path and o.path.startswith("f-")]
    # (Python's os.dup is fcntl(F_DUPFD_CLOEXEC): a new descriptor it never inherits)
    assert len(made) == 3 * files and {o.syscall for o in made} == {"dup2", "fcntl"}
    out = scratch / "dup.json"
    proc = cli("replay", str(log), "--recipe", "ext4-default", "--ram", "--size", "256M", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    by_op = {o["op"]: o for o in report["ops"]}
    assert by_op["write"]["calls"] == 3 * files and by_op["fsync"]["calls"] == 3 * files, report["ops"]
    assert by_op["dup"]["calls"] == files and by_op["fcntl"]["calls"] == 2 * files
    assert all(by_op[k]["failed"] == 0 for k in ("write", "fsync", "dup", "fcntl", "close"))
    # every call on the files (the interpreter's own, outside the tree, are skipped as before)
    in_tree = sum(1 for o in read.ops if o.path and o.path.startswith("f-"))
    assert sum(o["calls"] for o in report["ops"]) >= in_tree, (in_tree, report["skipped"])
    assert report["runs"][0]["differs"] == 0


THINKING = """
import os, sys, time
path, n = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
for i in range(n):
    os.pwrite(fd, b"x" * 100, 0)
    start = time.thread_time_ns()          # work 3 ms of this thread's CPU time
    while time.thread_time_ns() - start < 3_000_000:
        pass
    os.fsync(fd)
    time.sleep(0.005)                      # then sleep 5 ms
os.close(fd)
"""


@pytest.mark.privileged
def test_a_think_time_is_recorded_by_its_parts_and_replayed_by_them(cli, xfs_mount, scratch):
    """Between its calls a thread works, sleeps, or waits for a CPU: the capture splits each
    think time by the thread's scheduling (sched_switch, sched_wakeup), and the recorded pace
    replays the work as this thread's own CPU time and the sleep as a sleep, not the wait."""
    from fsscope.replay.play import play

    n = 20
    _, read = _capture_script(cli, scratch, xfs_mount, "think", THINKING, n)
    fsyncs = [o for o in read.ops if o.op == "fsync" and o.path == "f"]
    writes = [o for o in read.ops if o.op == "write" and o.path == "f"][1:]   # after a sleep
    assert len(fsyncs) == n and len(writes) == n - 1
    for o in read.ops:
        assert o.think_cpu_ns == -1 or 0 <= o.think_cpu_ns + o.think_sleep_ns <= o.think_ns, o
    # The kernel does not record every switch back to a thread (about one in a few hundred
    # under load, seen in its own text trace too: capture.off_cpu): a gap holding such a span
    # has its parts not known (-1) and replays its whole think time. Every other gap is split:
    # the 3 ms of work before each fsync on the CPU, whatever the load added around it (within
    # a sixth), and the 5 ms sleep before each write asleep (time.sleep sleeps at least that)
    gaps = fsyncs + writes
    known = [o for o in gaps if o.think_cpu_ns >= 0]
    assert len(known) >= len(gaps) * 3 // 4, [(o.seq, o.think_ns, o.think_cpu_ns, o.think_sleep_ns) for o in gaps]
    for o in fsyncs:
        assert o.think_cpu_ns == -1 or (o.think_cpu_ns >= 2_500_000 and o.think_sleep_ns < 1_000_000), o
    for o in writes:
        assert o.think_cpu_ns == -1 or o.think_sleep_ns >= 5_000_000, o
    root = scratch / "root"
    root.mkdir()
    for pace in ("recorded", "wall"):
        (root / "f").unlink(missing_ok=True)
        cpu_ns = time.process_time_ns()
        played = play(root, read, pace=pace)
        used_ns = time.process_time_ns() - cpu_ns
        rows = played.calls
        for o in fsyncs + writes:
            before = max(k for k in range(o.seq) if read.ops[k].tid == o.tid and played.played[k])
            gap = rows[o.seq]["start_ns"] - (rows[before]["start_ns"] + rows[before]["duration_ns"])
            least = o.think_cpu_ns + o.think_sleep_ns if pace == "recorded" and o.think_cpu_ns >= 0 else o.think_ns
            assert gap >= least * 0.95, (pace, o, gap)
        if pace == "recorded":  # the work was this process's own CPU time
            assert used_ns >= sum(o.think_cpu_ns for o in fsyncs if o.think_cpu_ns >= 0), used_ns


def test_a_gap_whose_return_the_kernel_lost_is_not_known():
    """A span off the CPU ended only by the thread's own next event (its switch back was not
    recorded) leaves that gap's parts not known (-1), as does a thread with no scheduling at
    all; a gap whose spans all came back is split into work and sleep."""
    from fsscope.trace.decode import EVENT_DTYPE
    from fsscope.watch.capture import off_cpu, think_parts

    names = ["sched/sched_switch", "sched/sched_wakeup", "syscalls/sys_enter_fsync"]
    tid, other = 100, 200
    rows = [  # (ts, code, pid, sector = prev_pid, arg = next_pid or the woken, flags = prev_state)
        (1_000, 0, tid, tid, other, 1),       # asleep at 1 µs ...
        (6_000, 1, other, 0, tid, 0),         # ... woken at 6 ...
        (7_000, 0, other, other, tid, 0),     # ... back at 7
        (9_000, 2, tid, 0, 0, 0),             # a call at 9
        (12_000, 0, tid, tid, other, 0),      # preempted at 12, its return not recorded ...
        (20_000, 2, tid, 0, 0, 0),            # ... its next call at 20
    ]
    events = np.zeros(len(rows), EVENT_DTYPE)
    for i, (ts, code, pid, prev, arg, state) in enumerate(rows):
        events[i]["ts_ns"], events[i]["code"], events[i]["pid"] = ts, code, pid
        events[i]["sector"], events[i]["arg"], events[i]["flags"] = prev, arg, state
    spans = off_cpu(events, names)
    assert spans is not None
    assert spans[tid].tolist() == [[1_000, 7_000, 6_000, 1], [12_000, 20_000, 12_000, 0]]
    assert think_parts(spans[tid], 0, 9_000) == (9_000 - 6_000, 5_000)  # 1 ms waited for a CPU
    assert think_parts(spans[tid], 9_000, 20_000) == (-1, 0)
    assert think_parts(spans.get(other + 1), 0, 9_000) == (-1, 0)
    assert off_cpu(events, names[1:]) is None


def test_pseudonyms_keep_each_names_length_and_tell_names_apart():
    from fsscope.watch.capture import Pseudonyms

    names = [f"{i:0{width}d}" for width in (1, 2, 29) for i in range(min(10 ** width, 300))] + ["é" * 3, "a.b"]
    fake = Pseudonyms()
    out = [fake.name(n) for n in names]
    assert [len(o.encode()) for o in out] == [len(n.encode()) for n in names]  # bytes, as directory formats count
    assert len(set(out)) == len(names)                     # ten 1-byte names: all ten letters differ
    assert [fake.name(n) for n in names] == out            # stable within a log
    assert Pseudonyms().name("1700000000.M000000P00001.host") != fake.name("1700000000.M000000P00001.host")  # a new key
    assert fake.path("a.b/01") == f"{fake.name('a.b')}/{fake.name('01')}" and fake.path(".") == "."


def _replays(rng, mean_a: float, mean_b: float, ops: int, runs: int) -> dict:
    def report(mean):
        return {"ops": [{"op": f"op{k}"} for k in range(ops)],
                "runs": [{"mean_us": {f"op{k}": float(rng.normal(mean, 0.1 * mean)) for k in range(ops)}}
                         for _ in range(runs)]}
    return {"a": report(mean_a), "b": report(mean_b)}


def test_recipes_compared_per_call_type_name_a_winner_only_where_one_is_faster():
    import numpy as np

    from fsscope.replay.compare import compare_replays

    rng = np.random.default_rng(37)
    alike = compare_replays(_replays(rng, 50.0, 50.0, ops=60, runs=5))
    winners = [p for p in alike.pairs if p.winner]
    assert len(alike.pairs) == 60 and len(winners) <= 8   # alpha 0.05: about 3 of 60 by chance, never most
    faster = compare_replays(_replays(rng, 50.0, 80.0, ops=20, runs=5))
    assert all(p.winner == "a" and p.p < 0.05 for p in faster.pairs)
    one_run = compare_replays(_replays(rng, 50.0, 80.0, ops=3, runs=1))
    assert all(p.winner is None and "--runs 2" in p.note for p in one_run.pairs)  # no test: says what would decide
    assert all(p.verdict.startswith("inconclusive (n too small") for p in one_run.pairs)
    assert all(p.verdict == "a faster (p < 0.05)" for p in faster.pairs)
    assert {p.verdict for p in alike.pairs if not p.winner} == {"not significant (p >= 0.05)"}


@pytest.mark.privileged
def test_a_sqlite_wal_workload_replays_with_its_file_positions(cli, xfs_mount, scratch):
    log = scratch / "sqlite.oplog.gz"
    writer = Path(__file__).with_name("sqlite_writer.py")
    proc = cli("watch", "--capture", str(log), "--", sys.executable, str(writer), str(xfs_mount / "db.sqlite"), "60",
               cwd=xfs_mount)
    assert proc.returncode == 0, proc.stderr[-3000:]
    read = oplog.read(log)
    in_tree = [o for o in read.ops if o.path and o.path.startswith("db.sqlite")]
    writes = [o for o in in_tree if o.op == "write"]
    syncs = [o for o in in_tree if o.op in ("fsync", "fdatasync")]
    assert len(syncs) >= 60 and all(o.syscall == "pwrite64" and o.offset is not None for o in writes)
    assert len({o.offset for o in writes}) > 10  # SQLite writes its pages and log frames where it means to
    out = scratch / "sqlite.json"
    proc = cli("replay", str(log), "--recipes", "ext4-default,xfs-default", "--ram", "--size", "512M", "--runs", "2",
               "--json", str(out), timeout_s=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    for name in ("ext4-default", "xfs-default"):
        report = doc["reports"][name]
        by_op = {o["op"]: o for o in report["ops"]}
        assert by_op["write"]["calls"] == 2 * len(writes) and by_op["write"]["failed"] == 0
        assert by_op["write"]["bytes"] == 2 * sum(o.result for o in writes)
        assert sum(by_op[o]["calls"] for o in ("fsync", "fdatasync") if o in by_op) == 2 * len(syncs)
        assert all(r["differs"] == 0 for r in report["runs"])
    assert {p["op"] for p in doc["comparison"]["pairs"]} >= {"write", syncs[0].op}


@pytest.mark.privileged
def test_a_capture_on_ext4_names_creates_and_renames_by_the_directories_the_kernel_named(cli, ext4_mount, scratch):
    log = scratch / "ext4.oplog.gz"
    capture(cli, ext4_mount, log)
    read = oplog.read(log)
    renames = [o for o in read.ops if o.op == "rename"]
    assert read.header.fs == "ext4" and len(renames) == MESSAGES
    for r in renames:  # ext4 names no entry: the file's last name, in the directories ext4 named
        assert r.path.startswith("mail/tmp/") and r.path2 == "mail/new/" + r.path.rsplit("/", 1)[1], r
    assert any("ext4 records no names" in n for n in read.header.notes)
    out = scratch / "ext4.json"
    proc = cli("replay", str(log), "--recipe", "xfs-default", "--ram", "--size", "512M", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    by_op = {o["op"]: o for o in report["ops"]}
    assert by_op["rename"]["calls"] == MESSAGES and by_op["rename"]["failed"] == 0
    assert report["runs"][0]["differs"] == 0


def _creating_log(path: Path, files: int) -> Path:
    """A log made by hand: a directory, then per file create, write, fsync, close; the last
    call stats a name the starting tree holds."""
    ops: list[oplog.Op] = [oplog.Op(seq=0, tid=7, proc=7, op="mkdir", syscall="mkdir", path="spool/in", start_ns=0,
                                    duration_ns=10_000)]
    for i in range(files):
        fd = 3
        for op, extra in (("open", {"syscall": "openat", "path": f"spool/in/m{i:04d}", "flags": 0o1101,
                                    "result": fd}),
                          ("write", {"syscall": "write", "fd": fd, "path": f"spool/in/m{i:04d}", "size": 700,
                                     "result": 700}),
                          ("fsync", {"syscall": "fsync", "fd": fd, "path": f"spool/in/m{i:04d}"}),
                          ("close", {"syscall": "close", "fd": fd, "path": f"spool/in/m{i:04d}"})):
            ops.append(oplog.Op(seq=len(ops), tid=7, proc=7, op=op, start_ns=len(ops) * 50_000, duration_ns=20_000,
                                **extra))
    ops.append(oplog.Op(seq=len(ops), tid=7, proc=7, op="stat", syscall="newfstatat", path="spool/old",
                        start_ns=len(ops) * 50_000, duration_ns=3_000))
    oplog.write(path, oplog.Header(fs="ext4"), [oplog.Entry(path="spool", kind="dir"),
                                                oplog.Entry(path="spool/old", kind="file", size_bytes=5000)], ops)
    return path


@pytest.mark.privileged
def test_replay_from_an_aged_snapshot_starts_every_run_from_the_aged_state(cli, scratch):
    """--from-snapshot AGED: each run restores the image `fsscope age` kept (no mkfs) and
    replays on it; the file system holds the aged tree and the log's calls at once."""
    aged_out = scratch / "age.json"
    proc = cli("age", "--image", str(scratch / "aged.img"), "--size", "128M", "--profile", "small", "--seed", "3",
               "--confidence", "0.5", "--json", str(aged_out), timeout_s=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    aged = json.loads(aged_out.read_text())
    snapshot = Path(aged["snapshot"]["path"])
    log = _creating_log(scratch / "made.oplog.gz", files=40)
    out = scratch / "aged-replay.json"
    proc = cli("replay", str(log), "--recipe", "ext4-default", "--ram", "--from-snapshot", str(snapshot),
               "--runs", "2", "--json", str(out), timeout_s=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["snapshot"] == str(snapshot) and report["fs"] == "ext4"
    assert "restored from the aged snapshot" in " ".join(proc.stdout.split())  # however rich wraps it
    by_op = {o["op"]: o for o in report["ops"]}
    # every run made its 40 files again: run 2 did not find run 1's (O_EXCL would fail)
    assert by_op["open"]["calls"] == 80 and by_op["open"]["failed"] == 0 and by_op["stat"]["failed"] == 0
    assert all(r["played"] == 162 and r["differs"] == 0 for r in report["runs"])
    # the world without the effect: 40 names of 5 bytes fit spool/in's first block, so the only
    # format change traced is the new directory's own first block, in the mkdir
    assert report["traced"] and [(c["op"], c["call"]) for c in report["format_changes"]] == [("mkdir", 0)]
    assert report["format_changes_per_run"] == [1, 1]
    run = Path(re.search(r"recorded in (\S+) \(", proc.stderr).group(1))
    manifest = json.loads((run / "manifest.json").read_text())
    restores = manifest["target"]["restores"]
    assert len(restores) == 2 and all(r["inodes_used"] == aged["inodes_used"] for r in restores)
    commands = [c["argv"][0] for c in manifest["target"]["commands"]]
    assert "mkfs.ext4" not in commands and commands.count("cp") == 2
    # one aged image cannot serve recipes of two file systems: refused before either runs
    proc = cli("replay", str(log), "--recipes", "ext4-default,xfs-default", "--ram", "--from-snapshot", str(snapshot))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "ext4, xfs" in lines[0] and not proc.stdout, proc.stderr
    # the same log on a fresh ext4 starts with a nearly empty file system, not the aged one
    fresh_out = scratch / "fresh-replay.json"
    proc = cli("replay", str(log), "--recipe", "ext4-default", "--ram", "--size", "128M", "--json", str(fresh_out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(fresh_out.read_text())["snapshot"] == ""


def _flags(report: dict) -> list[tuple]:
    """The directory-format flags of a replay, by the create they came at: the directory's
    place in the tree (its depth), the event, the call type and the names it held before."""
    return sorted((c["dir"].count("/") if c["dir"] else -1, c["event"], c["op"], c["entries_before"], c["predicted"],
                   c["matches"]) for c in report["format_changes"])


@pytest.mark.privileged
def test_an_anonymized_log_replays_the_same_directory_format_flags(cli, fresh_fs, scratch):
    """A maildir delivery captured on xfs-default in RAM, with and without --anonymize: both
    logs replayed (traced) on xfs-default show the same directory-format changes at the same
    calls -- the renames into new/ that filled its short form and its block -- as watch saw."""
    mnt = Path(fresh_fs("xfs-default").workdir)
    plain_log, anon_log = scratch / "plain.oplog.gz", scratch / "anon.oplog.gz"
    watched = capture(cli, mnt, plain_log)
    subprocess.run(["rm", "-rf", str(mnt / "mail")], check=True)
    capture(cli, mnt, anon_log, "--anonymize")
    named, anon = oplog.read(plain_log), oplog.read(anon_log)
    assert anon.header.anonymized and not named.header.anonymized
    assert sorted(len(e.path) for e in anon.entries) == sorted(len(e.path) for e in named.entries)
    reports = {}
    for label, log in (("plain", plain_log), ("anon", anon_log)):
        out = scratch / f"{label}.json"
        proc = cli("replay", str(log), "--recipe", "xfs-default", "--ram", "--size", "512M", "--json", str(out),
                   timeout_s=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        reports[label] = json.loads(out.read_text())
        assert reports[label]["traced"], reports[label]["notes"]
        assert "directory format changes" in proc.stdout
    plain, anonymous = _flags(reports["plain"]), _flags(reports["anon"])
    renames_into_new = [c for c in reports["plain"]["format_changes"] if c["op"] == "rename"]
    # new/ held 5 old messages, then 120 renames: it left its short form and its single block
    assert {c["event"] for c in renames_into_new} >= {"xfs_dir2_sf_to_block", "xfs_dir2_block_to_leaf"}, plain
    assert plain == anonymous
    # the same changes at the same names-before, with the same arithmetic and verdict, as watch
    # saw when the delivery was captured (new/'s 15-byte old names beside the 29-byte new ones
    # make the median-length arithmetic miss the short form's end for both alike)
    def key(c: dict) -> tuple:
        return c["event"], c["entries_before"], c["name_bytes"], c["predicted"], c["matches"], c["arithmetic"]

    seen = sorted(key(c) for c in watched["format_changes"] if c["op"] == "rename")
    assert sorted(key(c) for c in renames_into_new) == seen
    # and in each log at the call that made it: the k-th rename into new/ finds 5 + k names there
    for label, log in (("plain", named), ("anon", anon)):
        renames = [o.seq for o in log.ops if o.op == "rename"]
        for c in reports[label]["format_changes"]:
            assert log.ops[c["call"]].op == c["op"]
            if c["op"] == "rename":
                assert renames.index(c["call"]) + 5 == c["entries_before"], (label, c)


def test_a_stat_replays_its_success_or_its_failure(tmp_path):
    """A stat by path used to kill its replay thread (its stat_result taken for a result), the
    thread's later calls unplayed and uncounted; a failed stat was counted as a success."""
    from fsscope.replay.play import play

    path = tmp_path / "stat.oplog.gz"
    ops = [oplog.Op(seq=0, tid=1, proc=1, op="stat", syscall="newfstatat", path="d", result=-2, start_ns=0,
                    duration_ns=1),
           oplog.Op(seq=1, tid=1, proc=1, op="mkdir", syscall="mkdir", path="d", start_ns=1, duration_ns=1),
           oplog.Op(seq=2, tid=1, proc=1, op="stat", syscall="newlstat", path="d", start_ns=2, duration_ns=1),
           oplog.Op(seq=3, tid=1, proc=1, op="rmdir", syscall="rmdir", path="d", start_ns=3, duration_ns=1)]
    oplog.write(path, oplog.Header(), [], ops)
    root = tmp_path / "root"
    root.mkdir()
    played = play(root, oplog.read(path))
    assert played.played.all() and played.skipped == {} and played.differs == 0
    assert list(played.calls["result"]) == [-2, 0, 0, 0] and not (root / "d").exists()
