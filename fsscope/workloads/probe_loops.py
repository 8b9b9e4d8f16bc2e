"""The probe's timed loops: one Python function per call shape (the reference, and the
fallback without a compiler) and the same calls timed in C (``probe_calls.c``), with the
CPU-wait accounting around each call. :mod:`fsscope.workloads.probe` drives them (names,
batches, cancel, errors); why the timed region is shaped this way is in its docstring.
"""

from __future__ import annotations

import ctypes
import errno as errno_codes
import os
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from fsscope import native

#: Target of every probe symlink. It need not exist; 22 bytes is short enough to be stored in
#: the inode itself (ext4 "fast" symlinks < 60 bytes, XFS local format), so the op measures
#: the directory and inode work, not a data-block allocation.
SYMLINK_TARGET = b"fsscope-symlink-target"

#: creat(2) is open(O_CREAT|O_WRONLY|O_TRUNC). Python's os.open adds O_CLOEXEC itself.
CREATE_FLAGS = os.O_CREAT | os.O_WRONLY | os.O_TRUNC
FILE_MODE = 0o644

#: Where the kernel accounts this thread's time waiting for a CPU (CONFIG_SCHED_INFO):
#: "run_time_ns run_delay_ns timeslices".
SCHEDSTAT = "/proc/thread-self/schedstat"

clock_ns = time.monotonic_ns


_libc = ctypes.CDLL(None, use_errno=True)

#: The timed loop in C (see probe_calls.c); its op code per op.
NATIVE_SOURCE = Path(__file__).with_name("probe_calls.c")
NATIVE_LIBRARY = "C probe loop library"  # how a refusal to load it names it
NATIVE_OPS = {"creat": 0, "open-existing": 0, "mkdir": 1, "unlink": 2, "stat": 3, "rename": 4,
              "symlink": 5, "write-fsync": 6, "fallocate": 7}
SYNC_ALL, NO_SYNC = -2, -1  # probe_calls.c's sync_fd: sync(), none (an fd: syncfs of its fs)
_native_calls: dict[Path, Any] = {}
_NO_SCHEDSTAT = b"0 0 0\n"


def syncfs(fd: int) -> None:
    """syncfs(2): write back the file system holding ``fd`` (Python has no os.syncfs)."""
    if _libc.syncfs(fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"syncfs: {os.strerror(code)}")


class Accounting:
    """Per call, how long the thread waited for a CPU inside the timed region.

    The loops note this thread's schedstat (one pread, ~0.6 µs) right before ``t0`` and right
    after ``t1``, outside the timed region; the notes are parsed between batches. The
    difference in run_delay is the time the call was runnable but another task had the CPU
    (preempted, or woken up behind one): a disturbance of this machine, not of the file
    system. The reads sit just outside the timed region, so a preemption in the few hundred
    ns between a read and the clock counts as well (the call then does not vote: safe).
    Without schedstat every call reads as undisturbed (``available`` False).

    Cost (creat, pinned, load 11-14 on 2 CPUs, alternated against a stub that reads nothing):
    two preads of ~0.6 µs each per call outside the timed region, and the median *timed*
    latency 2.5-5 % higher (1.84 -> 1.93 µs on tmpfs, 8.0 -> 8.2 µs and 11.2 -> 11.6 µs with
    syncfs on an ext4 RAM image): the procfs read just before t0 leaves a trace in the caches.
    """

    def __init__(self) -> None:
        self.log: list[bytes] = []
        try:
            self.fd = os.open(SCHEDSTAT, os.O_RDONLY | os.O_CLOEXEC)
            self.read: Callable[[], bytes] = partial(os.pread, self.fd, 64, 0)
            self.read()
        except OSError:
            self.fd = -1
            self.read = _NO_SCHEDSTAT.__bytes__
        self.available = self.fd >= 0

    def drain(self, out: Any, start: int) -> int:
        """Parse the notes of calls ``start``, ``start + 1``, ... into ``out`` (run delay in ns
        per call) and forget them; returns how many calls were complete (pairs of notes)."""
        calls = len(self.log) // 2
        if calls:
            fields = np.fromstring(b"".join(self.log[: 2 * calls]), dtype=np.int64, sep=" ")
            delay = fields.reshape(calls, 2, 3)[:, :, 1]
            out[start:start + calls] = delay[:, 1] - delay[:, 0]
        self.log.clear()
        return calls

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)



Sync = Callable[[], None] | None


