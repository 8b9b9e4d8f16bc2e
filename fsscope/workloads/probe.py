"""The measured syscall loop of the latency probe (Aota & Kono's method).

In one fresh, empty directory the probe does one operation on file 0, 1, ..., N-1 (names:
zero-padded decimal of ``name_length`` digits, "0000000", "0000001", ...), each call right
after a sync (optional: ``syncfs`` of the measured file system by default, the machine-wide
``sync()`` of the papers on request), and times every call on its own with a monotonic ns
clock. Beside each latency it keeps the time the call waited for a CPU (:class:`Accounting`),
so a call another task pushed off the CPU can be told from a slow file system. The
per-file latencies of repeated runs are what the outlier analysis compares: a file index that
is slow in every run points at a structural threshold of the file system (XFS's short-form
directory filling up at file 22, inode chunk allocation every 64 files, ...), not at noise.

Only the syscall is inside the timed region. Everything else -- name encoding, sync, storing
the result, closing the fd, live batches, cancellation -- happens between ``t1`` of one call
and ``t0`` of the next. The timed loop runs in C (``probe_calls.c``, built on first use through
:mod:`fsscope.native`, called via ctypes once per chunk of names or batch deadline): sync,
schedstat, clock, call, clock, schedstat, close, next, as the C reference does
(``bench/probe_overhead.py``; a Python-timed region cost 1.25-1.3x its latency with a sync
before each call). The Python loops below stay the reference the C loop is tested against,
and the fallback without a compiler; they keep the timed region as close to the C reference
as Python allows:

- names are pre-encoded ``bytes`` (no str -> fs-encoding conversion inside the region), built
  per chunk of :data:`NAME_CHUNK` files so a 1,000,000-file run holds no per-file objects;
- calls are ``dir_fd``-relative (``openat(dfd, name)``): the kernel resolves one component,
  whatever the working directory's path is;
- functions and constants are bound to locals; nothing is allocated between ``t0`` and ``t1``
  except what the call itself returns (an fd int, or ``os.stat``'s result for ``stat``);
- the clock is :func:`time.monotonic_ns` -- CLOCK_MONOTONIC through the vDSO, the clock the C
  reference uses. ``time.perf_counter_ns`` reads the same clock on Linux and costs the same
  here (about 47 ns a call on this machine, tsc clocksource); ``time.clock_gettime_ns`` costs
  twice that because of its argument parsing;
- the garbage collector is disabled during the loop, so a collection cannot land in a timed
  region (``os.stat`` allocates a tracked ``stat_result`` inside it).

Caveat for the caller (the engine): the syscall releases the GIL. If another Python thread
of the probe process is runnable at that moment it takes the GIL, and the probe thread waits
for it (up to ``sys.getswitchinterval()``, 5 ms) *inside* the timed region. Keep the probe
process single-threaded while measuring: do the work of ``on_batch`` synchronously.
"""

from __future__ import annotations

import ctypes
import errno as errno_codes
import gc
import os
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

import numpy as np
from msgspec import Meta

from fsscope import native
from fsscope.errors import FsscopeError
from fsscope.records import SpecRecord

Op = Literal["creat", "mkdir", "unlink", "stat", "rename", "open-existing", "write-fsync",
             "fallocate", "symlink"]
SyncBefore = Literal["each", "none"]
#: What the sync before each call writes back: the measured file system (syncfs on the probe
#: directory, the default) or every file system on the machine (sync(2), the papers' method --
#: on a busy machine it waits on all their writeback and pushes out their dirty data).
SyncScope = Literal["fs", "global"]
TraceMode = Literal["off", "attribute", "all"]

OPS: tuple[str, ...] = get_args(Op)
SYNC_MODES: tuple[str, ...] = get_args(SyncBefore)
SYNC_SCOPES: tuple[str, ...] = get_args(SyncScope)
TRACE_MODES: tuple[str, ...] = get_args(TraceMode)

#: Ops whose files must exist before the timed loop (created by an untimed populate step).
POPULATED_OPS = frozenset({"unlink", "stat", "rename", "open-existing"})

#: Latency of a file the run did not reach (cancelled or stopped by an error).
NOT_REACHED_NS = -1

