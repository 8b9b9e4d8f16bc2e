"""The file set: its directory tree, per-file sizes, the manifest of which files exist, populate."""

from __future__ import annotations

import math
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fsscope.errors import FsscopeError
from fsscope.workloads.personalities.spec import LOG_DIR, MANIFEST_NAME, PersonalitySpec


class Layout:
    """Paths of the file set: a tree with ``dir_width`` entries per directory (Filebench's
    meandirwidth), files named by index, e.g. ``fileserver/d03/d11/00001234``."""

    def __init__(self, root: Path, spec: PersonalitySpec):
        self.fileset_dir = Path(root) / spec.name
        n_leaves = max(1, math.ceil(spec.nfiles / spec.dir_width))
        self.width = spec.dir_width
        depth = 0
        while spec.dir_width ** depth < n_leaves:
            depth += 1
        leaves = []
        for leaf in range(n_leaves):
            parts, rest = [], leaf
            for _ in range(depth):
                rest, digit = divmod(rest, spec.dir_width)
                parts.append(f"d{digit:02d}")
            leaves.append(os.path.join(str(self.fileset_dir), *reversed(parts)))
        self.leaves = leaves
        self.log_path = str(Path(root) / LOG_DIR / f"{spec.name}.log")

    def path(self, index: int) -> str:
        return f"{self.leaves[index // self.width]}/{index:08d}"


@dataclass(frozen=True)
class Fileset:
    """State of a populated file set: fixed per-file sizes and which files exist now."""

    spec_name: str
    nfiles: int
    sizes_bytes: np.ndarray      # int64, per file (the size written by create / populate)
    exists: np.ndarray           # bool, per file
    seed: int


def _manifest_path(root: Path, spec: PersonalitySpec) -> Path:
    return Path(root) / MANIFEST_NAME.format(name=spec.name)


def save_fileset(root: Path, spec: PersonalitySpec, fs: Fileset) -> None:
    path = _manifest_path(root, spec)
    tmp = path.with_suffix(".tmp.npz")
    np.savez(tmp, sizes_bytes=fs.sizes_bytes, exists=fs.exists,
             meta=np.array([fs.spec_name, str(fs.nfiles), str(fs.seed)]))
    os.replace(tmp, path)


def load_fileset(root: str | os.PathLike, spec: PersonalitySpec) -> Fileset:
    """The file set populate() left in ``root`` (and run() updated); clear error if absent."""
    path = _manifest_path(Path(root), spec)
    try:
        with np.load(path) as data:
            name, nfiles, seed = (str(x) for x in data["meta"])
            fs = Fileset(name, int(nfiles), data["sizes_bytes"].astype(np.int64),
                         data["exists"].astype(bool), int(seed))
    except FileNotFoundError:
        raise FsscopeError(f"no {spec.name} file set in {root}: populate it first") from None
    if fs.nfiles != spec.nfiles:
        raise FsscopeError(f"{spec.name} file set in {root} has {fs.nfiles} files, the spec wants "
                           f"{spec.nfiles}: populate again")
    return fs


def fileset_paths(root: str | os.PathLike, spec: PersonalitySpec) -> list[str]:
    """Paths of the files the populated file set holds now (from its manifest)."""
    layout = Layout(Path(root), spec)
    return [layout.path(int(i)) for i in np.flatnonzero(load_fileset(root, spec).exists)]


def file_sizes_bytes(spec: PersonalitySpec, seed: int) -> np.ndarray:
    """Gamma-distributed sizes like Filebench's cvar-gamma (mean, shape ``gamma_shape``)."""
    rng = np.random.default_rng(seed)
    scale = spec.mean_file_size_bytes / spec.gamma_shape
    return np.rint(rng.gamma(spec.gamma_shape, scale, spec.nfiles)).astype(np.int64)


@dataclass(frozen=True)
class PopulateResult:
    files: int
    bytes_written: int
    elapsed_s: float
    cache_evicted: bool
    cancelled: bool = False          # stopped part-way: the file set is incomplete and not saved


def populate(root: str | os.PathLike, spec: PersonalitySpec, seed: int | None = None,
             evict_cache: bool = True, cancelled: Callable[[], bool] | None = None) -> PopulateResult:
    """Create the file set (``prealloc_pct`` % of the files, all of them for webserver).

    Replaces an earlier file set of the same personality under ``root``. With ``evict_cache``
    the data is synced and dropped from the page cache (posix_fadvise DONTNEED per file), so
    the run starts cold and, under ``--mem-limit``, the cache is charged to the workers' cgroup
    rather than to the populating process (no effect on tmpfs, whose pages are the storage).
    ``cancelled()`` is asked every 64 files: a large data set takes minutes to write."""
    root = Path(root)
    seed = spec.seed if seed is None else seed
    t0 = time.monotonic()
    layout = Layout(root, spec)
    if layout.fileset_dir.exists():
        shutil.rmtree(layout.fileset_dir)
    for leaf in layout.leaves:
        os.makedirs(leaf, exist_ok=True)
    sizes = file_sizes_bytes(spec, seed)
    rng = np.random.default_rng(seed + 1)
    n_exist = int(round(spec.nfiles * spec.prealloc_pct / 100.0))
    exists = np.zeros(spec.nfiles, dtype=bool)
    exists[rng.permutation(spec.nfiles)[:n_exist]] = True
    buf = memoryview(pattern(spec.io_size_bytes, seed))
    written = 0
    for done, index in enumerate(np.flatnonzero(exists)):
        if cancelled is not None and done % 64 == 0 and cancelled():
            return PopulateResult(done, written, time.monotonic() - t0, False, cancelled=True)
        fd = os.open(layout.path(int(index)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            written += write_whole(fd, int(sizes[index]), buf)
        finally:
            os.close(fd)
    if spec.name == "webserver":
        os.makedirs(os.path.dirname(layout.log_path), exist_ok=True)
        open(layout.log_path, "wb").close()
    if evict_cache:
        os.sync()
        for index in np.flatnonzero(exists):
            fd = os.open(layout.path(int(index)), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
    save_fileset(root, spec, Fileset(spec.name, spec.nfiles, sizes, exists, seed))
    return PopulateResult(n_exist, written, time.monotonic() - t0, evict_cache)


def pattern(size: int, seed: int) -> bytearray:
    """Incompressible write data (zeros would flatter compressing file systems)."""
    return bytearray(random.Random(seed).randbytes(size))


def write_whole(fd: int, size: int, buf: memoryview) -> int:
    """Write ``size`` bytes in chunks of len(buf) (Filebench writewholefile)."""
    chunk = len(buf)
    done = 0
    while done < size:
        done += os.write(fd, buf[: min(chunk, size - done)])
    return done


def write_sequential(path: str | os.PathLike, size_bytes: int, io_size_bytes: int,
                     fsync: bool = False) -> float:
    """Seconds to write a new file sequentially through the workers' own write path
    (for ``bench/workload_rate.py``, which compares it with fio)."""
    buf = memoryview(pattern(io_size_bytes, 0))
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_whole(fd, size_bytes, buf)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