# --- the timed loops --------------------------------------------------------------------
# One function per call shape, so the timed region holds a direct call and nothing else (a
# generic wrapper would add a Python frame to every measurement). Each loop consumes names
# from ``names`` (an iterator, so a loop that returns early resumes where it stopped), stores
# ``t1 - t0`` at ``sink[i]`` and ``t0`` at ``starts[i]`` (both after the timed region) and
# returns the next index once ``t1 >= deadline_ns`` or the names run out. An OSError becomes
# CallFailed carrying the index it happened at.


class CallFailed(Exception):
    def __init__(self, index: int, error: OSError):
        self.index = index
        self.error = error


def loop_open(names: Iterator[bytes], i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
               sync: Sync, acct: Accounting, flags: int) -> int:
    """creat / open-existing: the openat() is timed, the close() is not."""
    open_, close, clock, note, read = os.open, os.close, clock_ns, acct.log.append, acct.read
    try:
        for name in names:
            if sync is not None:
                sync()
            note(read())
            t0 = clock()
            fd = open_(name, flags, 0o644, dir_fd=dfd)
            t1 = clock()
            note(read())
            sink[i] = t1 - t0
            starts[i] = t0
            close(fd)
            i += 1
            if t1 >= deadline_ns:
                return i
    except OSError as exc:
        raise CallFailed(i, exc) from exc
    return i


def loop_name_call(names: Iterator[bytes], i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
                    sync: Sync, acct: Accounting, call: Callable[..., Any]) -> int:
    """mkdir / unlink / stat: ``call(name, dir_fd=dfd)`` is timed (mkdir uses mode 0o777 &
    ~umask, like mkdir(1); stat is fstatat and includes building the stat_result)."""
    clock, note, read = clock_ns, acct.log.append, acct.read
    try:
        for name in names:
            if sync is not None:
                sync()
            note(read())
            t0 = clock()
            call(name, dir_fd=dfd)
            t1 = clock()
            note(read())
            sink[i] = t1 - t0
            starts[i] = t0
            i += 1
            if t1 >= deadline_ns:
                return i
    except OSError as exc:
        raise CallFailed(i, exc) from exc
    return i


def loop_rename(names: Iterator[tuple[bytes, bytes]], i: int, sink: Any, starts: Any, deadline_ns: int,
                 dfd: int, sync: Sync, acct: Accounting) -> int:
    """rename: renameat(dfd, name, dfd, sibling) is timed."""
    rename, clock, note, read = os.rename, clock_ns, acct.log.append, acct.read
    try:
        for src, dst in names:
            if sync is not None:
                sync()
            note(read())
            t0 = clock()
            rename(src, dst, src_dir_fd=dfd, dst_dir_fd=dfd)
            t1 = clock()
            note(read())
            sink[i] = t1 - t0
            starts[i] = t0
            i += 1
            if t1 >= deadline_ns:
                return i
    except OSError as exc:
        raise CallFailed(i, exc) from exc
    return i


def loop_symlink(names: Iterator[bytes], i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
                  sync: Sync, acct: Accounting) -> int:
    """symlink: symlinkat(SYMLINK_TARGET, dfd, name) is timed."""
    symlink, clock, target = os.symlink, clock_ns, SYMLINK_TARGET
    note, read = acct.log.append, acct.read
    try:
        for name in names:
            if sync is not None:
                sync()
            note(read())
            t0 = clock()
            symlink(target, name, dir_fd=dfd)
            t1 = clock()
            note(read())
            sink[i] = t1 - t0
            starts[i] = t0
            i += 1
            if t1 >= deadline_ns:
                return i
    except OSError as exc:
        raise CallFailed(i, exc) from exc
    return i


def loop_write_fsync(names: Iterator[bytes], i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
                      sync: Sync, acct: Accounting, payload: bytes) -> int:
    """write-fsync: openat(O_CREAT|O_WRONLY|O_TRUNC) + write + fsync timed as ONE op -- the
    cost of making one small new file durable, which is what an application pays. The close
    is not timed. A short write is reported as ENOSPC."""
    open_, write, fsync, close, clock = os.open, os.write, os.fsync, os.close, clock_ns
    note, read = acct.log.append, acct.read
    flags, size_bytes = CREATE_FLAGS, len(payload)
    fd = -1
    try:
        for name in names:
            if sync is not None:
                sync()
            note(read())
            t0 = clock()
            fd = open_(name, flags, 0o644, dir_fd=dfd)
            written = write(fd, payload)
            fsync(fd)
            t1 = clock()
            note(read())
            close(fd)
            fd = -1
            if written != size_bytes:
                raise OSError(errno_codes.ENOSPC,
                              f"short write: {written} of {size_bytes} bytes")
            sink[i] = t1 - t0
            starts[i] = t0
            i += 1
            if t1 >= deadline_ns:
                return i
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        raise CallFailed(i, exc) from exc
    return i


