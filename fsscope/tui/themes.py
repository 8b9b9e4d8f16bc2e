"""Themes from ``themes/*.tcss``: each file is a list of TCSS variables, read into a Textual
Theme and registered in ``App.__init__`` (registering later breaks CSS that uses them).

File format (see themes/dark.tcss): a leading comment holding ``name: NAME`` and
``dark: true|false``, then ``$variable: value;`` lines. Textual's core colours ($primary,
$background, ...) become Theme fields; everything else ($heat-0 ... $heat-4, $heat-empty,
$heat-mark) becomes a theme variable the fsscope stylesheet and widgets use.
"""

from __future__ import annotations

import re
from pathlib import Path

from textual.theme import BUILTIN_THEMES, Theme

from fsscope import paths

CORE = ("primary", "secondary", "warning", "error", "success", "accent", "foreground",
        "background", "surface", "panel", "boost")

#: Fallbacks for themes that do not set them (every built-in Textual theme).
VARIABLE_DEFAULTS = {
    "heat-empty": "#1b1f24",
    "heat-0": "#0b2545",
    "heat-1": "#13678a",
    "heat-2": "#45a29e",
    "heat-3": "#f2c14e",
    "heat-4": "#ff4d4d",
    "heat-mark": "#ffffff",
}

FSSCOPE_THEMES = ("fsscope-dark", "fsscope-light", "fsscope-high-contrast")

_VAR = re.compile(r"^\s*\$([a-zA-Z0-9_-]+)\s*:\s*([^;]+);", re.MULTILINE)
_META = re.compile(r"^\s*(name|dark)\s*:\s*(\S+)", re.MULTILINE)


class ThemeFileError(ValueError):
    pass


def parse_theme(text: str, *, source: str = "<theme>") -> Theme:
    comment = text.split("*/", 1)[0] if text.lstrip().startswith("/*") else ""
    meta = {key: value for key, value in _META.findall(comment)}
    name = meta.get("name") or Path(source).stem
    dark = meta.get("dark", "true").lower() in ("true", "yes", "1")
    values = {key: value.strip() for key, value in _VAR.findall(text)}
    if "primary" not in values:
        raise ThemeFileError(f"{source}: a theme needs at least $primary")
    core = {key: values.pop(key) for key in CORE if key in values}
    return Theme(name=name, dark=dark, variables=values, **core)


def theme_names() -> list[str]:
    """fsscope's themes, then Textual's built-in ones: what ``--theme`` accepts."""
    return [theme.name for theme in load_themes()] + sorted(BUILTIN_THEMES)


def load_themes(directory: Path | None = None) -> list[Theme]:
    """Every theme file in ``themes/``; a broken file is skipped (and reported by the app)."""
    directory = directory or paths.themes_dir()
    themes = []
    for path in sorted(directory.glob("*.tcss")):
        try:
            themes.append(parse_theme(path.read_text(), source=str(path)))
        except (OSError, ThemeFileError):
            continue
    return themes
