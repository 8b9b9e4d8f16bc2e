"""The probe end to end: real mkfs per run, the latency matrix in the run record, the JSON contract."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fsscope import recipes, store
from fsscope.engine import runner
from fsscope.targets import TargetSpec
from fsscope.targets.journal import Journal


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
    assert report["op"] == "creat" and report["files"] == 200 and report["runs"] == 3
    assert report["timed_in"] == "native"  # each call's sync and timed region in C (probe_calls.c)
    for key in ("count", "mean_ns", "sd_ns", "min_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns", "rsd"):
        assert key in report["stats"]["overall"]
    assert report["stats"]["overall"]["count"] == 600
    # xfs turns the short-form directory into a block at a predictable file: at least that one
    assert report["outliers"], "no outlier on xfs (the short-form to block conversion is one)"
    for outlier in report["outliers"]:
        assert set(outlier) >= {"index", "runs_flagged", "median_ns"} and outlier["runs_flagged"] >= 2
    assert "xfs-dir-shortform-to-block" in {t["structure"] for t in report["thresholds"]}
    for key in ("series", "level_shifts"):
        assert isinstance(report[key], list)
        for finding in report[key]:
            assert "start" in finding or "index" in finding
    run = store.list_runs()[-1]
    matrix = run.load_array("latency_ns")
    assert matrix.shape == (3, 200) and matrix.dtype == np.int64 and (matrix > 0).all()
    assert report["stats"]["overall"]["max_ns"] == int(matrix.max())
    mkfs = [c for c in run.manifest()["target"]["commands"] if c["argv"][0] == "mkfs.xfs"]
    traced = 1 if report["trace"]["active"] else 0  # --trace attribute: one extra, traced run
    assert len(mkfs) == 3 + traced  # a fresh file system per run
    assert "creat × 200 files" in out.stdout


def test_probe_on_a_directory_without_formatting(cli, scratch):
    out = cli("probe", "--dir", str(scratch), "--files", "100", "--runs", "2", "--op", "stat")
    assert out.returncode == 0, out.stderr
    assert "stat × 100 files" in out.stdout
    assert list(scratch.iterdir()) == []


@pytest.mark.privileged
def test_cancelled_probe_keeps_measured_rows_and_cleans_up():
    handle = runner.start("probe", {"files": 20000, "runs": 3}, TargetSpec("ram", size_bytes=256 * 2**20),
                          recipes.load("ext4-default"))
    samples = 0
    for event in handle.events():
        if event["kind"] == "samples":
            samples += len(event["latency_ns"])
            if samples > 500:
                handle.cancel()
    assert handle.run_dir.status() == "cancelled"
    matrix = handle.run_dir.load_array("latency_ns")
    measured = (matrix >= 0).sum()
    assert measured >= 500 and (matrix[0, :500] > 0).all()
    assert (matrix[-1] == -1).all()  # the last run never started
    assert handle.run_dir.report()["runs_completed"] >= 1
    assert Journal().entries() == []


def test_bad_probe_arguments_are_one_line(cli):
    out = cli("probe", "--dir", "/tmp", "--files", "1000", "--name-length", "2")
    assert out.returncode == 2 and "too short for 1000 files" in out.stderr
    out = cli("probe", "--op", "chmod", "--dir", "/tmp")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
