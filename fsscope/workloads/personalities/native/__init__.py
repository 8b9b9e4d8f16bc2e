"""The personalities' worker loops in C, built on first use with the system's C compiler and
called via ctypes.

Where ops are cheap, or fsync wakes a worker every few ops (varmail), the generator's own CPU
per op sets the number: the Python varmail loop spent ~3.9 us of user CPU per op against
Filebench's ~1.3. The Python loops in :mod:`..worker` stay the reference the C ones are tested
against, and the fallback when no compiler is found (scripts/setup installs gcc); a run says
which loop it used.

Built and loaded by :mod:`fsscope.native` (cached under fsscope's home, named by the source's
hash; as root only from a file and directory only root can write), as every C library
fsscope loads.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from fsscope import native as fsscope_native
from fsscope.workloads import PERSONALITIES  # noqa: F401 - each has fsscope_<name>() in loops.c

SOURCE = Path(__file__).with_name("loops.c")
LIBRARY = "C loops library"  # how a refusal to load it names it

MAX_OPS = 8

AT_EDGE, BUFFER_FULL, FAILED = 0, 1, 2

_i64, _i32 = ctypes.c_int64, ctypes.c_int32
P64, P32 = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int32)


class LoopState(ctypes.Structure):
    """loops.c's ``loop_state``, field for field."""

    _fields_ = [
        ("paths", ctypes.POINTER(ctypes.c_char_p)), ("fsize", P64), ("sizes", P64),
        ("present", P32), ("n_present", _i64), ("absent", P32), ("n_absent", _i64), ("nfiles", _i64),
        ("wbuf", ctypes.c_void_p), ("rbuf", ctypes.c_void_p), ("io_size", _i64), ("append_max", _i64),
        ("reads_per_iteration", _i64), ("log_limit", _i64), ("rotate_every", _i64),
        ("log_fd", _i32), ("n_ops", _i32),
        ("rng", ctypes.c_uint64), ("lat", P64), ("cap", _i64),
        ("n_lat", _i64 * MAX_OPS), ("nbytes", _i64 * MAX_OPS), ("iterations", _i64), ("reads_done", _i64),
        ("step", _i32), ("fd", _i32), ("index", _i32), ("pending_op", _i32),
        ("pending_ns", _i64), ("pending_bytes", _i64), ("t1", _i64),
        ("err_op", _i32), ("err_errno", _i32),
    ]


def library_path() -> tuple[Path | None, str]:
    """The built library (building it if needed), or None and why not."""
    return fsscope_native.library_path(SOURCE, LIBRARY)


def load(path: str | os.PathLike, personality: str):
    """The C loop of ``personality``: f(POINTER(LoopState), edge_ns) -> AT_EDGE | BUFFER_FULL | FAILED."""
    fn = getattr(fsscope_native.load(path, LIBRARY), f"fsscope_{personality}")
    fn.argtypes = [ctypes.POINTER(LoopState), ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn
