"""The layout workload player: writes a treatment's files chunk by chunk, then reads back
where their data lies (FIEMAP) -- Chopper's workload generator, player and FS monitor in one.

What the factors mean here (anchors §2.3):

- FileSize bytes per file, cut into ChunkCount chunks of FileSize / ChunkCount bytes.
- InternalDensity d: each chunk gets d x its size in writes, at its END, as the paper's
  player does ("0.2 and chunk size 10KB: only the 2KB at the end of each chunk will be
  written"): d < 1 leaves a hole before each chunk's written part (a sparse file whose last
  byte is still the file's last); d > 1 writes the file again in rounds (round r rewrites the
  last min(1, d - r) of each chunk) -- overwrites.
- ChunkOrder: the order the chunks are written in, e.g. "3120" (digits >= ChunkCount are
  skipped, so a 4-chunk order serves smaller counts too).
- Fsync bitmap: fsync after the i-th written chunk when bit i is 1. Sync bitmap: close the
  file, sync the file system and open it again before the next chunk; the last bit is
  always 1 (every file ends closed and synced). Bits beyond the pattern repeat it.
- FileCount files: their chunks are interleaved (chunk i of file 0, of file 1, ...).
- DirectorySpan: a binary directory tree (``dir_depth`` levels below the root) is made; the
  files go into its directories in breadth-first order from level ``start_level``, the first
  file in the first one, the last file DirectorySpan - 1 directories further (one file: the
  DirectorySpan-th directory).
- CPUCount: the n-th write runs on CPU n mod CPUCount (of the CPUs this process may use), so
  with 2 the allocator sees requests from two CPUs -- ext4's per-CPU locality groups make
  that visible (Chopper's "scheduler dependency").

The syncs are ``syncfs`` of the treatment's own file system, never a machine-wide sync(2).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.errors import FsscopeError
from fsscope.layout import fiemap
from fsscope.layout.freespace import syncfs
from fsscope.records import Record
from fsscope.study.space import Level, Schema
from fsscope.units import parse_size_bytes


class FileLayout(Record, frozen=True, kw_only=True):
    """Where one of a treatment's files lies (FIEMAP after the pattern was played). NaN (no
    mapped byte) is null on the wire, None when read back."""

    path: str = ""
    size_bytes: int = 0
    d_span_bytes: int = 0
    extents: int = 0
    fragments: int = 0
    mapped_bytes: int = 0
    layout_score: float | None = None
    d_span_ideal_ratio: float | None = None

# --- the explore factors' schema: each normaliser reads TOML or --factor text ---------------

def _int(lo: int, hi: int | None = None) -> Callable[[Any, str], Level]:
    def norm(value: Any, where: str) -> int:
        try:
            v = int(str(value)) if not isinstance(value, float) or value.is_integer() else None
        except ValueError:
            v = None
        if v is None or v < lo or (hi is not None and v > hi):
            rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            raise FsscopeError(f"{where}: expected a whole number {rng}, got {value!r}")
        return v
    return norm


def _size(value: Any, where: str) -> int:
    if isinstance(value, float):
        raise FsscopeError(f"{where}: expected a size like 64K or 1G, got {value!r}")
    size = parse_size_bytes(value, where)
    if size % 4096:
        raise FsscopeError(f"{where}: {value!r} is not a multiple of 4 KiB")
    return size


def _ratio(lo: float, hi: float, *, hi_open: bool = False) -> Callable[[Any, str], float]:
    def norm(value: Any, where: str) -> float:
        v: float | None
        try:
            v = float(value)
        except (TypeError, ValueError):
            v = None
        if v is None or v < lo or v > hi or (hi_open and v == hi):
            raise FsscopeError(f"{where}: expected a number in [{lo}, {hi}{')' if hi_open else ']'}, got {value!r}")
        return round(v, 10)
    return norm


def _order(value: Any, where: str) -> str:
    text = str(value)
    if not text.isdigit() or sorted(text) != [str(i) for i in range(len(text))]:
        raise FsscopeError(f"{where}: expected a chunk order such as '3120' (a permutation of 0..n-1), got {value!r}")
    return text


def _bitmap(value: Any, where: str) -> str:
    text = str(value)
    if not text or set(text) - {"0", "1"}:
        raise FsscopeError(f"{where}: expected a bitmap such as '0101', got {value!r}")
    return text


def _density(value: Any, where: str) -> float:
    v = _ratio(0.0, 64.0)(value, where)
    if v <= 0:
        raise FsscopeError(f"{where}: InternalDensity must be above 0, got {value!r}")
    return v


EXPLORE_SCHEMA: Schema = {
    "DiskSize": _size,
    "UsedRatio": _ratio(0.0, 0.95),
    "FreeSpaceLayout": _int(1, 6),
    "CPUCount": _int(1, 1024),
    "FileSize": _size,
    "ChunkCount": _int(1, 10),
    "InternalDensity": _density,
    "ChunkOrder": _order,
    "Fsync": _bitmap,
    "Sync": _bitmap,
    "FileCount": _int(1, 64),
    "DirectorySpan": _int(1, 1024),
}

#: Where a factor is missing from a space, its Chopper default.
DEFAULTS: dict[str, Level] = {"DiskSize": 1 << 30, "UsedRatio": 0.0, "FreeSpaceLayout": 6, "CPUCount": 1,
                              "FileSize": 64 << 10, "ChunkCount": 4, "InternalDensity": 1.0,
                              "ChunkOrder": "0123", "Fsync": "0000", "Sync": "0001", "FileCount": 1,
                              "DirectorySpan": 1}


# --- the write pattern -----------------------------------------------------------------------

def _bit(bitmap: str, i: int) -> bool:
    return bitmap[i % len(bitmap)] == "1"


def chunk_writes(file_size: int, chunk_count: int, density: float, order: str) -> list[tuple[int, int, int]]:
    """(position in order, offset, length) of every write of one file, in time order."""
    chunk = file_size // chunk_count
    chunks = [int(c) for c in order if int(c) < chunk_count]
    chunks += [c for c in range(chunk_count) if c not in chunks]  # an order shorter than the count
    writes = []
    rounds = int(np.ceil(density - 1e-9))
    for r in range(rounds):
        share = min(1.0, density - r)
        length = int(chunk * share) // 512 * 512 or min(chunk, 512)
        for pos, c in enumerate(chunks):
            writes.append((pos, c * chunk + chunk - length, length))  # the chunk's end, as the paper
    return writes


def directory_tree(root: Path, depth: int) -> list[Path]:
    """A binary tree of directories below ``root``, levels 1..depth; breadth-first list of
    every directory including the root (level 0)."""
    levels = [[root]]
    for _ in range(depth):
        levels.append([parent / str(i) for parent in levels[-1] for i in (0, 1)])
    out = [d for level in levels for d in level]
    for d in out:
        d.mkdir()
    return out


def file_dirs(tree: list[Path], depth: int, start_level: int, span: int, count: int) -> list[Path]:
    candidates = tree[2 ** min(start_level, depth) - 1:]
    span = min(span, len(candidates))
    if count == 1:
        return [candidates[span - 1]]
    return [candidates[round(f * (span - 1) / (count - 1))] for f in range(count)]


def play(root: Path, factors: dict[str, Level], settings: dict[str, Any] | None = None
         ) -> tuple[dict[str, Any], dict[str, float]]:
    """Write the treatment's files under ``root`` (a mounted file system) and measure them:
    the layout fields of its row (:func:`measure`) and where the time went."""
    settings = settings or {}
    f = DEFAULTS | factors
    depth, start = int(settings.get("dir_depth", 4)), int(settings.get("start_level", 2))
    count, size = int(f["FileCount"]), int(f["FileSize"])
    tree = directory_tree(root / "tree", depth)
    paths = [d / f"file{i}" for i, d in enumerate(file_dirs(tree, depth, start, int(f["DirectorySpan"]), count))]
    writes = chunk_writes(size, int(f["ChunkCount"]), float(f["InternalDensity"]), str(f["ChunkOrder"]))
    allowed = sorted(os.sched_getaffinity(0))
    cpus = allowed[:max(1, int(f["CPUCount"]))]
    fds: list[int | None] = [None] * count
    payload = os.urandom(max(length for _, _, length in writes))
    t0 = time.monotonic()
    n_ops = 0
    try:
        for pos, offset, length in writes:
            for i in range(count):
                os.sched_setaffinity(0, {cpus[n_ops % len(cpus)]})
                n_ops += 1
                fd = fds[i]
                if fd is None:
                    fd = fds[i] = os.open(paths[i], os.O_CREAT | os.O_RDWR, 0o666)
                os.pwrite(fd, payload[:length], offset)
                if _bit(str(f["Fsync"]), pos):
                    os.fsync(fd)
                last = pos == int(f["ChunkCount"]) - 1
                if _bit(str(f["Sync"]), pos) or last:
                    os.close(fd)
                    fds[i] = None
                    syncfs(str(root))
    finally:
        os.sched_setaffinity(0, allowed)
        for fd in fds:
            if fd is not None:
                os.close(fd)
    play_s = time.monotonic() - t0
    t0 = time.monotonic()
    syncfs(str(root))
    sync_s = time.monotonic() - t0
    t0 = time.monotonic()
    measured = measure(paths)
    return measured, {"play_s": play_s, "sync_s": sync_s, "fiemap_s": time.monotonic() - t0}


def measure(paths: list[Path]) -> dict[str, Any]:
    """Per file, and the treatment's response as Chopper defines it: d-span is the distance
    between the first and last physical block OF A FILE, and a treatment of several files
    reports the largest of its files' d-spans (He et al., Sec. 3.1, Fig. 3). The layout score
    and d-span / ideal follow the same worst-file rule. The span over all
    files together -- which grows with the distance BETWEEN files, e.g. two directories in two
    XFS allocation groups -- is kept under its own names (``dspan_all_files_bytes``,
    ``layout_score_all_files``): it is not the paper's d-span. The layout fields of the
    treatment's row, by name."""
    files, all_extents = [], []
    for path in paths:
        exts = fiemap.extents(path)
        all_extents.append(exts)
        placed = fiemap.placed(exts)
        mapped = int(placed["length_bytes"].sum())
        span = fiemap.d_span_bytes(exts)
        files.append(FileLayout(path=path.name, size_bytes=os.stat(path).st_size, d_span_bytes=int(span),
                                extents=int(len(exts)), fragments=int(fiemap.fragments(exts)), mapped_bytes=mapped,
                                layout_score=fiemap.layout_index(exts),
                                d_span_ideal_ratio=span / mapped if mapped else math.nan))
    every = fiemap.concat(all_extents)
    return {"files": files, **worst_file(files), "extents": sum(fl.extents for fl in files),
            "dspan_all_files_bytes": int(fiemap.d_span_bytes(every)),
            "layout_score_all_files": fiemap.layout_index(every)}


def worst_file(files: list[FileLayout]) -> dict[str, Any]:
    """The treatment's per-file responses: the largest d-span, layout score (larger is worse)
    and d-span / ideal of its files (NaN, null on the wire, when none has one)."""
    def worst(values: list[float | None]) -> float:
        known = [v for v in values if v is not None and not math.isnan(v)]
        return max(known) if known else math.nan

    return {"d_span_bytes": int(max((f.d_span_bytes for f in files), default=0)),
            "layout_score": worst([f.layout_score for f in files]),
            "d_span_ideal_ratio": worst([f.d_span_ideal_ratio for f in files])}
