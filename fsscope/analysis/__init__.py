"""Pure analysis functions on numpy arrays: no I/O, no UI, no file-system calls."""

from types import ModuleType


def scipy_stats() -> ModuleType:
    """``scipy.stats``, imported on first use: it takes seconds to import on a busy machine, and
    the CLI's ``--help`` and the TUI's setup screen import the modules that use it for their types."""
    from scipy import stats

    return stats
