"""Real short personality runs on tmpfs (/dev/shm) and on a plain directory of the root disk."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from fsscope import records
from fsscope.analysis.variation.metrics import relative_range
from fsscope.analysis.variation.report import variation_report
from fsscope.workloads import personalities as P

DURATION_S = 2.0
WORKERS = 3


@pytest.fixture(params=["tmpfs", "rootdisk"])
def workdir(request, scratch) -> Path:
    """A fresh directory on tmpfs or on the root disk's file system."""
    if request.param == "tmpfs":
        if not os.path.isdir("/dev/shm"):
            pytest.skip("no /dev/shm tmpfs on this machine")
        path = Path(tempfile.mkdtemp(prefix="fsscope-pers-", dir=os.environ["FSSCOPE_RAM_DIR"]))
    else:
        path = scratch
    return path


def small_spec(name: str, **kw) -> P.PersonalitySpec:
    base = dict(nfiles=120, mean_file_size_bytes=16 << 10, workers=WORKERS, duration_s=DURATION_S,
                io_size_bytes=64 << 10, latency_window_s=1.0, seed=11)
    if name == "fileserver":
        base.update(dir_width=10)
    base.update(kw)
    return P.default_spec(name, **base)


def files_on_disk(root: Path, name: str) -> set[int]:
    found = set()
    for _, _, files in os.walk(root / name):
        found.update(int(f) for f in files)
    return found


@pytest.mark.parametrize("name", P.PERSONALITIES)
def test_short_run_executes_and_counts_every_op(workdir, name):
    spec = small_spec(name)
    populated = P.populate(workdir, spec)
    before = files_on_disk(workdir, name)
    assert len(before) == populated.files == round(spec.nfiles * spec.prealloc_pct / 100)
    seen_pids: list[tuple[int, ...]] = []
    worker_parents = []

    def on_start(pids):
        seen_pids.append(pids)
        worker_parents.extend(psutil.Process(p).ppid() for p in pids)

    samples: list[P.LiveSample] = []
    log = workdir / P.LOG_DIR / "webserver.log"
    result = P.run(workdir, spec, P.RunOptions(on_window=samples.append, on_start=on_start))

    # every op type executed, no errors, counts consistent across all the arrays
    counts = {op: result.op_count(op) for op in spec.op_names}
    assert all(c > 0 for c in counts.values()), counts
    assert result.errors.tolist() == [0] * len(spec.op_names)
    assert result.latency_hist.sum(axis=1).tolist() == result.counts.sum(axis=1).tolist()
    for i, op in enumerate(spec.op_names):
        assert result.window_histograms(op).sum() == counts[op]
        assert result.window_hist[result.window_hist[:, 1] == i, 3].sum() == counts[op]
    assert result.elapsed_s == pytest.approx(DURATION_S, abs=1e-6)
    assert result.counts.shape == (len(spec.op_names), 2)
    assert result.throughput(1.0).sum() * 1.0 == result.total_ops          # windows add up
    assert result.throughput(2.0).tolist() == [pytest.approx(result.ops_per_s)]
    assert np.all(result.latency_sum_ns[result.counts > 0] > 0)

    # live samples: one per bin, in order, complete, adding up to the same totals
    assert [s.bin_index for s in samples] == [0, 1]
    assert all(s.complete for s in samples)
    assert sum(s.ops_per_s * spec.bin_s for s in samples) == result.total_ops
    assert json.loads(records.dumps(samples[-1]))["bin"] == 1

    # worker processes: real, separate, all different from this process; the C loops' workers
    # are threads, spread over one process per CPU
    assert len(seen_pids) == 1 and len(set(seen_pids[0])) == min(WORKERS, os.cpu_count())
    assert result.summary()["workers"] == WORKERS and result.summary()["worker_processes"] == len(seen_pids[0])
    assert os.getpid() not in seen_pids[0] and result.worker_pids == seen_pids[0]
    assert all(code == 0 for code in result.worker_exitcodes)
    assert os.getpid() not in worker_parents               # forked by the forkserver, not by us

    # the files really changed on disk, and the manifest agrees with the disk
    after = files_on_disk(workdir, name)
    fileset = P.load_fileset(workdir, spec)
    assert after == set(np.flatnonzero(fileset.exists).tolist())
    # (each worker's last op completes after the deadline: done, but not counted)
    if name == "fileserver":
        assert abs(counts["create"] - counts["delete"] - (len(after) - len(before))) <= WORKERS
        assert after != before
    elif name == "varmail":
        assert after != before
    else:
        assert after == before
        appended = int(result.io_bytes[spec.op_names.index("append")].sum())
        assert 0 < appended <= log.stat().st_size <= appended + WORKERS * spec.append_size_bytes
    read_bytes = int(result.io_bytes[spec.op_names.index("read")].sum())
    assert read_bytes > 0


