"""Filebench-like throughput personalities: fileserver, webserver, varmail.

Modelled on Filebench's ``workloads/{fileserver,webserver,varmail}.f`` (same flowop sequences,
gamma-distributed file sizes with shape 1.5, ``appendfilerand`` appends of 1..append_size
bytes, whole-file reads/writes in ``io_size`` chunks), with two deliberate differences:

- Worker *processes*, not threads: the measured syscalls must not queue on one GIL. They are
  started with the ``forkserver`` method: a clean single-threaded server forks them, which is
  safe even when the caller has threads (a telemetry sampler, a queue feeder) and cheap (the
  preloaded interpreter pages are shared, which also keeps them out of a ``--mem-limit``).
- fileserver and varmail workers each own a disjoint slice of the file set (file i belongs to
  worker i mod W), like the FAST'17 description "each thread represents a user ... on a unique
  set of files"; no cross-process locks are needed to pick a free or existing file.
- webserver's shared log is truncated whenever it passes ``log_limit_bytes`` (like logrotate's
  copytruncate; :func:`default_spec` sets a quarter of the capacity). Filebench lets it grow,
  but at ~100 MB/s of appends it fills a 2 GiB target within a 30-s run.

A full file system (ENOSPC) stops the whole run at once, like a cancel: the workers stop,
what they measured is kept, and :attr:`RunResult.stopped_by` says why.

Measurements (chosen so memory stays bounded however long the run):

- completions, bytes and summed latency per op type per ``bin_s`` bin (int64, op x bin):
  Throughput-N is exact afterwards for any N that is a multiple of ``bin_s``;
- one whole-run latency histogram per op type on the shared log-bucketed grid of
  :mod:`fsscope.analysis.variation` (4480 buckets, percentiles within 0.4 %);
- per ``latency_window_s`` window and op type, the same histogram stored sparsely
  (window, op, bucket, count rows), so windowed percentiles and CDFs stay exact to 1 %.

Raw per-call arrays would be exact too but grow by 16 bytes per op (about 1 GB an hour at
20 k ops/s); the histograms grow by a few kB per window.

Typical use from a job (the parent process does no I/O, it only aggregates)::

    spec = default_spec("fileserver", capacity_bytes=fs_size)
    populate(path, spec, seed=1)
    result = run(path, spec, on_window=emit_sample, cancelled=lambda: ctx.cancelled)
"""

from __future__ import annotations

import errno
import math
import multiprocessing as mp
import os
import queue as queue_mod
import random
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.analysis import variation
from fsscope.errors import FsscopeError

PERSONALITIES = ("fileserver", "webserver", "varmail")

# Op types per personality, in the order they appear in the flowop sequence.
OPS: dict[str, tuple[str, ...]] = {
    "fileserver": ("create", "write", "close", "open", "append", "read", "delete", "stat"),
    "webserver": ("open", "read", "close", "append"),
    "varmail": ("delete", "create", "append", "fsync", "close", "open", "read"),
}

# Filebench defaults (anchors §3.1): files, mean size, dir width, threads, prealloc %.
_FILEBENCH = {
    "fileserver": dict(nfiles=10_000, mean_file_size_bytes=128 << 10, dir_width=20, threads=50, prealloc_pct=80),
    "webserver": dict(nfiles=1_000, mean_file_size_bytes=16 << 10, dir_width=20, threads=100, prealloc_pct=100),
    "varmail": dict(nfiles=1_000, mean_file_size_bytes=16 << 10, dir_width=1_000_000, threads=16, prealloc_pct=80),
}

MANIFEST_NAME = ".fsscope-fileset-{name}.npz"
LOG_DIR = "logfiles"