#: Target of every probe symlink. It need not exist; 22 bytes is short enough to be stored in
#: the inode itself (ext4 "fast" symlinks < 60 bytes, XFS local format), so the op measures
#: the directory and inode work, not a data-block allocation.
SYMLINK_TARGET = b"fsscope-symlink-target"

#: creat(2) is open(O_CREAT|O_WRONLY|O_TRUNC). Python's os.open adds O_CLOEXEC itself.
CREATE_FLAGS = os.O_CREAT | os.O_WRONLY | os.O_TRUNC
FILE_MODE = 0o644

#: Files whose names are encoded at once: bounded memory however large ``files`` is.
NAME_CHUNK = 4096

MAX_NAME_LENGTH = 255

#: Without ``max_runs``, a probe may make up to this many times ``runs`` runs to decide.
DEFAULT_RUN_CAP_FACTOR = 3

#: Where the kernel accounts this thread's time waiting for a CPU (CONFIG_SCHED_INFO):
#: "run_time_ns run_delay_ns timeslices".
SCHEDSTAT = "/proc/thread-self/schedstat"

# rename i -> the same name with its first digit turned into a letter (0->a ... 9->j): a sibling
# of the same length, so directory-entry sizes (which drive thresholds such as XFS's short-form
# directory limit) stay what they were, and it can never collide with a probe name.
_RENAME_FIRST_CHAR = bytes.maketrans(b"0123456789", b"abcdefghij")

_clock_ns = time.monotonic_ns


class ProbeSpec(SpecRecord, frozen=True):
    """What one latency probe does; ``runs`` repetitions of ``files`` timed calls of ``op``.

    ``fresh_fs`` and ``runs`` are for the engine (a freshly made file system per run, or one
    fresh directory per run on the same file system); ``cpu`` is the CPU the measuring process
    is pinned to (None: the last CPU it may use, see :func:`default_cpu`). ``write_bytes`` is
    used by ``write-fsync``, ``fallocate_bytes`` by ``fallocate``. ``trace``: kernel-event
    attribution (see :mod:`fsscope.trace.jobs`): ``attribute`` adds one traced run
    after the untraced measured ones, ``all`` traces every run, ``off`` none.
    ``sync_scope``: ``fs`` syncs the measured file system (syncfs), ``global`` the machine
    (sync). ``max_runs``: the engine adds runs after the first ``runs`` until every candidate
    index is decided, up to this many (None: :data:`DEFAULT_RUN_CAP_FACTOR` x ``runs``, or
    one for a single run; equal to ``runs``: a fixed number of runs). ``in_root``:
    the files go into the root directory of the file system the run made (the papers'
    setup; what mkfs put there stays), not into a fresh subdirectory -- the structural
    indices depend on it (a new XFS directory gets an attribute fork, ext4's root holds
    lost+found).
    """

    job: ClassVar[str] = "probe"

    op: Op = "creat"
    files: Annotated[int, Meta(ge=1)] = 1024
    runs: Annotated[int, Meta(ge=1)] = 5
    name_length: Annotated[int, Meta(ge=1, le=MAX_NAME_LENGTH)] = 7
    sync_before: SyncBefore = "each"
    fresh_fs: bool = True
    cpu: Annotated[int, Meta(ge=0)] | None = None
    write_bytes: Annotated[int, Meta(ge=0)] = 4096
    fallocate_bytes: Annotated[int, Meta(ge=1)] = 1 << 20
    trace: TraceMode = "attribute"
    sync_scope: SyncScope = "fs"
    max_runs: Annotated[int, Meta(ge=1)] | None = None
    in_root: bool = False

    @property
    def run_cap(self) -> int:
        """The most runs the engine may make (the first ``runs`` always)."""
        if self.max_runs is not None:
            return max(self.runs, self.max_runs)
        # one run asked for is a look, not a verdict (every slow file listed): it stays one
        return self.runs if self.runs == 1 else DEFAULT_RUN_CAP_FACTOR * self.runs

    def __post_init__(self) -> None:
        """Checks across fields (each field's own type and range are in its annotation)."""
        if 10 ** self.name_length < self.files:
            need = len(str(self.files - 1))
            raise FsscopeError(f"probe name_length {self.name_length} is too short for "
                               f"{self.files} files: names 0..{self.files - 1} need {need} digits")
        if self.max_runs is not None and self.max_runs < self.runs:
            raise FsscopeError(f"probe max_runs must be at least {self.runs}, not {self.max_runs}")
        if self.cpu is not None:
            allowed = sorted(os.sched_getaffinity(0))
            if self.cpu not in allowed:
                raise FsscopeError(f"probe cpu {self.cpu}: this process may run on CPUs {allowed} only")
        if self.in_root and not self.fresh_fs:
            raise FsscopeError("probe in_root needs a fresh file system per run: with one file "
                               "system for all runs the root would hold the earlier runs' files")