def test_json_report_from_two_real_runs(scratch):
    spec = small_spec("varmail", duration_s=2.0)
    P.populate(scratch, spec)
    runs = [P.run(scratch, spec) for _ in range(2)]
    report = json.loads(records.dumps(variation_report("varmail", runs, window_sizes_s=(1,))))
    json.dumps(report, allow_nan=False)
    assert [r["ops_per_s"] for r in report["runs"]] == pytest.approx([r.ops_per_s for r in runs])
    assert len(report["runs"][0]["windows"]["1"]) == 2
    assert report["runs"][1]["ops"]["fsync"]["count"] == runs[1].op_count("fsync")
    assert report["variation"]["relative_range"] == pytest.approx(relative_range([r.ops_per_s for r in runs]))


def test_cancel_stops_the_run_early(scratch):
    spec = small_spec("fileserver", duration_s=30.0)
    P.populate(scratch, spec)
    t0 = time.monotonic()
    started: list[float] = []  # cancelled 1 s after the workers start, not after P.run is called
    result = P.run(scratch, spec, P.RunOptions(on_start=lambda pids: started.append(time.monotonic()),
                                               cancelled=lambda: bool(started) and time.monotonic() - started[0] > 1.0))
    wall_s = time.monotonic() - t0
    assert result.cancelled
    assert wall_s < 15.0 and result.elapsed_s < 5.0  # far from the 30 s asked; slack for a slow CI
    assert result.total_ops > 0 and result.counts.shape[1] == int(np.ceil(result.elapsed_s))


def test_spec_defaults_scale_to_capacity_and_reject_bad_values():
    small = P.default_spec("fileserver", capacity_bytes=256 << 20, cpu_count=2)
    assert small.nfiles == 512 and small.workers == 8
    assert small.fileset_bytes <= (256 << 20) // 4
    big = P.default_spec("fileserver", capacity_bytes=1 << 40, cpu_count=64)
    assert big.nfiles == 10_000 and big.workers == 50                   # Filebench's own defaults
    web = P.default_spec("webserver", cpu_count=2)
    assert (web.nfiles, web.mean_file_size_bytes, web.prealloc_pct) == (1000, 16 << 10, 100)
    assert P.default_spec("varmail", fileset_bytes=32 << 20).nfiles == 2048
    with pytest.raises(Exception, match="nfiles"):
        P.PersonalitySpec("varmail", nfiles=3, mean_file_size_bytes=1, dir_width=1, workers=4)
    with pytest.raises(Exception, match="unknown personality"):
        P.default_spec("oltp")


def test_file_sizes_are_gamma_distributed_with_the_requested_mean():
    spec = P.default_spec("fileserver", nfiles=20_000, cpu_count=2)
    sizes = P.file_sizes_bytes(spec, seed=3)
    assert sizes.mean() == pytest.approx(128 << 10, rel=0.02)
    # gamma(k=1.5): variance = mean^2 / k
    assert sizes.std() == pytest.approx((128 << 10) / np.sqrt(1.5), rel=0.05)
    assert np.array_equal(sizes, P.file_sizes_bytes(spec, seed=3))     # reproducible


