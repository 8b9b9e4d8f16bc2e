"""Kernel-event attribution on real RAM images: the kernel's own account (tracefs) of the
structures the geometry predicts, and the tracefs instance's life cycle.

Each probe here is small (one traced run of a few hundred files) and checks that the
format-change events fire inside exactly the call the rules in fsscope/explain predict --
also where the latency does not flag it (XFS block->leaf with long names, leaf->node).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from pilot_wait import wait_for

from fsscope import recipes, store
from fsscope.engine import runner
from fsscope.engine.registry import spec_from_data
from fsscope.targets import TargetSpec
from fsscope.targets.journal import Journal
from fsscope.trace import attribute
from fsscope.trace.catalog import BLOCK
from fsscope.trace.decode import (
    EVENT_DTYPE,
    RWBS_FLUSH,
    RWBS_FUA,
    RWBS_READ,
    RWBS_SYNC,
    RWBS_WRITE,
    layouts,
    parse_format,
    rwbs_bits,
)
from fsscope.trace.tracefs import fsscope_instances

XFS_FORMAT_CHANGES = {"xfs-dir-shortform-to-block": "xfs_dir2_sf_to_block",
                      "xfs-dir-block-to-leaf": "xfs_dir2_block_to_leaf",
                      "xfs-dir-leaf-to-node": "xfs_dir2_leaf_to_node"}


def _probe(cli, scratch, recipe: str, files: int, name_length: int, *, trace: str = "all",
           runs: int = 1) -> dict:
    out_json = scratch / "probe.json"
    out = cli("probe", "--recipe", recipe, "--ram", "--size", "400M", "--files", str(files),
              "--runs", str(runs), "--name-length", str(name_length), "--trace", trace,
              "--json", str(out_json))
    assert out.returncode == 0, out.stderr
    report = json.loads(out_json.read_text())
    assert report["trace"]["active"], report["trace"]
    assert report["trace"]["complete"], "the reader lost events"
    assert fsscope_instances() == [] and Journal().entries() == []  # removed after the job
    return report


def _seen(report: dict, event: str) -> list[int]:
    return sorted(e["index"] for e in report["structural_events"] if e["event"] == event)


def _predicted(report: dict, structure: str) -> int:
    return next(p["index"] for p in report["predictions"] if p["structure"] == structure)


@pytest.mark.privileged
@pytest.mark.parametrize("name_length,trace", [(7, "attribute"), (20, "all")])
def test_xfs_directory_format_changes_fire_inside_the_predicted_calls(cli, scratch, name_length, trace):
    report = _probe(cli, scratch, "xfs-default", 560, name_length, trace=trace)
    # attribute: one extra traced run after the measured one; all: the measured run itself
    assert report["trace"]["runs_traced"] == ([1] if trace == "attribute" else [0])
    if trace == "attribute":  # its observer effect is measured against the untraced run
        assert report["trace"]["median_ratio_vs_untraced"] > 0
    table = {row["structure"]: row for row in report["structures"]}
    for structure, event in XFS_FORMAT_CHANGES.items():
        predicted = _predicted(report, structure)
        assert _seen(report, event) == [predicted], (structure, report["structural_events"])
        assert table[structure]["verdict"] == "confirmed" and table[structure]["seen"] == [predicted]
    # reported with evidence whether or not the latency flags it (leaf->node rarely is)
    (node,) = [e for e in report["structural_events"] if e["event"] == "xfs_dir2_leaf_to_node"]
    assert node["runs"] == 1 and isinstance(node["latency_outlier"], bool)
    assert {"index", "event", "runs", "latency_outlier"} == set(node)
    # every flag and threshold carries the kernel's side, and its note says it
    for flag in report["flags"] + report["thresholds"]:
        assert set(flag["kernel"]) >= {"events", "io_requests", "io_bytes"}
        assert "kernel (1 traced run)" in flag["note"]
        if flag.get("structure") == "xfs-dir-shortform-to-block":
            assert flag["kernel"]["events"]["xfs_dir2_sf_to_block"] == 1
            assert flag["kernel"]["io_requests"] >= 1 and flag["kernel"]["io_bytes"] > 0
    # the events are in the run record as a compact array, not text
    events = store.list_runs()[-1].load_array("trace_events")
    assert events.dtype == EVENT_DTYPE and len(events) == report["trace"]["events"]
    code = report["trace"]["event_names"].index("xfs/xfs_dir2_sf_to_block")
    assert (events["code"] == code).sum() == 1


@pytest.mark.privileged
def test_ext4_htree_conversion_allocates_its_block_in_the_predicted_call(cli, scratch):
    report = _probe(cli, scratch, "ext4-default", 300, 7)
    predicted = _predicted(report, "ext4-dir-htree-conversion")
    assert predicted in _seen(report, "ext4_allocate_blocks")
    row = next(r for r in report["structures"] if r["structure"] == "ext4-dir-htree-conversion")
    assert row["verdict"] == "confirmed"


def _start_long_traced_probe():
    return runner.start("probe", spec_from_data("probe", {"op": "write-fsync", "files": 20000, "runs": 1, "trace": "all",
                                  "sync_before": "none"}),
                        TargetSpec("ram", size_bytes=400 * 2**20), recipes.load("ext4-default"))


@pytest.mark.privileged
def test_cancel_removes_the_tracefs_instance():
    handle = _start_long_traced_probe()
    try:
        assert wait_for(lambda: fsscope_instances() != []), "no instance appeared"
        assert any(e.kind == "tracefs" for e in Journal().entries())
        handle.cancel()
        handle.drain()
    finally:
        handle.kill()
    assert handle.run_dir.status() == "cancelled"
    assert fsscope_instances() == [] and Journal().entries() == []
    assert handle.run_dir.report()["trace"]["active"]  # what it traced before the cancel is kept


@pytest.mark.privileged
def test_sigkill_leaves_the_instance_to_fsscope_cleanup(cli):
    handle = _start_long_traced_probe()
    try:
        assert wait_for(lambda: fsscope_instances() != []), "no instance appeared"
        (instance,) = fsscope_instances()
        os.kill(handle.pid, signal.SIGKILL)  # the job child only: nobody cleans up after it
        handle.proc.wait()
        assert instance.is_dir()  # really left behind
        out = cli("cleanup")
        assert out.returncode == 0, out.stderr
        assert f"removed tracefs instance {instance}" in out.stdout
        assert not instance.exists() and fsscope_instances() == []
    finally:
        handle.kill()
        handle.wait()
    assert Journal().entries() == []


def test_rwbs_flags_parse_like_blk_fill_rwbs():
    # blk_fill_rwbs(): optional F (preflush), the op letter, then F (FUA), A, S, M
    assert rwbs_bits("W") == RWBS_WRITE
    assert rwbs_bits("WS") == RWBS_WRITE | RWBS_SYNC
    assert rwbs_bits("FWFS") == RWBS_FLUSH | RWBS_WRITE | RWBS_FUA | RWBS_SYNC
    assert rwbs_bits("RM") & RWBS_READ and not rwbs_bits("RM") & RWBS_WRITE
    assert rwbs_bits("FF") == RWBS_FLUSH  # a preflush-only flush request
    assert rwbs_bits("F") == RWBS_FLUSH


def test_an_events_format_file_without_an_id_is_skipped_not_a_crash(tmp_path):
    """A format file the kernel never wrote (no ``ID:`` line) leaves its event undecoded;
    the events whose format files are real still decode."""
    issue, complete = BLOCK
    real = Path("/sys/kernel/tracing/events") / complete.event / "format"
    if not real.is_file():
        pytest.skip("tracefs is not mounted at /sys/kernel/tracing")
    (tmp_path / complete.event).mkdir(parents=True)
    (tmp_path / complete.event / "format").write_text(real.read_text())
    (tmp_path / issue.event).mkdir(parents=True)
    (tmp_path / issue.event / "format").write_text("name: block_rq_issue\nformat:\n")
    with pytest.raises(ValueError, match="ID"):
        parse_format("name: block_rq_issue\nformat:\n")
    table = layouts(tmp_path, [issue, complete])
    assert [layout.entry.event for layout in table.values()] == [complete.event]
    assert list(table) == [int((real.parent / "id").read_text())]


def test_events_are_placed_in_the_call_whose_interval_holds_them():
    start_ns = np.array([100, 200, 300, 400], dtype=np.int64)
    latency_ns = np.array([50, 50, 50, -1], dtype=np.int64)  # call 3 never ran
    ts_ns = np.array([99, 100, 150, 151, 250, 299, 420], dtype=np.int64)
    assert attribute.call_index(ts_ns, start_ns, latency_ns).tolist() == [-1, 0, 0, -1, 1, -1, -1]


def test_per_call_io_counts_requests_bytes_flush_and_fua():
    names = ["block/block_rq_issue", "block/block_rq_complete"]
    events = np.zeros(4, EVENT_DTYPE)
    events["ts_ns"] = [110, 120, 210, 215]
    events["code"] = [0, 1, 0, 0]
    events["bytes"] = [4096, 4096, 0, 8192]
    events["flags"] = [RWBS_WRITE | RWBS_SYNC, RWBS_WRITE, RWBS_FLUSH, RWBS_WRITE | RWBS_FUA]
    io = attribute.per_call_io(events, names, np.array([100, 200]), np.array([50, 50]))
    assert io["requests"].tolist() == [1, 2]  # the completion is not a request
    assert io["bytes"].tolist() == [4096, 8192]
    assert io["flush"].tolist() == [0, 1] and io["fua"].tolist() == [0, 1]


@pytest.mark.privileged
def test_a_forced_sync_shows_its_journal_commit_in_its_bench_window():
    handle = runner.start("bench", spec_from_data("bench", {"personality": "webserver", "runs": 1, "duration_s": 4,
                                    "window_sizes_s": [1], "nfiles": 100}),
                          TargetSpec("ram", size_bytes=256 * 2**20), recipes.load("ext4-default"))
    synced = []
    for event in handle.records():
        if event.kind == "samples" and not synced:  # the timed run is going: force a commit
            mountpoint = next(e.fields["mountpoint"] for e in Journal().entries() if e.kind == "mount")
            t0 = time.monotonic_ns()
            subprocess.run(["sync", "-f", mountpoint], check=True)  # syncfs(2) of this fs only
            synced.append((t0, time.monotonic_ns()))
    report = handle.run_dir.report()
    assert synced and report["trace"]["active"], report["trace"]
    kernel = report["runs"][0]["kernel_windows"]
    events = handle.run_dir.load_array("run0_trace_events")
    code = report["trace"]["event_names"].index("jbd2/jbd2_start_commit")
    commits = events["ts_ns"][events["code"] == code]
    t0, t1 = synced[0]
    inside = commits[(commits >= t0) & (commits <= t1)]
    assert len(inside), "the sync started no journal commit"
    window = int((inside[0] - kernel["start_ns"]) // int(kernel["window_s"] * 1e9))
    assert kernel["journal_commits"][window] >= 1
    assert sum(kernel["bytes_written"]) > 0 and len(kernel["journal_commits"]) == 4


@pytest.mark.privileged
def test_each_synchronous_write_is_attributed_its_device_requests(fresh_fs, scratch):
    """The syncwrite attribution: per O_DSYNC write, the block requests, bytes and cache
    flushes that reached the device inside that call."""
    from fsscope.trace.session import Tracer

    mounted = fresh_fs("ext4-default", size_bytes=256 * 2**20)
    write_bytes, writes = 8192, 12
    start_ns = np.zeros(writes, np.int64)
    latency_ns = np.zeros(writes, np.int64)
    fd = os.open(mounted.workdir / "sync.dat", os.O_CREAT | os.O_WRONLY | os.O_DSYNC, 0o644)
    try:
        with Tracer(scratch / "raw", fs=mounted.fs, job="syncwrite", pid=os.getpid(),
                    device=mounted.device, journal=Journal()) as tracer:
            for i in range(writes):
                t0 = time.monotonic_ns()
                os.write(fd, b"s" * write_bytes)
                start_ns[i], latency_ns[i] = t0, time.monotonic_ns() - t0
    finally:
        os.close(fd)
    result = tracer.result
    assert result.lost == 0 and fsscope_instances() == []
    assert not [e for e in Journal().entries() if e.kind == "tracefs"]
    io = attribute.per_call_io(result.events, result.names, start_ns, latency_ns)
    assert (io["requests"] >= 1).all()
    assert (io["bytes"] >= write_bytes).all()  # the data itself, plus the journal's blocks
    cache = Path(f"/sys/block/{Path(os.path.realpath(mounted.device)).name}/queue/write_cache")
    if cache.read_text().strip() == "write back":  # a volatile cache: durability needs a flush
        assert ((io["flush"] + io["fua"]) >= 1).all(), io


def test_a_prediction_the_kernel_contradicts_is_reported_as_such():
    predictions = [{"structure": "xfs-dir-shortform-to-block", "kind": "outlier", "index": 13,
                    "tolerance_files": 0}]
    structural = [{"index": 12, "event": "xfs_dir2_sf_to_block", "runs": 1, "latency_outlier": True},
                  {"index": 500, "event": "xfs_dir2_leaf_to_node", "runs": 1, "latency_outlier": False}]
    enabled = ["xfs/xfs_dir2_sf_to_block", "xfs/xfs_dir2_leaf_to_node"]
    rows = {r["structure"]: r for r in attribute.structure_table(predictions, structural, {12}, enabled)}
    sf = rows["xfs-dir-shortform-to-block"]
    assert sf["verdict"].startswith("contradicted") and "[12]" in sf["verdict"] and sf["seen"] == [12]
    node = rows["xfs-dir-leaf-to-node"]  # fired, though nothing predicted it in this range
    assert node["verdict"] == "seen by the kernel, not predicted" and node["seen"] == [500]


def test_only_kernel_marked_predictions_become_kernel_thresholds():
    """A prediction the kernel marks at its index is a threshold with kernel evidence and the
    latency it cost; one the kernel marks elsewhere, or a hash window without the event inside
    it, is not; a window with the event inside says the index seen, not a predicted one."""
    predictions = [{"structure": "xfs-dir-shortform-to-block", "kind": "outlier", "index": 6},
                   {"structure": "xfs-dir-block-to-leaf", "kind": "outlier", "index": 201},
                   {"structure": "xfs-dir-leaf-to-node", "kind": "outlier", "index": 1012},
                   {"structure": "ext4-htree-first-leaf-split", "kind": "outlier", "index": None,
                    "index_low": 100, "index_high": 180},
                   {"structure": "ext4-htree-first-leaf-split", "kind": "outlier", "index": None,
                    "index_low": 300, "index_high": 380}]
    run = attribute.RunCalls(0, np.full(1100, 10_000, np.int64))
    for index, event in ((6, "xfs_dir2_sf_to_block"), (201, "xfs_dir2_block_to_leaf"),
                         (1015, "xfs_dir2_leaf_to_node"), (150, "ext4_allocate_blocks")):
        run.events[index][event] += 1
    structural = attribute.structural_events([run], set())
    enabled = ["xfs/xfs_dir2_sf_to_block", "xfs/xfs_dir2_block_to_leaf", "xfs/xfs_dir2_leaf_to_node",
               "ext4/ext4_allocate_blocks"]
    rows = attribute.structure_table(predictions, structural, set(), enabled, [run])
    measured = np.full((3, 1100), 10_000, np.int64)
    measured[:, 201] = 40_000  # slower than its neighbours, yet not flagged
    thresholds = attribute.kernel_thresholds(rows, [run], measured, "creat", set())
    found = {t["structure"]: t for t in thresholds}
    sf, leaf = found["xfs-dir-shortform-to-block"], found["xfs-dir-block-to-leaf"]
    assert (sf["index"], sf["evidence"], sf["latency_ratio"]) == (6, "kernel", 1.0)
    assert sf["latency"] == "not distinguishable from its neighbours (median ×1.00)"
    assert sf["kernel"]["events"] == {"xfs_dir2_sf_to_block": 1}
    assert leaf["index"] == 201 and leaf["latency"].startswith("slower than its neighbours (median ×4.00)")
    assert "xfs-dir-leaf-to-node" not in found  # the kernel marked 1015, not the predicted 1012
    (split,) = [t for t in thresholds if t["structure"] == "ext4-htree-first-leaf-split"]  # not 300..380
    assert split["index"] == 150 and split["predicted_index"] is None and split["window"] == [100, 180]
    assert "saw it at file 150" in split["note"]
    # already reported by a latency flag with the kernel's word: not twice
    taken = {("xfs-dir-shortform-to-block", 6)}
    assert [t["index"] for t in attribute.kernel_thresholds(rows, [run], measured, "creat", taken)
            if t["structure"] == "xfs-dir-shortform-to-block"] == []


def test_a_preempted_call_names_who_took_the_cpu_and_for_how_long():
    pid, other = 4242, 77
    names = ["sched/sched_switch"]
    events = np.zeros(2, EVENT_DTYPE)
    events["ts_ns"] = [100_000, 400_000]
    events["sector"] = [pid, other]      # prev_pid
    events["arg"] = [other, pid]         # next_pid
    events["flags"] = [0, 1]             # prev_state: R (preempted), then the other one sleeps
    run = attribute.attribute_run(events, names, np.array([0]), np.array([1_000_000]), pid=pid,
                                  comms={other: "kworker/1:1"})
    assert attribute.call_cause(run, 0) == "preempted by kworker/1:1 for 300 µs"
    assert attribute.kernel_evidence([run], [0])["off_cpu"] == ["preempted by kworker/1:1 for 300 µs"]


def test_a_series_says_in_how_many_of_its_calls_each_event_fired():
    run = attribute.RunCalls(0, np.zeros(200, np.int64))
    for index in (60, 124):  # two of the three members allocated; one of them also converted
        run.events[index]["xfs_alloc_vextent_finish"] += 1
    run.events[124]["xfs_dir2_block_to_leaf"] += 1
    kernel = attribute.kernel_evidence([run], [60, 124, 188])
    assert kernel["members"] == {"xfs_alloc_vextent_finish": 2, "xfs_dir2_block_to_leaf": 1}
    assert kernel["events"] == {"xfs_alloc_vextent_finish": 1, "xfs_dir2_block_to_leaf": 1}
    sentence = attribute.evidence_sentence(kernel, "creat")
    assert "xfs_alloc_vextent_finish fired in 2/3" in sentence and "block_to_leaf fired in 1/3" in sentence


def test_a_call_blocked_without_io_of_its_own_waited_on_another_process():
    """Off the CPU and not runnable, with no block request of its own: it waited on someone
    else. A call that did its own I/O keeps its wait (the structure's cost); a preempted one
    is counted by the CPU-wait accounting instead."""
    from fsscope.trace.attribute import OffCpu, RunCalls, waited_on_others_ns

    calls = RunCalls(run=0, latency_ns=np.full(10, 50_000))
    calls.off_cpu[5] = [OffCpu(5, 30_000, False, ""), OffCpu(5, 5_000, False, "")]
    calls.off_cpu[6] = [OffCpu(6, 30_000, False, "")]
    calls.io_requests[6] = 1
    calls.off_cpu[7] = [OffCpu(7, 30_000, True, "hog")]
    assert waited_on_others_ns(calls, 10).tolist() == [0, 0, 0, 0, 0, 35_000, 0, 0, 0, 0]


# --- in-memory structures: slab caches -------------------------------------------------------


def test_slabinfo_gives_each_caches_objects_per_slab():
    from fsscope.explain.slab import parse_slabinfo, read_slabinfo

    text = ("slabinfo - version: 2.1\n# name <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : ...\n"
            "dentry            382389 382389    192   21    1 : tunables    0    0    0 : slabdata  18209  18209  0\n"
            "shmem_inode_cache 342027 342027    752   21    4 : tunables    0    0    0 : slabdata  16287  16287  0\n"
            "broken line\n")
    caches = parse_slabinfo(text)
    assert set(caches) == {"dentry", "shmem_inode_cache"}
    assert caches["shmem_inode_cache"].order == 2 and caches["dentry"].order == 0
    assert caches["dentry"].arithmetic() == "21 objects of 192 B per 4 KiB slab (1 page)"
    if os.geteuid() == 0:  # this kernel's own, read as the probe reads it at the run
        dentry = read_slabinfo()["dentry"]
        assert dentry.objects_per_slab * dentry.object_bytes <= dentry.pages_per_slab * 4096


def test_a_series_is_a_slabs_only_with_its_period_and_its_page_allocations():
    """Every 21 creates explained by dentry's 21 objects per slab where the member calls took its
    new slab (pages, then a dentry); the same calls every 15 are not dentry's (15 is no multiple
    of 21), and a series whose calls take more objects of a cache than the others is that
    cache's in-memory structure."""
    from fsscope.explain.slab import SlabCache

    caches = {"dentry": SlabCache(name="dentry", object_bytes=192, objects_per_slab=21, pages_per_slab=1)}
    members = list(range(20, 420, 21))

    def traced(run_index: int, slab_at: list[int]) -> attribute.RunCalls:
        """A run whose calls at ``slab_at`` took dentry's new slab and were slow for it."""
        run = attribute.RunCalls(run_index, np.full(420, 3_000, np.int64))
        for index in range(420):
            run.objects[index]["dentry"] += 1
        for index in slab_at:
            run.events[index][attribute.NEW_SLAB + "dentry"] += 1
            run.latency_ns[index] = 9_000
        run.slab_orders["dentry"] = 0
        return run

    run = traced(0, members[:-2])  # all but two took the new slab
    found = attribute.in_memory([run], members, 21, caches)
    assert found is not None and found["structure"] == "slab:dentry" and found["objects_per_slab"] == 21
    assert "21 objects of 192 B per 4 KiB slab" in found["note"] and "inside 18 of 18 member calls" in found["note"]
    # the slab's phase moved in the other runs (their last unlinks left a partial slab): only the
    # runs where the members were slow say what made them slow
    moved = [traced(r, [i + 7 for i in members[:-1]]) for r in (1, 2, 3)]
    found = attribute.in_memory([run, *moved], members, 21, caches)
    assert found is not None and found["structure"] == "slab:dentry", found
    # ... and slow members that did not take the slab are not the slab's
    unslabbed = traced(4, [])
    unslabbed.latency_ns[members] = 9_000
    assert attribute.in_memory([unslabbed, *moved], members, 21, caches) is None
    assert attribute.in_memory([run], list(range(20, 420, 15)), 15, caches) is None
    for index in range(14, 420, 15):
        run.objects[index]["maple_node"] += 3
    tree = attribute.in_memory([run], list(range(14, 420, 15)), 15, caches)
    assert tree is not None and tree["structure"] == "memory:maple_node" and tree["objects_per_slab"] is None


