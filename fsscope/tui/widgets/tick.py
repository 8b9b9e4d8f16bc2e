"""A checkbox that draws ✓ when on and nothing when off: Textual's draws an X either way and
tells them apart by colour only (issue 27), which a newcomer, a light theme or a
screenshot does not."""

from __future__ import annotations

from textual.widgets import Checkbox


class Tick(Checkbox):
    @property
    def BUTTON_INNER(self) -> str:  # type: ignore[override]  # noqa: N802 - Textual's class attribute, read per render
        return "✓" if self.value else " "