def test_a_cancelled_populate_stops_and_leaves_no_file_set_to_run(scratch):
    asked = []
    spec = small_spec("fileserver")
    out = P.populate(scratch, spec, cancelled=lambda: asked.append(1) or len(asked) > 1)
    assert out.cancelled and out.files == 64 and len(asked) == 2     # asked every 64 files
    with pytest.raises(Exception, match="populate it first"):           # no manifest: not runnable
        P.run(scratch, spec)


def test_run_without_populate_is_a_clear_error(scratch):
    with pytest.raises(Exception, match="populate it first"):
        P.run(scratch, small_spec("webserver"))


# -- beside the workload: telemetry, and the sync-write sweep ------------------------------------

def test_telemetry_beside_a_run_sees_the_workers_io(scratch):
    from fsscope.telemetry import taskstats
    from fsscope.telemetry.sampler import TelemetrySampler

    spec = small_spec("fileserver", duration_s=2.0)
    P.populate(scratch, spec)
    live = []
    sampler = TelemetrySampler(interval_s=0.5, on_sample=live.append).start()
    result = P.run(scratch, spec, P.RunOptions(on_start=sampler.watch))
    samples = sampler.stop()
    assert len(samples) >= 4 and np.all(np.diff(samples.t_s) > 0)
    assert samples.disk_write_bytes.shape == (len(samples), len(samples.disks))
    appended = int(result.io_bytes[[spec.op_names.index(op) for op in ("write", "append")]].sum())
    # /proc/PID/io counts whole pages as they are dirtied (so it need not equal the bytes
    # written), but the workers' writes on this ext4 directory must show up
    assert appended > 0 and samples.proc_write_bytes.sum() > 0
    assert np.all((samples.cpu_idle_pct >= 0) & (samples.cpu_idle_pct <= 100))
    assert np.all(samples.mem_available_bytes > 0)
    assert live and isinstance(live[0]["cpu_user_pct"], float)
    json.dumps(live[-1])
    if samples.taskstats_available:
        assert samples.cpu_delay_ns.sum() >= 0
        if taskstats.delayacct_enabled() is False:
            assert any("task_delayacct = 0" in n for n in samples.notes)
            assert samples.blkio_delay_ns.sum() == 0
    else:
        assert any("taskstats" in n for n in samples.notes)


def test_taskstats_reader_reads_this_process_or_says_why_not():
    from fsscope.telemetry.taskstats import TaskStatsReader

    with TaskStatsReader() as ts:
        mine = ts.read_process(os.getpid())
        if not ts.available:
            assert mine is None and ts.notes
            return
        assert mine is not None and mine.cpu_run_real_ns > 0 and mine.comm
        assert "\0" not in mine.comm
        assert ts.read_process(2**22 + 12345) is None          # no such pid: None, not an error


def test_syncwrite_sweep_small(scratch):
    from fsscope.workloads import syncwrite as S

    spec = S.SyncWriteSpec(buffer_sizes_bytes=(4096, 65536, 1 << 20), file_size_bytes=1 << 20,
                           mode="fsync", repeats=2, min_writes=4)
    latency, points = S.new_arrays(spec)
    seen = []
    end = S.sweep(scratch, spec, latency, points, on_point=lambda row, lat: seen.append((row, lat.size)))
    assert end == S.SweepEnd(6, None) and [row for row, _ in seen] == list(range(6))
    measured = S.measured_points(points, latency)
    assert sorted((p["repeat"], p["buffer_bytes"], p["writes"]) for p in measured) == [
        (r, size, n) for r in (0, 1) for size, n in ((4096, 256), (65536, 16), (1 << 20, 4))]
    assert all(p["bytes_written"] == p["writes"] * p["buffer_bytes"] and p["bytes_per_s"] > 0 for p in measured)
    assert (latency > 0).all() and not any(scratch.iterdir())          # every write timed, files removed
    json.dumps([{k: v for k, v in p.items() if k != "latency_ns"} for p in measured])
    with pytest.raises(Exception, match="mode"):
        S.SyncWriteSpec(mode="sometimes")