@pytest.mark.privileged
@pytest.mark.slow
def test_a_tmpfs_probe_explains_its_series_by_the_kernels_in_memory_structures(cli):
    """tmpfs has no on-disk format to predict, yet 1,000 creates repeat slow calls: the
    directory's in-memory index and the slab caches. Traced (--trace all, 10 runs), at most one
    repeatable series stays unexplained, and a slab series names its cache and objects per slab."""
    where = Path(tempfile.mkdtemp(dir=os.environ["FSSCOPE_RAM_DIR"]))
    try:
        out_json = where.parent / f"{where.name}.json"
        done = cli("probe", "--dir", str(where), "--files", "1000", "--runs", "10", "--max-runs", "10",
                   "--trace", "all", "--json", str(out_json), timeout_s=900)
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(out_json.read_text())
        out_json.unlink()
    finally:
        shutil.rmtree(where, ignore_errors=True)
    assert report["trace"]["active"] and "kmem/kmem_cache_alloc" in report["trace"]["enabled"], report["trace"]
    series = [f for f in report["flags"] if f["flag"] == "series"]
    unexplained = [f["title"] for f in series if not f.get("structure")]
    assert len(unexplained) <= 1, [f["title"] for f in series]
    explained = [f for f in series if f.get("structure")]
    assert explained, [f["title"] for f in series]
    for flag in explained:
        kind, cache = flag["structure"].split(":", 1)
        assert kind in ("slab", "memory") and cache in flag["title"] and cache in flag["note"], flag
        assert "Kernel vs prediction" not in flag["note"], flag  # its own numbers, not another series' row
        if kind == "slab":
            (slab,) = [s for s in report["slabs"] if s["name"] == cache]
            assert f"{slab['objects_per_slab']} objects of" in flag["note"] and "the slow call allocated it" in flag["note"]
    rows = {r["structure"] for r in report["structures"]}
    assert {f["structure"] for f in explained} <= rows
    by_member: dict[int, set[str]] = {}
    for row in (s | f for s, f in zip(report["series"], series)):
        for m in row["members"] if row.get("structure") else ():
            by_member.setdefault(m, set()).add(row["structure"])
    for flag in [f for f in report["flags"] if f["flag"] == "outlier" and f["index"] in by_member]:
        # a member of an explained series (of one of them, where two explained series share it)
        assert flag.get("structure") in by_member[flag["index"]], flag
        events = " ".join((flag.get("kernel") or {}).get("events") or {})
        shown = [s for s in by_member[flag["index"]] if s.split(":", 1)[1] in events]
        assert not shown or flag["structure"] in shown, flag  # the one its own call's events show
    # an unexplained flag is listed as such, or counted among those the screen leaves to --json
    # (when the explained ones already fill MAX_FLAGS_SHOWN)
    assert "repeatable, unexplained (no rule and no kernel event names a cause)" in done.stdout \
        or "more unexplained flags (all in --json" in done.stdout \
        or not [f for f in report["flags"] if not f.get("structure")]
