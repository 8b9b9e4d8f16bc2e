"""What one latency probe is told: :class:`ProbeSpec`, its types and bounds.

Apart from :mod:`fsscope.workloads.probe` (the measured loop, numpy and the C loop) so that the
Setup screen's probe panel and the CLI's parser read the spec without loading those: the
panel is part of the Setup screen's start-up (issue 33, bench/startup.py).
"""

from __future__ import annotations

import os
from typing import Annotated, ClassVar, Literal, get_args

from msgspec import Meta

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

MAX_NAME_LENGTH = 255

#: Without ``max_runs``, a probe may make up to this many times ``runs`` runs to decide.
DEFAULT_RUN_CAP_FACTOR = 3


class ProbeSpec(SpecRecord, frozen=True):
    """What one latency probe does; ``runs`` repetitions of ``files`` timed calls of ``op``.

    ``fresh_fs`` and ``runs`` are for the engine (a freshly made file system per run, or one
    fresh directory per run on the same file system); ``cpu`` is the CPU the measuring process
    is pinned to (None: the last CPU it may use, see :func:`fsscope.workloads.probe.default_cpu`). ``write_bytes`` is
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

    op: Annotated[Op, Meta(description="the timed syscall")] = "creat"
    files: Annotated[int, Meta(ge=1, description="files per run")] = 1024
    runs: Annotated[int, Meta(ge=1, description="runs, each on a fresh file system")] = 5
    name_length: Annotated[int, Meta(ge=1, le=MAX_NAME_LENGTH, description="digits per file name")] = 7
    sync_before: Annotated[SyncBefore, Meta(description="sync before each call")] = "each"
    fresh_fs: Annotated[bool, Meta(description="a freshly made file system per run (without: one file system "
                                               "for all runs, a fresh directory in it per run)")] = True
    cpu: Annotated[int, Meta(ge=0, description="CPU to pin the probe to (default: the last one)")] | None = None
    write_bytes: Annotated[int, Meta(ge=0, description="bytes each write-fsync call writes")] = 4096
    fallocate_bytes: Annotated[int, Meta(ge=1, description="bytes each fallocate call allocates")] = 1 << 20
    trace: Annotated[TraceMode, Meta(
        description="kernel-event attribution through tracefs (root): 'attribute' adds one traced run after "
                    "the untraced measured ones and backs every flag with the kernel events inside that call; "
                    "'all' traces every run; 'off' none")] = "attribute"
    sync_scope: Annotated[SyncScope, Meta(
        description="what that sync writes back: 'fs' the measured file system (syncfs), 'global' every file "
                    "system (sync(), the papers' method: on a busy machine it waits on all their writeback)")] = "fs"
    max_runs: Annotated[int, Meta(
        ge=1, description="add runs after the first --runs until every candidate file is decided slow or typical, "
                          f"up to N runs (default {DEFAULT_RUN_CAP_FACTOR}× --runs, none after --runs 1; equal to "
                          "--runs: no extra runs)")] | None = None
    in_root: Annotated[bool, Meta(description="files in the root directory of the file system fsscope made (the "
                                              "papers' setup) instead of a fresh subdirectory; the structural "
                                              "indices depend on it")] = False

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
