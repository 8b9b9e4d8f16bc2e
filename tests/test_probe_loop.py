"""The probe's measured syscall loop: every op really happens, latencies are sane, batches
cover every index once and in order, cancel and errors keep what was measured."""

from __future__ import annotations

import errno
import gc
import json
import os
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from fsscope import tools
from fsscope.errors import FsscopeError, ToolError
from fsscope.records import convert, dumps
from fsscope.workloads.probe import (
    NOT_REACHED_NS,
    OPS,
    ProbeRunError,
    ProbeSpec,
    default_cpu,
    file_name,
    measure_run,
    pin_cpu,
    renamed_name,
)
from fsscope.workloads.probe_loops import SYMLINK_TARGET


def _fs_type(path: Path) -> str:
    return subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.fixture(params=["tmpfs", "plain"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An empty directory on tmpfs (/dev/shm) or on the plain file system under tmp_path."""
    if request.param == "plain":
        workdir = tmp_path / "probe"
        workdir.mkdir()
        yield "plain", workdir
        return
    if not Path("/dev/shm").is_dir() or _fs_type(Path("/dev/shm")) != "tmpfs":
        pytest.skip("/dev/shm is not a tmpfs on this machine")
    with tempfile.TemporaryDirectory(prefix="fsscope-test-probe-", dir="/dev/shm") as workdir:
        yield "tmpfs", Path(workdir)


def _spec_for(kind: str, op: str, **overrides: object) -> ProbeSpec:
    # sync() is global: on the plain (shared, disk-backed) file system keep the run short.
    files = 300 if kind == "tmpfs" else 40
    settings: dict[str, object] = dict(op=op, files=files, sync_before="each",
                                       write_bytes=512, fallocate_bytes=64 * 1024)
    settings.update(overrides)
    return ProbeSpec(**settings)  # type: ignore[arg-type]


def _names(workdir: Path) -> set[str]:
    return set(os.listdir(workdir))


@pytest.mark.parametrize("timed_in_c", [True, False], ids=["C-timed", "python-timed"])
@pytest.mark.parametrize("op", OPS)
def test_every_op_does_its_work_and_times_it(op: str, target: tuple[str, Path], timed_in_c: bool) -> None:
    """Both timed loops (each call's region in C, or the Python reference) do the same work."""
    kind, workdir = target
    spec = _spec_for(kind, op)
    n = spec.files
    starts = np.full(n, -1, dtype=np.int64)
    latency_ns = measure_run(workdir, spec, timed_in_c=timed_in_c, start_out=starts)
    assert (np.diff(starts) > 0).all() and (starts[1:] >= starts[:-1] + latency_ns[:-1]).all()

    assert latency_ns.dtype == np.int64 and latency_ns.shape == (n,)
    assert (latency_ns > 0).all(), f"non-positive latencies at {np.flatnonzero(latency_ns <= 0)}"
    assert gc.isenabled()

    expected = {file_name(i, spec.name_length) for i in range(n)}
    if op == "unlink":
        assert _names(workdir) == set()
        return
    if op == "rename":
        assert _names(workdir) == {renamed_name(i, spec.name_length) for i in range(n)}
        assert all(os.stat(workdir / renamed_name(i)).st_size == 0 for i in range(n))
        return
    assert _names(workdir) == expected
    for name in sorted(expected)[:: max(1, n // 10)]:
        st = os.lstat(workdir / name)
        if op == "mkdir":
            assert stat.S_ISDIR(st.st_mode)
        elif op == "symlink":
            assert stat.S_ISLNK(st.st_mode)
            assert os.readlink(workdir / name) == SYMLINK_TARGET.decode()
        else:
            assert stat.S_ISREG(st.st_mode)
        if op == "write-fsync":
            assert st.st_size == spec.write_bytes
        elif op == "fallocate":
            assert st.st_size == spec.fallocate_bytes
            assert st.st_blocks * 512 >= spec.fallocate_bytes
        elif op in ("creat", "stat", "open-existing"):
            assert st.st_size == 0


def test_without_a_c_compiler_the_python_timed_loop_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fsscope.workloads import probe_loops

    monkeypatch.setenv("FSSCOPE_HOME", str(tmp_path / "home"))   # nothing built there yet
    monkeypatch.setenv("CC", "/bin/false")                       # a compiler that fails
    # named as run: the trusted path (/bin/false is /usr/bin/false where /bin links to usr/bin)
    assert probe_loops.native_call() == (None, f"{os.path.realpath('/bin/false')} failed on probe_calls.c: 1")
    (tmp_path / "run").mkdir()
    latency_ns = measure_run(tmp_path / "run", ProbeSpec(files=50, sync_before="none"))
    assert (latency_ns > 0).all() and len(_names(tmp_path / "run")) == 50


def test_write_fsync_content_is_the_same_every_file(tmp_path: Path) -> None:
    spec = ProbeSpec(op="write-fsync", files=3, write_bytes=1000, sync_before="none")
    measure_run(tmp_path, spec)
    contents = {(tmp_path / file_name(i)).read_bytes() for i in range(3)}
    assert len(contents) == 1 and len(next(iter(contents))) == 1000


def test_names_follow_name_length(tmp_path: Path) -> None:
    measure_run(tmp_path, ProbeSpec(files=1000, name_length=3, sync_before="none"))
    assert _names(tmp_path) == {f"{i:03d}" for i in range(1000)}
    assert renamed_name(42, 3) == "a42" and renamed_name(942, 3) == "j42"


@pytest.mark.parametrize("batch_s", [0.0, 0.0005, 0.2])
def test_on_batch_covers_every_index_once_in_order(tmp_path: Path, batch_s: float) -> None:
    seen: list[tuple[int, np.ndarray]] = []
    spec = ProbeSpec(files=5000, sync_before="none")
    latency_ns = measure_run(tmp_path, spec, batch_s=batch_s,
                             on_batch=lambda start, part: seen.append((start, part.copy())))
    starts = [start for start, _ in seen]
    assert starts[0] == 0
    assert all(part.size > 0 for _, part in seen)
    assert starts == list(np.cumsum([0] + [part.size for _, part in seen[:-1]]))
    np.testing.assert_array_equal(np.concatenate([part for _, part in seen]), latency_ns)
    if batch_s == 0.0:
        assert len(seen) == spec.files


def test_cancel_leaves_a_minus_one_tail(tmp_path: Path) -> None:
    seen: list[int] = []
    spec = ProbeSpec(files=200, sync_before="none")
    latency_ns = measure_run(tmp_path, spec, batch_s=0.0,
                             on_batch=lambda start, part: seen.extend(range(start, start + part.size)),
                             cancelled=lambda: len(seen) >= 10)
    assert (latency_ns[:10] > 0).all()
    assert (latency_ns[10:] == NOT_REACHED_NS).all()
    assert seen == list(range(10))
    assert len(_names(tmp_path)) == 10


def test_cancel_before_the_populate_step_measures_nothing(tmp_path: Path) -> None:
    latency_ns = measure_run(tmp_path, ProbeSpec(op="unlink", files=50), cancelled=lambda: True)
    assert (latency_ns == NOT_REACHED_NS).all()


def test_out_can_be_a_row_of_a_memory_mapped_npy(tmp_path: Path) -> None:
    path = tmp_path / "latency_ns.npy"
    matrix = np.lib.format.open_memmap(path, mode="w+", dtype=np.int64, shape=(2, 100))
    matrix[:] = 7
    workdir = tmp_path / "run1"
    workdir.mkdir()
    returned = measure_run(workdir, ProbeSpec(files=100, sync_before="none"), out=matrix[1])
    assert np.shares_memory(returned, matrix)
    matrix.flush()
    del matrix, returned
    stored = np.load(path)
    assert (stored[0] == 7).all() and (stored[1] > 0).all()


@pytest.mark.parametrize("bad_out, message", [
    (np.zeros(10, dtype=np.int32), "int64 of shape (10,)"),
    (np.zeros(11, dtype=np.int64), "int64 of shape (10,)"),
])
def test_bad_out_array_is_refused(tmp_path: Path, bad_out: np.ndarray, message: str) -> None:
    with pytest.raises(FsscopeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        measure_run(tmp_path, ProbeSpec(files=10), out=bad_out)


def test_workdir_must_exist_and_be_empty(tmp_path: Path) -> None:
    with pytest.raises(FsscopeError, match="cannot be opened"):
        measure_run(tmp_path / "missing", ProbeSpec(files=1))
    (tmp_path / "leftover").touch()
    with pytest.raises(FsscopeError, match="not empty.*leftover"):
        measure_run(tmp_path, ProbeSpec(files=1))


def test_an_oserror_stops_the_run_and_keeps_what_was_measured(tmp_path: Path) -> None:
    """A directory where file 5 will be created makes creat fail there with EISDIR."""
    def plant_obstacle(start: int, part: np.ndarray) -> None:
        if start == 3:
            (tmp_path / file_name(5)).mkdir()

    out = np.zeros(20, dtype=np.int64)
    with pytest.raises(ProbeRunError) as caught:
        measure_run(tmp_path, ProbeSpec(files=20, sync_before="none"), batch_s=0.0,
                    on_batch=plant_obstacle, out=out)
    error = caught.value
    assert (error.index, error.errno, error.file_name) == (5, errno.EISDIR, "0000005")
    assert "stopped at file 5 ('0000005'): EISDIR" in str(error)
    assert "the 5 latencies measured before it are kept" in str(error)
    assert error.latency_ns is out
    assert (out[:5] > 0).all() and (out[5:] == NOT_REACHED_NS).all()
    assert gc.isenabled()


# --- ENOSPC on a tiny tmpfs we mount ourselves --------------------------------------------


@pytest.fixture
def tiny_tmpfs(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A 64 KiB tmpfs with 20 inodes; unmounted in a finalizer even if the test fails."""
    if os.geteuid() != 0:
        reason = "needs root to mount a tiny tmpfs"
        if os.environ.get("FSSCOPE_REQUIRE_PRIVILEGED") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    mountpoint = tmp_path / "tiny"
    mountpoint.mkdir()
    tools.run("mount", "-t", "tmpfs", "-o", "size=64k,nr_inodes=20", "tmpfs", str(mountpoint))

    def unmount() -> None:
        try:
            tools.run("umount", str(mountpoint))
        except ToolError:
            tools.run("umount", "-l", str(mountpoint))
        mountpoint.rmdir()

    request.addfinalizer(unmount)
    return mountpoint


def _open_fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.privileged
@pytest.mark.parametrize("op, extra", [
    ("creat", {}), ("mkdir", {}), ("write-fsync", {"write_bytes": 16 * 1024}),
    ("fallocate", {"fallocate_bytes": 24 * 1024}),
])
def test_enospc_stops_the_run_with_a_clear_message(tiny_tmpfs: Path, op: str,
                                                   extra: dict[str, int]) -> None:
    workdir = tiny_tmpfs / "run"
    workdir.mkdir()
    fds_before = _open_fd_count()
    seen: list[int] = []
    out = np.zeros(100, dtype=np.int64)
    with pytest.raises(ProbeRunError) as caught:
        measure_run(workdir, ProbeSpec(op=op, files=100, **extra), out=out,  # type: ignore[arg-type]
                    on_batch=lambda start, part: seen.extend(range(start, start + part.size)))
    error = caught.value
    stopped_at = error.index
    assert 0 < stopped_at < 100
    assert error.errno == errno.ENOSPC
    assert f"stopped at file {stopped_at} ('{file_name(stopped_at)}'): ENOSPC" in str(error)
    assert (out[:stopped_at] > 0).all() and (out[stopped_at:] == NOT_REACHED_NS).all()
    assert seen == list(range(stopped_at))
    assert _open_fd_count() == fds_before


@pytest.mark.privileged
def test_enospc_in_the_populate_step_names_it(tiny_tmpfs: Path) -> None:
    workdir = tiny_tmpfs / "run"
    workdir.mkdir()
    with pytest.raises(ProbeRunError, match=r"creating file \d+ .* before the timed loop "
                                            r"failed: ENOSPC.*no latencies were measured"):
        measure_run(workdir, ProbeSpec(op="unlink", files=100))


# --- specs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("settings, message", [
    ({"op": "chmod"}, "probe op 'chmod' is unknown: choose one of creat, mkdir"),
    ({"files": 0}, "probe files must be at least 1, not 0"),
    ({"files": "10"}, "probe spec field 'files' must be a whole number, not '10'"),
    ({"files": True}, "'files' must be a whole number, not True"),
    ({"runs": 0}, "probe runs must be at least 1"),
    ({"files": 1001, "name_length": 3},
     "name_length 3 is too short for 1001 files: names 0..1000 need 4 digits"),
    ({"name_length": 0}, "probe name_length must be at least 1"),
    ({"name_length": 300}, "probe name_length must be at most 255, not 300"),
    ({"sync_before": "sometimes"}, "sync_before 'sometimes' is unknown: choose one of each, none"),
    ({"fresh_fs": "yes"}, "'fresh_fs' must be true or false, not 'yes'"),
    ({"cpu": -1}, "probe cpu must be at least 0"),
    ({"write_bytes": -1}, "probe write_bytes must be at least 0"),
    ({"fallocate_bytes": 0}, "probe fallocate_bytes must be at least 1"),
])
def test_bad_specs_give_clear_errors(settings: dict[str, object], message: str) -> None:
    with pytest.raises(FsscopeError) as caught:
        convert(settings, ProbeSpec)
    assert message in str(caught.value)


def test_spec_defaults_and_json_round_trip() -> None:
    spec = ProbeSpec()
    assert (spec.op, spec.files, spec.runs, spec.name_length, spec.sync_before, spec.fresh_fs,
            spec.cpu, spec.write_bytes, spec.fallocate_bytes) == (
        "creat", 1024, 5, 7, "each", True, None, 4096, 1 << 20)
    custom = ProbeSpec(op="rename", files=1000, name_length=3, sync_before="none", cpu=0)
    assert convert(json.loads(dumps(custom)), ProbeSpec) == custom
    assert ProbeSpec(files=1000, name_length=3).files == 1000


def test_convert_refuses_unknown_fields() -> None:
    with pytest.raises(FsscopeError, match="field 'file' is unknown: known fields are op, files"):
        convert({"file": 10}, ProbeSpec)
    with pytest.raises(FsscopeError, match="must be a JSON object"):
        convert([1, 2], ProbeSpec)


# --- CPU pinning and imports -----------------------------------------------------------------


def test_pin_cpu_returns_the_previous_affinity() -> None:
    before = os.sched_getaffinity(0)
    previous = pin_cpu()
    try:
        assert previous == before
        assert os.sched_getaffinity(0) == {max(before)} == {default_cpu()}
    finally:
        os.sched_setaffinity(0, previous)
    with pytest.raises(FsscopeError, match="cannot pin the probe to CPU 100000"):
        pin_cpu(100000)
    assert os.sched_getaffinity(0) == before
