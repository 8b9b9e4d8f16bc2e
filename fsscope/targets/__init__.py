"""Targets: where fsscope measures, made safely and undone completely.

Public API: :class:`TargetSpec`, :class:`Target`, :class:`MountedFS`, :func:`release`,
:func:`cleanup`, and device discovery in :mod:`fsscope.targets.devices`.

Only the spec (:mod:`fsscope.targets.spec`) is imported with the package: the rest (the journal,
:class:`Target` with device discovery and the mount table) on first use (PEP 562), so what only
names a target -- the TUI's Setup screen before its first frame (issue 33) -- does not load them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fsscope.errors import FsscopeError
from fsscope.targets.spec import DEFAULT_SIZE_BYTES, ReportTarget, TargetSpec

if TYPE_CHECKING:
    from fsscope.targets.journal import Journal, cleanup, triage
    from fsscope.targets.target import MountedFS, Target

__all__ = ["DEFAULT_SIZE_BYTES", "Journal", "MountedFS", "ReportTarget", "Target", "TargetSpec", "cleanup", "release", "triage"]

# a name of the package -> the module that defines it, imported on first use
_LAZY = {"Journal": "journal", "cleanup": "journal", "owner_alive": "journal", "triage": "journal",
         "undo_group": "journal", "MountedFS": "target", "Target": "target"}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


def release(mountpoint: str, journal: Journal | None = None) -> list[str]:
    """Undo the target 'fsscope prepare' mounted at ``mountpoint`` (mount, loop, RAM image,
    dirs). A running job's mount is not released: the job undoes it when it ends."""
    import os

    from fsscope.targets.journal import Journal, owner_alive, undo_group

    journal = journal or Journal()
    target = os.path.realpath(mountpoint)
    for entry in journal.entries():
        if entry.kind == "mount" and os.path.realpath(entry.fields["mountpoint"]) == target:
            if owner_alive(entry):
                raise FsscopeError(f"{mountpoint} belongs to running fsscope process {entry.owner_pid}: "
                                   "stop that job instead (it cleans up after itself)")
            return undo_group(journal, entry.group)
    raise FsscopeError(f"{mountpoint}: not a mount point fsscope made (see 'fsscope cleanup')")
