"""The aging state file ``<root>/.fsscope-aging.json``: read, reserved, saved atomically.

What it holds and why it is padded: see :mod:`fsscope.aging.ager` (State).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fsscope.aging.errors import AgingError
from fsscope.aging.executor import FULL_ERRNOS
from fsscope.aging.profile import AGING_STATE_FILE

STATE_FILE = AGING_STATE_FILE
STATE_VERSION = 1
STATE_RESERVE_BYTES = 32 << 10  # state files are padded to this (RNG state ~7 KB)


def state_path(root: Path) -> Path:
    return Path(root) / STATE_FILE


def read_state(root: Path) -> dict | None:
    """The saved aging state of ``root``, or None if it was never aged by fsscope."""
    path = state_path(root)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AgingError(f"{path}: unreadable aging state: {exc.strerror}") from None
    if not text.strip():
        return None  # only the reservation: the run died before its first save
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AgingError(f"{path}: unreadable aging state: {exc}") from None
    if data.get("version") != STATE_VERSION:
        raise AgingError(f"{path}: aging state version {data.get('version')!r} is not "
                         f"{STATE_VERSION}")
    return data


def _padded(text: str) -> bytes:
    data = text.encode()
    size = -(-(len(data) + 1) // STATE_RESERVE_BYTES) * STATE_RESERVE_BYTES
    return data + b" " * (size - len(data) - 1) + b"\n"


def reserve_state_file(root: Path) -> None:
    """Allocate the state file before measuring, so a full file system still takes the last save."""
    path = state_path(root)
    if not path.exists():
        path.write_bytes(_padded(""))


def write_state(root: Path, state: dict) -> str:
    """Save atomically (temp + rename); on a full file system overwrite the reserved blocks.

    Returns "" or why the state could not be saved (the tree stays the truth on resume).
    """
    path = state_path(root)
    data = _padded(json.dumps(state, separators=(",", ":")))
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return ""
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno not in FULL_ERRNOS:
            raise
    try:  # same size as before, so no new blocks on ext4/xfs/tmpfs
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)
        return ""
    except OSError as exc:
        return f"the state file could not be updated ({exc.strerror})"
