"""Targets: where fsscope measures, made safely and undone completely.

Public API: :class:`TargetSpec`, :class:`Target`, :class:`MountedFS`, :func:`release`,
:func:`cleanup`, and device discovery in :mod:`fsscope.targets.devices`.
"""

from fsscope.targets.journal import Journal, cleanup
from fsscope.targets.target import DEFAULT_SIZE_BYTES, MountedFS, Target, TargetSpec

__all__ = ["DEFAULT_SIZE_BYTES", "Journal", "MountedFS", "Target", "TargetSpec", "cleanup", "release"]


def release(mountpoint: str, journal: Journal | None = None) -> list[str]:
    """Undo the prepared target mounted at ``mountpoint`` (mount, loop, RAM image, dirs)."""
    import os

    from fsscope.errors import FsscopeError
    from fsscope.targets.journal import undo_group

    journal = journal or Journal()
    target = os.path.realpath(mountpoint)
    for entry in journal.entries():
        if entry.kind == "mount" and os.path.realpath(entry.fields["mountpoint"]) == target:
            return undo_group(journal, entry.group)
    raise FsscopeError(f"{mountpoint}: not a mount point fsscope made (see 'fsscope cleanup')")
