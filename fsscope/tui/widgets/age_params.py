"""The aging job's panel: the profile (picked from the shipped ones), how full, the seed, a
time limit in minutes, the fit confidence to stop at, and fallocate. Small first-try
defaults: profile small, one minute at most. Extra mkfs options (ext4 ``-i 4096`` for
profiles of small files) go in the recipe's "+mkfs" field."""

from __future__ import annotations

from typing import Any

from fsscope.aging import list_profiles
from fsscope.tui.widgets.job_params import JobParams


def shipped_profiles() -> tuple[str, ...]:
    try:
        return tuple(list_profiles())
    except Exception:  # noqa: BLE001 - no profile list: the field is typed instead
        return ()


class AgeParams(JobParams):
    FIELDS = ("profile", "fullness", "seed", "max_seconds", "confidence", "fallocate")
    DEFAULTS = {"max_seconds": 60.0}
    LABELS = {"max_seconds": "max minutes"}
    HINTS = {
        "profile": "file-size, depth and age distributions to age towards ('fsscope profile list')",
        "fullness": "fraction to fill, e.g. 0.5 (empty: the profile's)",
        "seed": "every choice follows it: same seed, same operation sequence",
        "max_seconds": "stop aging after this many minutes (empty: no limit)",
        "confidence": "stop once every fit's p-value is >= this, e.g. 0.9 (empty: off)",
        "fallocate": "allocate files with fallocate instead of writing them",
    }

    def choices(self, name: str) -> tuple | None:
        if name != "profile":
            return None
        profiles = shipped_profiles()
        current = self.values.get("profile")
        if profiles and current and current not in profiles:  # a .toml path given by the caller
            profiles = (str(current), *profiles)
        return profiles or None

    def _text(self, name: str, value: Any) -> str:
        if name == "max_seconds" and value is not None:
            return f"{float(value) / 60:g}"
        return super()._text(name, value)

    def _parse_text(self, name: str, kind: str, text: str) -> Any:
        if name == "max_seconds":
            return float(super()._parse_text(name, "float", text)) * 60
        return super()._parse_text(name, kind, text)