class ProbeRunError(FsscopeError):
    """A syscall failed (ENOSPC, EMFILE, ...) and the run stopped at file ``index``.

    ``latency_ns`` is the run's array: entries before ``index`` hold what was measured, the
    rest are :data:`NOT_REACHED_NS`. ``stage`` is "populate" (untimed set-up) or the op.
    """

    def __init__(self, *, op: str, stage: str, index: int, file_name: str, errno: int | None,
                 strerror: str, latency_ns: np.ndarray):
        self.op = op
        self.stage = stage
        self.index = index
        self.file_name = file_name
        self.errno = errno
        self.strerror = strerror
        self.latency_ns = latency_ns
        code = errno_codes.errorcode.get(errno, f"errno {errno}") if errno is not None else "error"
        if stage == "populate":
            what = f"probe {op}: creating file {index} ({file_name!r}) before the timed loop failed"
            kept = "no latencies were measured"
        else:
            what = f"probe {op} stopped at file {index} ({file_name!r})"
            kept = f"the {index} latencies measured before it are kept"
        super().__init__(f"{what}: {code} ({strerror}); {kept}")


def file_name(index: int, name_length: int = 7) -> str:
    """Name of probe file ``index``: zero-padded decimal, ``name_length`` characters."""
    return f"{index:0{name_length}d}"


def renamed_name(index: int, name_length: int = 7) -> str:
    """Where the ``rename`` op moves file ``index`` (first digit 0..9 -> letter a..j)."""
    name = file_name(index, name_length)
    return "abcdefghij"[int(name[0])] + name[1:]


def default_cpu() -> int:
    """The CPU a probe pins to by default: the last one this process may run on (CPU 0 gets
    most interrupts and housekeeping)."""
    return max(os.sched_getaffinity(0))


def pin_cpu(cpu: int | None = None) -> set[int]:
    """Pin this process to ``cpu`` (None: :func:`default_cpu`) and return the previous
    affinity, to restore with ``os.sched_setaffinity(0, previous)``."""
    previous = os.sched_getaffinity(0)
    target = default_cpu() if cpu is None else cpu
    try:
        os.sched_setaffinity(0, {target})
    except OSError as exc:
        raise FsscopeError(f"cannot pin the probe to CPU {target}: this process may use CPUs "
                           f"{sorted(previous)} ({exc.strerror})") from None
    return previous


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


def sync_once(spec: ProbeSpec, fd: int) -> None:
    """The sync of ``spec.sync_scope`` once: the file system holding ``fd``, or all of them."""
    if spec.sync_scope == "global":
        os.sync()
    else:
        syncfs(fd)


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
# _CallFailed carrying the index it happened at.


class _CallFailed(Exception):
    def __init__(self, index: int, error: OSError):
        self.index = index
        self.error = error


def _loop_open(names: Iterator[bytes], i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
               sync: Sync, acct: Accounting, flags: int) -> int:
    """creat / open-existing: the openat() is timed, the close() is not."""
    open_, close, clock, note, read = os.open, os.close, _clock_ns, acct.log.append, acct.read
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
        raise _CallFailed(i, exc) from exc
    return i


def _loop_name_call(names: Iterator[bytes], i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
                    sync: Sync, acct: Accounting, call: Callable[..., Any]) -> int:
    """mkdir / unlink / stat: ``call(name, dir_fd=dfd)`` is timed (mkdir uses mode 0o777 &
    ~umask, like mkdir(1); stat is fstatat and includes building the stat_result)."""
    clock, note, read = _clock_ns, acct.log.append, acct.read
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
        raise _CallFailed(i, exc) from exc
    return i