def test_syncwrite_point_time_limit_ends_points_not_the_sweep(scratch):
    """A point that hits its time limit ends normally and the sweep goes on to the next."""
    from fsscope.workloads import syncwrite as S

    spec = S.SyncWriteSpec(buffer_sizes_bytes=(4096, 8192), file_size_bytes=64 << 20, mode="fdatasync", repeats=2)
    latency, points = S.new_arrays(spec)
    end = S.sweep(scratch, spec, latency, points, point_limit_s=0.05)
    assert end == S.SweepEnd(4, None)
    measured = S.measured_points(points, latency)
    assert len(measured) == 4 and all(p["ended"] and 16 <= p["writes"] < p["bytes_written"] for p in measured)
    assert all(p["writes"] < 8192 for p in measured)               # cut by the limit, not the file size


def test_syncwrite_arrays_of_a_point_cut_by_a_kill_still_count(scratch):
    """A kill mid-point leaves its latencies but NaN in its points row: its writes count in
    the latency statistics, its throughput does not."""
    from fsscope.workloads import syncwrite as S

    spec = S.SyncWriteSpec(buffer_sizes_bytes=(4096,), file_size_bytes=64 << 10, mode="fdatasync", repeats=2)
    latency, points = S.new_arrays(spec)
    S.sweep(scratch, spec, latency, points)
    points[1, S.COL["writes"]:] = np.nan                  # as if killed during the second point
    latency[points[1, S.COL["offset"]].astype(int) + 5:] = -1
    measured = S.measured_points(points, latency)
    assert [(p["writes"], p["ended"], p["bytes_per_s"] is None) for p in measured] == [(16, True, False), (5, False, True)]
    by_size = S.samples_by_size(measured)
    assert len(by_size[4096]["throughput_bps"]) == 1 and [a.size for a in by_size[4096]["latency_ns"]] == [16, 5]


def _one_worker(workdir: Path, spec: P.PersonalitySpec, loop: str, duration_ns: int = 300_000_000):
    """A worker of the real loop (``loop``: python or native) in this process, and what it sent."""
    from types import SimpleNamespace

    from fsscope.workloads.personalities import native
    from fsscope.workloads.personalities.worker import _Worker

    lib = None
    if loop == "native":
        lib, why = native.library_path()
        assert lib is not None, why
    fileset = P.load_fileset(workdir, spec)
    sent: list[tuple] = []
    deadline = SimpleNamespace(value=time.monotonic_ns() + duration_ns)
    worker = _Worker(0, 1, str(workdir), spec, fileset.sizes_bytes, fileset.exists,
                     SimpleNamespace(put=sent.append), deadline, lib and str(lib))
    return worker, sent


def _run_until_stopped(worker) -> None:
    from fsscope.workloads.personalities.worker import _Stop

    worker.begin(time.monotonic_ns())
    with pytest.raises(_Stop):
        worker.loop()
    worker.flush(None)


@pytest.mark.parametrize("loop", ["python", "native"])
@pytest.mark.parametrize("name", ["fileserver", "varmail"])
def test_worker_tracks_every_file_size_so_whole_file_reads_need_no_eof_probe(workdir, name, loop):
    """The worker reads a whole file by its tracked size (no extra read() to find EOF) and
    appends through O_APPEND (no lseek): after real iterations its sizes match the disk's."""
    spec = small_spec(name, workers=1, io_size_bytes=16 << 10)   # 16 KiB reads: many files take several
    P.populate(workdir, spec, evict_cache=False)
    worker, sent = _one_worker(workdir, spec, loop)
    _run_until_stopped(worker)
    assert sum(count for msg in sent for _, count, *_ in msg[4]) > 100   # it really iterated
    assert worker.errors == [0] * len(spec.op_names)
    assert sorted(worker.present) == sorted(files_on_disk(workdir, name))
    for index in worker.present:
        assert worker.fsize[index] == os.stat(worker.paths[index]).st_size, index
    assert max(worker.fsize[i] for i in worker.present) > spec.io_size_bytes   # multi-chunk reads happened


