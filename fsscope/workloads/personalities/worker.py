"""The loop one worker process runs (in its own process: the syscalls must not share a GIL)."""

from __future__ import annotations

import errno
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.analysis import variation
from fsscope.workloads.personalities.fileset import Layout, pattern, read_whole, write_whole
from fsscope.workloads.personalities.spec import PersonalitySpec


class _Stop(Exception):
    """Raised inside a worker's loop when the deadline has passed."""


class _Worker:
    """The loop one worker process runs. Records each op's latency into per-bin lists and
    ships one summary per bin to the parent (bucketed histograms, not raw samples)."""

    def __init__(self, wid: int, nworkers: int, root: str, spec: PersonalitySpec,
                 sizes: np.ndarray, exists: np.ndarray, out: Any, deadline_ns: Any):
        self.wid, self.spec, self.out, self.deadline = wid, spec, out, deadline_ns
        self.layout = Layout(Path(root), spec)
        self.rnd = random.Random(spec.seed * 1_000_003 + wid)
        self.sizes = [int(s) for s in sizes]
        if spec.name == "webserver":
            self.present = list(range(spec.nfiles))
            self.absent: list[int] = []
        else:
            owned = range(wid, spec.nfiles, nworkers)
            self.present = [i for i in owned if exists[i]]
            self.absent = [i for i in owned if not exists[i]]
        self.wbuf = memoryview(pattern(spec.io_size_bytes, spec.seed + 17 + wid))
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
        n = read_whole(fd, self.rbuf)
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
            n = write_whole(self.fd, self.sizes[index], self.wbuf)
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


def worker_main(wid: int, nworkers: int, root: str, spec: PersonalitySpec, sizes: np.ndarray,
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


