"""The loop one worker process runs (in its own process: the syscalls must not share a GIL).

Where operations are cheap (page cache, tmpfs) the generator's own cost per op sets the
throughput, so the loops are written for it (``bench/workload_parity.py`` measures them
against the previous engine): one loop per personality with everything it touches bound to
locals, two clock reads and one int64-array append per op, one comparison against the next
"edge" (bin end, deadline, deadline poll) instead of a shared-memory read per op, paths built once,
file sizes tracked so a whole-file read needs no EOF probe and an append no lseek (files are
opened ``O_APPEND``), ``random()`` instead of ``randrange``. Each op is still timed around
its own syscall(s) only, and counted with its bytes in the bin where it completed.

:meth:`_Worker.native_loop` runs the same loops in C (:mod:`.native`) and takes over from them
at every edge; the Python loops below are the reference and the fallback without a compiler.
"""

from __future__ import annotations

import ctypes
import errno
import os
import random
import resource
import signal
import threading
import time
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.analysis.variation.grid import bucket_index
from fsscope.workloads.personalities import native
from fsscope.workloads.personalities.fileset import Layout, pattern, write_whole
from fsscope.workloads.personalities.spec import PersonalitySpec

POLL_NS = 100_000_000       # the shared deadline (cancel, a full fs) is re-read this often: the
                            # launcher polls a cancel 10x a second, and each read costs a C loop
                            # a return to Python (16 threads at 10 ms: 1,600 a second)
ROTATE_CHECK_ITERATIONS = 8  # webserver: how often the shared log's size is looked at


class _Stop(Exception):
    """Raised inside a worker's loop when the deadline has passed."""


