"""The bench and syncwrite jobs end to end: real short personality runs through the engine
(child process, fresh file system per run), the JSON contract, the report recomputed from the
saved arrays, recipe comparison, cancel, and one-line errors for bad flags."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from fsscope import recipes, store
from fsscope.analysis import generator
from fsscope.analysis.variation.grid import bucket_mid_ns
from fsscope.analysis.variation.stats import welch
from fsscope.engine import runner
from fsscope.engine.events import Finding
from fsscope.engine.registry import spec_from_data
from fsscope.records import plain
from fsscope.targets import TargetSpec
from fsscope.targets.existing import existing_fs
from fsscope.targets.journal import Journal
from fsscope.workloads.bench_job import WindowSample
from fsscope.workloads.bench_records import TelemetrySample

# small and short: 2 runs of 2 s, a few workers, a small file set
SMALL = ["--runs", "2", "--duration", "2", "--files", "60", "--mean-file-size", "8K", "--workers", "2"]
SMALL_SPEC = {"runs": 2, "duration_s": 2, "nfiles": 60, "mean_file_size_bytes": 8192, "workers": 2}


def check_contract(report: dict, personality: str, runs: int, windows: tuple[str, ...]) -> None:
    assert report["personality"] == personality
    assert len(report["runs"]) == runs
    for run in report["runs"]:
        assert run["ops_per_s"] > 0
        assert set(run["windows"]) == set(windows)
        assert all(isinstance(run["windows"][w], list) for w in windows)
        for op, entry in run["ops"].items():
            assert {"count", "p50_ns", "p99_ns"} <= set(entry), op
        assert sum(e["count"] for e in run["ops"].values()) > 0
    assert {"relative_range", "rsd"} <= set(report["variation"])
    for flag in report["flags"]:
        assert {"kind", "note"} <= set(flag) and flag["note"]


def hist_percentile(hist: np.ndarray, q: float) -> float:
    """Nearest-rank percentile of a bucket histogram, written out here (not the library's)."""
    cumulative = np.cumsum(hist)
    index = int(np.argmax(cumulative >= math.ceil(q / 100 * cumulative[-1])))
    return float(bucket_mid_ns(index))


def check_against_arrays(report: dict, window_s: int) -> None:
    """Every variation number in the report, recomputed from the run directory's arrays."""
    run_dir = store.find_run(report["run_id"])
    elapsed = run_dir.load_array("elapsed_s", mmap=False)
    assert elapsed.shape == (len(report["runs"]),)
    ops_per_s = []
    for r, run in enumerate(report["runs"]):
        counts = run_dir.load_array(f"run{r}_counts", mmap=False)
        hist = run_dir.load_array(f"run{r}_latency_hist", mmap=False)
        io_bytes = run_dir.load_array(f"run{r}_io_bytes", mmap=False)
        lat_sum = run_dir.load_array(f"run{r}_latency_sum_ns", mmap=False)
        assert counts.ndim == 2 and counts.shape[0] == len(run["ops"])
        total = int(counts.sum())
        ops_per_s.append(total / elapsed[r])
        assert run["ops_per_s"] == pytest.approx(total / elapsed[r], rel=1e-12)
        per_bin = counts.sum(axis=0)
        n = per_bin.size // window_s
        expected = per_bin[: n * window_s].reshape(n, window_s).sum(axis=1) / window_s
        assert run["windows"][str(window_s)] == pytest.approx(expected.tolist(), rel=1e-12)
        for i, entry in enumerate(run["ops"].values()):
            assert entry["count"] == int(counts[i].sum())
            assert entry["bytes"] == int(io_bytes[i].sum())
            assert entry["bytes_per_s"] == pytest.approx(io_bytes[i].sum() / elapsed[r], rel=1e-12)
            if entry["count"]:
                assert entry["mean_ns"] == pytest.approx(lat_sum[i].sum() / entry["count"], rel=1e-12)
                assert entry["mean_bytes"] == pytest.approx(io_bytes[i].sum() / entry["count"], rel=1e-12)
                assert entry["p50_ns"] == hist_percentile(hist[i], 50)
                assert entry["p99_ns"] == hist_percentile(hist[i], 99)
    x = np.array(ops_per_s)
    assert report["variation"]["relative_range"] == pytest.approx((x.max() - x.min()) / x.mean(), rel=1e-9)
    assert report["variation"]["rsd"] == pytest.approx(x.std(ddof=1) / x.mean(), rel=1e-9)


def test_bench_on_a_directory_json_contract_and_arrays(cli, scratch):
    out_json = scratch / "out" / "bench.json"
    out_json.parent.mkdir()
    workdir = scratch / "work"
    workdir.mkdir()
    out = cli("bench", "--personality", "varmail", *SMALL, "--window", "1", "--window", "2",
              "--dir", str(workdir), "--json", str(out_json), timeout_s=60)
    assert out.returncode == 0, out.stderr
    report = json.loads(out_json.read_text())
    check_contract(report, "varmail", 2, ("1", "2"))
    assert all(len(run["windows"]["2"]) == 1 for run in report["runs"])  # 2-s runs: one 2-s window
    assert all(len(run["windows"]["1"]) == 2 for run in report["runs"])
    check_against_arrays(report, 1)
    # a directory is measured as the file system holding it, and the report says which
    assert report["recipe"] is None and report["runs_completed"] == 2
    assert report["fs"] == report["existing"]["fs"] == existing_fs(workdir).fs
    assert "measured on the file system holding it" in " ".join(out.stderr.split())
    assert "taskstats_available" in report["telemetry"]
    assert list(workdir.iterdir()) == []  # both fresh directories removed
    assert "per op" in out.stdout and "Throughput-1" in out.stdout
    assert "B/op" in out.stdout and "mean" in out.stdout
    assert sum(run["ops"]["read"]["bytes"] for run in report["runs"]) > 0  # varmail reads whole files
    assert {run["worker_loop"] for run in report["runs"]} == {"native"}   # varmail's C loop ran
    events = store.find_run(report["run_id"]).events()
    assert any(e["kind"] == "telemetry" for e in events)
    progress = [e for e in events if e["kind"] == "progress"]
    assert progress and progress[-1]["total"] == 4 and 0 < progress[-1]["done"] <= 4
    for finding in (e for e in events if e["kind"] == "finding"):
        assert finding["title"] and finding["note"] and finding["flag"]


@pytest.mark.privileged
def test_bench_on_ext4_ram_image_streams_samples_and_formats_per_run():
    spec = {"personality": "fileserver", **SMALL_SPEC, "window_sizes_s": [1]}
    handle = runner.start("bench", spec_from_data("bench", spec), TargetSpec("ram", size_bytes=256 * 2**20), recipes.load("ext4-default"))
    samples, telemetry, findings = [], [], []
    for event in handle.records():
        if isinstance(event, WindowSample):
            samples.append(event)
        elif isinstance(event, TelemetrySample):
            telemetry.append(event)
        elif isinstance(event, Finding):
            findings.append(event)
    assert handle.run_dir.status() == "ok", handle.run_dir.manifest().get("error")
    assert {e.run for e in samples} == {0, 1}
    window = plain(samples[0].window)  # its wire form
    assert {"bin", "t_s", "ops_per_s", "ops", "complete"} <= set(window)
    assert set(window["ops"]) == {"create", "write", "close", "open", "append", "read", "delete", "stat"}
    assert telemetry and all(list(t.sample.disk_write_bytes)[0].startswith("loop") for t in telemetry)
    report = handle.run_dir.report()
    check_contract(report, "fileserver", 2, ("1",))
    check_against_arrays(report, 1)
    assert report["fs"] == "ext4" and report["recipe"] == "ext4-default"
    assert all(run["telemetry"]["disks"][0].startswith("loop") for run in report["runs"])
    assert {f.flag for f in findings} <= {f["kind"] for f in report["flags"]}
    # a flag streamed before the last run says the final test replaces it; after it, none does
    assert all(bool(f.provisional) == (f.fields["after_runs"] < 2) for f in findings if "after_runs" in f.fields)
    commands = handle.run_dir.manifest()["target"]["commands"]
    assert sum(c["argv"][0] == "mkfs.ext4" for c in commands) == 2  # a fresh file system per run
    assert Journal().entries() == []
    # Fig. 4: where each run's dataset landed (ext4 block groups: 8 MiB with the 1 KiB blocks
    # mke2fs picks for this 256 MiB image)
    for run in report["runs"]:
        placed = run["placement"]
        assert placed["available"] and placed["unit"] == "block_group" and placed["unit_bytes"] == 8 * 2**20
        assert sum(count for _, count in placed["groups"]) == placed["files_placed"] > 0
        assert placed["first_byte_min"] // placed["unit_bytes"] == placed["groups"][0][0]
        assert placed["first_byte_max"] < placed["device_bytes"] == 256 * 2**20
    assert report["placement"]["runs"] == 2 and report["placement"]["pcc"] is None  # 2 runs: no r


@pytest.mark.privileged
def test_dataset_placement_agrees_with_filefrag(fresh_fs):
    import subprocess

    from fsscope.layout.placement import dataset_placement

    for recipe in ("ext4-default", "xfs-default"):
        mounted = fresh_fs(recipe)
        paths = []
        for i in range(20):
            path = mounted.workdir / f"f{i}"
            path.write_bytes(os.urandom(8192 * (i + 1)))
            paths.append(str(path))
        os.sync()
        placed = dataset_placement(paths, mounted.fs, mounted.device, mounted.mountpoint)
        # filefrag -e: the first extent's physical start, in blocks of -b bytes
        starts = []
        for path in paths:
            text = subprocess.run(["filefrag", "-e", "-b4096", path], capture_output=True, text=True,
                                  check=True).stdout
            first = next(line for line in text.splitlines() if line.strip().startswith("0:"))
            starts.append(int(first.split(":")[2].split("..")[0]) * 4096)
        assert placed.first_byte_min == min(starts) and placed.first_byte_max == max(starts)
        assert placed.unit_bytes is not None
        groups = {g: 0 for g in {s // placed.unit_bytes for s in starts}}
        for s in starts:
            groups[s // placed.unit_bytes] += 1
        assert placed.groups == sorted([g, c] for g, c in groups.items())
        assert placed.unit == ("block_group" if recipe.startswith("ext4") else "ag")


@pytest.mark.privileged
def test_recipes_comparison(cli, scratch):
    out_json = scratch / "cmp.json"
    out = cli("bench", "--personality", "webserver", *SMALL, "--window", "1",
              "--recipes", "ext4-default,xfs-default", "--ram", "--size", "512M", "--json", str(out_json),
              timeout_s=90)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out_json.read_text())
    assert doc["recipes"] == ["ext4-default", "xfs-default"]
    for name, report in doc["reports"].items():
        check_contract(report, "webserver", 2, ("1",))
        assert report["recipe"] == name
    assert doc["reports"]["xfs-default"]["fs"] == "xfs"
    assert doc["reports"]["ext4-default"]["run_id"] != doc["reports"]["xfs-default"]["run_id"]
    comparison = doc["comparison"]
    assert [e["recipe"] for e in comparison["recipes"]] == ["ext4-default", "xfs-default"]
    (pair,) = comparison["pairs"]
    ext4 = [r["ops_per_s"] for r in doc["reports"]["ext4-default"]["runs"]]
    xfs = [r["ops_per_s"] for r in doc["reports"]["xfs-default"]["runs"]]
    expected = welch(ext4, xfs, labels=("ext4-default", "xfs-default"))
    assert pair["winner"] == expected.winner
    if pair["winner"] is not None:
        assert pair["p"] < 0.05
    assert "recipes compared" in out.stdout and "Welch" in out.stdout


@pytest.mark.privileged
def test_cancel_stops_the_running_bench_and_cleans_up():
    spec = {"personality": "varmail", "runs": 3, "duration_s": 60, "nfiles": 60, "workers": 2}
    handle = runner.start("bench", spec_from_data("bench", spec), TargetSpec("ram", size_bytes=256 * 2**20), recipes.load("ext4-default"))
    for event in handle.records():
        if isinstance(event, WindowSample) and event.window.bin_index >= 1:
            handle.cancel()
    assert handle.run_dir.status() == "cancelled"
    report = handle.run_dir.report()
    assert report["cancelled"] is True and report["runs_completed"] == 0 and report["runs"] == []
    assert report["partial_run"]["run"] == 0 and 1 <= report["partial_run"]["elapsed_s"] < 30
    assert handle.run_dir.load_array("run0_counts").sum() > 0  # what was measured is kept
    assert Journal().entries() == []


def test_syncwrite_on_a_directory(cli, scratch):
    out_json = scratch / "sw.json"
    workdir = scratch / "work"
    workdir.mkdir()
    out = cli("syncwrite", "--dir", str(workdir), "--sizes", "4K,64K", "--bytes-per-point", "256K",
              "--repeats", "2", "--mode", "fdatasync", "--json", str(out_json), timeout_s=60)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out_json.read_text())
    (report,) = doc["recipes"].values()
    assert [p["buffer_bytes"] for p in report["sizes"]] == [4096, 65536] and doc["tests"] == []
    assert report["recommended_bytes"] in (4096, 65536)
    assert report["mode"] == "fdatasync" and len(report["raw_points"]) == 4
    run_dir = store.find_run(report["run_id"])
    latency = run_dir.load_array("latency_ns")
    assert latency.size == sum(p["writes"] for p in report["raw_points"]) == 2 * (64 + 4)
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize("args, needle", [
    (["--personality", "nope"], "--personality"),
    (["--mem-limit", "12Q"], "--mem-limit"),
    (["--window", "0"], "--window"),
    (["--recipes", "ext4-default"], "--recipes"),
    (["--recipe", "ext4-default", "--recipes", "ext4-default,xfs-default"], "--recipes"),
])
def test_bad_bench_flags_are_one_line(cli, scratch, args, needle):
    out = cli("bench", *args, "--dir", str(scratch), timeout_s=30)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], out.stderr
    assert list(scratch.iterdir()) == []


def test_windows_must_fit_in_the_run_and_default_to_it(cli):
    from fsscope.workloads.bench_job import Spec

    assert Spec(duration_s=3).window_sizes_s == (3.0,) and Spec().window_sizes_s == (10.0,)
    proc = cli("bench", "--dir", "/tmp", "--duration", "5", "--window", "10")
    assert proc.returncode == 2 and "does not fit in a 5 s run" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_run_on_tmpfs_is_flagged_as_cpu_bound(cli):
    """On tmpfs there is no device to wait for: the workers never block, so the CPU sets the
    number and the run says so, with the workers' CPU accounted by the kernel and the flag
    naming whose CPU it was (the generator's user time, or the kernel's)."""
    workdir = Path(os.environ["FSSCOPE_RAM_DIR"]) / "generator"
    workdir.mkdir()
    out_json = workdir.parent / "generator.json"
    try:
        out = cli("bench", "--personality", "varmail", "--runs", "1", "--duration", "2", "--files", "40",
                  "--mean-file-size", "4K", "--workers", "1", "--trace", "off", "--dir", str(workdir),
                  "--json", str(out_json), timeout_s=60)
        assert out.returncode == 0, out.stderr
        report = json.loads(out_json.read_text())
    finally:
        out_json.unlink(missing_ok=True)
        workdir.rmdir()
    verdict = report["runs"][0]["generator"]
    assert verdict["device_busy"] is None                    # tmpfs: no block device
    assert verdict["workers_cpu_bound_share"] >= generator.CPU_BOUND
    elapsed = report["runs"][0]["elapsed_s"]
    assert 0 < verdict["workers_cpu_s"] <= 1.05 * elapsed    # one worker cannot use more than the run
    assert verdict["cpu_bound"]
    assert verdict["generator_bound"] == (verdict["workers_user_share"] >= generator.GENERATOR_SHARE)
    ops = sum(op["count"] for op in report["runs"][0]["ops"].values())
    user_s = verdict["workers_cpu_s"] * verdict["workers_user_share"]
    assert verdict["user_us_per_op"] == pytest.approx(user_s / ops * 1e6)   # the generator's own cost
    text = " ".join(out.stdout.split())                              # the console wraps lines
    assert "gen µs/op" in text and "(C worker loops)" in text
    kind = "generator_bound" if verdict["generator_bound"] else "cpu_bound"
    flag = next(f for f in report["flags"] if f["kind"] == kind)
    assert flag["title"] in " ".join(out.stdout.split())          # the console wraps lines


def test_generator_verdict_needs_a_busy_cpu_and_an_idle_device():
    cpu_bound = dict(workers=2, elapsed_s=10.0, cpu_user_s=8.0, cpu_system_s=8.0, runqueue_s=3.0)
    assert generator.generator_bound(**cpu_bound, device_busy=0.1)["generator_bound"]
    assert generator.generator_bound(**cpu_bound, device_busy=None)["generator_bound"]
    assert not generator.generator_bound(**cpu_bound, device_busy=0.9)["cpu_bound"]   # the device is the limit
    blocked = dict(cpu_bound, cpu_user_s=2.0, cpu_system_s=3.0, runqueue_s=1.0)      # 30 % on a CPU
    assert not generator.generator_bound(**blocked, device_busy=0.1)["cpu_bound"]
    kernel = dict(cpu_bound, cpu_user_s=3.0, cpu_system_s=13.0)                      # the kernel's CPU
    verdict = generator.generator_bound(**kernel, device_busy=0.1)
    assert verdict["cpu_bound"] and not verdict["generator_bound"]
    assert generator.generator_flag(0, verdict)["kind"] == "cpu_bound"
    assert generator.generator_flag(0, generator.generator_bound(**cpu_bound, device_busy=0.1))["kind"] == \
        "generator_bound"
    verdict = generator.generator_bound(**cpu_bound, device_busy=0.1)
    assert verdict["workers_cpu_bound_share"] == pytest.approx(19 / 20)
    assert verdict["workers_user_share"] == pytest.approx(0.5)
    assert generator.generator_flag(0, generator.generator_bound(**blocked, device_busy=0.1)) is None
