"""Full and read-only file systems, on small tmpfs mounts made here (and unmounted, even on
failure): the data directory is checked before a run record is made, run arrays get real
blocks (never a SIGBUS), and a target that fills up or runs out of inodes is a normal,
explained stop that keeps what was measured (flag + note; status and exit agree)."""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from msgspec.structs import replace

from fsscope import store
from fsscope.cli import main
from fsscope.errors import FsscopeError
from fsscope.workloads import personalities as P

pytestmark = pytest.mark.privileged


@contextmanager
def tmpfs(where: Path, options: str):
    where.mkdir(parents=True, exist_ok=True)
    # mode 0755: tmpfs's default 1777 is a directory every user can write, which root's fsscope
    # refuses as its data directory (the threat model)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"{options},mode=0755", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _one_line_exit_2(argv, capsys) -> str:
    status = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("options,expected", [("size=1M", "not enough room"), ("ro,size=1M", "read-only")])
def test_a_full_or_read_only_data_dir_is_refused_before_the_run(tmp_path, monkeypatch, capsys, options, expected):
    with tmpfs(tmp_path / "home", options) as home:
        monkeypatch.setenv("FSSCOPE_HOME", str(home))
        line = _one_line_exit_2(["probe", "--ram", "--size", "64M", "--files", "100", "--runs", "1"], capsys)
        assert expected in line and "FSSCOPE_HOME" in line
        assert not (home / "runs").exists() or not any((home / "runs").iterdir())


def test_run_arrays_get_real_blocks_or_a_clear_error(tmp_path):
    with tmpfs(tmp_path / "runs", "size=2M") as root:
        run = store.RunDir.create("probe", root)
        small = run.open_array("small", (4, 1000))
        path = run.path / "small.npy"
        assert os.stat(path).st_blocks * 512 >= os.path.getsize(path)  # allocated, not a hole
        assert (small == -1).all()
        del small
        with pytest.raises(FsscopeError, match="no room for latency_ns"):
            run.open_array("latency_ns", (5, 1 << 20))  # 40 MiB on a 2 MiB file system
        assert not (run.path / "latency_ns.npy").exists()


def test_probe_out_of_inodes_is_an_explained_stop(tmp_path, capsys):
    report_path = tmp_path / "probe.json"
    status = main(["probe", "--ram", "--size", "64M", "--mkfs-opts", "-N 256", "--files", "1000", "--runs", "2",
                   "--json", str(report_path)])
    err = capsys.readouterr().err
    report = json.loads(report_path.read_text())
    stop = [f for f in report["flags"] if f.get("flag") == "stopped"]
    assert status == 0 and "error" not in err, err
    assert len(stop) == 1 and "ENOSPC" in stop[0]["note"] and "-N COUNT" in stop[0]["note"]
    assert report["runs_completed"] > 0 and report["stopped_by"]
    run = store.list_runs()[-1]
    assert run.status() == "ok"
    assert (np.asarray(run.load_array("latency_ns"))[0, : stop[0]["index"]] > 0).all()  # kept


def test_bench_stops_cleanly_when_the_file_system_fills(tmp_path, capsys):
    """Out of inodes during the measured run (fileserver creates files): the workers stop at
    once, the report and JSON are written, a fs_full flag says why, no further runs."""
    report_path = tmp_path / "bench.json"
    with tmpfs(tmp_path / "target", "size=64M,nr_inodes=118") as target:
        status = main(["bench", "--personality", "fileserver", "--dir", str(target), "--runs", "2",
                       "--duration", "3", "--json", str(report_path)])
    err = capsys.readouterr().err
    assert status == 0, err
    report = json.loads(report_path.read_text())
    full = [f for f in report["flags"] if f["kind"] == "fs_full"]
    assert len(full) == 1 and "ENOSPC" in full[0]["note"], report["flags"]
    assert report["partial_run"]["run"] == 0 and report["runs_completed"] == 0
    assert report["stopped_by"] and report["partial_run"]["elapsed_s"] < 3
    run = store.find_run(report["run_id"])  # not list_runs()[-1]: another run may share its second
    assert run.status() == "ok" and "run0_counts" in run.arrays()


def test_the_webserver_log_rotates_so_a_run_fits(tmp_path):
    """With the log capped, appends never fail on a small file system; uncapped, the same run
    fills it and stops (ENOSPC) with what it measured."""
    base = P.default_spec("webserver", capacity_bytes=16 << 20, workers=2, duration_s=1.5, nfiles=50)
    assert base.log_limit_bytes == 4 << 20
    with tmpfs(tmp_path / "fs", "size=16M") as root:
        P.populate(root, base, evict_cache=False)
        capped = P.run(root, base)
        assert capped.stopped_by is None and capped.errors.sum() == 0 and capped.total_ops > 0
        assert os.path.getsize(Path(root) / P.LOG_DIR / "webserver.log") <= base.log_limit_bytes + base.append_size_bytes
        uncapped = P.run(root, replace(base, log_limit_bytes=None, duration_s=30.0))
        assert uncapped.stopped_by and "ENOSPC" in uncapped.stopped_by
        assert uncapped.elapsed_s < 30 and uncapped.total_ops > 0



def test_a_dir_target_that_fills_during_populate_is_one_clear_line(tmp_path, capsys):
    """ENOSPC before anything is measured (the file set does not fit the inodes): the run
    fails with the errno in words and the path, not "OSError: [Errno 28]"."""
    with tmpfs(tmp_path / "target", "size=64M,nr_inodes=58") as target:
        status = main(["bench", "--personality", "fileserver", "--dir", str(target), "--runs", "1",
                       "--duration", "2"])
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert status == 2 and len(errors) == 1, errors
    assert "No space left on device: " in errors[0] and "Errno" not in errors[0], errors[0]


def test_a_run_that_measured_nothing_is_flagged(tmp_path):
    """Workers the OOM killer ends (a limit below the refusal's minimum, bypassing the CLI)
    measure 0 ops: the bench flags that run instead of reporting 0 ops/s as a result."""
    from fsscope.workloads.bench_flags import nothing_flag as _nothing_flag

    spec = P.default_spec("fileserver", capacity_bytes=64 << 20, workers=2, duration_s=1.0)
    with tmpfs(tmp_path / "fs", "size=64M") as root:
        P.populate(root, spec, evict_cache=False)
        result = P.run(root, spec, P.RunOptions(mem_limit_bytes=1024))
    assert result.total_ops == 0
    flag = _nothing_flag(0, result)
    assert flag["kind"] == "nothing_measured" and "OOM" in flag["note"], flag
