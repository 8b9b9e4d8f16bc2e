"""A probe names the other processes that did I/O on the file system it measures (issue 35
item 7): a real O_DIRECT writer on the same ext4 image during a real probe of a directory on
it, and the null world, the same probe with no writer, which names none."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import pytest
from rich.console import Console
from short_writers import COMM as SHORT
from short_writers import short_lived_writers

from fsscope.cli.render.probe import render_probe
from fsscope.engine import runner
from fsscope.engine.registry import spec_from_data
from fsscope.records import typed
from fsscope.targets import TargetSpec
from fsscope.tui.model import flags_from_report
from fsscope.workloads.probe_records import Report

pytestmark = pytest.mark.privileged

COMM = "odirect-writer"

#: writes 1 MiB blocks with O_DIRECT round a 32 MiB file until killed (one process, one pid)
WRITER = textwrap.dedent(f"""
    import mmap, os, sys
    with open("/proc/self/comm", "w") as f:
        f.write({COMM!r})
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
    block = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT needs
    block.write(b"w" * (1 << 20))
    n = 0
    while True:
        os.pwrite(fd, block, (n % 32) << 20)
        n += 1
        if n == 1:
            print("ready", flush=True)
""")


def _probe(where, trace: str = "off") -> dict:
    handle = runner.start("probe", spec_from_data("probe", {"files": 200, "runs": 3, "trace": trace}),
                          TargetSpec("dir", str(where)), None)
    handle.drain()
    assert handle.run_dir.status() == "ok", handle.run_dir.manifest().get("error")
    return handle.run_dir.report()


def _printed(report: dict) -> str:
    out = io.StringIO()
    render_probe(typed(report, Report, "probe report"), Console(file=out, width=200))
    return out.getvalue()


def test_a_direct_writer_on_the_probed_file_system_is_named(fresh_fs):
    mounted = fresh_fs("ext4-default")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(mounted.workdir / "writer.bin")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        report = _probe(mounted.workdir)
    finally:
        writer.kill()
        writer.wait()
    named = [w for w in report["writers"] if w["pid"] == writer.pid]
    assert named, report["writers"]
    w = named[0]
    assert w["command"] == COMM and w["write_bytes"] > 0 and w["runs"]
    # its rate is its own over the runs it was seen in, never above the device's in that run
    assert 0 < w["bytes_per_s"] <= w["device_bytes_per_s"]
    flags = [f for f in report["flags"] if f["flag"] == "other-io"]
    assert len(flags) == 1 and f"pid {writer.pid} ({COMM})" in flags[0]["title"]
    assert "competes with the probe's calls" in flags[0]["note"]
    # the TUI's flags list is the report's findings: the writer is one of them
    flags_shown = flags_from_report(typed(report, Report, "probe report")) or []
    assert [f.title for f in flags_shown if f.kind == "other-io"] == [flags[0]["title"]]
    printed = _printed(report)
    assert f"pid {writer.pid} ({COMM})" in printed and COMM in printed


def test_short_lived_writers_are_named_from_the_block_layer(fresh_fs):
    """Processes that start and exit inside a run are invisible to /proc's two passes; the
    block layer's record of who submitted each bio names them, their rate never above the
    device's over the same run."""
    from fsscope.trace.tracefs import unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(f"tracefs: {unavailable_reason()}")
    mounted = fresh_fs("ext4-default")
    with short_lived_writers(mounted.workdir / "short.bin") as writer:
        report = _probe(mounted.workdir, trace="attribute")
    assert "block_bio_queue" in report["writers_watched"], report["writers_watched"]
    (w,) = [w for w in report["writers"] if w["command"] == SHORT]
    assert w["exited"] and w["tasks"] > 3 and w["seen_by"] == "block_bio_queue" and w["write_bytes"] >= 4 << 20
    assert 0 < w["bytes_per_s"] <= w["device_bytes_per_s"]
    assert not [x for x in report["writers"] if x["pid"] == writer.pid]   # the parent wrote nothing itself
    (flag,) = [f for f in report["flags"] if f["flag"] == "other-io"]
    assert f"short-lived processes ({SHORT})" in flag["title"] and "block_bio_queue" in flag["note"]
    flags_shown = flags_from_report(typed(report, Report, "probe report")) or []
    assert [f.title for f in flags_shown if f.kind == "other-io"] == [flag["title"]]
    assert SHORT in _printed(report)


@pytest.mark.parametrize("trace", ["off", "attribute"])
def test_no_writer_no_name(fresh_fs, trace):
    from fsscope.trace.tracefs import unavailable_reason

    if trace != "off" and unavailable_reason() is not None:
        pytest.skip(f"tracefs: {unavailable_reason()}")
    mounted = fresh_fs("ext4-default")
    report = _probe(mounted.workdir, trace)
    assert report["writers"] == []
    assert not [f for f in report.get("flags") or [] if f["flag"] == "other-io"]
    assert "other processes' I/O" not in _printed(report)


