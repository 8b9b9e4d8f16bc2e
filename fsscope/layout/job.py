"""The ``frag`` job: how fragmented a file system is, measured the way aging reports it.

On the target's file system (freshly made, or restored from an aged snapshot with
``--from-snapshot``): the free-space extent histogram (:mod:`fsscope.layout.freespace`) and
the fragments of a large test file written sequentially and read back with FIEMAP
(:mod:`fsscope.layout.probe_file`; deleted afterwards). :func:`measure_fragmentation` is
the one measurement shared with the aging job's "fresh" and "aged" sections, so the numbers
of a ``frag`` run, a fresh file system and an aged one line up.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, ClassVar

import msgspec
from msgspec import Meta

from fsscope.errors import FsscopeError
from fsscope.layout.freespace import free_space_of
from fsscope.layout.probe_file import probe_file_layout
from fsscope.layout.records import Measurement, Restore, TargetInfo
from fsscope.records import SpecRecord, plain, typed

MIB = 2**20
MAX_AUTO_TEST_FILE_BYTES = 256 * MIB


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "frag"

    test_file_bytes: Annotated[int, Meta(ge=4096, description="size of the test file (default: a quarter of "
                                               "the free space, 1M..256M)")] | None = None
    chunk_bytes: Annotated[int, Meta(ge=512, description="the size of each write of the test file")] = MIB
    free_space: Annotated[bool, Meta(description="the free-extent histogram (needs ext4/xfs/btrfs)")] = True


class Report(Measurement, frozen=True, kw_only=True, omit_defaults=False):
    """The ``frag`` job's report: where it measured, and the measurement (its error keys
    are written as null when there is no error)."""

    fs: str | None = None
    recipe: str | None = None
    target: TargetInfo | None = None
    snapshot: str | None = None
    restores: list[Restore] = []
    spec: Spec | None = None


def auto_test_file_bytes(free_bytes: float) -> int:
    """A test file that fits comfortably: a quarter of ``free_bytes`` in whole MiB, 1..256 MiB."""
    return int(max(MIB, min(MAX_AUTO_TEST_FILE_BYTES, free_bytes / 4 // MIB * MIB)))


def space_of(path: str | os.PathLike) -> dict:
    """statvfs of the file system holding ``path``: bytes and inodes, total/used/free."""
    vfs = os.statvfs(path)
    total, free = vfs.f_blocks * vfs.f_frsize, vfs.f_bfree * vfs.f_frsize
    return {"total_bytes": total, "used_bytes": total - free, "free_bytes": free,
            "fullness": (total - free) / total if total else 0.0,
            "inodes_used": vfs.f_files - vfs.f_ffree, "block_size_bytes": vfs.f_frsize}


def measure_fragmentation(mounted, test_file_bytes: int | None, *, chunk_bytes: int = MIB,
                          free_space: bool = True, test_file: bool = True,
                          directory: Path | None = None) -> Measurement:
    """Free-space histogram and test-file fragments of a mounted file system.

    The histogram is read first (the state as found), then the test file is written into
    ``directory`` (default: the work directory), mapped and deleted. A part that cannot be
    measured (no free-space tool for this fs, no room for the test file) becomes an
    ``*_error`` line instead of failing the whole measurement."""
    space = space_of(mounted.workdir)
    out: dict = {"space": space}
    if test_file_bytes is None:
        test_file_bytes = auto_test_file_bytes(space["free_bytes"])
    if free_space:
        try:
            hist = free_space_of(mounted)
            out["free_space"] = hist.to_dict()
        except FsscopeError as exc:
            out["free_space_error"] = str(exc)
    if test_file:
        try:
            out["test_file"] = plain(probe_file_layout(directory or mounted.workdir, test_file_bytes,
                                                       chunk_bytes))
        except FsscopeError as exc:
            out["test_file_error"] = str(exc)
            out["test_file_bytes"] = test_file_bytes
        except OSError as exc:  # e.g. ENOSPC creating it: no inode left
            out["test_file_error"] = f"could not create the {test_file_bytes}-byte test file: {exc.strerror}"
            out["test_file_bytes"] = test_file_bytes
    space["inodes_used"] = space_of(mounted.workdir)["inodes_used"]  # the test file is gone again
    return typed(out, Measurement)


def run(ctx, spec: Spec) -> Report:
    with ctx.fresh_fs() as fs:
        ctx.phase("free space + test file")
        measurement = measure_fragmentation(fs, spec.test_file_bytes, chunk_bytes=spec.chunk_bytes,
                                            free_space=spec.free_space)
    target = ctx.target
    # a --dir target: the histogram is of the whole file system holding it, as found (used)
    return Report(fs=fs.fs, recipe=ctx.recipe.name if ctx.recipe is not None else None,
                  target=TargetInfo.of(target.spec), snapshot=target.spec.snapshot or None,
                  restores=typed(target.restores, list[Restore]),
                  spec=spec, **msgspec.structs.asdict(measurement))