@pytest.mark.parametrize("loop", ["python", "native"])
@pytest.mark.parametrize("name", ["fileserver", "varmail"])
def test_files_deleted_behind_its_back_are_errors_it_survives(scratch, name, loop):
    """Every file the worker believes present is removed before it starts: its opens and
    deletes fail with ENOENT, it counts them, forgets those files, and goes on creating new
    ones -- in the end what it believes present is what is on the disk."""
    spec = small_spec(name, workers=1)
    P.populate(scratch, spec, evict_cache=False)
    worker, sent = _one_worker(scratch, spec, loop, duration_ns=200_000_000)
    for index in worker.present:
        os.unlink(worker.paths[index])
    _run_until_stopped(worker)
    failed_ops = {op for op, errors in zip(spec.op_names, worker.errors) if errors}
    assert failed_ops & {"open", "delete"}, worker.errors     # ENOENT, counted, not fatal
    assert sum(count for msg in sent for _, count, *_ in msg[4]) > 100   # it went on
    assert sorted(worker.present) == sorted(files_on_disk(scratch, name))
    for index in worker.present:
        assert worker.fsize[index] == os.stat(worker.paths[index]).st_size, index


# ops per whole iteration of each personality's flowops (webserver: 10 reads per log append)
PER_ITERATION = {
    "varmail": {"delete": 1, "create": 1, "append": 2, "fsync": 2, "close": 3, "open": 2, "read": 2},
    "fileserver": {"create": 1, "write": 1, "close": 3, "open": 2, "append": 1, "read": 1, "delete": 1, "stat": 1},
    "webserver": {"open": 10, "read": 10, "close": 10, "append": 1},
}


@pytest.mark.parametrize("name", P.PERSONALITIES)
def test_the_c_loops_run_the_python_loops_op_mix(scratch, name):
    """Both loops run the same flowops, so the op counts keep each personality's per-iteration
    ratios (each worker's last iteration may be cut anywhere)."""
    spec = small_spec(name, duration_s=1.0)
    per_iteration = PER_ITERATION[name]
    unit = min(per_iteration, key=per_iteration.get)          # an op done once per iteration
    for native_loops in (True, False):
        P.populate(scratch, spec, evict_cache=False)
        result = P.run(scratch, spec, P.RunOptions(native_loops=native_loops))
        assert result.worker_loop == ("native" if native_loops else "python") and not result.notes
        assert result.errors.tolist() == [0] * len(spec.op_names)
        n = {op: result.op_count(op) for op in spec.op_names}
        assert n[unit] > 100, (native_loops, n)
        for op, k in per_iteration.items():
            assert abs(n[op] - k * n[unit]) <= max(per_iteration.values()) * spec.workers, (native_loops, n)


def test_without_a_c_compiler_the_python_loop_runs_and_says_so(scratch, monkeypatch, tmp_path):
    monkeypatch.setenv("FSSCOPE_HOME", str(tmp_path / "home"))   # nothing built there yet
    monkeypatch.setenv("CC", "/bin/false")                       # a compiler that fails
    spec = small_spec("varmail", duration_s=0.5)
    P.populate(scratch, spec, evict_cache=False)
    result = P.run(scratch, spec)
    assert result.worker_loop == "python" and result.total_ops > 0
    assert any("Python loop" in note and "/bin/false failed" in note for note in result.notes), result.notes
    assert not list((tmp_path / "home" / "lib").glob("*"))       # no half-built library left
