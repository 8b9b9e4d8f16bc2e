"""Errors that reach the user as one clear line and exit status 2."""

from __future__ import annotations


class FsscopeError(Exception):
    """Bad input or a refused action: the message is the whole story, shown as one line."""

    exit_status = 2


class RecipeError(FsscopeError):
    """A recipe file that does not parse or validate; the message names the file and field."""


class SafetyRefusal(FsscopeError):
    """fsscope will not touch this device; the message says why."""


class ToolError(FsscopeError):
    """An external tool exited non-zero. Keeps the command line and its stderr."""

    def __init__(self, cmd: list[str], rc: int, stderr: str):
        self.cmd = list(cmd)
        self.rc = rc
        self.stderr = stderr
        super().__init__(f"{cmd[0]} failed (exit {rc}): {self.summary}")

    @property
    def summary(self) -> str:
        """The tool's first meaningful stderr line (usage text after it is noise)."""
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip()]
        return lines[0] if lines else "(no error output)"
