"""Carrying out the ager's file operations, in this process or in worker processes.

Kept free of numpy/scipy so worker processes start fast. Operations name files by paths
relative to the aged root (opened once as a directory fd), so a worker needs nothing but
the root and the write mode. A create whose parent directory is missing makes it first
(``mkdir -p``), which is how the directory tree grows: only directories that hold or lead
to files ever exist.

Errors that mean "the file system is full" (ENOSPC, EDQUOT) are results, not exceptions:
the partial file is removed and the errno is returned, so the caller can stop cleanly
with a consistent tree. Anything else raises.
"""

from __future__ import annotations

import errno
import multiprocessing
import os
import random
import signal
import threading
from collections import deque
from pathlib import Path
from typing import Any

from fsscope.errors import FsscopeError

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
WRITE_CHUNK_BYTES = 1 << 20
SKIPPED = -1  # a worker's "not executed" mark for ops queued after its first failure


class WorkerError(FsscopeError):
    """An aging worker process failed or died; the message says how."""


def data_pattern(seed: int, size_bytes: int = WRITE_CHUNK_BYTES) -> bytes:
    """Incompressible bytes for real writes (zeros would let compressing file systems cheat)."""
    return random.Random(seed).randbytes(size_bytes)


class FileOps:
    """Create/delete under one root; ``fallocate`` allocates blocks instead of writing data."""

    def __init__(self, root: Path, *, fallocate: bool, pattern: bytes):
        self.root = str(root)
        self.root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self.fallocate = fallocate
        self.pattern = memoryview(pattern)

    def close(self) -> None:
        if self.root_fd >= 0:
            os.close(self.root_fd)
            self.root_fd = -1

    def create(self, rel_path: str, size_bytes: int) -> int:
        """Create ``rel_path`` with ``size_bytes``; 0, or the errno when the file system is full."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        root_fd = self.root_fd
        try:
            try:
                fd = os.open(rel_path, flags, 0o600, dir_fd=root_fd)
            except FileNotFoundError:
                parent = rel_path.rpartition("/")[0]
                os.makedirs(os.path.join(self.root, parent), exist_ok=True)
                fd = os.open(rel_path, flags, 0o600, dir_fd=root_fd)
        except OSError as exc:
            if exc.errno in FULL_ERRNOS:
                return exc.errno
            raise
        try:
            if size_bytes:
                if self.fallocate:
                    os.posix_fallocate(fd, 0, size_bytes)
                else:
                    pattern = self.pattern
                    left = size_bytes
                    while left:
                        left -= os.write(fd, pattern[:left if left < WRITE_CHUNK_BYTES
                                                     else WRITE_CHUNK_BYTES])
        except OSError as exc:
            os.close(fd)
            if exc.errno in FULL_ERRNOS:
                os.unlink(rel_path, dir_fd=root_fd)
                return exc.errno
            raise
        os.close(fd)
        return 0

    def delete(self, rel_path: str) -> int:
        os.unlink(rel_path, dir_fd=self.root_fd)
        return 0


STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _worker_main(conn, root: str, fallocate: bool, pattern_seed: int) -> None:
    """Run batches in order; after the first failure, report the rest of the queue as skipped."""
    # The planner decides when to stop: a cancel (Ctrl-C, or SIGTERM to the job's process
    # group) reaches the job, which stops submitting and drains; SIGKILL still ends everything.
    # (A worker starts with both ignored already, see WorkerPool; a fork keeps them anyway.)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ops = FileOps(Path(root), fallocate=fallocate, pattern=data_pattern(pattern_seed))
    failed_once = False
    try:
        while True:
            batch = conn.recv()
            if batch is None:
                break
            failures = []
            for seq, kind, rel_path, size_bytes in batch:
                if failed_once:
                    failures.append((seq, SKIPPED))
                    continue
                err = ops.create(rel_path, size_bytes) if kind == "c" else ops.delete(rel_path)
                if err:
                    failures.append((seq, err))
                    failed_once = True
            conn.send(("ok", failures))
    except Exception as exc:  # noqa: BLE001 - reported to the planner, which raises it
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        ops.close()
        conn.close()


class WorkerPool:
    """``jobs`` processes executing a planned op sequence; a file's ops always go to one worker.

    Routing by file id keeps each file's create before its delete; directories are made
    with ``exist_ok`` so racing workers agree. Only the interleaving of different files'
    operations varies, so the op log (decided by the planner) stays reproducible while the
    on-disk placement may not.
    """

    BATCH_OPS = 1024
    MAX_OUTSTANDING = 4  # batches in flight per worker: bounds the lag behind the planner

    def __init__(self, root: Path, jobs: int, *, fallocate: bool, pattern_seed: int):
        # fork starts in milliseconds and needs no importable __main__; it is only safe
        # while this process has no other threads (a job child has its parent watcher: spawn)
        single_threaded = threading.active_count() == 1
        ctx: Any = multiprocessing.get_context("fork" if single_threaded else "spawn")
        self.jobs = jobs
        self.conns = []
        self.procs = []
        # A spawned worker must ignore a cancel's SIGTERM while it is still importing, before
        # _worker_main runs: it is started with the stop signals ignored (exec keeps SIG_IGN;
        # whether it keeps the mask depends on how Python starts the child, so the mask is not
        # relied on there). Meanwhile they are blocked here: Linux queues a blocked signal even
        # while ignored, and our own handlers get it once restored and unblocked.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        main = threading.current_thread() is threading.main_thread()  # (only it may set handlers)
        handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS} if main else {}
        try:
            for _ in range(jobs):
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_worker_main, args=(child, str(root), fallocate, pattern_seed),
                                   daemon=True)
                proc.start()
                child.close()
                self.conns.append(parent)
                self.procs.append(proc)
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        self.pending: list[list[tuple]] = [[] for _ in range(jobs)]
        self.in_flight: list[deque[int]] = [deque() for _ in range(jobs)]  # first seq per batch
        self.failures: dict[int, int] = {}

    def submit(self, worker: int, seq: int, kind: str, rel_path: str, size_bytes: int) -> None:
        batch = self.pending[worker]
        batch.append((seq, kind, rel_path, size_bytes))
        if len(batch) >= self.BATCH_OPS:
            self._send(worker)

    def _send(self, worker: int) -> None:
        batch = self.pending[worker]
        if not batch:
            return
        while len(self.in_flight[worker]) >= self.MAX_OUTSTANDING:
            self._receive(worker)
        self.conns[worker].send(batch)
        self.in_flight[worker].append(batch[0][0])
        self.pending[worker] = []

    def _receive(self, worker: int) -> None:
        try:
            status, payload = self.conns[worker].recv()
        except (EOFError, OSError):
            self.procs[worker].join(timeout=5)
            raise WorkerError(f"aging worker {worker} died (exit code "
                              f"{self.procs[worker].exitcode})") from None
        if status != "ok":
            raise WorkerError(f"aging worker {worker} failed: {payload}")
        self.in_flight[worker].popleft()
        for seq, err in payload:
            self.failures[seq] = err

    def poll(self) -> None:
        """Collect finished batches without blocking."""
        for worker, conn in enumerate(self.conns):
            while self.in_flight[worker] and conn.poll():
                self._receive(worker)

    def resolved_before(self, next_seq: int) -> int:
        """Every op with a smaller seq has finished (or failed)."""
        limit = next_seq
        for worker in range(self.jobs):
            if self.in_flight[worker]:
                limit = min(limit, self.in_flight[worker][0])
            if self.pending[worker]:
                limit = min(limit, self.pending[worker][0][0])
        return limit

    def drain(self) -> None:
        """Send what is queued and wait until every worker has finished it."""
        for worker in range(self.jobs):
            self._send(worker)
        for worker in range(self.jobs):
            while self.in_flight[worker]:
                self._receive(worker)

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in self.conns:
            conn.close()
