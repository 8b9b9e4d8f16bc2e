"""What every screen of the fsscope app shares: the app as the :class:`FsscopeApp` it is (its
config, its plans), typed (Textual types ``self.app`` as any App)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from textual.screen import Screen

if TYPE_CHECKING:
    from fsscope.tui.app import FsscopeApp


class AppScreen(Screen[Any]):
    @property
    def fs_app(self) -> FsscopeApp:
        return cast("FsscopeApp", self.app)
