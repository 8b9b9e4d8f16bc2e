"""The one way fsscope runs external tools (mkfs, mount, losetup, xfs_info, ...).

Every call goes through :func:`run`, which captures stdout and stderr, raises
:class:`~fsscope.errors.ToolError` with the tool's own stderr on failure, and reports the
command and its outcome to the listeners in :data:`listeners` (the job engine forwards them
as ``log`` events, so the TUI's log panel and the run manifest show every command).
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fsscope.errors import FsscopeError, ToolError

if TYPE_CHECKING:
    import sh


@dataclass(frozen=True)
class CommandRecord:
    argv: tuple[str, ...]
    rc: int
    duration_s: float
    stdout: str
    stderr: str

    @property
    def line(self) -> str:
        return shlex.join(self.argv)


listeners: list[Callable[[CommandRecord], None]] = []

# Tools speak English to us whatever the user's locale: their output is parsed
# (dumpe2fs "Block size:", xfs_info, btrfs dump-super) and their errors quoted.
_UNTRANSLATED = {"LC_ALL": "C"}

# Where each tool comes from, so a missing one gets an actionable message.
PACKAGE_OF = {
    "mkfs.ext4": "e2fsprogs", "mke2fs": "e2fsprogs", "dumpe2fs": "e2fsprogs", "debugfs": "e2fsprogs",
    "tune2fs": "e2fsprogs", "e2freefrag": "e2fsprogs", "mkfs.xfs": "xfsprogs",
    "xfs_info": "xfsprogs", "xfs_db": "xfsprogs", "xfs_spaceman": "xfsprogs", "xfs_io": "xfsprogs", "mkfs.btrfs": "btrfs-progs",
    "btrfs": "btrfs-progs", "mkfs.f2fs": "f2fs-tools", "losetup": "util-linux",
    "mount": "mount", "umount": "mount", "blkid": "util-linux", "wipefs": "util-linux",
    "blkdiscard": "util-linux",
    "fio": "fio", "openssl": "openssl",
}


def require(tool: str) -> str:
    """Path of ``tool``, or a clear error naming the package that provides it."""
    path = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin:/usr/bin:/bin")
    if path is None:
        pkg = PACKAGE_OF.get(tool, tool)
        raise FsscopeError(f"{tool} not found: install the '{pkg}' package (scripts/setup installs it)")
    return path


def run(*argv: str, ok_codes: tuple[int, ...] = (0,), timeout_s: float | None = None,
        input_text: str | None = None, own_group: bool = False) -> str:
    """Run ``argv`` and return its stdout; raise ToolError(cmd, rc, stderr) on failure."""
    return capture(*argv, ok_codes=ok_codes, timeout_s=timeout_s, input_text=input_text,
                   own_group=own_group).stdout


def capture(*argv: str, ok_codes: tuple[int, ...] = (0,), timeout_s: float | None = None,
            input_text: str | None = None, own_group: bool = False) -> CommandRecord:
    """Run ``argv`` and return its whole record; raise ToolError on an exit code not in ok_codes.

    ``own_group``: the tool leads its own process group, out of reach of a cancel (SIGTERM to
    the job's process group) — for the umount and losetup -d that undo a target, which must
    finish. The job's cgroup still holds it: a kill of the job still takes it.

    No timeout by default: with one, sh polls the child every 0.1 s, which adds 0.1 s to every
    command (measured) — too much for a probe that formats a file system per run."""
    import sh  # here: it reads its own version through importlib.metadata, ~10% of what the
    # Setup screen imports before its first frame, which runs no tool

    argv = tuple(str(a) for a in argv)
    cmd = sh.Command(require(argv[0]))
    t0 = time.monotonic()
    try:
        proc = cmd(*argv[1:], _return_cmd=True, _tty_out=False, _ok_code=list(ok_codes),
                   _in=input_text, _bg=True, _bg_exc=False, _env=os.environ | _UNTRANSLATED,
                   _timeout=timeout_s or None, _new_group=own_group)
        try:
            proc.wait()
        except (KeyboardInterrupt, SystemExit):  # a job interrupted while it waits: the tool
            _kill_and_reap(proc)                 # must not run on, unwaited, into the cleanup
            raise
        rc, out, err = proc.exit_code, proc.stdout, proc.stderr
    except sh.ErrorReturnCode as exc:
        rc, out, err = exc.exit_code, exc.stdout, exc.stderr
    except sh.TimeoutException:
        rc, out, err = -9, b"", f"timed out after {timeout_s} s".encode()
    record = CommandRecord(argv, rc, time.monotonic() - t0,
                           out.decode(errors="replace"), err.decode(errors="replace"))
    for listener in list(listeners):
        listener(record)
    if rc not in ok_codes:
        raise ToolError(list(argv), rc, record.stderr or record.stdout)
    return record


def _kill_and_reap(proc: sh.RunningCommand) -> None:
    import sh

    try:
        proc.kill()
        proc.wait()
    except (sh.ErrorReturnCode, sh.SignalException, ProcessLookupError):
        pass


def version(tool: str) -> str:
    """First line of the tool's version output, or 'missing'."""
    flags = {"mkfs.xfs": "-V", "losetup": "--version", "btrfs": "--version",
             "fio": "--version", "mkfs.f2fs": "-V"}
    try:
        if tool == "mkfs.ext4":
            rec = capture("mke2fs", "-V", ok_codes=(0, 1))
        else:
            rec = capture(tool, flags.get(tool, "--version"), ok_codes=(0, 1, 2, 16))
    except FsscopeError:
        return "missing"
    lines = [ln for ln in (rec.stdout + rec.stderr).splitlines() if ln.strip()]
    return lines[0].strip() if lines else "unknown"
