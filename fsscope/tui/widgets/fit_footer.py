"""The footer, its keys fitted to the width: Textual's footer cuts the last keys off mid-label
when they do not fit (at 80 columns the live screen's ran to ~130). Narrower than
:data:`COMPACT_BELOW` the keys lose their padding and the command palette's key goes (ctrl+p
still opens it); still too wide, the app's own keys go first -- theme, SVG, then the screens
(F5 … F2) -- then the rightmost, until what is left fits, and a last key, ``? keys``, says where
every key is listed. Help (F1) stays."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

COMPACT_BELOW = 120
"""Columns under which the keys lose their padding."""
DROP_FIRST = ("next_theme", "export_svg", "lab", "mode('runs')", "mode('live')", "mode('setup')")
"""The app's keys a narrow footer leaves out first (the keys screen lists them all)."""
KEEP = ("help",)


class FitFooter(Footer):
    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey) and not widget.has_class("-command-palette"):
                # born as compact as the footer: a key starts compact and is bound to the
                # footer's (not compact) only once mounted, each change restyling it, every
                # time the keys change (the Setup screen's wait for its job panel,
                # bench/startup.py); the palette's key is not bound, it stays compact
                widget.set_reactive(FooterKey.compact, self.compact)
                widget.set_class(self.compact, "-compact", update=False)
            yield widget
        if self._bindings_ready:
            key = Binding("question_mark", "keys", "keys")
            more = FooterKey(key.key, self.app.get_key_display(key), key.description, key.action,
                             classes="-all-keys")
            more.display = False
            more.set_reactive(FooterKey.compact, self.compact)
            more.set_class(self.compact, "-compact", update=False)
            yield more.data_bind(compact=Footer.compact)

    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self.fit)

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit)

    def fit(self) -> None:
        """Show the keys that fit the footer's width, leaving out the least needed first."""
        width = self.size.width
        if not width or not self.is_attached:
            return
        self.compact = width < COMPACT_BELOW
        keys = [k for k in self.query(FooterKey) if k.parent is self and not k.has_class("-all-keys")]
        more = [k for k in self.query(FooterKey) if k.has_class("-all-keys")]
        palette = [k for k in keys if k.has_class("-command-palette")]
        keys = [k for k in keys if k not in palette]
        for key in palette:
            key.display = not self.compact
        margin = 1 if self.compact else 0

        def cost(key: FooterKey) -> int:
            return len(key.render().plain) + margin

        # what else the footer holds (a group's keys and label) takes its room as laid out
        fixed = sum(child.outer_size.width for child in self.children
                    if child not in keys and child not in palette and child not in more and child.display)
        room = width - fixed - (sum(cost(k) + 2 for k in palette) if not self.compact else 0)
        order = [k for action in DROP_FIRST for k in keys if k.action.removeprefix("app.") == action]
        order += [k for k in reversed(keys) if k not in order and k.action.removeprefix("app.") not in KEEP]
        shown = set(keys)
        total = sum(cost(k) for k in keys)
        extra = cost(more[0]) if more else 0
        for key in order:
            if total <= room:
                break
            if len(shown) == len(keys):  # the first to go: room for "? keys" too
                room -= extra
            shown.discard(key)
            total -= cost(key)
        for key in keys:
            key.display = key in shown
        for key in more:
            key.display = len(shown) < len(keys)
