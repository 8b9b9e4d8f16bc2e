"""The --mem-limit memory cgroup: workers really inside it, and it is gone afterwards."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fsscope import units
from fsscope.errors import FsscopeError
from fsscope.workloads import cgroup as C
from fsscope.workloads import personalities as P

LIMIT_BYTES = 64 << 20


def usable_support() -> C.CgroupSupport:
    """The machine's memory cgroup, or skip (fail in CI) saying why there is none."""
    support = C.detect()
    if support.version is None:
        if os.environ.get("FSSCOPE_REQUIRE_PRIVILEGED") == "1":
            pytest.fail(f"FSSCOPE_REQUIRE_PRIVILEGED=1 but {support.note}")
        pytest.skip(support.note)
    return support


def cgroup_dir_of(pid: int, support: C.CgroupSupport) -> Path:
    """The directory of the memory cgroup ``pid`` is in (v1 memory line, or the v2 line)."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if (support.version == 1 and "memory" in controllers.split(",")) or \
                (support.version == 2 and controllers == ""):
            return Path(path)
    raise AssertionError(f"pid {pid} has no memory cgroup line")


def limit_file(cg_path: Path, version: int) -> Path:
    return cg_path / ("memory.limit_in_bytes" if version == 1 else "memory.max")


@pytest.mark.privileged
def test_process_is_inside_and_cgroup_removed_even_with_it_still_running():
    support = usable_support()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        with C.MemoryCgroup(LIMIT_BYTES, support=support) as cg:
            cg.add(sleeper.pid)
            assert cg.pids() == [sleeper.pid]
            assert cgroup_dir_of(sleeper.pid, support).name == cg.name
            assert int(limit_file(cg.path, cg.version).read_text()) == LIMIT_BYTES
            path = cg.path
        assert not path.exists()                                   # removed, process moved home
        assert sleeper.poll() is None
        assert cgroup_dir_of(sleeper.pid, support).name != cg.name
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.privileged
def test_cgroup_removed_when_the_body_raises():
    support = usable_support()
    with pytest.raises(RuntimeError), C.MemoryCgroup(LIMIT_BYTES, support=support) as cg:
        path = cg.path
        raise RuntimeError("job failed")
    assert not path.exists()


@pytest.mark.privileged
def test_workers_run_under_a_64mib_limit_and_the_cgroup_is_removed(scratch):
    support = usable_support()
    spec = P.default_spec("varmail", nfiles=200, workers=2, duration_s=2.0, latency_window_s=1.0)
    P.populate(scratch, spec)
    seen: dict[int, tuple[Path, int]] = {}

    def on_start(pids):
        for pid in pids:
            rel = cgroup_dir_of(pid, support)
            cg_dir = next(p for p in [support.parent / rel.name] if p.exists())
            seen[pid] = (cg_dir, int(limit_file(cg_dir, support.version).read_text()))

    result = P.run(scratch, spec, P.RunOptions(mem_limit_bytes=LIMIT_BYTES, on_start=on_start))
    assert set(seen) == set(result.worker_pids) and len(seen) == min(2, os.cpu_count())
    dirs = {d for d, _ in seen.values()}
    assert len(dirs) == 1 and next(iter(dirs)).name.startswith("fsscope-")
    assert {limit for _, limit in seen.values()} == {LIMIT_BYTES}
    assert not next(iter(dirs)).exists()                            # removed after the run
    assert result.cgroup["limit_bytes"] == LIMIT_BYTES and result.cgroup["version"] == support.version
    assert result.cgroup["oom_kills"] == 0
    peak = result.cgroup["peak_bytes"]
    assert peak is None or 0 < peak <= LIMIT_BYTES
    assert result.total_ops > 0 and result.errors.sum() == 0
    assert not list(C.fsscope_cgroups(support))                    # nothing left behind


def test_unavailable_cgroup_is_one_clear_error():
    none = C.CgroupSupport(None, None, "no usable memory cgroup: no cgroup file system is mounted")
    with pytest.raises(C.CgroupUnavailable, match="--mem-limit needs a memory cgroup: no usable"):
        C.MemoryCgroup(LIMIT_BYTES, support=none)
    assert issubclass(C.CgroupUnavailable, FsscopeError)


def test_parse_size_bytes():
    assert units.parse_size_bytes("64M") == 64 << 20
    assert units.parse_size_bytes("64MiB") == 64 << 20
    assert units.parse_size_bytes("1g") == 1 << 30
    assert units.parse_size_bytes("4096") == 4096
    for bad in ("", "lots", "-1M", "0"):
        with pytest.raises(FsscopeError):
            units.parse_size_bytes(bad)
