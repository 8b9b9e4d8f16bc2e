"""Errors that reach the user as one clear line and exit status 2."""

from __future__ import annotations

import errno
import re


class FsscopeError(Exception):
    """Bad input or a refused action: the message is the whole story, shown as one line."""

    exit_status = 2


class RecipeError(FsscopeError):
    """A recipe file that does not parse or validate; the message names the file and field."""


class SafetyRefusal(FsscopeError):
    """fsscope will not touch this device; the message says why."""


#: a tool's version banner ("dumpe2fs 1.47.0 (5-Feb-2023)", "mke2fs 1.46.5 (30-Dec-2021)")
_BANNER = re.compile(r"^[\w.+-]+ \d+(\.\d+)+(-\w+)? \([^)]*\)$")


class ToolError(FsscopeError):
    """An external tool exited non-zero. Keeps the command line and its stderr."""

    def __init__(self, cmd: list[str], rc: int, stderr: str):
        self.cmd = list(cmd)
        self.rc = rc
        self.stderr = stderr
        super().__init__(f"{cmd[0]} failed (exit {rc}): {self.summary}")

    @property
    def summary(self) -> str:
        """The tool's first meaningful stderr line (usage text after it is noise; a version
        banner before it, as e2fsprogs prints, says nothing of what failed)."""
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip() and not _BANNER.match(ln.strip())]
        return lines[0] if lines else "(no error output)"


# What a file-system error means where fsscope writes (the path says where).
_OS_HINTS = {
    errno.ENOSPC: "its file system is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "its file system is mounted read-only",
}


def os_error_line(exc: OSError) -> str:
    """An OSError as one readable line: what failed, on which path, and what it means
    (``No space left on device: /srv/out.json (its file system is full)``), never a repr."""
    what = exc.strerror or str(exc)
    where = ": ".join(str(name) for name in (exc.filename, exc.filename2) if name is not None)
    hint = _OS_HINTS.get(exc.errno or 0)
    line = f"{what}: {where}" if where else what
    return f"{line} ({hint})" if hint and where else line
