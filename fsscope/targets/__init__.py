"""Targets: where fsscope measures, made safely and undone completely.

Public API: :class:`TargetSpec`, :class:`Target`, :class:`MountedFS`, :func:`release`,
:func:`cleanup`, and device discovery in :mod:`fsscope.targets.devices`.
"""

from fsscope.errors import FsscopeError
from fsscope.targets.journal import Journal, cleanup, owner_alive, triage, undo_group
from fsscope.targets.target import DEFAULT_SIZE_BYTES, MountedFS, ReportTarget, Target, TargetSpec

__all__ = ["DEFAULT_SIZE_BYTES", "Journal", "MountedFS", "ReportTarget", "Target", "TargetSpec", "cleanup", "release", "triage"]


def release(mountpoint: str, journal: Journal | None = None) -> list[str]:
    """Undo the target 'fsscope prepare' mounted at ``mountpoint`` (mount, loop, RAM image,
    dirs). A running job's mount is not released: the job undoes it when it ends."""
    import os

    journal = journal or Journal()
    target = os.path.realpath(mountpoint)
    for entry in journal.entries():
        if entry.kind == "mount" and os.path.realpath(entry.fields["mountpoint"]) == target:
            if owner_alive(entry):
                raise FsscopeError(f"{mountpoint} belongs to running fsscope process {entry.owner_pid}: "
                                   "stop that job instead (it cleans up after itself)")
            return undo_group(journal, entry.group)
    raise FsscopeError(f"{mountpoint}: not a mount point fsscope made (see 'fsscope cleanup')")