def _loop_rename(names: Iterator[tuple[bytes, bytes]], i: int, sink: Any, starts: Any, deadline_ns: int,
                 dfd: int, sync: Sync, acct: Accounting) -> int:
    """rename: renameat(dfd, name, dfd, sibling) is timed."""
    rename, clock, note, read = os.rename, _clock_ns, acct.log.append, acct.read
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
        raise _CallFailed(i, exc) from exc
    return i


def _loop_symlink(names: Iterator[bytes], i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
                  sync: Sync, acct: Accounting) -> int:
    """symlink: symlinkat(SYMLINK_TARGET, dfd, name) is timed."""
    symlink, clock, target = os.symlink, _clock_ns, SYMLINK_TARGET
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
        raise _CallFailed(i, exc) from exc
    return i


def _loop_write_fsync(names: Iterator[bytes], i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
                      sync: Sync, acct: Accounting, payload: bytes) -> int:
    """write-fsync: openat(O_CREAT|O_WRONLY|O_TRUNC) + write + fsync timed as ONE op -- the
    cost of making one small new file durable, which is what an application pays. The close
    is not timed. A short write is reported as ENOSPC."""
    open_, write, fsync, close, clock = os.open, os.write, os.fsync, os.close, _clock_ns
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
        raise _CallFailed(i, exc) from exc
    return i


def _loop_fallocate(names: Iterator[bytes], i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
                    sync: Sync, acct: Accounting, size_bytes: int) -> int:
    """fallocate: the file is created (untimed) right before the sync, then
    posix_fallocate(fd, 0, size_bytes) is timed and the close is not."""
    open_, fallocate, close, clock = os.open, os.posix_fallocate, os.close, _clock_ns
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
        raise _CallFailed(i, exc) from exc
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


class _NameBlock:
    """A chunk of names for the C loop: NUL-terminated, ``stride`` bytes apart (and their
    rename targets); ``pos`` is the next one to use."""

    def __init__(self, names: list[bytes], others: list[bytes] | None):
        self.stride = len(names[0]) + 1 if names else 1
        self.names = b"\0".join(names) + b"\0"
        self.others = b"\0".join(others) + b"\0" if others is not None else None
        self.count, self.pos = len(names), 0


