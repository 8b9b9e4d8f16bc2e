"""The ager's op loop in C (ager.c), built on first use and called via ctypes.

On tmpfs the Python loop planned and carried out ~18,700 ops/s where a C program replaying
the same op log did ~41,000: the interpreter's cost per op, not the file system, set the
pace of fsscope's longest job. ``ager.c`` runs the same choices from the same seeded stream
and returns to Python at every op where Python has something to do, so the op log is the
Python loop's byte for byte. The Python loop in :mod:`..session` stays the reference it is
tested against, and the fallback without a compiler; a result says which loop ran.

:class:`Loop` holds one session's C state. The planner's live files live in C while it runs;
its counts, totals and random state come back to the Python planner after every call, its
cells at a re-cut and at the end (:meth:`Loop.pull_cells`), so the Python planner is the
truth whenever Python looks.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import numpy as np

from fsscope import native as fsscope_native

SOURCE = Path(__file__).with_name("ager.c")
LIBRARY = "C aging loop library"  # how a refusal to load it names it

# what fsscope_ager_run returns
AT_EDGE, BUFFER_FULL, SETTLE, RAPID_OVER, NO_ROOM, FULL, FAILED = range(7)
LOG_BUFFER_BYTES = 1 << 20
MT_N = 624

_i64, _i32, _f64 = ctypes.c_int64, ctypes.c_int32, ctypes.c_double
P64, P32, PF64 = ctypes.POINTER(_i64), ctypes.POINTER(_i32), ctypes.POINTER(_f64)


class Cell(ctypes.Structure):
    _fields_ = [("items", ctypes.c_void_p), ("n", _i64), ("cap", _i64)]


class AgerState(ctypes.Structure):
    """ager.c's ``ager_state``, field for field."""

    _fields_ = [
        ("S", _i32), ("D", _i32), ("B", _i32), ("n_size_nz", _i32), ("n_depth_nz", _i32), ("pad0", _i32),
        ("size_nz", P32), ("depth_nz", P32),
        ("p", PF64), ("q", PF64), ("g", PF64), ("r", PF64),
        ("size_bytes", P64), ("alloc_bytes", P64),
        ("n_sib", P32), ("dir_first", P32), ("dir_prefix", ctypes.POINTER(ctypes.c_char_p)),
        ("root_fd", _i32), ("fallocate", _i32), ("pattern", ctypes.c_char_p), ("pattern_bytes", _i64),
        ("cells", ctypes.POINTER(Cell)),
        ("size_count", P64), ("depth_count", P64), ("age_count", P64), ("as_count", P64),
        ("live_files", _i64), ("files_bytes", _i64), ("horizon_ops", _i64),
        ("alive", ctypes.c_void_p),
        ("mt", ctypes.c_uint32 * MT_N), ("mti", _i64),
        ("phase", _i64), ("ops", _i64), ("ops_limit", _i64), ("edge_ns", _i64),
        ("base_used_bytes", _i64), ("capacity_bytes", _i64), ("written_bytes", _i64),
        ("target_bytes", _f64), ("ceiling_bytes", _f64), ("floor_bytes", _f64),
        ("settle_at_bytes", _f64), ("max_written", _f64),
        ("log", ctypes.c_void_p), ("log_len", _i64), ("log_cap", _i64),
        ("err_errno", _i64), ("err_path", ctypes.c_char * os.pathconf("/", "PC_PATH_MAX")),
    ]


def library() -> tuple[ctypes.CDLL | None, str]:
    """The loaded library (built on first use), or None and why not."""
    path, why = fsscope_native.library_path(SOURCE, LIBRARY)
    if path is None:
        return None, why
    lib = fsscope_native.load(path, LIBRARY)
    state = ctypes.POINTER(AgerState)
    lib.fsscope_ager_run.argtypes = [state]
    lib.fsscope_ager_run.restype = ctypes.c_int
    lib.fsscope_ager_set_cells.argtypes = [state, P64, P64, P64]
    lib.fsscope_ager_set_cells.restype = ctypes.c_int
    lib.fsscope_ager_get_cells.argtypes = [state, P64, P64, P64]
    lib.fsscope_ager_get_cells.restype = None
    lib.fsscope_ager_free_cells.argtypes = [state]
    lib.fsscope_ager_free_cells.restype = None
    return lib, "built"


def _ints(values, dtype=np.int64) -> np.ndarray:
    return np.ascontiguousarray(np.array(values, dtype=dtype))


