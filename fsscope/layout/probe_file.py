"""The aging report's "fragments of a large test file written into each": how well the
allocator can still place a big sequential file on this (fresh or aged) file system.

The file is written sequentially in ``chunk_bytes`` writes of incompressible bytes (so btrfs
compression or zero detection cannot shrink it), fsync'd, then read back with FIEMAP.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from fsscope.errors import FsscopeError
from fsscope.layout import fiemap

PROBE_FILE_NAME = "fsscope-layout-probe.bin"
#: Largest buffer kept in memory; bigger chunks reuse it (random per 1 MiB is incompressible).
_BUFFER_BYTES = 2**20


def write_test_file(directory: str | os.PathLike, size_bytes: int, chunk_bytes: int = 2**20, *,
                    name: str = PROBE_FILE_NAME, fsync: bool = True) -> Path:
    """Write ``size_bytes`` sequentially in ``chunk_bytes`` writes; return the path.

    On ENOSPC the partial file is removed and FsscopeError says how much fitted."""
    if size_bytes <= 0 or chunk_bytes <= 0:
        raise FsscopeError(f"test file size and chunk must be positive (got {size_bytes}, {chunk_bytes})")
    path = Path(directory) / name
    buffer = os.urandom(min(chunk_bytes, _BUFFER_BYTES))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    written = 0
    try:
        while written < size_bytes:
            this_chunk = min(chunk_bytes, size_bytes - written)
            done = 0
            while done < this_chunk:
                piece = memoryview(buffer)[: min(len(buffer), this_chunk - done)]
                done += os.write(fd, piece)
            written += this_chunk
        if fsync:
            os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        fd = -1
        path.unlink(missing_ok=True)
        if exc.errno == errno.ENOSPC:
            raise FsscopeError(f"{directory}: no space for a {size_bytes}-byte test file "
                               f"(only {written} bytes fitted)") from None
        raise
    finally:
        if fd >= 0:
            os.close(fd)
    return path


@dataclass(frozen=True)
class ProbeFileLayout:
    """Where one freshly written large file landed."""

    path: str
    size_bytes: int
    chunk_bytes: int
    extent_count: int
    fragment_count: int
    d_span_bytes: int
    layout_index: float
    #: the physically contiguous runs' lengths, largest first (how big the pieces are)
    run_lengths_bytes: tuple[int, ...]


def probe_file_layout(directory: str | os.PathLike, size_bytes: int, chunk_bytes: int = 2**20, *,
                      keep: bool = False, name: str = PROBE_FILE_NAME) -> ProbeFileLayout:
    """Write the test file, read its layout with FIEMAP, and (unless ``keep``) delete it so
    the file system is left as it was found."""
    path = write_test_file(directory, size_bytes, chunk_bytes, name=name)
    try:
        exts = fiemap.extents(path)
        runs = fiemap.physical_runs(exts)
        return ProbeFileLayout(
            str(path), size_bytes, chunk_bytes, int(len(exts)), int(len(runs)),
            fiemap.d_span_bytes(exts), fiemap.layout_index(exts),
            tuple(sorted((int(n) for n in runs[:, 1]), reverse=True)))
    finally:
        if not keep:
            path.unlink(missing_ok=True)
