"""What every screen of the fsscope app shares: the app as the :class:`FsscopeApp` it is (its
config, its plans), typed (Textual types ``self.app`` as any App), and one layout per size."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from textual import events
from textual.geometry import Size
from textual.screen import Screen

if TYPE_CHECKING:
    from fsscope.tui.app import FsscopeApp


class AppScreen(Screen[Any]):
    _resized_to: Size | None = None
    """The size this screen last handled a Resize for, since it was last shown."""
    _shown = False

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name, id, classes)
        # The size classes (-narrow/-wide, -short/-tall) of the terminal as it is, before the
        # children are styled: Textual adds them at the first resize, and every widget of the
        # screen was styled again for it (the Setup screen's start-up, bench/startup.py).
        try:
            width, height = self.app.size
        except Exception:  # noqa: BLE001 - no app running (built in a test): the resize sets them
            return
        horizontal = (self.app.HORIZONTAL_BREAKPOINTS if self.HORIZONTAL_BREAKPOINTS is None
                      else self.HORIZONTAL_BREAKPOINTS) or []
        vertical = (self.app.VERTICAL_BREAKPOINTS if self.VERTICAL_BREAKPOINTS is None
                    else self.VERTICAL_BREAKPOINTS) or []
        on = self._get_breakpoint_classes(width, horizontal) | self._get_breakpoint_classes(height, vertical)
        self.update_classes({name: name in on for _, name in horizontal + vertical}, update=False)

    def _on_screen_resume(self, event: events.ScreenResume) -> None:
        # Shown the first time, its widgets were styled as they were mounted, just now: Textual
        # styles them all again here (Screen's handler runs after this one), needed only when
        # the screen comes back (a theme may have changed meanwhile).
        if not self._shown:
            self._shown = True
            event.refresh_styles = False

    @property
    def fs_app(self) -> FsscopeApp:
        return cast("FsscopeApp", self.app)

    async def _on_resize(self, event: events.Resize) -> None:
        # Textual hands a screen the terminal's size again when it has not changed -- at start
        # three times: after its first layout, for the driver's first size, and once more when
        # idle -- and lays out and repaints the whole screen each time: half the Setup screen's
        # start-up after its first frame (bench/startup.py). A size handled already (while the
        # screen was shown) changes nothing, its breakpoint classes included.
        # (Textual calls each class's handler in turn: Screen's runs after this one unless
        # prevented.)
        if event.size == self._resized_to:
            event.stop()
            event.prevent_default()
            return
        self._resized_to = event.size

    def _on_screen_suspend(self) -> None:
        # hidden, it misses resizes (a screen below a dialog is laid out but not given the
        # breakpoint classes): the next size is handled whatever it is (Screen's handler
        # runs after this one)
        self._resized_to = None