@dataclass(frozen=True)
class PersonalitySpec:
    """Everything that defines a personality run. Sizes in bytes, times in seconds."""

    name: str
    nfiles: int
    mean_file_size_bytes: int
    dir_width: int
    workers: int
    duration_s: float = 60.0
    io_size_bytes: int = 1 << 20
    append_size_bytes: int = 16 << 10     # appendfilerand: uniform 1..append_size_bytes
    gamma_shape: float = 1.5
    prealloc_pct: int = 80
    reads_per_iteration: int = 10         # webserver: whole-file reads per log append
    log_limit_bytes: int | None = None    # webserver: truncate the log past this size (None: never)
    seed: int = 0
    bin_s: float = 1.0                    # granularity of completion counts
    latency_window_s: float = 10.0        # granularity of stored latency histograms

    def __post_init__(self) -> None:
        def bad(field_name: str, why: str) -> FsscopeError:
            return FsscopeError(f"{self.name} spec: {field_name} {why}")
        if self.name not in PERSONALITIES:
            raise FsscopeError(f"unknown personality {self.name!r} (choose from {', '.join(PERSONALITIES)})")
        if self.workers < 1:
            raise bad("workers", f"must be >= 1, got {self.workers}")
        if self.nfiles < 1:
            raise bad("nfiles", f"must be >= 1, got {self.nfiles}")
        if self.name != "webserver" and self.nfiles < 2 * self.workers:
            raise bad("nfiles", f"must be at least 2 per worker ({2 * self.workers}), got {self.nfiles}")
        for name in ("mean_file_size_bytes", "dir_width", "io_size_bytes", "append_size_bytes"):
            if getattr(self, name) < 1:
                raise bad(name, f"must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.prealloc_pct <= 100:
            raise bad("prealloc_pct", f"must be 0..100, got {self.prealloc_pct}")
        if self.log_limit_bytes is not None and self.log_limit_bytes < self.append_size_bytes:
            raise bad("log_limit_bytes", f"must be at least append_size_bytes ({self.append_size_bytes})")
        if self.duration_s <= 0 or self.bin_s <= 0:
            raise bad("duration_s/bin_s", "must be positive")
        ratio = self.latency_window_s / self.bin_s
        if ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
            raise bad("latency_window_s", f"must be a multiple of bin_s={self.bin_s}")

    @property
    def op_names(self) -> tuple[str, ...]:
        return OPS[self.name]

    @property
    def fileset_bytes(self) -> int:
        return self.nfiles * self.mean_file_size_bytes


def default_spec(name: str, capacity_bytes: int | None = None, cpu_count: int | None = None,
                 **overrides: Any) -> PersonalitySpec:
    """Filebench's defaults scaled to fit: the file set takes at most a quarter of
    ``capacity_bytes`` (files grow by appends, and the file system needs room), with at least
    50 files; workers default to min(Filebench's thread count, 4 per CPU), since processes
    beyond that only queue for the CPU on a fast device."""
    if name not in _FILEBENCH:
        raise FsscopeError(f"unknown personality {name!r} (choose from {', '.join(PERSONALITIES)})")
    base = dict(_FILEBENCH[name])
    threads = base.pop("threads")
    cpus = cpu_count or os.cpu_count() or 1
    base["workers"] = max(1, min(threads, 4 * cpus))
    mean = overrides.get("mean_file_size_bytes", base["mean_file_size_bytes"])
    if "fileset_bytes" in overrides:
        base["nfiles"] = max(1, int(overrides.pop("fileset_bytes")) // mean)
    elif capacity_bytes:
        base["nfiles"] = int(max(50, min(base["nfiles"], capacity_bytes // 4 // mean)))
    if name == "webserver" and capacity_bytes:
        base["log_limit_bytes"] = max(capacity_bytes // 4, base.get("append_size_bytes", 16 << 10))
    base.update(overrides)
    if name != "webserver":
        base["nfiles"] = max(base["nfiles"], 2 * base["workers"])
    return PersonalitySpec(name=name, **base)


# ---------------------------------------------------------------------------------------------
# File set layout and population
# ---------------------------------------------------------------------------------------------

class _Layout:
    """Paths of the file set: a tree with ``dir_width`` entries per directory (Filebench's
    meandirwidth), files named by index, e.g. ``fileserver/d03/d11/00001234``."""

    def __init__(self, root: Path, spec: PersonalitySpec):
        self.fileset_dir = Path(root) / spec.name
        n_leaves = max(1, math.ceil(spec.nfiles / spec.dir_width))
        self.width = spec.dir_width
        depth = 0
        while spec.dir_width ** depth < n_leaves:
            depth += 1
        leaves = []
        for leaf in range(n_leaves):
            parts, rest = [], leaf
            for _ in range(depth):
                rest, digit = divmod(rest, spec.dir_width)
                parts.append(f"d{digit:02d}")
            leaves.append(os.path.join(str(self.fileset_dir), *reversed(parts)))
        self.leaves = leaves
        self.log_path = str(Path(root) / LOG_DIR / f"{spec.name}.log")

    def path(self, index: int) -> str:
        return f"{self.leaves[index // self.width]}/{index:08d}"


@dataclass(frozen=True)
class Fileset:
    """State of a populated file set: fixed per-file sizes and which files exist now."""

    spec_name: str
    nfiles: int
    sizes_bytes: np.ndarray      # int64, per file (the size written by create / populate)
    exists: np.ndarray           # bool, per file
    seed: int


def _manifest_path(root: Path, spec: PersonalitySpec) -> Path:
    return Path(root) / MANIFEST_NAME.format(name=spec.name)


def _save_fileset(root: Path, spec: PersonalitySpec, fs: Fileset) -> None:
    path = _manifest_path(root, spec)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, sizes_bytes=fs.sizes_bytes, exists=fs.exists,
             meta=np.array([fs.spec_name, str(fs.nfiles), str(fs.seed)]))
    os.replace(tmp, path)


def load_fileset(root: str | os.PathLike, spec: PersonalitySpec) -> Fileset:
    """The file set populate() left in ``root`` (and run() updated); clear error if absent."""
    path = _manifest_path(Path(root), spec)
    try:
        with np.load(path) as data:
            name, nfiles, seed = (str(x) for x in data["meta"])
            fs = Fileset(name, int(nfiles), data["sizes_bytes"].astype(np.int64),
                         data["exists"].astype(bool), int(seed))
    except FileNotFoundError:
        raise FsscopeError(f"no {spec.name} file set in {root}: populate it first") from None
    if fs.nfiles != spec.nfiles:
        raise FsscopeError(f"{spec.name} file set in {root} has {fs.nfiles} files, the spec wants "
                           f"{spec.nfiles}: populate again")
    return fs


def file_sizes_bytes(spec: PersonalitySpec, seed: int) -> np.ndarray:
    """Gamma-distributed sizes like Filebench's cvar-gamma (mean, shape ``gamma_shape``)."""
    rng = np.random.default_rng(seed)
    scale = spec.mean_file_size_bytes / spec.gamma_shape
    return np.rint(rng.gamma(spec.gamma_shape, scale, spec.nfiles)).astype(np.int64)


@dataclass(frozen=True)
class PopulateResult:
    files: int
    bytes_written: int
    elapsed_s: float
    cache_evicted: bool


def populate(root: str | os.PathLike, spec: PersonalitySpec, seed: int | None = None,
             evict_cache: bool = True) -> PopulateResult:
    """Create the file set (``prealloc_pct`` % of the files, all of them for webserver).

    Replaces an earlier file set of the same personality under ``root``. With ``evict_cache``
    the data is synced and dropped from the page cache (posix_fadvise DONTNEED per file), so
    the run starts cold and, under ``--mem-limit``, the cache is charged to the workers' cgroup
    rather than to the populating process (no effect on tmpfs, whose pages are the storage)."""
    root = Path(root)
    seed = spec.seed if seed is None else seed
    t0 = time.monotonic()
    layout = _Layout(root, spec)
    if layout.fileset_dir.exists():
        shutil.rmtree(layout.fileset_dir)
    for leaf in layout.leaves:
        os.makedirs(leaf, exist_ok=True)
    sizes = file_sizes_bytes(spec, seed)
    rng = np.random.default_rng(seed + 1)
    n_exist = int(round(spec.nfiles * spec.prealloc_pct / 100.0))
    exists = np.zeros(spec.nfiles, dtype=bool)
    exists[rng.permutation(spec.nfiles)[:n_exist]] = True
    buf = memoryview(_pattern(spec.io_size_bytes, seed))
    written = 0
    for index in np.flatnonzero(exists):
        fd = os.open(layout.path(int(index)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            written += _write_whole(fd, int(sizes[index]), buf)
        finally:
            os.close(fd)
    if spec.name == "webserver":
        os.makedirs(os.path.dirname(layout.log_path), exist_ok=True)
        open(layout.log_path, "wb").close()
    if evict_cache:
        os.sync()
        for index in np.flatnonzero(exists):
            fd = os.open(layout.path(int(index)), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
    _save_fileset(root, spec, Fileset(spec.name, spec.nfiles, sizes, exists, seed))
    return PopulateResult(n_exist, written, time.monotonic() - t0, evict_cache)


def _pattern(size: int, seed: int) -> bytearray:
    """Incompressible write data (zeros would flatter compressing file systems)."""
    return bytearray(random.Random(seed).randbytes(size))


def _write_whole(fd: int, size: int, buf: memoryview) -> int:
    """Write ``size`` bytes in chunks of len(buf) (Filebench writewholefile)."""
    chunk = len(buf)
    done = 0
    while done < size:
        done += os.write(fd, buf[: min(chunk, size - done)])
    return done


def _read_whole(fd: int, buf: bytearray) -> int:
    """Read to EOF in len(buf) chunks into one reused buffer (Filebench readwholefile)."""
    total = 0
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        n = os.readv(fd, [buf])
        if n <= 0:
            return total
        total += n


def write_sequential(path: str | os.PathLike, size_bytes: int, io_size_bytes: int,
                     fsync: bool = False) -> float:
    """Seconds to write a new file sequentially through the workers' own write path
    (for ``bench/workload_rate.py``, which compares it with fio)."""
    buf = memoryview(_pattern(io_size_bytes, 0))
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        _write_whole(fd, size_bytes, buf)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------
# Worker process
# ---------------------------------------------------------------------------------------------

class _Stop(Exception):
    """Raised inside a worker's loop when the deadline has passed."""


class _Worker:
    """The loop one worker process runs. Records each op's latency into per-bin lists and
    ships one summary per bin to the parent (bucketed histograms, not raw samples)."""

    def __init__(self, wid: int, nworkers: int, root: str, spec: PersonalitySpec,
                 sizes: np.ndarray, exists: np.ndarray, out: Any, deadline_ns: Any):
        self.wid, self.spec, self.out, self.deadline = wid, spec, out, deadline_ns
        self.layout = _Layout(Path(root), spec)
        self.rnd = random.Random(spec.seed * 1_000_003 + wid)
        self.sizes = [int(s) for s in sizes]
        if spec.name == "webserver":
            self.present = list(range(spec.nfiles))
            self.absent: list[int] = []
        else:
            owned = range(wid, spec.nfiles, nworkers)
            self.present = [i for i in owned if exists[i]]
            self.absent = [i for i in owned if not exists[i]]
        self.wbuf = memoryview(_pattern(spec.io_size_bytes, spec.seed + 17 + wid))
        self.rbuf = bytearray(spec.io_size_bytes)
        self.n_ops = len(spec.op_names)
        self.op = {name: i for i, name in enumerate(spec.op_names)}
        self.lat: list[list[int]] = [[] for _ in range(self.n_ops)]
        self.nbytes = [0] * self.n_ops
        self.errors = [0] * self.n_ops
        self.bin_ns = int(round(spec.bin_s * 1e9))
        self.fd = -1
        self.log_fd = -1
        self.cur = 0          # op type in progress (for error accounting)
        self.ppid = os.getppid()
        self.picked: int | None = None

    # -- recording ------------------------------------------------------------------------------
    def begin(self, start_ns: int) -> None:
        self.start_ns = start_ns
        self.cur_bin = 0
        self.next_edge = start_ns + self.bin_ns

    def rec(self, op: int, t0: int, nbytes: int = 0) -> None:
        t1 = time.monotonic_ns()
        if t1 >= self.deadline.value:
            raise _Stop
        if t1 >= self.next_edge:
            self.flush(t1)
        self.lat[op].append(t1 - t0)
        self.nbytes[op] += nbytes

    def flush(self, t1: int | None) -> None:
        payload = []
        for op in range(self.n_ops):
            lat = self.lat[op]
            if not lat:
                continue
            arr = np.array(lat, dtype=np.int64)
            buckets, counts = np.unique(variation.bucket_index(arr), return_counts=True)
            payload.append((op, len(lat), self.nbytes[op], int(arr.sum()),
                            buckets.astype(np.int16), counts.astype(np.int32)))
            self.lat[op] = []
            self.nbytes[op] = 0
        new_bin = (1 << 62) if t1 is None else (t1 - self.start_ns) // self.bin_ns
        self.out.put(("bin", self.wid, self.cur_bin, new_bin, payload))
        self.cur_bin = new_bin
        self.next_edge = self.start_ns + (new_bin + 1) * self.bin_ns
        if t1 is not None and os.getppid() != self.ppid:
            raise _Stop           # orphaned: the job process (and its forkserver) are gone

    # -- helpers --------------------------------------------------------------------------------
    def take(self, pool: list[int]) -> int:
        i = self.rnd.randrange(len(pool))
        index = pool[i]
        pool[i] = pool[-1]
        pool.pop()
        return index

    def open(self, path: str, flags: int) -> int:
        self.cur = self.op["open"]
        t0 = time.monotonic_ns()
        fd = self.fd = os.open(path, flags)
        self.rec(self.cur, t0)
        return fd

    def close(self) -> None:
        self.cur = self.op["close"]
        t0 = time.monotonic_ns()
        fd, self.fd = self.fd, -1
        os.close(fd)
        self.rec(self.cur, t0)

    def append(self, fd: int) -> None:
        self.cur = self.op["append"]
        n = self.rnd.randint(1, self.spec.append_size_bytes)
        t0 = time.monotonic_ns()
        os.lseek(fd, 0, os.SEEK_END)
        written = os.write(fd, self.wbuf[: min(n, len(self.wbuf))])
        self.rec(self.cur, t0, written)

    def read(self, fd: int) -> None:
        self.cur = self.op["read"]
        t0 = time.monotonic_ns()
        n = _read_whole(fd, self.rbuf)
        self.rec(self.cur, t0, n)

    def create(self) -> int | None:
        if not self.absent:
            return None
        index = self.take(self.absent)
        self.cur = self.op["create"]
        t0 = time.monotonic_ns()
        self.fd = os.open(self.layout.path(index), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.present.append(index)
        self.rec(self.cur, t0)
        return index

    def delete(self) -> None:
        if not self.present:
            return
        index = self.take(self.present)
        self.cur = self.op["delete"]
        t0 = time.monotonic_ns()
        try:
            os.unlink(self.layout.path(index))
        finally:
            self.absent.append(index)
        self.rec(self.cur, t0)

    def pick(self) -> int | None:
        """An existing file of this worker (kept in the pool; remembered for error handling)."""
        self.picked = self.present[self.rnd.randrange(len(self.present))] if self.present else None
        return self.picked

    # -- personalities --------------------------------------------------------------------------
    def fileserver(self) -> None:
        op = self.op
        index = self.create()
        if index is not None:
            self.cur = op["write"]
            t0 = time.monotonic_ns()
            n = _write_whole(self.fd, self.sizes[index], self.wbuf)
            self.rec(self.cur, t0, n)
            self.close()
        index = self.pick()
        if index is not None:
            self.append(self.open(self.layout.path(index), os.O_RDWR))
            self.close()
        index = self.pick()
        if index is not None:
            self.read(self.open(self.layout.path(index), os.O_RDWR))
            self.close()
        self.delete()
        index = self.pick()
        if index is not None:
            self.cur = op["stat"]
            path = self.layout.path(index)
            t0 = time.monotonic_ns()
            os.stat(path)
            self.rec(self.cur, t0)

    def webserver(self) -> None:
        nfiles = self.spec.nfiles
        for _ in range(self.spec.reads_per_iteration):
            index = self.rnd.randrange(nfiles)
            self.read(self.open(self.layout.path(index), os.O_RDONLY))
            self.close()
        self.append(self.log_fd)
        limit = self.spec.log_limit_bytes
        if limit is not None and os.lseek(self.log_fd, 0, os.SEEK_CUR) > limit:
            os.ftruncate(self.log_fd, 0)      # rotate, untimed: the next append starts it again

    def varmail(self) -> None:
        op = self.op
        self.delete()
        if self.create() is not None:
            self.append(self.fd)
            self.cur = op["fsync"]
            t0 = time.monotonic_ns()
            os.fsync(self.fd)
            self.rec(self.cur, t0)
            self.close()
        index = self.pick()
        if index is not None:
            fd = self.open(self.layout.path(index), os.O_RDWR)
            self.read(fd)
            self.append(fd)
            self.cur = op["fsync"]
            t0 = time.monotonic_ns()
            os.fsync(fd)
            self.rec(self.cur, t0)
            self.close()
        index = self.pick()
        if index is not None:
            self.read(self.open(self.layout.path(index), os.O_RDWR))
            self.close()

    def loop(self) -> str | None:
        """Run iterations until the deadline; returns an error message if it had to give up."""
        iteration = getattr(self, self.spec.name)
        failures_in_a_row = 0
        while True:
            try:
                iteration()
                failures_in_a_row = 0
            except _Stop:
                return None
            except OSError as exc:
                self.errors[self.cur] += 1
                failures_in_a_row += 1
                if exc.errno == errno.ENOSPC:     # the run is over for everyone: say so at once
                    message = f"{self.spec.op_names[self.cur]}: the file system is full (ENOSPC)"
                    self.out.put(("full", self.wid, message))
                    return message
                if exc.errno == errno.ENOENT and self.picked in self.present:
                    self.present.remove(self.picked)      # gone behind our back: stop picking it
                    self.absent.append(self.picked)
                if self.fd >= 0:
                    try:
                        os.close(self.fd)
                    except OSError:
                        pass
                    self.fd = -1
                if failures_in_a_row >= 100:
                    return f"{self.spec.op_names[self.cur]}: {exc} (100 failures in a row)"
                if time.monotonic_ns() >= self.deadline.value:
                    return None


def _worker_main(wid: int, nworkers: int, root: str, spec: PersonalitySpec, sizes: np.ndarray,
                 exists: np.ndarray, out: Any, go: Any, start_ns: Any, deadline_ns: Any) -> None:
    """Entry point of a worker process: set up, report ready, wait for go, loop, report."""
    # The parent decides when to stop: a terminal's Ctrl-C or the runner's SIGTERM to the
    # process group reaches the job, which moves the deadline; SIGKILL still ends everything.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    worker = _Worker(wid, nworkers, root, spec, sizes, exists, out, deadline_ns)
    if spec.name == "webserver":
        worker.log_fd = os.open(worker.layout.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    out.put(("ready", wid, os.getpid()))
    go.wait()
    worker.begin(start_ns.value)
    cpu0, wait0 = os.times(), _runqueue_wait_ns()
    error = worker.loop()
    cpu1, wait1 = os.times(), _runqueue_wait_ns()
    worker.flush(None)
    if worker.fd >= 0:
        os.close(worker.fd)
    if worker.log_fd >= 0:
        os.close(worker.log_fd)
    out.put(("done", wid, worker.present, worker.errors, error,
             (cpu1.user - cpu0.user, cpu1.system - cpu0.system, (wait1 - wait0) / 1e9)))


def _runqueue_wait_ns() -> int:
    """Time this process spent runnable but waiting for a CPU (/proc/self/schedstat's second
    field): on a loaded machine a CPU-bound worker waits there instead of running."""
    try:
        with open("/proc/self/schedstat") as fh:
            return int(fh.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0


# ---------------------------------------------------------------------------------------------
# Parent side: start workers, aggregate, stop
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LiveSample:
    """One bin of live numbers for the UI (ops/s and latency percentiles per op type)."""

    bin_index: int
    t_s: float                              # end of the bin, seconds since the run started
    ops_per_s: float
    op_ops_per_s: dict[str, float]
    op_p50_ns: dict[str, float]
    op_p99_ns: dict[str, float]
    complete: bool                          # False: emitted before every worker reported

    def to_dict(self) -> dict[str, Any]:
        return {"bin": self.bin_index, "t_s": self.t_s, "ops_per_s": self.ops_per_s,
                "ops": {op: {"ops_per_s": self.op_ops_per_s[op],
                             "p50_ns": _finite(self.op_p50_ns.get(op)),
                             "p99_ns": _finite(self.op_p99_ns.get(op))} for op in self.op_ops_per_s},
                "complete": self.complete}


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


@dataclass(frozen=True)
class RunResult:
    """Arrays of one run. Counts are per op type (rows, in ``op_names`` order) per bin."""

    personality: str
    op_names: tuple[str, ...]
    bin_s: float
    elapsed_s: float
    counts: np.ndarray                # int64 [n_ops, n_bins] completions
    io_bytes: np.ndarray              # int64 [n_ops, n_bins] bytes moved by read/write/append
    latency_sum_ns: np.ndarray        # int64 [n_ops, n_bins]
    latency_hist: np.ndarray          # int64 [n_ops, N_BUCKETS] whole run
    latency_window_s: float
    window_hist: np.ndarray           # int64 [rows, 4]: window, op, bucket, count (sparse)
    errors: np.ndarray                # int64 [n_ops]
    worker_pids: tuple[int, ...]
    worker_exitcodes: tuple[int | None, ...]
    cancelled: bool
    start_unix_s: float
    spec: PersonalitySpec
    cgroup: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()
    start_ns: int = 0                 # CLOCK_MONOTONIC ns of bin 0 (kernel trace events align on it)
    stopped_by: str | None = None         # why the run ended before its duration (ENOSPC)
    worker_cpu_user_s: float = 0.0        # CPU the workers spent in their loop (all workers summed):
    worker_cpu_system_s: float = 0.0      # user = the generator itself, system = the kernel for it
    worker_runqueue_s: float = 0.0        # time they were runnable but waited for a CPU

    @property
    def total_ops(self) -> int:
        return int(self.counts.sum())

    @property
    def ops_per_s(self) -> float:
        """Cumulative throughput (Throughput-whole-run)."""
        return self.total_ops / self.elapsed_s if self.elapsed_s > 0 else math.nan

    def op_count(self, op: str) -> int:
        return int(self.counts[self.op_names.index(op)].sum())

    def throughput(self, window_s: float) -> np.ndarray:
        """Throughput-N over all op types (ops/s per complete window)."""
        return variation.throughput_n(self.counts, self.bin_s, window_s)

    def percentile_ns(self, op: str, q: float) -> float:
        return variation.hist_percentile_ns(self.latency_hist[self.op_names.index(op)], q)

    def window_histograms(self, op: str) -> np.ndarray:
        """Dense [n_windows, N_BUCKETS] latency histograms of one op per latency window."""
        n_windows = max(1, math.ceil(self.elapsed_s / self.latency_window_s))
        rows = self.window_hist[self.window_hist[:, 1] == self.op_names.index(op)]
        out = np.zeros((n_windows, variation.N_BUCKETS), dtype=np.int64)
        np.add.at(out, (np.minimum(rows[:, 0], n_windows - 1), rows[:, 2]), rows[:, 3])
        return out

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Arrays for the run directory (``np.savez`` or one ``.npy`` each)."""
        return {"counts": self.counts, "io_bytes": self.io_bytes,
                "latency_sum_ns": self.latency_sum_ns, "latency_hist": self.latency_hist,
                "window_hist": self.window_hist, "errors": self.errors}

    def summary(self) -> dict[str, Any]:
        """Plain-JSON facts of the run (no arrays)."""
        return {"personality": self.personality, "ops_per_s": self.ops_per_s,
                "elapsed_s": self.elapsed_s, "total_ops": self.total_ops,
                "ops": {op: {"count": self.op_count(op),
                             "p50_ns": _finite(self.percentile_ns(op, 50)),
                             "p99_ns": _finite(self.percentile_ns(op, 99)),
                             "errors": int(self.errors[i])} for i, op in enumerate(self.op_names)},
                "workers": len(self.worker_pids), "cancelled": self.cancelled, "stopped_by": self.stopped_by,
                "worker_cpu_user_s": self.worker_cpu_user_s, "worker_cpu_system_s": self.worker_cpu_system_s,
                "worker_runqueue_s": self.worker_runqueue_s,
                "cgroup": self.cgroup, "notes": list(self.notes)}


class _Aggregator:
    """Merges per-worker bin summaries into run arrays and decides when a bin is final."""

    def __init__(self, spec: PersonalitySpec, nworkers: int, alloc: Callable[[str, tuple[int, int]], np.ndarray]):
        self.spec = spec
        self.n_ops = len(spec.op_names)
        cap = int(math.ceil(spec.duration_s / spec.bin_s)) + 2
        self.counts = alloc("counts", (self.n_ops, cap))
        self.io_bytes = alloc("io_bytes", (self.n_ops, cap))
        self.lat_sum = alloc("latency_sum_ns", (self.n_ops, cap))
        self.hist = alloc("latency_hist", (self.n_ops, variation.N_BUCKETS))
        self.bins_per_window = int(round(spec.latency_window_s / spec.bin_s))
        self.window_rows: dict[int, list[np.ndarray]] = {}
        self.compacted: list[np.ndarray] = []
        self.live: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}
        self.progress = [0] * nworkers       # worker w has finished all bins < progress[w]
        self.emitted = 0                     # bins < emitted were handed to on_window

    def _grow(self, b: int) -> None:
        if b < self.counts.shape[1]:
            return
        extra = max(b + 1 - self.counts.shape[1], self.counts.shape[1])
        pad = np.zeros((self.n_ops, extra), dtype=np.int64)
        self.counts = np.hstack([self.counts, pad])
        self.io_bytes = np.hstack([self.io_bytes, pad])
        self.lat_sum = np.hstack([self.lat_sum, pad])

    def add(self, wid: int, b: int, next_bin: int, payload: list) -> None:
        if payload:
            self._grow(b)
        window = b // self.bins_per_window
        for op, count, nbytes, lat_sum, buckets, counts in payload:
            buckets = buckets.astype(np.int64)
            self.counts[op, b] += count
            self.io_bytes[op, b] += nbytes
            self.lat_sum[op, b] += lat_sum
            np.add.at(self.hist[op], buckets, counts)
            rows = np.empty((buckets.size, 4), dtype=np.int64)
            rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = window, op, buckets, counts
            self.window_rows.setdefault(window, []).append(rows)
            if b >= self.emitted:
                self.live.setdefault(b, []).append((op, buckets, counts))
        self.progress[wid] = max(self.progress[wid], next_bin)

    def finish_worker(self, wid: int) -> None:
        self.progress[wid] = 1 << 62

    def compact(self, before_window: int) -> None:
        """Merge duplicate (op, bucket) rows of windows that no worker will add to."""
        for window in [w for w in self.window_rows if w < before_window]:
            self.compacted.append(_dedupe(np.vstack(self.window_rows.pop(window))))

    def ready_bins(self, now_bin: int, grace_bins: int) -> list[tuple[int, bool]]:
        """Bins to emit now: complete ones, and ones older than the grace period."""
        done = min(self.progress)
        out = []
        while self.emitted < min(done, now_bin) or self.emitted < now_bin - grace_bins:
            out.append((self.emitted, self.emitted < done))
            self.emitted += 1
        return out

    def live_sample(self, b: int, complete: bool) -> LiveSample:
        spec = self.spec
        hists = np.zeros((self.n_ops, variation.N_BUCKETS), dtype=np.int64)
        for op, buckets, counts in self.live.pop(b, []):
            np.add.at(hists[op], buckets, counts)
        counts = self.counts[:, b] if b < self.counts.shape[1] else np.zeros(self.n_ops, np.int64)
        names = spec.op_names
        return LiveSample(
            b, (b + 1) * spec.bin_s, float(counts.sum() / spec.bin_s),
            {n: float(counts[i] / spec.bin_s) for i, n in enumerate(names)},
            {n: variation.hist_percentile_ns(hists[i], 50) for i, n in enumerate(names)},
            {n: variation.hist_percentile_ns(hists[i], 99) for i, n in enumerate(names)},
            complete)

    def window_hist(self) -> np.ndarray:
        self.compact(1 << 62)
        if not self.compacted:
            return np.zeros((0, 4), dtype=np.int64)
        return _dedupe(np.vstack(self.compacted))


def _dedupe(rows: np.ndarray) -> np.ndarray:
    """Sum the counts of identical (window, op, bucket) rows."""
    keys, inverse = np.unique(rows[:, :3], axis=0, return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=rows[:, 3], minlength=len(keys)).astype(np.int64)
    return np.column_stack([keys, counts])


_ctx: Any = None


def _context() -> Any:
    """The forkserver context, preloading this module (and the caller's ``-m`` main module,
    which every worker re-imports as ``__mp_main__``) so workers start in milliseconds.

    Like any spawn/forkserver user, a *script* calling :func:`run` needs an
    ``if __name__ == "__main__":`` guard, since workers re-import it."""
    global _ctx
    if _ctx is None:
        _ctx = mp.get_context("forkserver")
        preload = [__name__]
        main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        main_name = getattr(main_spec, "name", None)
        if main_name and not main_name.endswith("__main__"):
            preload.append(main_name)
        _ctx.set_forkserver_preload(preload)
    return _ctx


def run(root: str | os.PathLike, spec: PersonalitySpec, duration_s: float | None = None,
        workers: int | None = None, on_window: Callable[[LiveSample], None] | None = None,
        cancelled: Callable[[], bool] | None = None, mem_limit_bytes: int | None = None,
        on_start: Callable[[tuple[int, ...]], None] | None = None,
        grace_s: float = 3.0, straggler_timeout_s: float = 60.0,
        alloc: Callable[[str, tuple[int, int]], np.ndarray] | None = None) -> RunResult:
    """Run one personality on the file set populated under ``root`` and return its arrays.

    ``on_window`` gets a :class:`LiveSample` per bin, in order, once every worker has reported
    the bin (or ``grace_s`` after its end, flagged incomplete). ``cancelled`` is polled ~10x a
    second; when true the workers stop at their next op and the result covers the time run.
    ``mem_limit_bytes`` runs the workers in a fresh memory cgroup (see :mod:`.cgroup`).
    ``on_start`` receives the worker pids just before they start (e.g. for taskstats).
    ``alloc(name, shape)`` gives the zeroed int64 arrays the run adds into as bins arrive
    (counts, io_bytes, latency_sum_ns, latency_hist): memory-mapped files of a run record keep
    every aggregated bin if the job is killed. Default: plain in-memory arrays.
    Must not be called from a daemonic process (those cannot have children)."""
    from fsscope.workloads.cgroup import MemoryCgroup

    spec = replace(spec, **{k: v for k, v in (("duration_s", duration_s), ("workers", workers))
                            if v is not None})
    root = Path(root)
    fileset = load_fileset(root, spec)
    ctx = _context()
    out = ctx.Queue()
    go = ctx.Event()
    start_v = ctx.RawValue("q", 0)
    deadline_v = ctx.RawValue("q", 1 << 62)
    nworkers = spec.workers
    notes: list[str] = []
    procs = [ctx.Process(target=_worker_main, name=f"fsscope-{spec.name}-{w}",
                         args=(w, nworkers, str(root), spec, fileset.sizes_bytes, fileset.exists,
                               out, go, start_v, deadline_v))
             for w in range(nworkers)]
    agg = _Aggregator(spec, nworkers, alloc or (lambda name, shape: np.zeros(shape, dtype=np.int64)))
    done: dict[int, tuple] = {}
    was_cancelled = went = False
    stopped_by: str | None = None
    start_ns = end_ns = 0
    start_unix_s = time.time()
    cg = None
    cg_stats: dict[str, Any] | None = None
    bin_ns = int(round(spec.bin_s * 1e9))

    def emit(bins: list[tuple[int, bool]], limit_ns: int) -> None:
        for b, complete in bins:
            sample = agg.live_sample(b, complete)
            if on_window is not None and b * bin_ns < limit_ns - start_ns:
                on_window(sample)

    try:
        if mem_limit_bytes:
            cg = MemoryCgroup(mem_limit_bytes).create()
        for p in procs:
            p.start()
        pids = tuple(p.pid for p in procs)
        _wait_ready(out, procs, timeout_s=60.0)
        if cg is not None:
            for pid in pids:
                cg.add(pid)
        if on_start is not None:
            on_start(pids)
        start_unix_s = time.time()
        start_ns = time.monotonic_ns() + 2_000_000       # 2 ms for the go signal to land
        start_v.value = start_ns
        deadline_v.value = start_ns + int(spec.duration_s * 1e9)
        go.set()
        went = True
        grace_bins = max(1, int(math.ceil(grace_s / spec.bin_s)))
        gone_since: dict[int, float] = {}
        while len(done) < nworkers:
            if not was_cancelled and cancelled is not None and cancelled():
                was_cancelled = True
                deadline_v.value = min(deadline_v.value, time.monotonic_ns())
            for msg in _drain(out, timeout_s=0.1):
                if msg[0] == "bin":
                    _, wid, b, next_bin, payload = msg
                    agg.add(wid, b, next_bin, payload)
                elif msg[0] == "done":
                    done[msg[1]] = msg
                    agg.finish_worker(msg[1])
                elif msg[0] == "full" and stopped_by is None:
                    stopped_by = msg[2]
                    deadline_v.value = min(deadline_v.value, time.monotonic_ns())
            now = time.monotonic_ns()
            deadline = deadline_v.value
            now_bin = (min(now, deadline) - start_ns) // bin_ns + (1 if now >= deadline else 0)
            emit(agg.ready_bins(now_bin, grace_bins), deadline)
            agg.compact(min(agg.progress) // agg.bins_per_window)
            # workers that died without saying done (OOM kill, crash), or hang past the deadline
            for w, p in enumerate(procs):
                if w in done:
                    continue
                if p.exitcode is not None:
                    first = gone_since.setdefault(w, time.monotonic())
                    if time.monotonic() - first > 2.0:       # its last messages had time to arrive
                        done[w] = ("done", w, None, [0] * agg.n_ops,
                                   f"worker {w} (pid {p.pid}) exited with code {p.exitcode}", None)
                        agg.finish_worker(w)
                elif now > deadline + int(straggler_timeout_s * 1e9):
                    notes.append(f"worker {w} (pid {p.pid}) still busy {straggler_timeout_s:g} s "
                                 "after the deadline (stuck in a syscall?): killed")
                    p.kill()
        end_ns = min(deadline_v.value, max(time.monotonic_ns(), start_ns))
        n_bins = max(1, int(math.ceil((end_ns - start_ns) / bin_ns - 1e-9)))
        emit(agg.ready_bins(n_bins, 0), end_ns)
        for p in procs:
            p.join(timeout=10)
    finally:
        if not went:  # a second set() could hang: a worker OOM-killed inside go.wait() holds its lock
            go.set()
        deadline_v.value = 0                     # any worker still running stops at its next op
        for p in procs:
            if p.pid is not None and p.is_alive():
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=5)
        if cg is not None:
            cg_stats = {"version": cg.version, **cg.stats()}
            cg.remove()
        out.close()

    elapsed_s = max(0.0, (end_ns - start_ns) / 1e9)
    errors = np.zeros(agg.n_ops, dtype=np.int64)
    exists = fileset.exists.copy()
    cpu_s = np.zeros(3)                         # user, system, runqueue wait; all workers
    for w, msg in sorted(done.items()):
        _, _, present, errs, error, cpu = msg
        errors += np.asarray(errs, dtype=np.int64)
        if cpu is not None:
            cpu_s += cpu
        if error:
            notes.append(error)
        if present is not None and spec.name != "webserver":
            owned = np.arange(w, spec.nfiles, nworkers)
            exists[owned] = False
            exists[np.asarray(present, dtype=np.int64)] = True
    try:
        _save_fileset(root, spec, replace(fileset, exists=exists))
    except OSError as exc:  # a full file system: the measurements matter, the manifest does not
        notes.append(f"file-set manifest not updated ({exc.strerror}): populate again before another run")
    agg._grow(n_bins - 1)
    if cg_stats and cg_stats.get("oom_kills"):
        notes.append(f"the memory cgroup's OOM killer fired {cg_stats['oom_kills']} time(s): "
                     f"--mem-limit {mem_limit_bytes} is too small for the workers themselves")
    return RunResult(
        personality=spec.name, op_names=spec.op_names, bin_s=spec.bin_s, elapsed_s=elapsed_s,
        counts=agg.counts[:, :n_bins].copy(), io_bytes=agg.io_bytes[:, :n_bins].copy(),
        latency_sum_ns=agg.lat_sum[:, :n_bins].copy(), latency_hist=np.array(agg.hist),
        latency_window_s=spec.latency_window_s, window_hist=agg.window_hist(), errors=errors,
        worker_pids=tuple(p.pid for p in procs), worker_exitcodes=tuple(p.exitcode for p in procs),
        cancelled=was_cancelled, start_unix_s=start_unix_s,
        spec=spec, cgroup=cg_stats, notes=tuple(notes), start_ns=start_ns, stopped_by=stopped_by,
        worker_cpu_user_s=float(cpu_s[0]), worker_cpu_system_s=float(cpu_s[1]),
        worker_runqueue_s=float(cpu_s[2]))


def _drain(out: Any, timeout_s: float, max_messages: int = 10_000) -> list[tuple]:
    """Every message available now (waiting up to ``timeout_s`` for the first)."""
    try:
        messages = [out.get(timeout=timeout_s)]
    except queue_mod.Empty:
        return []
    while len(messages) < max_messages:
        try:
            messages.append(out.get_nowait())
        except queue_mod.Empty:
            break
    return messages


def _wait_ready(out: Any, procs: Sequence[Any], timeout_s: float) -> None:
    ready: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while len(ready) < len(procs):
        try:
            msg = out.get(timeout=0.2)
        except queue_mod.Empty:
            dead = [p for p in procs if p.exitcode is not None]
            if dead:
                raise FsscopeError(f"workload worker {dead[0].name} exited during setup "
                                   f"(code {dead[0].exitcode})") from None
            if time.monotonic() > deadline:
                raise FsscopeError(f"workload workers not ready after {timeout_s:g} s") from None
            continue
        if msg[0] == "ready":
            ready.add(msg[1])
