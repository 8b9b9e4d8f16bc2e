"""Where fsscope keeps its data: run records, images, the state journal.

``FSSCOPE_HOME`` overrides the base directory (tests give every session its own).
"""

from __future__ import annotations

import os
from pathlib import Path

from fsscope import trust

DATA_DIR = Path(__file__).resolve().parent / "data"
"""What fsscope ships beside its code (the recorded noise model): package data (pyproject.toml)."""
RECIPES_DIR = Path(trust.SHIPPED_RECIPES)
"""The shipped recipes, aging profiles (``aging/``) and factor spaces (``spaces/``): ``recipes/``
at the repository's top level, which the wheel carries inside the package (setup.py)."""
THEMES_DIR = Path(trust.SHIPPED_THEMES)
"""The shipped themes: ``themes/`` at the repository's top level, in the wheel as ``recipes/`` is."""


def home() -> Path:
    env = os.environ.get("FSSCOPE_HOME")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "fsscope"


def runs_dir() -> Path:
    return home() / "runs"


def state_dir() -> Path:
    """The journal of attached loops and mounts, and default mount points."""
    return home() / "state"


def images_dir() -> Path:
    return home() / "images"


def recipes_dir() -> Path:
    """The shipped recipes (``FSSCOPE_RECIPES`` replaces them: tests, a site's own set)."""
    return Path(os.environ.get("FSSCOPE_RECIPES") or RECIPES_DIR)


def themes_dir() -> Path:
    return THEMES_DIR


def ram_dir(*, checked: bool = True) -> Path:
    """Where RAM images go ($FSSCOPE_RAM_DIR, default /dev/shm; tests give each session its own).
    ``checked``: refused if another user may rename entries there (what root makes files in)."""
    where = Path(os.environ.get("FSSCOPE_RAM_DIR", "/dev/shm"))
    if checked:
        trust.check_work_dir(where, "FSSCOPE_RAM_DIR")
    return where


def disk_dir() -> Path:
    """Where images that must live on this machine's disk go (a study's ``device = "disk"``)."""
    where = Path(os.environ.get("FSSCOPE_DISK_DIR", "/var/tmp"))
    trust.check_work_dir(where, "FSSCOPE_DISK_DIR")
    return where


def check_home() -> None:
    """As root, refuse a data directory another user could write: fsscope loads code from
    ``lib/`` and undoes what ``state/journal/`` names. One line saying why and how to fix it."""
    base = home()
    fix = (f"as root, fsscope's data must be root's own: 'chown -R root: {base} && chmod -R go-w {base}', "
           "or point FSSCOPE_HOME at a directory only root can write")
    for path in (base, base / "lib", state_dir(), state_dir() / "journal"):
        trust.check_private_dir(path, "fsscope data directory", fix)
