"""The probe end to end: real mkfs per run, the latency matrix in the run record, the JSON contract."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fsscope import recipes, store
from fsscope.engine import runner
from fsscope.engine.registry import spec_from_data
from fsscope.targets import TargetSpec
from fsscope.targets.journal import Journal
from fsscope.workloads.probe_records import Samples


@pytest.mark.privileged
def test_probe_cli_json_contract_on_xfs(cli, scratch):
    out_json = scratch / "probe.json"
    for _attempt in range(2):  # load on a shared machine can spoil one probe's outliers
        out = cli("probe", "--recipe", "xfs-default", "--ram", "--size", "400M", "--files", "200", "--runs", "3",
                  "--json", str(out_json))
        assert out.returncode == 0, out.stderr
        report = json.loads(out_json.read_text())
        if "xfs-dir-shortform-to-block" in {t["structure"] for t in report["thresholds"]}:
            break
    runs = report["decisions"]["runs_used"]  # at least the 3 asked for, more if the noise needed them
    assert report["op"] == "creat" and report["files"] == 200 and report["runs"] == runs >= 3
    assert report["timed_in"] == "native"  # the timed loop in C (probe_calls.c)
    assert report["sync"]["scope"] == "fs" and "syncfs" in report["sync"]["note"]
    for key in ("count", "mean_ns", "sd_ns", "min_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns", "rsd"):
        assert key in report["stats"]["overall"]
    assert report["stats"]["overall"]["count"] == 200 * runs
    # xfs turns the short-form directory into a block at a predictable file: at least that one
    assert report["outliers"], "no outlier on xfs (the short-form to block conversion is one)"
    for outlier in report["outliers"]:
        assert set(outlier) >= {"index", "runs_flagged", "median_ns"} and outlier["runs_flagged"] >= 2
    assert "xfs-dir-shortform-to-block" in {t["structure"] for t in report["thresholds"]}
    for key in ("series", "level_shifts"):
        assert isinstance(report[key], list)
        for finding in report[key]:
            assert "start" in finding or "index" in finding
    if report["trace"]["active"]:  # the kernel's word on each decided file: its events inside that call
        (shortform,) = [c for c in report["decisions"]["candidates"] if c["source"] == "xfs-dir-shortform-to-block"]
        assert "xfs_dir2_sf_to_block" in shortform["kernel"], report["decisions"]
    run = store.list_runs()[-1]
    matrix = run.load_array("latency_ns")
    assert matrix.shape == (runs, 200) and matrix.dtype == np.int64 and (matrix > 0).all()
    assert run.load_array("wait_ns").shape == (runs, 200)
    assert report["stats"]["overall"]["max_ns"] == int(matrix.max())
    mkfs = [c for c in run.manifest()["target"]["commands"] if c["argv"][0] == "mkfs.xfs"]
    traced = 1 if report["trace"]["active"] else 0  # --trace attribute: one extra, traced run
    assert len(mkfs) == runs + traced  # a fresh file system per run
    assert "creat × 200 files" in out.stdout


def test_probe_on_a_directory_without_formatting(cli, scratch):
    out = cli("probe", "--dir", str(scratch), "--files", "100", "--runs", "2", "--op", "stat")
    assert out.returncode == 0, out.stderr
    assert "stat × 100 files" in out.stdout
    assert list(scratch.iterdir()) == []


@pytest.mark.privileged
def test_cancelled_probe_keeps_measured_rows_and_cleans_up():
    handle = runner.start("probe", spec_from_data("probe", {"files": 20000, "runs": 3}), TargetSpec("ram", size_bytes=256 * 2**20),
                          recipes.load("ext4-default"))
    samples = 0
    for event in handle.records():
        if isinstance(event, Samples):
            samples += len(event.latency_ns)
            if samples > 500:
                handle.cancel()
    assert handle.run_dir.status() == "cancelled"
    matrix = handle.run_dir.load_array("latency_ns")
    measured = (matrix >= 0).sum()
    assert measured >= 500 and (matrix[0, :500] > 0).all()
    report = handle.run_dir.report()
    assert report["runs_completed"] >= 1
    assert matrix.shape[0] == report["runs_completed"] < 3  # runs never started are not in the record
    assert "cancelled" in report["decisions"]["why"]
    assert Journal().entries() == []


def test_bad_probe_arguments_are_one_line(cli):
    out = cli("probe", "--dir", "/tmp", "--files", "1000", "--name-length", "2")
    assert out.returncode == 2 and "too short for 1000 files" in out.stderr
    out = cli("probe", "--op", "chmod", "--dir", "/tmp")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
