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
        last = stderr.strip().splitlines()[-1] if stderr.strip() else "(no stderr)"
        super().__init__(f"{cmd[0]} failed (exit {rc}): {last}")
