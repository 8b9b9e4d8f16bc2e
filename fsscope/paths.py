"""Where fsscope keeps its data: run records, images, the state journal.

``FSSCOPE_HOME`` overrides the base directory (tests give every session its own).
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
"""What fsscope ships (recipes, aging profiles, factor spaces, themes): inside the package, so
an installed wheel carries them (package data in pyproject.toml), not beside it in the checkout."""


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
    return Path(os.environ.get("FSSCOPE_RECIPES") or DATA_DIR / "recipes")


def themes_dir() -> Path:
    return DATA_DIR / "themes"
