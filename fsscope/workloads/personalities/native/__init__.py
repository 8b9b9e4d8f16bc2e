"""The personalities' worker loops in C, built on first use with the system's C compiler and
called via ctypes.

Where ops are cheap, or fsync wakes a worker every few ops (varmail), the generator's own CPU
per op sets the number: the Python varmail loop spent ~3.9 us of user CPU per op against
Filebench's ~1.3. The Python loops in :mod:`..worker` stay the reference the C ones are tested
against, and the fallback when no compiler is found (scripts/setup installs gcc); a run says
which loop it used.

The shared object is cached under fsscope's home, named by the source's hash, built into a
temporary name and renamed (several jobs may build at once). As root it is loaded only from
a file root owns and no one else may write, in a directory the same holds for, through the
descriptor that was checked.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from fsscope import paths, trust

SOURCE = Path(__file__).with_name("loops.c")
PERSONALITIES = ("fileserver", "webserver", "varmail")   # each has fsscope_<name>() in loops.c
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
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    target = paths.home() / "lib" / f"fsscope-loops-{digest}.so"
    paths.check_home()  # code run as root is loaded only from a directory only root can write
    if os.path.lexists(target):
        os.close(trust.open_owned_file(target, "C loops library"))
        return target, "built"
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None, "no C compiler (cc/gcc) found: install gcc (scripts/setup does)"
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        proc = subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", tmp, str(SOURCE)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            return None, f"{compiler} failed on {SOURCE.name}: {lines[-1] if lines else proc.returncode}"
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target, "built"


def load(path: str | os.PathLike, personality: str):
    """The C loop of ``personality``: f(POINTER(LoopState), edge_ns) -> AT_EDGE | BUFFER_FULL | FAILED."""
    fd = trust.open_owned_file(path, "C loops library")
    try:  # dlopen the very file that was checked, not whatever the path names by then
        lib = ctypes.CDLL(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    fn = getattr(lib, f"fsscope_{personality}")
    fn.argtypes = [ctypes.POINTER(LoopState), ctypes.c_int64]
    fn.restype = ctypes.c_int
    return fn
