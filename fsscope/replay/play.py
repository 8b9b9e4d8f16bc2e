"""Play an op log's calls on a directory: the starting tree first, then a thread per recorded
thread, each making its calls in order, waiting where the log says it depended on another
thread (the ``after`` of :class:`fsscope.oplog.Op`), as fast as possible or after each call's
recorded think time.

Each call is timed around the system call alone (``perf_counter_ns``) into the record watch
makes of a call (:data:`fsscope.watch.calls.CALL_DTYPE`), so watch's judges run on replayed
calls as on watched ones. A call the log could not name (no path, a descriptor never seen
opening and no path to open it by) is skipped and counted; a call whose success differs from
the recorded one (it failed here and not there, or the reverse) is counted too.
"""

from __future__ import annotations

import fcntl
import functools
import mmap
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.oplog import Entry, Op, OpLog
from fsscope.watch.calls import CALL_DTYPE
from fsscope.watch.syscalls import F_DUPFD, F_DUPFD_CLOEXEC, OPS

#: How long a call waits for a call of another thread it depends on before going ahead (the
#: other thread failed or the log's dependency was wrong): counted, never a hang.
DEPENDENCY_TIMEOUT_S = 30.0
PATTERN = b"fsscope replay: file contents are not recorded\n"
CHUNK_BYTES = 1 << 20
#: A replay thread's buffer is at most this big, whatever the log's largest read or write: a
#: larger call gives the kernel the same buffer several times over in one readv/writev (the
#: contents are not recorded, so they need not differ), so a log cannot make replay hold more.
BUFFER_BYTES = 1 << 20
#: The most iovecs one readv/writev takes (UIO_MAXIOV); a call larger than this many buffers
#: is made in as many calls as it needs, timed as one.
IOV_MAX = os.sysconf("SC_IOV_MAX")
#: The most bytes Linux moves in one read or write (MAX_RW_COUNT, INT_MAX rounded down to a
#: page): a recorded call asking more did not happen as recorded (a crafted log).
MAX_RW_BYTES = 0x7FFFF000
#: The calls whose success differs named in the report (the count covers them all).
SHOW_DIFFERING = 5
#: A call ready to make: the function, its arguments, what to do with its result (None: as it is).
Prepared = tuple[Callable[..., Any], tuple, Callable[[Any], int] | None]


@dataclass
class Played:
    calls: np.ndarray                     # CALL_DTYPE, one row per log op (by seq)
    played: np.ndarray                    # bool per op: made here (else skipped)
    elapsed_ns: int
    skipped: dict[str, int] = field(default_factory=dict)   # why -> calls
    differs: int = 0                      # succeeded here and failed there, or the reverse
    timeouts: int = 0                     # dependencies not met in DEPENDENCY_TIMEOUT_S
    t0_ns: int = 0                        # perf_counter (CLOCK_MONOTONIC, tracefs's mono) at start_ns 0
    native: np.ndarray | None = None      # per op: the kernel thread id that made it here
    differing: list[int] = field(default_factory=list)  # the first few calls that differ (their seq)


def _pattern_buffer(size: int) -> mmap.mmap:
    """A page-aligned buffer (O_DIRECT calls need one) filled with the pattern."""
    size = max(4096, -(-size // 4096) * 4096)
    buf = mmap.mmap(-1, size)
    buf.write((PATTERN * (size // len(PATTERN) + 1))[:size])
    return buf


def _repeated(read: bool, fd: int, view: memoryview, size: int, offset: int | None) -> int:
    """A read or write of ``size`` bytes, more than ``view`` holds: ``view`` as many times as it
    takes in one readv/writev (several calls only past IOV_MAX of them); the bytes moved. A
    short call (end of file, a full device) ends it, as it would have ended the recorded one."""
    done = 0
    while done < size:
        chunk = min(size - done, IOV_MAX * len(view))
        whole, rest = divmod(chunk, len(view))
        iov = [view] * whole + ([view[:rest]] if rest else [])
        if offset is None:
            n = (os.readv if read else os.writev)(fd, iov)
        else:
            n = (os.preadv if read else os.pwritev)(fd, iov, offset + done)
        done += n
        if n < chunk:
            break
    return done


def recreate(root: Path, entries: list[Entry]) -> int:
    """The starting tree under ``root`` (directories, files of their sizes); bytes written."""
    written = 0
    chunk = (PATTERN * (CHUNK_BYTES // len(PATTERN) + 1))[:CHUNK_BYTES]
    for e in sorted(entries, key=lambda e: e.path.count("/")):
        path = root / e.path
        if e.kind == "dir":
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            left = e.size_bytes
            while left > 0:
                n = f.write(chunk[:min(left, CHUNK_BYTES)])
                left -= n
                written += n
    return written


#: Think times shorter than this are waited out busy: a sleep (or a yield) that short
#: oversleeps (timer slack) and gives the CPU away, which the captured thread, busy between
#: its calls, did not -- both make the next call slower than it was. Another replay thread
#: still gets the GIL at the interpreter's switch interval.
SPIN_BELOW_NS = 2_000_000


def think_own(sleep_ns: int, cpu_deadline_ns: int) -> None:
    """A think time by its recorded parts: asleep ``sleep_ns``, then on this thread's CPU until
    its CPU time (``thread_time_ns``) reaches ``cpu_deadline_ns``. The part the captured thread
    spent waiting for a CPU is not waited: a loaded machine makes the replayer wait for its
    own, while it works, as the captured program did."""
    if sleep_ns > 0:
        time.sleep(sleep_ns / 1e9)
    while time.thread_time_ns() < cpu_deadline_ns:
        pass


def think_until(deadline_ns: int) -> None:
    """Wait until ``deadline_ns`` (perf_counter): slept down to the last SPIN_BELOW_NS, spun after."""
    ahead = deadline_ns - time.perf_counter_ns()
    if ahead > SPIN_BELOW_NS:
        time.sleep((ahead - SPIN_BELOW_NS) / 1e9)
    while time.perf_counter_ns() < deadline_ns:
        pass


class _Player:
    def __init__(self, root: Path, log: OpLog, pace: str, cancelled: Callable[[], bool], buffer_bytes: int):
        self.root, self.log, self.pace, self.cancelled = root, log, pace, cancelled
        self.buffer_bytes = buffer_bytes
        n = len(log.ops)
        self.calls = np.zeros(n, CALL_DTYPE)
        self.played = np.zeros(n, bool)
        self.native = np.zeros(n, np.int32)
        self.fds: dict[tuple[int, int], int] = {}
        self.listed: set[int] = set()
        self.lock = threading.Lock()
        needed = {a for op in log.ops for a in op.after}
        self.done = {seq: threading.Event() for seq in needed}
        self.skipped: dict[str, int] = {}
        self.differs = self.timeouts = 0
        self.differing: list[int] = []
        self.t0 = 0

    def skip(self, why: str) -> Prepared | None:
        """Count a call not made (None: what :meth:`prepare` returns for it)."""
        self.skip_many(why, 1)
        return None

    def skip_many(self, why: str, n: int) -> None:
        with self.lock:
            self.skipped[why] = self.skipped.get(why, 0) + n

    def path(self, rel: str | None) -> str | None:
        return None if rel is None else str(self.root if rel == "." else self.root / rel)

    def fd_of(self, op: Op) -> int | None:
        """The descriptor standing for the recorded one; one held before the capture began is
        opened by its path on first use."""
        with self.lock:
            real = self.fds.get((op.proc, op.fd))
        if real is not None or op.path is None:
            return real
        path = self.path(op.path)
        assert path is not None
        try:
            real = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            try:
                real = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
        with self.lock:
            self.fds[(op.proc, op.fd)] = real
        return real

    def thread(self, ops: list[Op]) -> None:
        size = (max((o.size for o in ops if o.op in ("read", "write")), default=0)
                or max((o.result for o in ops if o.op in ("read", "write")), default=0))
        size = min(size, self.buffer_bytes)
        try:
            buf = _pattern_buffer(size)
        except (OSError, OverflowError, ValueError) as exc:
            # a log asking more than this machine can hold (a crafted size): the thread's calls
            # are skipped and said so, not lost with a traceback
            why = getattr(exc, "strerror", None) or str(exc)
            with self.lock:
                key = f"calls of a thread whose {size:,}-byte read or write needs a buffer this machine cannot give ({why})"
                self.skipped[key] = self.skipped.get(key, 0) + len(ops)
            for op in ops:
                if op.seq in self.done:
                    self.done[op.seq].set()
            return
        view = memoryview(buf)
        # the recorded pace counts each think time from when the previous call returned to the
        # moment the next one is made, so the replayer's own work between calls (waiting for a
        # dependency, preparing the call) is part of it, as the captured program's own work was
        # part of the recorded one; waiting the whole think time before that work made every
        # gap longer than the recorded one
        last_end, last_cpu = self.t0, time.thread_time_ns()
        try:
            for k, op in enumerate(ops):
                if self.cancelled():
                    break
                for a in op.after:
                    if not self.done[a].wait(DEPENDENCY_TIMEOUT_S):
                        with self.lock:
                            self.timeouts += 1
                due = last_end + op.think_ns if self.pace != "asap" else None
                wait: Callable[[], None] | None = None
                if due is not None:
                    # recorded: by the think time's parts where the capture traced them (the
                    # thread's own CPU time counted from its previous call's return); wall: whole
                    if self.pace == "recorded" and op.think_cpu_ns >= 0:
                        wait = functools.partial(think_own, op.think_sleep_ns, last_cpu + op.think_cpu_ns)
                    else:
                        wait = functools.partial(think_until, due)
                try:
                    end = self.one(op, view, wait)
                except Exception as exc:  # a replayer's bug shows in the report, not only in a thread's traceback
                    self.skip_many(f"calls of a thread the replayer stopped at a {op.op} "
                                   f"({type(exc).__name__}: {exc})", len(ops) - k)
                    break
                # a call not made here took its recorded time there
                last_end = end if end is not None else (due or last_end) + op.duration_ns
                last_cpu = time.thread_time_ns()
                if op.seq in self.done:
                    self.done[op.seq].set()
        finally:
            for op in ops:  # a thread that stopped early holds no other thread back
                if op.seq in self.done:
                    self.done[op.seq].set()
            view.release()
            buf.close()

    def one(self, op: Op, view: memoryview, wait: Callable[[], None] | None = None) -> int | None:
        """Make one call (after ``wait``, its think time, if given), timing the system call alone
        (what it needs is looked up before); when it returned (perf_counter ns), None: skipped."""
        prepared = self.prepare(op, view)
        if prepared is None:
            return None
        fn, args, then = prepared
        if wait is not None:
            wait()
        start = time.perf_counter_ns()
        try:
            made = fn(*args)
        except OSError as exc:
            end = time.perf_counter_ns()
            result = -(exc.errno or 1)  # as the kernel returned it (a failed stat is not a 0)
        else:
            end = time.perf_counter_ns()
            result = then(made) if then is not None else (0 if made is None else made)
        row = self.calls[op.seq]
        row["tid"], row["op"], row["code"] = op.tid, OPS.index(op.op) if op.op in OPS else -1, -1
        row["start_ns"], row["duration_ns"], row["result"] = start - self.t0, end - start, result
        row["bytes"], row["fd"], row["flags"] = op.size, op.fd, op.flags
        self.played[op.seq] = True
        self.native[op.seq] = threading.get_native_id()
        if (result < 0) != (op.result < 0):
            with self.lock:
                self.differs += 1
                if len(self.differing) < SHOW_DIFFERING:
                    self.differing.append(op.seq)
        return end

    def opened(self, op: Op, fd: int) -> int:
        """After an open: the new descriptor stands for the recorded one."""
        if fd < 0:
            return fd
        if op.result < 0:  # it failed when captured: nothing later uses it
            os.close(fd)
            return fd
        with self.lock:
            old = self.fds.pop((op.proc, op.result), None)
            self.fds[(op.proc, op.result)] = fd
        if old is not None:
            os.close(old)
        return fd

    def prepare(self, op: Op, view: memoryview) -> Prepared | None:
        """The call to make (function, arguments, what to do with its result), or None: skipped."""
        kind = op.op
        path, path2 = self.path(op.path), self.path(op.path2)
        if kind == "open":
            if path is None:
                return self.skip("open of a file outside the watched tree, or not named")
            return os.open, (path, op.flags | os.O_CLOEXEC, 0o644), lambda fd: self.opened(op, fd)
        if kind in ("mkdir", "rmdir", "unlink", "rename") or (kind in ("stat", "truncate") and op.fd < 0):
            if path is None or (kind == "rename" and path2 is None):
                return self.skip(f"{kind} of a name the log could not name")
            if kind == "mkdir":
                return os.mkdir, (path, 0o755), None
            if kind == "rename":
                return os.rename, (path, path2), None
            if kind == "stat":  # the call succeeded: its result is 0, as the kernel's
                return (os.lstat if op.syscall == "newlstat" else os.stat), (path,), lambda _: 0
            if kind == "truncate":
                return os.truncate, (path, op.size), None
            return (os.rmdir if kind == "rmdir" else os.unlink), (path,), None
        if kind == "close":
            with self.lock:
                real = self.fds.pop((op.proc, op.fd), None)
                self.listed.discard(real if real is not None else -1)
            if real is None:
                return self.skip("close of a descriptor never opened here")
            return os.close, (real,), None
        real = self.fd_of(op)
        if real is None:
            return self.skip(f"{kind} on a descriptor of a file outside the watched tree, or not named")
        size = op.size or max(op.result, 0)
        if kind in ("read", "write"):
            if size > MAX_RW_BYTES:
                return self.skip(f"{kind} of more than {MAX_RW_BYTES:,} bytes, more than Linux moves in one call")
            if size > len(view):
                return _repeated, (kind == "read", real, view, size, op.offset), None
            # the recorded system call where Python has it without a copy (write, pwrite64), so
            # the kernel path is the captured one; reads go into the buffer (readv, preadv)
            part = view[:size]
            if kind == "write" and op.syscall in ("write", "pwrite64"):
                if op.offset is not None:
                    return os.pwrite, (real, part, op.offset), None
                return os.write, (real, part), None
            if op.offset is not None:
                return (os.preadv if kind == "read" else os.pwritev), (real, [part], op.offset), None
            return (os.readv if kind == "read" else os.writev), (real, [part]), None
        if kind == "dup" or (kind == "fcntl" and op.flags in (F_DUPFD, F_DUPFD_CLOEXEC)):
            # a new descriptor for the same file stands for the recorded one from here on (its
            # number is this process's: dup2/dup3's chosen number is the recorded one's key).
            # Close-on-exec either way: the replay's own children must not inherit the target's files
            if kind == "dup":
                return os.dup, (real,), lambda fd: self.opened(op, fd)
            return fcntl.fcntl, (real, F_DUPFD_CLOEXEC, 0), lambda fd: self.opened(op, fd)
        if kind in ("fsync", "fdatasync", "sync_file_range"):
            # sync_file_range's range and flags are not recorded, and Python has no
            # sync_file_range: the file's data written and waited for, as its strongest form does
            return (os.fsync if kind == "fsync" else os.fdatasync), (real,), None
        if kind == "fallocate":
            if size <= 0:
                return self.skip("fallocate without a recorded length")
            return os.posix_fallocate, (real, op.offset or 0, size), None
        if kind == "truncate":
            return os.ftruncate, (real, op.size), None
        if kind == "stat":
            return os.fstat, (real,), lambda _: 0
        if kind == "lseek":
            return os.lseek, (real, op.offset or 0, op.flags), None
        if kind == "getdents":
            # one listing per open directory: the later calls that read on (or found the end) are in it
            with self.lock:
                first = real not in self.listed
                self.listed.add(real)
            if not first:
                return self.skip("getdents after the directory was listed")
            return os.listdir, (real,), lambda names: names if isinstance(names, int) else len(names)
        return self.skip(f"{kind}: not replayed")

    def close_all(self) -> None:
        for real in self.fds.values():
            try:
                os.close(real)
            except OSError:
                pass
        self.fds.clear()


def play(root: Path, log: OpLog, *, pace: str = "asap", cancelled: Callable[[], bool] = lambda: False,
         on_ready: Callable[[list[int]], None] | None = None, buffer_bytes: int = BUFFER_BYTES) -> Played:
    """Every thread's calls on ``root`` (the starting tree already made). ``on_ready`` gets the
    replay threads' kernel ids once they all exist and before any of them makes a call (a
    tracer following exactly them starts there)."""
    player = _Player(root, log, pace, cancelled, buffer_bytes)
    per_thread = list(log.threads().values())
    tids = [0] * len(per_thread)
    ready = threading.Semaphore(0)
    go = threading.Event()
    stop = threading.Event()

    def body(k: int, ops: list[Op]) -> None:
        tids[k] = threading.get_native_id()
        ready.release()
        go.wait()
        if stop.is_set():
            return
        player.thread(ops)

    threads = [threading.Thread(target=body, args=(k, ops), name=f"replay-{ops[0].tid}", daemon=True)
               for k, ops in enumerate(per_thread)]
    try:
        for t in threads:
            t.start()
        for _ in threads:
            ready.acquire()
        try:
            if on_ready is not None:
                on_ready(list(tids))
        except BaseException:
            stop.set()  # the threads end without a call
            raise
        finally:
            player.t0 = time.perf_counter_ns()
            go.set()
            for t in threads:
                t.join()
    finally:
        player.close_all()
    elapsed = time.perf_counter_ns() - player.t0
    return Played(player.calls, player.played, elapsed, player.skipped, player.differs, player.timeouts,
                  player.t0, player.native, sorted(player.differing))
