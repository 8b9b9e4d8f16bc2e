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
before each call). The Python loops (:mod:`.probe_loops`) stay the reference the C loop is tested against,
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

import errno as errno_codes
import gc
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.errors import FsscopeError
from fsscope.workloads.probe_loops import (
    CREATE_FLAGS,
    FILE_MODE,
    NO_SYNC,
    SYNC_ALL,
    Accounting,
    CallFailed,
    NameBlock,
    Sync,
    clock_ns,
    loop_fallocate,
    loop_name_call,
    loop_native,
    loop_open,
    loop_rename,
    loop_symlink,
    loop_write_fsync,
    native_call,
    syncfs,
)
from fsscope.workloads.probe_spec import (  # noqa: F401 - the probe's names, read here by its users
    DEFAULT_RUN_CAP_FACTOR,
    MAX_NAME_LENGTH,
    OPS,
    SYNC_MODES,
    SYNC_SCOPES,
    TRACE_MODES,
    Op,
    ProbeSpec,
    SyncBefore,
    SyncScope,
    TraceMode,
)

#: Ops whose files must exist before the timed loop (created by an untimed populate step).
POPULATED_OPS = frozenset({"unlink", "stat", "rename", "open-existing"})

#: Latency of a file the run did not reach (cancelled or stopped by an error).
NOT_REACHED_NS = -1


#: Files whose names are encoded at once: bounded memory however large ``files`` is.
NAME_CHUNK = 4096

# rename i -> the same name with its first digit turned into a letter (0->a ... 9->j): a sibling
# of the same length, so directory-entry sizes (which drive thresholds such as XFS's short-form
# directory limit) stay what they were, and it can never collide with a probe name.
_RENAME_FIRST_CHAR = bytes.maketrans(b"0123456789", b"abcdefghij")



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



def sync_once(spec: ProbeSpec, fd: int) -> None:
    """The sync of ``spec.sync_scope`` once: the file system holding ``fd``, or all of them."""
    if spec.sync_scope == "global":
        os.sync()
    else:
        syncfs(fd)



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
    sink: Any = latency_ns.data if latency_ns.flags.c_contiguous else latency_ns  # .data: its memoryview
    starts: Any = start_ns.data if start_ns.flags.c_contiguous else start_ns
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
    payload = b""
    if op == "creat":
        loop, extra = loop_open, (CREATE_FLAGS,)
    elif op == "open-existing":
        loop, extra = loop_open, (os.O_RDONLY,)
    elif op == "mkdir":
        loop, extra = loop_name_call, (os.mkdir,)
    elif op == "unlink":
        loop, extra = loop_name_call, (os.unlink,)
    elif op == "stat":
        loop, extra = loop_name_call, (os.stat,)
    elif op == "rename":
        loop, extra = loop_rename, ()
    elif op == "symlink":
        loop, extra = loop_symlink, ()
    elif op == "write-fsync":
        payload = np.random.default_rng(0).bytes(spec.write_bytes)
        loop, extra = loop_write_fsync, (payload,)
    else:  # fallocate
        loop, extra = loop_fallocate, (spec.fallocate_bytes,)
    if call is not None:  # the same calls, timed in C
        size_bytes = spec.fallocate_bytes if op == "fallocate" else len(payload)
        scratch = tuple(np.empty(NAME_CHUNK, dtype=np.int64) for _ in range(3))
        loop, extra = loop_native, (call, op, sync_fd, payload, size_bytes, wait_ns, scratch)

    batch_ns = max(0, int(batch_s * 1e9))
    reported = 0

    def report(upto: int) -> None:
        nonlocal reported
        acct.drain(wait_ns, reported)
        if on_batch is not None and upto > reported:
            on_batch(reported, latency_ns[reported:upto])
        reported = upto

    index = 0
    deadline_ns = clock_ns() + batch_ns
    while index < files:
        stop = min(files, index + NAME_CHUNK)
        chunk = _encode_names(index, stop, spec.name_length)
        names: Any = (NameBlock(chunk, _renamed(chunk) if op == "rename" else None) if call is not None
                      else iter(zip(chunk, _renamed(chunk)) if op == "rename" else chunk))
        while index < stop:
            try:
                index = loop(names, index, sink, starts, deadline_ns, dfd, sync, acct, *extra)
            except CallFailed as failure:
                report(failure.index)
                exc = failure.error
                raise ProbeRunError(op=op, stage=op, index=failure.index,
                                    file_name=file_name(failure.index, spec.name_length),
                                    errno=exc.errno, strerror=exc.strerror or str(exc),
                                    latency_ns=latency_ns) from None
            now_ns = clock_ns()
            if now_ns >= deadline_ns:
                report(index)
                if cancelled():
                    return
                deadline_ns = now_ns + batch_ns
    report(index)
