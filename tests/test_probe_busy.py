"""The probe's verdicts on a busy machine: a CPU hog on every core and another process
writing a device of its own, both made by the test and gone after it.

- the same thresholds at the same indices as without that load, and no repeatable flag the
  unloaded probe does not have (real RAM images, a fresh mkfs per run);
- the probe counts, per call, the time it waited for a CPU (the kernel's schedstat run delay)
  and a call slow only because of that does not vote;
- the sync before each call is the measured file system's (syncfs), not the machine's.

"Without that load" is this shared machine as it is (other engineers' tests run too): the
comparison is with and without the load this test adds. ext4's file 0 (the first create
after the mount) is slow in roughly three runs of four here, loaded or not, and its verdict
flips between two unloaded probes as well, so it is left out of the comparison. XFS runs 150
files: the short-form, cluster-read, inode-chunk and block-to-leaf files, but no periodic
series (two inode chunks at most): whether the series search chains ~2x members is that
detector's verdict (reworked apart), not the sequential decisions this file checks.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from fsscope import recipes
from fsscope.engine import runner
from fsscope.engine.registry import spec_from_data
from fsscope.targets import TargetSpec
from fsscope.workloads.probe import ProbeSpec, measure_run, pin_cpu

pytestmark = pytest.mark.privileged

SIZE_BYTES = 400 * 2**20

#: name -> (recipe, extra mkfs options, files, structures the comparison leaves out)
CONFIGS = {
    "ext4-1k": ("ext4-default", "-b 1024", 200, {"first-call"}),
    "ext4-2k": ("ext4-default", "-b 2048", 300, {"first-call"}),
    "xfs": ("xfs-default", "", 150, set()),
}


def _probe(config: str, **spec) -> dict:
    recipe, mkfs_opts, files, _ = CONFIGS[config]
    handle = runner.start("probe", spec_from_data("probe", {"files": files, "runs": 5, "trace": "off", **spec}),
                          TargetSpec("ram", size_bytes=SIZE_BYTES), recipes.load(recipe).with_extra(mkfs_opts, ""))
    handle.drain()
    assert handle.run_dir.status() == "ok", handle.run_dir.manifest().get("error")
    return handle.run_dir.report()


def _in_between(report: dict) -> set[int]:
    """Files the probe decided intermittent: slow in some runs, too rarely to be repeatable."""
    return {c["index"] for c in report["decisions"]["candidates"] if c["verdict"] == "intermittent"}


def _verdicts(report: dict, config: str, other: dict | None = None) -> tuple[set, set]:
    """(thresholds as (structure, kind, index), every flag as (kind, index)), minus what the
    config leaves out and the files either probe found in between (a file near the 2x bar is
    slow in some runs; whether it lands above that share is luck, loaded or not)."""
    left_out = CONFIGS[config][3]
    in_between = _in_between(report) | (_in_between(other) if other else set())
    # Periodic series and linear growth are judged from per-file medians, not by the sequential
    # test this file checks. On a loaded 2-CPU machine a chance chain among the loaded run's
    # outliers can pass as a series (a known gap of #25). ext4-2k's ramp over block 0 flips
    # between unloaded probes too: of three in a row, one attributed it to the linear scan, one
    # found it without attribution and one found none. No config here predicts a level shift
    # (btrfs' leaf split is the one that does), so a level shift is the median curve's
    # segmentation too: XFS' step at the short-form-to-block file 12 is found by one unloaded
    # probe in about seven here and not by the next.
    median_curve = {"series", "lineargrowth", "levelshift"}
    thresholds = {(f["structure"], f["flag"], f["index"]) for f in report["thresholds"]
                  if f["structure"] not in left_out and f["index"] not in in_between
                  and f["flag"] not in median_curve}
    flags = {(f["flag"], f["index"]) for f in report["flags"]
             if f.get("structure") not in left_out and f["index"] not in in_between
             and f["flag"] not in median_curve}
    return thresholds, flags


def _cost(report: dict) -> str:
    decisions = report["decisions"]
    return json.dumps({"runs_used": decisions["runs_used"], "why": decisions["why"],
                       "disturbed_per_run": report["settings"]["disturbed_calls_per_run"],
                       "decisions": [(c["index"], c["source"], c["verdict"], c["slow_votes"], c["votes"])
                                     for c in decisions["candidates"]],
                       "flags": sorted((f["flag"], f["index"]) for f in report["flags"])})


@pytest.mark.parametrize("config", list(CONFIGS))
def test_same_thresholds_and_no_extra_flags_with_cpu_hogs_and_a_writer(config, cpu_hogs, device_writer,
                                                                       loop_device, record_property):
    structure = "xfs-dir-shortform-to-block" if config == "xfs" else "ext4-dir-htree-conversion"
    for _attempt in range(3):  # another pair when either probe was spoiled (shared machine)
        quiet = _probe(config)
        with cpu_hogs() as hogs, device_writer(loop_device("1G")) as writer:
            loaded = _probe(config)
            assert all(p.poll() is None for p in [*hogs, writer]), "the load stopped during the probe"
        assert all(p.returncode is not None for p in [*hogs, writer])  # killed and reaped
        quiet_thresholds, quiet_flags = _verdicts(quiet, config, loaded)
        loaded_thresholds, loaded_flags = _verdicts(loaded, config, quiet)
        if quiet_thresholds == loaded_thresholds and loaded_flags <= quiet_flags:
            break
    record_property("cost", {"quiet": _cost(quiet), "loaded": _cost(loaded)})
    print(f"{config}: quiet {_cost(quiet)}\n{config}: loaded {_cost(loaded)}")
    assert any(s == structure for s, _, _ in quiet_thresholds), _cost(quiet)
    assert loaded_thresholds == quiet_thresholds, (_cost(quiet), _cost(loaded))
    assert loaded_flags <= quiet_flags, (_cost(quiet), _cost(loaded))
    for report in (quiet, loaded):  # how many runs it took, and why, is in the report
        decisions = report["decisions"]
        assert decisions["runs_used"] == report["runs"] >= 5 and decisions["why"]
        assert report["sync"]["scope"] == "fs"


def test_a_call_slow_only_because_another_task_had_the_cpu_does_not_vote(tmp_path, cpu_hogs):
    """A hog on the probe's own CPU: the kernel's run delay lands in the calls it preempted."""
    previous = pin_cpu()
    try:
        with cpu_hogs(1) as (hog,):
            os.sched_setaffinity(hog.pid, os.sched_getaffinity(0))
            latency = np.empty((1, 3000), np.int64)
            wait = np.empty((1, 3000), np.int64)
            measure_run(tmp_path, ProbeSpec(files=3000, sync_before="none"), out=latency[0], wait_out=wait[0])
    finally:
        os.sched_setaffinity(0, previous)
    assert (latency > 0).all() and (wait >= 0).all()
    waited = np.flatnonzero(wait[0] > 0)
    assert waited.size > 0, "the hog never took the CPU from a call"
    # the two schedstat reads sit just outside the timed region: a preemption right there counts
    # too (the call then does not vote, which is safe); nearly all waits fall inside the call
    assert (wait[0, waited] <= latency[0, waited]).mean() > 0.8, (wait[0, waited], latency[0, waited])
    from fsscope.analysis.outliers import mask_disturbed

    masked, disturbed = mask_disturbed(latency, wait)
    assert disturbed.any() and (masked[disturbed] == -1).all()
    assert (masked[~disturbed] == latency[~disturbed]).all()


def test_the_sync_before_each_call_is_the_measured_file_systems_unless_asked(cli, scratch):
    for scope, word in (("fs", "syncfs"), ("global", "sync(2)")):
        out_json = scratch / f"{scope}.json"
        out = cli("probe", "--dir", str(scratch), "--files", "10", "--runs", "2", "--max-runs", "2",
                  "--trace", "off", "--sync", scope, "--json", str(out_json))
        assert out.returncode == 0, out.stderr
        report = json.loads(out_json.read_text())
        assert report["sync"]["scope"] == scope and word in report["sync"]["note"]
        assert f"sync: before each call: {word}" in " ".join(out.stdout.split())
        assert report["decisions"]["runs_used"] == 2 and not report["decisions"]["sequential"]
    out = cli("probe", "--dir", str(scratch), "--sync", "all")
    assert out.returncode == 2 and "--sync" in out.stderr
    out = cli("probe", "--dir", str(scratch), "--runs", "5", "--max-runs", "3")
    assert out.returncode == 2 and "max_runs must be at least 5" in out.stderr


def test_syncfs_does_not_wait_on_another_devices_writeback_as_sync_does(device_writer, loop_device):
    """With a writer busy on another device, the papers' sync() before each call waits on its
    writeback (measured here: a median 16-38 ms between calls); syncfs of the probed file
    system does not (54-179 µs)."""
    gaps_us = {}
    # the writer never syncs its device: its dirty pages are there for whoever calls sync() (on a
    # quiet machine a writer that syncs itself leaves sync() little to wait for)
    with device_writer(loop_device("256M"), fsync_every_mib=0):
        for scope in ("fs", "global"):
            handle = runner.start("probe", spec_from_data("probe", {"files": 40, "runs": 2, "max_runs": 2, "trace": "off", "sync_scope": scope}),
                                  TargetSpec("ram", size_bytes=256 * 2**20), recipes.load("ext4-default"))
            handle.drain()
            assert handle.run_dir.status() == "ok", handle.run_dir.manifest().get("error")
            assert handle.run_dir.report()["sync"]["scope"] == scope
            start, latency = handle.run_dir.load_array("start_ns"), handle.run_dir.load_array("latency_ns")
            gaps_us[scope] = float(np.median(start[:, 1:] - start[:, :-1] - latency[:, :-1])) / 1e3
    assert 5 * gaps_us["fs"] < gaps_us["global"], gaps_us
