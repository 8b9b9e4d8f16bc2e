"""C code fsscope builds on first use with the system's compiler and loads via ctypes.

The shared object is cached under fsscope's home, named by the source's hash, built into a
temporary name and renamed (several jobs may build at once). As root it is loaded only from
a file root owns and no one else may write, in a directory the same holds for, through the
descriptor that was checked. Every C library fsscope loads (the personalities' worker loops,
the ager's op loop, the probe's timed loop) comes through here, so that check covers them
all. Without a compiler the callers run their Python loops, which stay the reference the C
ones are tested against.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from fsscope import paths, trust
from fsscope.errors import SafetyRefusal

# -ffp-contract=off: no fused multiply-add, so double arithmetic rounds as Python's does
CFLAGS = ("-O2", "-shared", "-fPIC", "-ffp-contract=off")


def library_path(source: Path, what: str) -> tuple[Path | None, str]:
    """The library built from ``source`` (building it if needed), or None and why not.
    ``what`` names it in a refusal ("C loops library")."""
    code = source.read_bytes()
    digest = hashlib.sha256(code).hexdigest()[:16]
    target = paths.home() / "lib" / f"fsscope-{source.stem}-{digest}.so"
    paths.check_home()  # code run as root is loaded only from a directory only root can write
    if os.path.lexists(target):
        os.close(trust.open_owned_file(target, what))
        return target, "built"
    compiler, why = find_compiler()
    if compiler is None:
        return None, why
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        proc = subprocess.run([compiler, *CFLAGS, "-o", tmp, str(source)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            lines = proc.stderr.strip().splitlines()
            return None, f"{compiler} failed on {source.name}: {lines[-1] if lines else proc.returncode}"
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target, "built"


def find_compiler() -> tuple[str | None, str]:
    """The C compiler to run (a real path), or None and why not, in one line: ``CC`` when it
    names a program no other user could have changed (:func:`fsscope.trust.trusted_program`),
    else the first ``cc`` or ``gcc`` on PATH that passes the same test -- a ``cc`` another
    user planted in a directory on PATH is passed over, never run."""
    cc = os.environ.get("CC")
    if cc:
        found = cc if "/" in cc else shutil.which(cc)
        if found is None:
            return None, f"CC={cc}: no such program"
        try:
            return trust.trusted_program(found, "the compiler CC"), ""
        except (SafetyRefusal, OSError) as exc:
            return None, str(exc)
    refused: list[str] = []
    for name in ("cc", "gcc"):
        for directory in os.get_exec_path():
            candidate = os.path.join(directory or ".", name)
            if not os.path.isfile(candidate) or not os.access(candidate, os.X_OK):
                continue
            try:
                return trust.trusted_program(candidate, "the C compiler"), ""
            except (SafetyRefusal, OSError) as exc:
                refused.append(str(exc))
    if refused:
        return None, refused[0]
    return None, "no C compiler (cc/gcc) found: install gcc (scripts/setup does)"


_LOADED: dict[tuple[int, int], ctypes.CDLL] = {}
"""Libraries loaded by this process, by the checked file's (device, inode)."""


def load(path: str | os.PathLike, what: str) -> ctypes.CDLL:
    """The library at ``path`` (from :func:`library_path`); ``what`` names it in a refusal."""
    fd = trust.open_owned_file(path, what)
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino)
    if key in _LOADED:
        os.close(fd)
        return _LOADED[key]
    try:  # dlopen the very file that was checked, not whatever the path names by then
        lib = ctypes.CDLL(f"/proc/self/fd/{fd}")
    except BaseException:
        os.close(fd)
        raise
    # The descriptor stays open while the library is loaded: the dynamic loader knows a
    # library by the name it was opened under, so a later library opened under the same
    # (reused) /proc/self/fd/N would be handed the first one instead.
    _LOADED[key] = lib
    return lib