def _loop_native(names: _NameBlock, i: int, sink: Any, starts: Any, deadline_ns: int, dfd: int,
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
    other = SYMLINK_TARGET if op == "symlink" else (names.others[offset:] if op == "rename" else None)
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
        raise _CallFailed(i + done, OSError(err.value, os.strerror(err.value)))
    return i + done


# --- the driver -------------------------------------------------------------------------


def _encode_names(start: int, stop: int, name_length: int) -> list[bytes]:
    fmt = b"%0" + str(name_length).encode() + b"d"
    return [fmt % index for index in range(start, stop)]


def _renamed(names: list[bytes]) -> list[bytes]:
    table = _RENAME_FIRST_CHAR
    return [name[:1].translate(table) + name[1:] for name in names]


def _prepare_output(out: np.ndarray | None, files: int) -> np.ndarray:
    if out is None:
        return np.full(files, NOT_REACHED_NS, dtype=np.int64)
    if not isinstance(out, np.ndarray) or out.dtype != np.int64 or out.shape != (files,):
        shape = getattr(out, "shape", None)
        dtype = getattr(out, "dtype", type(out).__name__)
        raise FsscopeError(f"probe output array must be int64 of shape ({files},), "
                           f"not {dtype} of shape {shape}")
    if not out.flags.writeable:
        raise FsscopeError("probe output array is read-only")
    out.fill(NOT_REACHED_NS)
    return out


def _open_empty_dir(workdir: Path, *, in_root: bool = False) -> int:
    """The probe directory, opened; it must be empty -- except a file system's root
    (``in_root``), which keeps what mkfs made there (lost+found), none of it a probe name."""
    try:
        dfd = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise FsscopeError(f"probe directory {workdir} cannot be opened: {exc.strerror}") from None
    try:
        with os.scandir(dfd) as entries:
            first = next(entries, None)
    except OSError as exc:
        os.close(dfd)
        raise FsscopeError(f"probe directory {workdir} cannot be listed: {exc.strerror}") from None
    if first is not None and in_root:
        return dfd
    if first is not None:
        os.close(dfd)
        raise FsscopeError(f"probe directory {workdir} is not empty (it holds {first.name!r}): "
                           f"each run needs a fresh, empty directory")
    return dfd


def _populate(dfd: int, spec: ProbeSpec, cancelled: Callable[[], bool],
              latency_ns: np.ndarray) -> bool:
    """Create the files an unlink/stat/rename/open-existing run works on (untimed), then
    sync so their creation is on disk before the first measured call. False if cancelled."""
    open_, close = os.open, os.close
    for start in range(0, spec.files, NAME_CHUNK):
        if cancelled():
            return False
        names = _encode_names(start, min(spec.files, start + NAME_CHUNK), spec.name_length)
        index = start
        try:
            for index, name in enumerate(names, start):
                close(open_(name, CREATE_FLAGS, FILE_MODE, dir_fd=dfd))
        except OSError as exc:
            raise ProbeRunError(op=spec.op, stage="populate", index=index,
                                file_name=file_name(index, spec.name_length), errno=exc.errno,
                                strerror=exc.strerror or str(exc), latency_ns=latency_ns) from None
    sync_once(spec, dfd)
    return True


def measure_run(workdir: Path, spec: ProbeSpec, *,
                on_batch: Callable[[int, np.ndarray], None] | None = None,
                batch_s: float = 0.2,
                cancelled: Callable[[], bool] = lambda: False,
                out: np.ndarray | None = None,
                start_out: np.ndarray | None = None,
                wait_out: np.ndarray | None = None,
                timed_in_c: bool = True) -> np.ndarray:
    """Run one repetition of ``spec`` in ``workdir`` (an existing, empty directory).

    Returns int64 latency_ns of length ``spec.files`` (``out`` itself when given -- e.g. a
    row of a memory-mapped .npy). Entries the run did not reach stay -1 (cancelled).
    ``on_batch(start_index, latency_ns_slice)`` is called about every ``batch_s`` seconds and
    once at the end, with consecutive slices that cover every measured index exactly once, in
    order; the slice is a view (copy it to keep it). ``cancelled()`` is checked at the same
    points, so a cancel takes effect within about ``batch_s`` plus one call. Neither runs
    inside a timed region. Pinning the CPU is the caller's job (:func:`pin_cpu`).

    An OSError (ENOSPC, EMFILE, ...) stops the run and raises :class:`ProbeRunError` naming
    the file index and errno; the latencies measured before it stay in the array (which the
    error carries, and which is ``out`` when given).

    ``start_out`` (int64, shape (files,)) receives each call's start on the monotonic clock
    (the trace's clock), so kernel events can be placed inside calls; stored after the timed
    region like the latency. Unreached entries stay -1.

    ``wait_out`` (int64, shape (files,)) receives each call's time waiting for a CPU inside
    its timed region (schedstat run delay, see :class:`Accounting`); 0 where this kernel does
    not account it.

    ``timed_in_c``: the timed loop is C (:func:`native_call`) when it builds, else (or with
    False) the Python loops -- the reference: the same calls in the same order.
    """
    latency_ns = _prepare_output(out, spec.files)
    start_ns = _prepare_output(start_out, spec.files)
    wait_ns = _prepare_output(wait_out, spec.files)
    sink: Any = memoryview(latency_ns) if latency_ns.flags.c_contiguous else latency_ns
    starts: Any = memoryview(start_ns) if start_ns.flags.c_contiguous else start_ns
    workdir = Path(workdir)
    dfd = _open_empty_dir(workdir, in_root=spec.in_root)
    gc_was_enabled = gc.isenabled()
    try:
        if spec.op in POPULATED_OPS and not _populate(dfd, spec, cancelled, latency_ns):
            return latency_ns
        gc.disable()
        _drive(dfd, spec, sink, starts, latency_ns, wait_ns, on_batch, batch_s, cancelled, timed_in_c)
    finally:
        if gc_was_enabled:
            gc.enable()
        os.close(dfd)
    return latency_ns


def _drive(dfd: int, spec: ProbeSpec, sink: Any, starts: Any, latency_ns: np.ndarray, wait_ns: np.ndarray,
           on_batch: Callable[[int, np.ndarray], None] | None, batch_s: float,
           cancelled: Callable[[], bool], timed_in_c: bool = True) -> None:
    """Feed the timed loop chunk by chunk; report batches and check for cancel at deadlines."""
    # the sync before each call, chosen here for both loops: Python calls ``sync``, C does
    # what ``sync_fd`` says (SYNC_ALL: sync(); an fd: syncfs of its file system)
    sync: Sync = None
    sync_fd = NO_SYNC
    if spec.sync_before == "each":
        sync = os.sync if spec.sync_scope == "global" else partial(syncfs, dfd)
        sync_fd = SYNC_ALL if spec.sync_scope == "global" else dfd
    acct = Accounting()
    try:
        _feed(dfd, spec, sink, starts, latency_ns, wait_ns, sync, acct, on_batch, batch_s, cancelled,
              native_call()[0] if timed_in_c else None, sync_fd)
    finally:
        acct.close()


def _feed(dfd: int, spec: ProbeSpec, sink: Any, starts: Any, latency_ns: np.ndarray, wait_ns: np.ndarray,
          sync: Sync, acct: Accounting, on_batch: Callable[[int, np.ndarray], None] | None, batch_s: float,
          cancelled: Callable[[], bool], call: Any = None, sync_fd: int = NO_SYNC) -> None:
    op, files = spec.op, spec.files
    loop: Callable[..., int]
    extra: tuple[Any, ...]
    if op == "creat":
        loop, extra = _loop_open, (CREATE_FLAGS,)
    elif op == "open-existing":
        loop, extra = _loop_open, (os.O_RDONLY,)
    elif op == "mkdir":
        loop, extra = _loop_name_call, (os.mkdir,)
    elif op == "unlink":
        loop, extra = _loop_name_call, (os.unlink,)
    elif op == "stat":
        loop, extra = _loop_name_call, (os.stat,)
    elif op == "rename":
        loop, extra = _loop_rename, ()
    elif op == "symlink":
        loop, extra = _loop_symlink, ()
    elif op == "write-fsync":
        loop, extra = _loop_write_fsync, (np.random.default_rng(0).bytes(spec.write_bytes),)
    else:  # fallocate
        loop, extra = _loop_fallocate, (spec.fallocate_bytes,)
    if call is not None:  # the same calls, timed in C
        payload = extra[0] if op == "write-fsync" else b""
        size_bytes = spec.fallocate_bytes if op == "fallocate" else len(payload)
        scratch = tuple(np.empty(NAME_CHUNK, dtype=np.int64) for _ in range(3))
        loop, extra = _loop_native, (call, op, sync_fd, payload, size_bytes, wait_ns, scratch)

    batch_ns = max(0, int(batch_s * 1e9))
    reported = 0

    def report(upto: int) -> None:
        nonlocal reported
        acct.drain(wait_ns, reported)
        if on_batch is not None and upto > reported:
            on_batch(reported, latency_ns[reported:upto])
        reported = upto

    index = 0
    deadline_ns = _clock_ns() + batch_ns
    while index < files:
        stop = min(files, index + NAME_CHUNK)
        chunk = _encode_names(index, stop, spec.name_length)
        names: Any = (_NameBlock(chunk, _renamed(chunk) if op == "rename" else None) if call is not None
                      else iter(zip(chunk, _renamed(chunk)) if op == "rename" else chunk))
        while index < stop:
            try:
                index = loop(names, index, sink, starts, deadline_ns, dfd, sync, acct, *extra)
            except _CallFailed as failure:
                report(failure.index)
                exc = failure.error
                raise ProbeRunError(op=op, stage=op, index=failure.index,
                                    file_name=file_name(failure.index, spec.name_length),
                                    errno=exc.errno, strerror=exc.strerror or str(exc),
                                    latency_ns=latency_ns) from None
            now_ns = _clock_ns()
            if now_ns >= deadline_ns:
                report(index)
                if cancelled():
                    return
                deadline_ns = now_ns + batch_ns
    report(index)