class Loop:
    """One session's C loop over ``planner`` (planner.Planner), executing under ``root_fd``."""

    def __init__(self, lib: ctypes.CDLL, planner, *, root_fd: int, fallocate: bool, pattern: bytes):
        self.lib = lib
        S, D, B = planner.S, planner.D, planner.B
        prefixes = [prefix.encode() for per_depth in planner.dir_prefix for prefix in per_depth]
        firsts = np.cumsum([0] + [len(per_depth) for per_depth in planner.dir_prefix])[:-1]
        self.keep = keep = {   # the arrays C points into live as long as this object
            "size_nz": _ints(planner.size_nz, np.int32), "depth_nz": _ints(planner.depth_nz, np.int32),
            "p": _ints(planner.p, np.float64), "q": _ints(planner.q, np.float64),
            "g": _ints(planner.g, np.float64), "r": _ints(planner.r, np.float64),
            "size_bytes": _ints(planner.size_bytes), "alloc_bytes": _ints(planner.alloc_bytes),
            "n_sib": _ints(planner.n_sib, np.int32), "dir_first": _ints(firsts, np.int32),
            "dir_prefix": (ctypes.c_char_p * len(prefixes))(*prefixes),
            "pattern": pattern, "cells": (Cell * (B * S * D))(),
            "size_count": np.zeros(S, np.int64), "depth_count": np.zeros(D, np.int64),
            "age_count": np.zeros(B, np.int64), "as_count": np.zeros(B * S, np.int64),
            "log": ctypes.create_string_buffer(LOG_BUFFER_BYTES),
        }
        st = self.state = AgerState(
            S=S, D=D, B=B, n_size_nz=len(planner.size_nz), n_depth_nz=len(planner.depth_nz),
            dir_prefix=keep["dir_prefix"], root_fd=root_fd, fallocate=int(fallocate),
            pattern=pattern, pattern_bytes=len(pattern), cells=keep["cells"],
            log=ctypes.addressof(keep["log"]), log_cap=LOG_BUFFER_BYTES)
        for name in ("size_nz", "depth_nz", "n_sib", "dir_first"):
            setattr(st, name, keep[name].ctypes.data_as(P32))
        for name in ("p", "q", "g", "r"):
            setattr(st, name, keep[name].ctypes.data_as(PF64))
        for name in ("size_bytes", "alloc_bytes", "size_count", "depth_count", "age_count", "as_count"):
            setattr(st, name, keep[name].ctypes.data_as(P64))
        self.ref = ctypes.byref(st)
        self.push(planner)

    def close(self) -> None:
        self.lib.fsscope_ager_free_cells(self.ref)

    # ---- the planner between Python and C

    def push(self, planner) -> None:
        """Everything of the Python planner's into C (at the start and after a re-cut)."""
        st, keep = self.state, self.keep
        for name in ("size_count", "depth_count", "age_count", "as_count"):
            keep[name][:] = getattr(planner, name)
        st.live_files, st.files_bytes, st.horizon_ops = planner.live_files, planner.files_bytes, planner.horizon_ops
        lens = _ints([len(cell) for cell in planner.cells])
        born = _ints([record[4] for cell in planner.cells for record in cell])
        sib = _ints([record[5] for cell in planner.cells for record in cell])
        if self.lib.fsscope_ager_set_cells(self.ref, lens.ctypes.data_as(P64), born.ctypes.data_as(P64),
                                           sib.ctypes.data_as(P64)):
            raise MemoryError("aging: no memory for the planner's cells in C")
        words = planner.rng.getstate()[1]
        st.mt[:] = words[:MT_N]
        st.mti = words[MT_N]

    def pull(self, planner) -> None:
        """Counts, totals and the random state back into the Python planner (after every call)."""
        st, keep = self.state, self.keep
        for name in ("size_count", "depth_count", "age_count", "as_count"):
            getattr(planner, name)[:] = keep[name].tolist()
        planner.live_files, planner.files_bytes = st.live_files, st.files_bytes
        version, _, gauss_next = planner.rng.getstate()
        planner.rng.setstate((version, (*st.mt, st.mti), gauss_next))

    def pull_cells(self, planner) -> None:
        """The live files back into the Python planner's cells, in C's order (before a re-cut
        and at the end), so Python's view is whole again."""
        n_cells = len(planner.cells)
        lens = np.zeros(n_cells, np.int64)
        born = np.zeros(self.state.live_files, np.int64)
        sib = np.zeros(self.state.live_files, np.int64)
        self.lib.fsscope_ager_get_cells(self.ref, lens.ctypes.data_as(P64), born.ctypes.data_as(P64),
                                        sib.ctypes.data_as(P64))
        S, D, prefix = planner.S, planner.D, planner.dir_prefix
        born_list, sib_list = born.tolist(), sib.tolist()
        k = 0
        for index, n in enumerate(lens.tolist()):
            a, rest = divmod(index, S * D)
            s, d = divmod(rest, D)
            planner.cells[index] = [[a, pos, s, d, born_list[k + pos], sib_list[k + pos],
                                     f"{prefix[d][sib_list[k + pos]]}{born_list[k + pos]}"]
                                    for pos in range(n)]
            k += n

    # ---- running

    def run(self, session, ops_limit: int, edge_s: float) -> tuple[int, memoryview]:
        """Ops from ``session.ops`` until ``ops_limit`` or the monotonic clock passes ``edge_s``;
        returns why it stopped and the op log written meanwhile (valid until the next call)."""
        st, planner = self.state, session.planner
        alive = planner.alive_by_born
        if len(alive) < ops_limit:
            alive.extend(bytes(ops_limit - len(alive) + 65536))
        view = (ctypes.c_uint8 * len(alive)).from_buffer(alive)
        st.alive = ctypes.addressof(view)
        st.phase = 0 if session.phase == "rapid" else 1
        st.ops, st.ops_limit = session.ops, ops_limit
        st.edge_ns = int(edge_s * 1e9) if edge_s != float("inf") else 2**62
        st.base_used_bytes, st.capacity_bytes = session.base_used_bytes, session.capacity_bytes
        st.written_bytes = session.written_bytes
        st.target_bytes, st.ceiling_bytes = session.target_bytes, session.ceiling_bytes
        st.floor_bytes, st.settle_at_bytes = session.floor_bytes, session.settle_at_bytes
        st.max_written = session.max_written
        st.log_len = 0
        try:
            status = self.lib.fsscope_ager_run(self.ref)
        finally:
            del view
            st.alive = None
        session.ops, session.written_bytes = st.ops, st.written_bytes
        self.pull(planner)
        return status, memoryview(self.keep["log"])[:st.log_len]

    def error(self) -> tuple[int, str]:
        """FULL / FAILED: the errno and the file (relative to the root)."""
        return self.state.err_errno, self.state.err_path.decode(errors="surrogateescape")
