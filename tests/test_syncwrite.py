"""The sync-write sweep end to end on real file systems: every number of the JSON recomputed
from the per-write arrays the run kept, knees on a real sweep, recipes compared, refused
modes, full file systems, huge buffers, and a killed sweep that keeps what it measured."""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as st

from fsscope import store
from fsscope.analysis import efficiency
from fsscope.engine import runner
from fsscope.engine.registry import spec_from_data
from fsscope.records import plain
from fsscope.targets import TargetSpec
from fsscope.workloads import syncwrite as sw

SIZES = (4096, 65536, 1 << 20)


@contextmanager
def small_mount(where: Path, fstype: str, size: str | None = None):
    """A tmpfs/ramfs the test mounts itself (removed even on failure)."""
    where.mkdir(parents=True)
    opts = ["-o", f"size={size}"] if size else []
    subprocess.run(["mount", "-t", fstype, *opts, "none", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


def one_line_error(out) -> str:
    lines = [ln for ln in out.stderr.strip().splitlines() if ln.strip()]
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    return lines[0]


@pytest.mark.privileged
def test_recipes_swept_and_compared_with_statistics_from_the_kept_arrays(cli, scratch):
    """ext4, xfs and btrfs on RAM images, O_DIRECT + O_SYNC (the paper's iozone -o -I),
    5 repetitions of three sizes on 1 MiB files: the JSON's statistics equal those recomputed
    from latency_ns.npy / points.npy, both knees are sizes of the sweep, and every pair of
    recipes has a Welch test per size."""
    out_json = scratch / "sw.json"
    out = cli("syncwrite", "--quick", "--mode", "direct+osync", "--sizes", "4K,64K,1M", "--bytes-per-point", "1M",
              "--recipes", "ext4-default,xfs-default,btrfs-default", "--ram", "--size", "320M",
              "--json", str(out_json), timeout_s=240)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out_json.read_text())
    assert doc["mode"] == "direct+osync" and list(doc["recipes"]) == ["ext4-default", "xfs-default", "btrfs-default"]
    for name, rec in doc["recipes"].items():
        assert rec["fs"] == name.split("-")[0] and rec["points_completed"] == 15
        run_dir = store.find_run(rec["run_id"])
        latency, points = run_dir.load_array("latency_ns"), run_dir.load_array("points")
        assert (latency >= 0).all() and latency.size == 5 * (256 + 16 + 1)
        col = sw.COL
        orders = [tuple(points[points[:, col["repeat"]] == r][:, col["buffer_bytes"]].astype(int)) for r in range(5)]
        assert all(sorted(o) == list(SIZES) for o in orders) and len(set(orders)) > 1  # shuffled per repetition
        assert [row["buffer_bytes"] for row in rec["sizes"]] == list(SIZES)
        for row in rec["sizes"]:
            mine = points[points[:, col["buffer_bytes"]] == row["buffer_bytes"]]
            lat = np.concatenate([latency[int(o):int(o) + int(n)] for o, n in
                                  mine[:, [col["offset"], col["writes"]]]]).astype(float)
            tput = mine[:, col["bytes_written"]] / mine[:, col["elapsed_s"]]
            assert row["throughput_mean"] == pytest.approx(tput.mean())
            assert row["throughput_sd"] == pytest.approx(tput.std(ddof=1))
            assert row["throughput_ci95"] == pytest.approx(st.t.ppf(0.975, 4) * tput.std(ddof=1) / np.sqrt(5))
            assert row["latency_mean_ns"] == pytest.approx(lat.mean())
            assert row["latency_sd_ns"] == pytest.approx(lat.std(ddof=1))
            assert row["latency_p50_ns"] == pytest.approx(np.percentile(lat, 50))
            assert row["latency_p99_ns"] == pytest.approx(np.percentile(lat, 99))
            assert row["ratio"] == pytest.approx(tput.mean() / (lat.mean() / 1e9))
        # the knees of a real sweep: sizes it measured, found again from the JSON's curves
        tput_curve = np.array([r["throughput_mean"] for r in rec["sizes"]])
        lat_curve = np.array([r["latency_mean_ns"] for r in rec["sizes"]])
        knees = rec["knees"]
        assert knees["throughput_saturation_bytes"] == SIZES[efficiency.saturation_index(tput_curve)[0]]
        rise = efficiency.latency_rise_index(lat_curve)[0]
        assert knees["latency_rise_bytes"] == (SIZES[rise] if rise >= 0 else None)
        assert knees["latency_rise"]["resamples"] == 1000
        assert rec["recommended_bytes"] == SIZES[int(np.argmax(tput_curve / lat_curve))]
        assert rec["recommendation"].startswith("Use ")
    pairs = {(t["a"], t["b"]) for t in doc["tests"]}
    assert pairs == {("ext4-default", "xfs-default"), ("ext4-default", "btrfs-default"),
                     ("xfs-default", "btrfs-default")}
    assert len(doc["tests"]) == 9 and all(set(t) >= {"a", "b", "buffer_bytes", "p", "verdict"} for t in doc["tests"])
    assert "Welch" in out.stdout and "Use " in out.stdout


@pytest.mark.privileged
def test_a_mode_the_file_system_refuses_is_one_line(cli, scratch):
    runs_before = len(store.list_runs())
    with small_mount(scratch / "ramfs", "ramfs") as where:
        line = one_line_error(cli("syncwrite", "--mode", "direct+odsync", "--dir", str(where), "--quick", timeout_s=30))
        assert "refuses O_DIRECT" in line and str(where) in line
        assert list(where.iterdir()) == []
    assert len(store.list_runs()) == runs_before          # refused before any run record


def test_sizes_linux_cannot_write_in_one_call_are_one_line(cli, scratch):
    line = one_line_error(cli("syncwrite", "--sizes", "4K,3G", "--dir", str(scratch), timeout_s=30))
    assert "--sizes" in line and "2 GiB" in line
    line = one_line_error(cli("syncwrite", "--sizes", "6K", "--mode", "direct+osync", "--dir", str(scratch)))
    assert "multiples of 4096" in line
    # 64 TiB of 4 KiB writes, 30 times: the latency arrays alone would not fit
    line = one_line_error(cli("syncwrite", "--sizes", "4K", "--bytes-per-point", "64T", "--dir", str(scratch)))
    assert "would keep" in line and "free" in line
    assert list(scratch.iterdir()) == []


@pytest.mark.privileged
def test_a_full_file_system_stops_cleanly_and_keeps_what_was_measured(cli, scratch):
    """A 2 MiB tmpfs and 4 MiB files written without preallocation: ENOSPC half-way through
    the first point. The run ends ok with an enospc flag, one line saying so, and every write
    measured before it."""
    out_json = scratch / "full.json"
    with small_mount(scratch / "small", "tmpfs", "2M") as where:
        out = cli("syncwrite", "--sizes", "4K", "--bytes-per-point", "4M", "--repeats", "3", "--mode", "fdatasync",
                  "--no-preallocate", "--dir", str(where), "--json", str(out_json), timeout_s=60)
        assert out.returncode == 0, out.stderr
        assert "Errno" not in out.stderr + out.stdout and "Traceback" not in out.stderr
        assert list(where.iterdir()) == []
    rec = next(iter(json.loads(out_json.read_text())["recipes"].values()))
    assert rec["stopped"] == "enospc" and [f["kind"] for f in rec["flags"]] == ["enospc"]
    assert rec["file_setup"] == {"preallocate": False, "as_paper": True, "note": rec["file_setup"]["note"]}
    flag_lines = [ln for ln in out.stdout.splitlines() if "file system full" in ln]
    assert len(flag_lines) == 1 and "ENOSPC" in flag_lines[0]
    latency = store.find_run(rec["run_id"]).load_array("latency_ns")
    kept = int((latency >= 0).sum())
    assert 100 < kept <= 512 and rec["writes_measured"] == kept   # at most 2 MiB of 4 KiB writes
    assert rec["sizes"][0]["writes"] == kept


@pytest.mark.privileged
def test_a_buffer_of_hundreds_of_megabytes_works(cli, scratch):
    """256 MiB buffers used to die building the buffer (OverflowError); now the point runs —
    here on an 8 MiB tmpfs, where preallocating its file fails: a full file system, cleanly."""
    out_json = scratch / "big.json"
    with small_mount(scratch / "small", "tmpfs", "8M") as where:
        out = cli("syncwrite", "--sizes", "256M", "--repeats", "1", "--dir", str(where), "--json", str(out_json),
                  timeout_s=120)
    assert out.returncode == 0, out.stderr
    assert "OverflowError" not in out.stderr
    rec = next(iter(json.loads(out_json.read_text())["recipes"].values()))
    assert rec["stopped"] == "enospc" and "preallocating" in rec["flags"][0]["note"]
    assert rec["writes_measured"] == 0 and "file system full" in out.stdout


@pytest.mark.privileged
def test_a_preallocation_that_finds_the_disk_full_leaves_no_file(scratch):
    """The space a failed fallocate got is given back at once, not held until the sweep ends."""
    with small_mount(scratch / "small", "tmpfs", "8M") as where:
        path = Path(where) / sw.FILE_NAME
        planned = sw.PlannedPoint(repeat=0, order=0, buffer_bytes=1 << 20, writes=16, offset=0)
        result = sw.write_file_sync(path, planned, "fsync", sw.aligned_buffer(1 << 20), np.zeros(16, np.int64))
        assert result.full and result.writes == 0
        assert not path.exists() and os.statvfs(where).f_bfree == os.statvfs(where).f_blocks


def test_a_killed_sweep_keeps_every_measured_write_and_report_shows_them(cli, scratch):
    spec = {"buffer_sizes_bytes": [4096, 16384], "file_size_bytes": 256 << 10, "mode": "fdatasync", "repeats": 200}
    handle = runner.start("syncwrite", spec_from_data("syncwrite", spec), TargetSpec("dir", str(scratch)), None)
    seen = 0
    for event in handle.records():
        if event.kind == "samples":
            seen += 1
            if seen == 3:
                handle.kill()
    assert handle.run_dir.status() == "interrupted" and handle.run_dir.report() is None
    latency = handle.run_dir.load_array("latency_ns")
    points = handle.run_dir.load_array("points")
    done = points[~np.isnan(points[:, sw.COL["writes"]])]
    assert len(done) >= 3
    assert int((latency >= 0).sum()) >= done[:, sw.COL["writes"]].sum() >= 3 * 16
    out = cli("report", str(handle.run_dir.path), env=os.environ | {"COLUMNS": "160"})
    assert out.returncode == 0, out.stderr
    assert "4 KiB" in out.stdout and "16 KiB" in out.stdout and "did not finish" in out.stdout
    from fsscope.tui.replay import load_run  # the TUI's replay rebuilds the same tables

    rows = load_run(handle.run_dir).data.rows()
    assert {r.buffer_bytes for r in rows} == {4096, 16384} and all(r.latency_mean_ns for r in rows)


def test_goals_name_the_buffer_or_say_not_reachable(cli, scratch):
    out_json = scratch / "goal.json"
    out = cli("syncwrite", "--dir", str(scratch), "--repeats", "3", "--sizes", "4K,64K", "--bytes-per-point", "256K",
              "--mode", "fdatasync", "--target-throughput", "1000T", "--max-latency", "10s", "--json", str(out_json),
              env=os.environ | {"COLUMNS": "200"}, timeout_s=60)
    assert out.returncode == 0, out.stderr
    (rec,) = json.loads(out_json.read_text())["recipes"].values()
    (choice,) = rec["choices"]
    assert choice["buffer_bytes"] is None and choice["target_throughput"] == 1e15 and choice["max_latency_ns"] == 1e10
    assert "not reachable on this stack" in out.stdout and "not reachable on this stack" in choice["note"]
    # preallocated by default (fio's way), and the report says that the paper's iozone did not
    assert rec["file_setup"]["preallocate"] is True and rec["file_setup"]["as_paper"] is False
    assert "iozone" in rec["file_setup"]["note"] and "--no-preallocate" in out.stdout
    line = one_line_error(cli("syncwrite", "--dir", str(scratch), "--max-latency", "soon"))
    assert "--max-latency" in line and "5ms" in line


@pytest.mark.privileged
def test_trace_attributes_each_write_its_device_requests_and_journal_commits(cli, scratch):
    """--trace on an ext4 loop image: every write's start is kept beside its latency; the
    per-write requests, bytes and journal commits (write_io.npy) are recomputed from the kept
    kernel events, and the report's per-point and per-size sums from write_io.npy."""
    from fsscope.trace.attribute import per_call_io
    from fsscope.workloads.syncwrite_job import WRITE_IO_COLUMNS

    out_json = scratch / "traced.json"
    out = cli("syncwrite", "--trace", "--repeats", "2", "--sizes", "4K,1M", "--bytes-per-point", "1M",
              "--recipe", "ext4-default", "--ram", "--size", "128M", "--json", str(out_json),
              env=os.environ | {"COLUMNS": "200"}, timeout_s=180)
    assert out.returncode == 0, out.stderr
    assert "what reached the device" in out.stdout
    (rec,) = json.loads(out_json.read_text())["recipes"].values()
    assert rec["trace"]["active"] and rec["trace"]["complete"], rec["trace"]
    run_dir = store.find_run(rec["run_id"])
    latency, start = run_dir.load_array("latency_ns"), run_dir.load_array("start_ns")
    assert (latency >= 0).all() and (start > 0).all()
    assert (start[:-1] + latency[:-1] <= start[1:]).all()  # writes in plan order, one at a time
    io = run_dir.load_array("write_io")
    events = run_dir.load_array("trace_events")
    again = per_call_io(events, rec["trace"]["event_names"], start, latency)
    assert np.array_equal(io, np.stack([again[c] for c in WRITE_IO_COLUMNS], axis=1))
    col = {c: k for k, c in enumerate(WRITE_IO_COLUMNS)}
    assert (io[:, col["requests"]] >= 1).all()  # an O_SYNC write reaches the device inside the call
    points = run_dir.load_array("points")
    for row in rec["kernel_by_size"]:
        size = row["buffer_bytes"]
        mine = points[points[:, sw.COL["buffer_bytes"]] == size]
        rows = np.concatenate([io[int(o):int(o) + int(n)] for o, n in mine[:, [sw.COL["offset"], sw.COL["writes"]]]])
        assert row["writes"] == len(rows) and row["bytes"] == rows[:, col["bytes"]].sum()
        assert row["commits"] == rows[:, col["commits"]].sum()
        assert row["bytes_per_write"] >= size  # the data itself, plus the journal's blocks
        assert row["commits_per_write"] > 0.5  # O_SYNC into preallocated blocks: a commit per write
    for point in rec["raw_points"]:
        assert point["kernel"]["writes"] == point["writes"] and point["kernel"]["requests"] >= point["writes"]
    from fsscope.tui.replay import load_run  # the TUI's view reads the same per-size rows

    assert plain(load_run(run_dir).data.report.kernel_by_size) == rec["kernel_by_size"]