def test_a_rate_is_never_above_the_devices_and_a_quiet_device_names_nobody():
    """/proc/PID/io counts buffered writes when dirtied: over one interval a process may count
    more than its device moved; what it did on the device is at most the device's."""
    from fsscope.telemetry.procio import IoSnapshot, movers

    disk0 = (0,) * 11
    before = IoSnapshot(0.0, {"loop9": disk0}, {7: ("w", 0, 0, 0, 0), 8: ("x", 0, 0, 0, 0)})
    busy = (0, 0, 0, 0, 10, 0, 2 * 10**6, 0, 0, 0, 0)  # 10 writes, 1 GB (2e6 sectors)
    after = IoSnapshot(1.0, {"loop9": busy}, {7: ("w", 0, 3 * 10**9, 0, 0), 8: ("x", 5 * 10**6, 0, 0, 0)})
    got = movers(before, after, "loop9", lambda pid: pid == 7)
    assert [(m.pid, m.comm) for m in got] == [(7, "w")]  # 8 is not on the device
    assert got[0].bytes_per_s == got[0].device_bytes_per_s == 512 * 2e6 and got[0].counted_bytes_per_s == 3e9
    quiet = IoSnapshot(1.0, {"loop9": disk0}, after.procs)
    assert movers(before, quiet, "loop9", lambda pid: True) == []  # the device moved nothing


def test_submitters_set_apart_the_job_s_children_and_the_kernel_and_never_exceed_the_device():
    """The arithmetic on decoded events: what the job forked is its own (grandchildren too),
    a gone task named like a kernel thread is the kernel's, the exited tasks of one command are
    one row, and no row is above the sum of every submitter's bytes."""
    import numpy as np

    from fsscope.trace.decode import EVENT_DTYPE, RWBS_WRITE
    from fsscope.trace.writers import EVENTS, submitters

    names = [e.event for e in EVENTS]
    texts = ["fsscope", "worker", "kworker/u8:1", "dd", "cat"]
    rows = [  # (pid, code, bytes or child, parent, comm text)
        (100, 1, 200, 100, 0), (200, 1, 201, 200, 1),             # own 100 forks 200, which forks 201
        (201, 0, 2048, 0, 1), (100, 0, 2048, 0, 0),                # own I/O: 1 MiB each
        (900, 0, 4096, 0, 2),                                      # a gone kworker: the kernel's
        (301, 0, 8192, 0, 3), (302, 0, 8192, 0, 3),                # two exited dd: one row of 8 MiB
        (303, 0, 16, 0, 4)]                                        # a cat that read 8 KiB
    events = np.zeros(len(rows), EVENT_DTYPE)
    for i, (pid, code, n, parent, comm) in enumerate(rows):
        events[i]["ts_ns"], events[i]["pid"], events[i]["code"] = i, pid, code
        if code == 1:
            events[i]["arg"], events[i]["sector"] = n, parent
        else:
            events[i]["bytes"], events[i]["arg"] = n, comm
            events[i]["flags"] = RWBS_WRITE if comm != 4 else 1
    got = submitters(events, names, texts, {100}, 2.0, kernel=lambda pid, comm: comm.startswith("kworker/"),
                     group=lambda tid: None)
    assert got.device_bytes == (2048 * 2 + 4096 + 8192 * 2 + 16) * 512 and got.kernel_bytes == 4096 * 512
    assert [(s.pid, s.comm, s.read_bytes, s.write_bytes, s.exited, s.tasks) for s in got.others] == [
        (301, "dd", 0, 8 << 20, True, 2), (303, "cat", 8192, 0, True, 1)]
    assert all(s.read_bytes + s.write_bytes <= got.device_bytes for s in got.others)


def _bench(where) -> dict:
    spec = {"personality": "fileserver", "runs": 2, "duration_s": 2, "nfiles": 60, "mean_file_size_bytes": 8192,
            "workers": 2, "window_sizes_s": [1], "trace": True}
    handle = runner.start("bench", spec_from_data("bench", spec), TargetSpec("dir", str(where)), None)
    handle.drain()
    assert handle.run_dir.status() == "ok", handle.run_dir.manifest().get("error")
    return handle.run_dir.report()


def test_the_bench_names_short_lived_writers_and_not_its_own_workers(fresh_fs):
    """The bench watches its runs with the probe's writer module: its own workers (forked
    during the run, threads and all) are not others; a loop of short-lived writers is."""
    from fsscope.trace.tracefs import unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(f"tracefs: {unavailable_reason()}")
    mounted = fresh_fs("ext4-default")
    quiet = _bench(mounted.workdir)
    assert quiet["writers"] == [] and "block_bio_queue" in quiet["writers_watched"]
    assert not [f for f in quiet["flags"] if f["kind"] == "other-io"]
    with short_lived_writers(mounted.workdir / "short.bin"):
        report = _bench(mounted.workdir)
    (w,) = [w for w in report["writers"] if w["command"] == SHORT]
    assert w["exited"] and w["tasks"] > 3 and 0 < w["bytes_per_s"] <= w["device_bytes_per_s"]
    assert [x["command"] for x in report["writers"]] == [SHORT]   # nothing of the bench's own
    (flag,) = [f for f in report["flags"] if f["kind"] == "other-io"]
    assert f"short-lived processes ({SHORT})" in flag["title"] and "the bench's workers" in flag["note"]
    flags_shown = flags_from_report(report) or []
    assert [f.title for f in flags_shown if f.kind == "other-io"] == [flag["title"]]