class _Worker:
    """The loop one worker process runs. Records each op's latency into per-bin lists and
    ships one summary per bin to the parent (bucketed histograms, not raw samples)."""

    def __init__(self, wid: int, nworkers: int, root: str, spec: PersonalitySpec,
                 sizes: np.ndarray, exists: np.ndarray, out: Any, deadline_ns: Any,
                 native_lib: str | None = None):
        self.wid, self.nworkers, self.spec, self.out, self.deadline = wid, nworkers, spec, out, deadline_ns
        self.native_lib = native_lib
        self.layout = layout = Layout(Path(root), spec)
        self.rnd = random.Random(spec.seed * 1_000_003 + wid)
        self.sizes = [int(s) for s in sizes]
        if spec.name == "webserver":
            owned = range(spec.nfiles)
            self.present = list(owned)
            self.absent: list[int] = []
        else:
            owned = range(wid, spec.nfiles, nworkers)
            self.present = [i for i in owned if exists[i]]
            self.absent = [i for i in owned if not exists[i]]
        self.paths: list[bytes | None] = [None] * spec.nfiles   # bytes: no encoding per call
        self.fsize = [0] * spec.nfiles      # current size of each owned file (exact: we wrote it)
        for i in owned:
            self.paths[i] = os.fsencode(layout.path(i))
            self.fsize[i] = self.sizes[i] if exists[i] else 0
        self.wdata = pattern(spec.io_size_bytes, spec.seed + 17 + wid)
        self.wbuf = memoryview(self.wdata)
        self.rbuf = bytearray(spec.io_size_bytes)
        self.n_ops = len(spec.op_names)
        self.op = {name: i for i, name in enumerate(spec.op_names)}
        # int64 arrays, not lists: a recorded latency is stored as 8 bytes and its int object
        # freed at once (its memory reused), where a list kept every one alive until the bin
        # closed -- fresh memory per op (on tmpfs: user CPU per op 1.95 -> 1.67 us fileserver)
        self.lat: list[array] = [array("q") for _ in range(self.n_ops)]
        self.nbytes = [0] * self.n_ops
        self.errors = [0] * self.n_ops
        self.bin_ns = int(round(spec.bin_s * 1e9))
        self.log_fd = -1
        self.ppid = os.getppid()

    # -- recording ------------------------------------------------------------------------------
    def begin(self, start_ns: int) -> None:
        self.start_ns = start_ns
        self.cur_bin = 0
        self.next_bin_ns = start_ns + self.bin_ns
        self.deadline_ns = self.deadline.value
        self.edge = min(self.next_bin_ns, self.deadline_ns, time.monotonic_ns() + POLL_NS)

    def tick(self, t1: int) -> int:
        """Called when an op ends at or past ``self.edge``: stop at the deadline (before the op
        is recorded), close the bin, re-read the shared deadline. Returns the next edge."""
        deadline = self.deadline_ns = self.deadline.value
        if t1 >= deadline:
            raise _Stop
        if t1 >= self.next_bin_ns:
            self.flush(t1)
        self.edge = min(self.next_bin_ns, deadline, t1 + POLL_NS)
        return self.edge

    def flush(self, t1: int | None) -> None:
        payload = []
        for op in range(self.n_ops):
            lat = self.lat[op]
            if not lat:
                continue
            arr = np.array(lat, dtype=np.int64)     # a copy (buffer protocol): lat may shrink
            buckets, counts = np.unique(bucket_index(arr), return_counts=True)
            payload.append((op, len(lat), self.nbytes[op], int(arr.sum()),
                            buckets.astype(np.int16), counts.astype(np.int32)))
            del lat[:]                  # in place: the loops hold these arrays' append methods
            self.nbytes[op] = 0
        new_bin = (1 << 62) if t1 is None else (t1 - self.start_ns) // self.bin_ns
        self.out.put(("bin", self.wid, self.cur_bin, new_bin, payload))
        self.cur_bin = new_bin
        self.next_bin_ns = self.start_ns + (new_bin + 1) * self.bin_ns
        if t1 is not None and os.getppid() != self.ppid:
            raise _Stop           # orphaned: the job process (and its forkserver) are gone

    def failed(self, exc: OSError, op: int, index: int | None) -> str | None:
        """Count a failed op; returns why the worker must give up, if it must."""
        self.errors[op] += 1
        self.failures_in_a_row += 1
        name = self.spec.op_names[op]
        if exc.errno == errno.ENOSPC:     # the run is over for everyone: say so at once
            message = f"{name}: the file system is full (ENOSPC)"
            self.out.put(("full", self.wid, message))
            return message
        if index is not None and self.paths[index] is not None:
            try:                          # a failed write or append leaves the size unknown
                self.fsize[index] = os.stat(self.paths[index]).st_size
            except OSError:
                self.fsize[index] = 0
            if exc.errno == errno.ENOENT and index in self.present:
                self.present.remove(index)      # gone behind our back: stop picking it
                self.absent.append(index)
        if self.failures_in_a_row >= 100:
            return f"{name}: {exc} (100 failures in a row)"
        if time.monotonic_ns() >= self.deadline.value:
            return ""
        return None

    def loop(self) -> str | None:
        """Run iterations until the deadline; returns an error message if it had to give up."""
        self.failures_in_a_row = 0
        message = self.native_loop() if self.native_lib is not None else getattr(self, self.spec.name)()
        return message or None

    # -- personalities --------------------------------------------------------------------------
    # Each runs until the deadline (_Stop) or until it must give up (returns why). On an
    # OSError the iteration is abandoned, its open file closed, and the next one started.

    def fileserver(self) -> str | None:
        op = self.op
        CREATE, WRITE, CLOSE, OPEN, APPEND, READ, DELETE, STAT = (
            op[k] for k in ("create", "write", "close", "open", "append", "read", "delete", "stat"))
        lat, nbytes = self.lat, self.nbytes
        rec = [lst.append for lst in lat]
        clock, os_open, os_close, os_write, os_readv, os_unlink, os_stat = (
            time.monotonic_ns, os.open, os.close, os.write, os.readv, os.unlink, os.stat)
        rnd = self.rnd.random
        present, absent, paths, fsize, sizes = self.present, self.absent, self.paths, self.fsize, self.sizes
        wbuf, rvec = self.wbuf, [self.rbuf]
        append_max = min(self.spec.append_size_bytes, len(wbuf))
        f_create = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        f_rw = os.O_RDWR | os.O_APPEND
        edge = self.edge
        while True:
            fd = -1
            cur = CREATE
            index = None
            try:
                while True:
                    if absent:
                        i = int(rnd() * len(absent))
                        index = absent[i]
                        absent[i] = absent[-1]
                        absent.pop()
                        cur = CREATE
                        t0 = clock()
                        try:
                            fd = os_open(paths[index], f_create, 0o644)
                        except OSError:
                            absent.append(index)    # not created: still absent
                            raise
                        t1 = clock()
                        present.append(index)
                        fsize[index] = 0
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[CREATE](t1 - t0)
                        cur = WRITE
                        t0 = clock()
                        n = write_whole(fd, sizes[index], wbuf)
                        t1 = clock()
                        fsize[index] = n
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[WRITE](t1 - t0)
                        nbytes[WRITE] += n
                        cur = CLOSE
                        t0 = clock()
                        os_close(fd)
                        t1 = clock()
                        fd = -1
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[CLOSE](t1 - t0)
                    if present:
                        index = present[int(rnd() * len(present))]
                        cur = OPEN
                        t0 = clock()
                        fd = os_open(paths[index], f_rw)
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[OPEN](t1 - t0)
                        cur = APPEND
                        wanted = 1 + int(rnd() * append_max)
                        t0 = clock()
                        n = os_write(fd, wbuf[:wanted])
                        t1 = clock()
                        fsize[index] += n
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[APPEND](t1 - t0)
                        nbytes[APPEND] += n
                        cur = CLOSE
                        t0 = clock()
                        os_close(fd)
                        t1 = clock()
                        fd = -1
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[CLOSE](t1 - t0)
                    if present:
                        index = present[int(rnd() * len(present))]
                        cur = OPEN
                        t0 = clock()
                        fd = os_open(paths[index], f_rw)
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[OPEN](t1 - t0)
                        cur = READ
                        size = fsize[index]
                        t0 = clock()
                        total = 0
                        while total < size:              # whole file: no EOF probe needed
                            n = os_readv(fd, rvec)
                            if not n:
                                break
                            total += n
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[READ](t1 - t0)
                        nbytes[READ] += total
                        cur = CLOSE
                        t0 = clock()
                        os_close(fd)
                        t1 = clock()
                        fd = -1
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[CLOSE](t1 - t0)
                    if present:
                        i = int(rnd() * len(present))
                        index = present[i]
                        present[i] = present[-1]
                        present.pop()
                        absent.append(index)
                        cur = DELETE
                        t0 = clock()
                        os_unlink(paths[index])
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[DELETE](t1 - t0)
                    if present:
                        index = present[int(rnd() * len(present))]
                        cur = STAT
                        t0 = clock()
                        os_stat(paths[index])
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[STAT](t1 - t0)
                    self.failures_in_a_row = 0
            except OSError as exc:
                edge = self.edge
                if fd >= 0:
                    _close_quietly(fd)
                message = self.failed(exc, cur, index)
                if message is not None:
                    return message

    def webserver(self) -> str | None:
        op = self.op
        OPEN, READ, CLOSE, APPEND = (op[k] for k in ("open", "read", "close", "append"))
        lat, nbytes = self.lat, self.nbytes
        rec = [lst.append for lst in lat]
        clock, os_open, os_close, os_write, os_readv = time.monotonic_ns, os.open, os.close, os.write, os.readv
        rnd = self.rnd.random
        paths, fsize = self.paths, self.fsize
        nfiles, reads = self.spec.nfiles, range(self.spec.reads_per_iteration)
        wbuf, rvec = self.wbuf, [self.rbuf]
        append_max = min(self.spec.append_size_bytes, len(wbuf))
        limit, log_fd = self.spec.log_limit_bytes, self.log_fd
        f_read = os.O_RDONLY
        edge = self.edge
        iteration = 0
        while True:
            fd = -1
            cur = OPEN
            index = None
            try:
                while True:
                    for _ in reads:
                        index = int(rnd() * nfiles)
                        cur = OPEN
                        t0 = clock()
                        fd = os_open(paths[index], f_read)
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[OPEN](t1 - t0)
                        cur = READ
                        size = fsize[index]
                        t0 = clock()
                        total = 0
                        while total < size:              # whole file: no EOF probe needed
                            n = os_readv(fd, rvec)
                            if not n:
                                break
                            total += n
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[READ](t1 - t0)
                        nbytes[READ] += total
                        cur = CLOSE
                        t0 = clock()
                        os_close(fd)
                        t1 = clock()
                        fd = -1
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[CLOSE](t1 - t0)
                    index = None
                    cur = APPEND
                    wanted = 1 + int(rnd() * append_max)
                    t0 = clock()
                    n = os_write(log_fd, wbuf[:wanted])       # the log is O_APPEND
                    t1 = clock()
                    if t1 >= edge:
                        edge = self.tick(t1)
                    rec[APPEND](t1 - t0)
                    nbytes[APPEND] += n
                    iteration += 1
                    # rotate, untimed (the next append starts it again); the log is shared,
                    # so its real size is looked at, every few iterations
                    if limit is not None and iteration % ROTATE_CHECK_ITERATIONS == 0 \
                            and os.fstat(log_fd).st_size > limit:
                        os.ftruncate(log_fd, 0)
                    self.failures_in_a_row = 0
            except OSError as exc:
                edge = self.edge
                if fd >= 0:
                    _close_quietly(fd)
                message = self.failed(exc, cur, index)
                if message is not None:
                    return message

    def varmail(self) -> str | None:
        op = self.op
        DELETE, CREATE, APPEND, FSYNC, CLOSE, OPEN, READ = (
            op[k] for k in ("delete", "create", "append", "fsync", "close", "open", "read"))
        lat, nbytes = self.lat, self.nbytes
        rec = [lst.append for lst in lat]
        clock, os_open, os_close, os_write, os_readv, os_unlink, os_fsync = (
            time.monotonic_ns, os.open, os.close, os.write, os.readv, os.unlink, os.fsync)
        rnd = self.rnd.random
        present, absent, paths, fsize = self.present, self.absent, self.paths, self.fsize
        wbuf, rvec = self.wbuf, [self.rbuf]
        append_max = min(self.spec.append_size_bytes, len(wbuf))
        f_create = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
        f_rw = os.O_RDWR | os.O_APPEND
        edge = self.edge
        while True:
            fd = -1
            cur = DELETE
            index = None
            try:
                while True:
                    if present:                                   # deletefile
                        i = int(rnd() * len(present))
                        index = present[i]
                        present[i] = present[-1]
                        present.pop()
                        absent.append(index)
                        cur = DELETE
                        t0 = clock()
                        os_unlink(paths[index])
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[DELETE](t1 - t0)
                    if absent:                                    # createfile, appendfilerand, fsync, close
                        i = int(rnd() * len(absent))
                        index = absent[i]
                        absent[i] = absent[-1]
                        absent.pop()
                        cur = CREATE
                        t0 = clock()
                        try:
                            fd = os_open(paths[index], f_create, 0o644)
                        except OSError:
                            absent.append(index)    # not created: still absent
                            raise
                        t1 = clock()
                        present.append(index)
                        fsize[index] = 0
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[CREATE](t1 - t0)
                        cur = APPEND
                        wanted = 1 + int(rnd() * append_max)
                        t0 = clock()
                        n = os_write(fd, wbuf[:wanted])
                        t1 = clock()
                        fsize[index] = n
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[APPEND](t1 - t0)
                        nbytes[APPEND] += n
                        cur = FSYNC
                        t0 = clock()
                        os_fsync(fd)
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[FSYNC](t1 - t0)
                        cur = CLOSE
                        t0 = clock()
                        os_close(fd)
                        t1 = clock()
                        fd = -1
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[CLOSE](t1 - t0)
                    if present:                                   # open, readwholefile, append, fsync, close
                        index = present[int(rnd() * len(present))]
                        cur = OPEN
                        t0 = clock()
                        fd = os_open(paths[index], f_rw)
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[OPEN](t1 - t0)
                        cur = READ
                        size = fsize[index]
                        t0 = clock()
                        total = 0
                        while total < size:              # whole file: no EOF probe needed
                            n = os_readv(fd, rvec)
                            if not n:
                                break
                            total += n
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[READ](t1 - t0)
                        nbytes[READ] += total
                        cur = APPEND
                        wanted = 1 + int(rnd() * append_max)
                        t0 = clock()
                        n = os_write(fd, wbuf[:wanted])
                        t1 = clock()
                        fsize[index] += n
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[APPEND](t1 - t0)
                        nbytes[APPEND] += n
                        cur = FSYNC
                        t0 = clock()
                        os_fsync(fd)
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[FSYNC](t1 - t0)
                        cur = CLOSE
                        t0 = clock()
                        os_close(fd)
                        t1 = clock()
                        fd = -1
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[CLOSE](t1 - t0)
                    if present:                                   # open, readwholefile, close
                        index = present[int(rnd() * len(present))]
                        cur = OPEN
                        t0 = clock()
                        fd = os_open(paths[index], f_rw)
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[OPEN](t1 - t0)
                        cur = READ
                        size = fsize[index]
                        t0 = clock()
                        total = 0
                        while total < size:              # whole file: no EOF probe needed
                            n = os_readv(fd, rvec)
                            if not n:
                                break
                            total += n
                        t1 = clock()
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[READ](t1 - t0)
                        nbytes[READ] += total
                        cur = CLOSE
                        t0 = clock()
                        os_close(fd)
                        t1 = clock()
                        fd = -1
                        if t1 >= edge:
                            edge = self.tick(t1)
                        rec[CLOSE](t1 - t0)
                    self.failures_in_a_row = 0
            except OSError as exc:
                edge = self.edge
                if fd >= 0:
                    _close_quietly(fd)
                message = self.failed(exc, cur, index)
                if message is not None:
                    return message

    # -- the same loops in C ---------------------------------------------------------------
    def native_loop(self) -> str | None:
        """This personality's loop in C (native/loops.c): the same flowops and timing; Python
        takes over at every edge to close bins and re-read the deadline, as the loops above do."""
        run = native.load(self.native_lib, self.spec.name)
        spec, n = self.spec, self.spec.nfiles
        cap = 1 << 14                   # latencies per op between two edges (<= 100 ms apart)
        lat = np.zeros((self.n_ops, cap), dtype=np.int64)
        fsize = np.asarray(self.fsize, dtype=np.int64)
        sizes = np.asarray(self.sizes, dtype=np.int64)
        present, absent = np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.int32)
        present[:len(self.present)] = self.present
        absent[:len(self.absent)] = self.absent
        keep = [(ctypes.c_char_p * n)(*self.paths),         # alive while the C side uses them
                (ctypes.c_char * len(self.wdata)).from_buffer(self.wdata),
                (ctypes.c_char * len(self.rbuf)).from_buffer(self.rbuf)]
        st = native.LoopState(
            paths=keep[0], fsize=fsize.ctypes.data_as(native.P64), sizes=sizes.ctypes.data_as(native.P64),
            present=present.ctypes.data_as(native.P32), n_present=len(self.present),
            absent=absent.ctypes.data_as(native.P32), n_absent=len(self.absent), nfiles=n,
            wbuf=ctypes.addressof(keep[1]), rbuf=ctypes.addressof(keep[2]), io_size=len(self.rbuf),
            append_max=min(spec.append_size_bytes, len(self.wdata)),
            reads_per_iteration=spec.reads_per_iteration,
            log_limit=-1 if spec.log_limit_bytes is None else spec.log_limit_bytes,
            rotate_every=ROTATE_CHECK_ITERATIONS, log_fd=self.log_fd, n_ops=self.n_ops,
            rng=(spec.seed * 1_000_003 + self.wid) * 0x9E3779B97F4A7C15 % (1 << 64) | 1,
            lat=lat.ctypes.data_as(native.P64), cap=cap, fd=-1, index=-1)
        state = ctypes.byref(st)
        iterations = 0
        edge = self.edge
        try:
            while True:
                rc = run(state, edge)
                for op in range(self.n_ops):       # what completed before the edge: this bin
                    if st.n_lat[op]:
                        self.lat[op].frombytes(lat[op, :st.n_lat[op]].data.cast("B"))
                        self.nbytes[op] += st.nbytes[op]
                        st.n_lat[op] = st.nbytes[op] = 0
                if rc == native.AT_EDGE:
                    edge = self.tick(st.t1)        # may stop: the pending op is then not counted
                    self.lat[st.pending_op].append(st.pending_ns)
                    self.nbytes[st.pending_op] += st.pending_bytes
                elif rc == native.FAILED:
                    if st.iterations != iterations:
                        iterations, self.failures_in_a_row = st.iterations, 0
                    exc = OSError(st.err_errno, os.strerror(st.err_errno))
                    message = self.failed(exc, st.err_op, None)   # the C side kept the lists right
                    if message is not None:
                        return message
                    edge = self.edge
        finally:
            if st.fd >= 0:
                _close_quietly(st.fd)
            self.present = present[:st.n_present].tolist()
            self.absent = absent[:st.n_absent].tolist()
            self.fsize = fsize.tolist()


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def worker_main(wids: tuple[int, ...], nworkers: int, root: str, spec: PersonalitySpec, sizes: np.ndarray,
                exists: np.ndarray, out: Any, go: Any, start_ns: Any, deadline_ns: Any,
                native_lib: str | None = None) -> None:
    """Entry point of a worker process: set up its workers (``wids``), report each ready,
    wait for go, run them (one thread each when there are several: only the C loops, which
    run without the GIL, are given more than one), report each done.
    ``native_lib``: the built C loops (:mod:`.native`), or None for the Python loops."""
    # The parent decides when to stop: a terminal's Ctrl-C or the runner's SIGTERM to the
    # process group reaches the job, which moves the deadline; SIGKILL still ends everything.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    workers = [_Worker(w, nworkers, root, spec, sizes, exists, out, deadline_ns, native_lib) for w in wids]
    for worker in workers:
        if spec.name == "webserver":
            worker.log_fd = os.open(worker.layout.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        out.put(("ready", worker.wid, os.getpid()))
    go.wait()
    if len(workers) == 1:
        _run(workers[0], start_ns.value)
        return
    threads = [threading.Thread(target=_run, args=(worker, start_ns.value), name=f"worker-{worker.wid}")
               for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _run(worker: _Worker, start_ns: int) -> None:
    """One worker from go to done, in the calling thread; its CPU is this thread's."""
    worker.begin(start_ns)
    cpu0, wait0 = resource.getrusage(resource.RUSAGE_THREAD), _runqueue_wait_ns()
    try:
        error = worker.loop()
    except _Stop:
        error = None
    except Exception as exc:            # noqa: BLE001 -- one thread's bug must still say done
        error = f"worker {worker.wid} failed: {exc!r}"
    cpu1, wait1 = resource.getrusage(resource.RUSAGE_THREAD), _runqueue_wait_ns()
    worker.flush(None)
    if worker.log_fd >= 0:
        os.close(worker.log_fd)
    worker.out.put(("done", worker.wid, worker.present, worker.errors, error,
                    (cpu1.ru_utime - cpu0.ru_utime, cpu1.ru_stime - cpu0.ru_stime, (wait1 - wait0) / 1e9)))


def _runqueue_wait_ns() -> int:
    """Time this thread spent runnable but waiting for a CPU (/proc/thread-self/schedstat's
    second field): on a loaded machine a CPU-bound worker waits there instead of running."""
    try:
        with open("/proc/thread-self/schedstat") as fh:
            return int(fh.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