def loop_fallocate(names: Iterator[bytes], i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
                    sync: Sync, acct: Accounting, size_bytes: int) -> int:
    """fallocate: the file is created (untimed) right before the sync, then
    posix_fallocate(fd, 0, size_bytes) is timed and the close is not."""
    open_, fallocate, close, clock = os.open, os.posix_fallocate, os.close, clock_ns
    note, read = acct.log.append, acct.read
    flags = CREATE_FLAGS
    fd = -1
    try:
        for name in names:
            fd = open_(name, flags, 0o644, dir_fd=dfd)
            if sync is not None:
                sync()
            note(read())
            t0 = clock()
            fallocate(fd, 0, size_bytes)
            t1 = clock()
            note(read())
            sink[i] = t1 - t0
            starts[i] = t0
            close(fd)
            fd = -1
            i += 1
            if t1 >= deadline_ns:
                return i
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        raise CallFailed(i, exc) from exc
    return i


def native_call() -> tuple[Any, str]:
    """The timed loop in C (probe_calls.c, built on first use), or None and why not."""
    path, why = native.library_path(NATIVE_SOURCE, NATIVE_LIBRARY)
    if path is None:
        return None, why
    call = _native_calls.get(path)
    if call is None:
        call = native.load(path, NATIVE_LIBRARY).fsscope_probe_loop
        i64, p64 = ctypes.c_int64, ctypes.POINTER(ctypes.c_int64)
        call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, i64, i64, i64,
                         ctypes.c_char_p, i64, ctypes.c_int, ctypes.c_int, i64, p64, p64, p64,
                         ctypes.POINTER(ctypes.c_int)]
        call.restype = i64
        _native_calls[path] = call
    return call, "native"


class NameBlock:
    """A chunk of names for the C loop: NUL-terminated, ``stride`` bytes apart (and their
    rename targets); ``pos`` is the next one to use."""

    def __init__(self, names: list[bytes], others: list[bytes] | None):
        self.stride = len(names[0]) + 1 if names else 1
        self.names = b"\0".join(names) + b"\0"
        self.others = b"\0".join(others) + b"\0" if others is not None else None
        self.count, self.pos = len(names), 0


def loop_native(names: NameBlock, i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
                 sync: Sync, acct: Accounting, call: Any, op: str, sync_fd: int, payload: bytes,
                 size_bytes: int, wait_ns: np.ndarray, scratch: tuple[np.ndarray, np.ndarray, np.ndarray]) -> int:
    """Every op timed in C (``call``: probe_calls.c), the sync before each call (``sync_fd``,
    chosen with ``sync``) and the schedstat notes around it too: the same calls in the same order
    as the Python loops above, which stay the reference. Returns like them once a call ends at
    or past ``deadline_ns``; the CPU waits go straight to ``wait_ns``."""
    arg = {"creat": CREATE_FLAGS | os.O_CLOEXEC, "open-existing": os.O_RDONLY | os.O_CLOEXEC,
           "mkdir": 0o777}.get(op, 0)
    offset = names.pos * names.stride
    name_ptr = names.names[offset:] if offset else names.names
    other = SYMLINK_TARGET if op == "symlink" else (
        names.others[offset:] if op == "rename" and names.others is not None else None)
    lat, start, wait = scratch
    err = ctypes.c_int(0)
    p64 = ctypes.POINTER(ctypes.c_int64)
    done = call(NATIVE_OPS[op], dfd, name_ptr, other, names.stride, names.count - names.pos, arg, payload,
                size_bytes, sync_fd, acct.fd, deadline_ns, lat.ctypes.data_as(p64), start.ctypes.data_as(p64),
                wait.ctypes.data_as(p64), ctypes.byref(err))
    sink[i:i + done] = lat[:done]
    starts[i:i + done] = start[:done]
    wait_ns[i:i + done] = wait[:done]
    names.pos += done
    if err.value:
        raise CallFailed(i + done, OSError(err.value, os.strerror(err.value)))
    return i + done
