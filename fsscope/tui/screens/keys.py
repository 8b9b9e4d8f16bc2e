"""``?``: the keys of the screen in front of you, read from its live bindings (the screen's,
its views', the focused widget's, then the app's), so the list can never drift from what the
keys really do. F1 is the full help."""

from __future__ import annotations

import re

from textual.actions import parse
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import DataTable, Static

from fsscope.tui.screens.help import HelpScreen


def _offered(node: DOMNode, action: str) -> bool:
    """Whether ``node`` offers ``action`` now (a replay has no job to cancel: the footer hides
    c, and so does this list)."""
    _, name, parameters = parse(action)
    try:
        return node.check_action(name, parameters) is not False
    except Exception:  # a check that needs a state the node is not in: listed, as before
        return True


def _key_rows(node: DOMNode) -> list[tuple[str, str]]:
    """(keys, description) for each action bound on ``node``, keys joined, in binding order."""
    app = node.app
    grouped: dict[tuple[str, str], list[str]] = {}
    for key, bindings in node._bindings.key_to_bindings.items():
        for binding in bindings:
            if binding.system or not binding.description or not _offered(node, binding.action):
                continue
            display = app.get_key_display(Binding(key, binding.action, binding.description))
            keys = grouped.setdefault((binding.action, binding.description), [])
            if display not in keys:
                keys.append(display)
    # fsscope's own keys first, then those every screen or widget of their kind has (tab, copy)
    own = {b.action if isinstance(b, Binding) else b[1]
           for cls in type(node).__mro__ if cls.__module__.startswith("fsscope.")
           for b in cls.__dict__.get("BINDINGS", [])}
    rows = sorted(grouped.items(), key=lambda item: item[0][0] not in own)
    return [(" / ".join(keys), description) for (_action, description), keys in rows]


def widget_name(widget: Widget) -> str:
    """What the user calls ``widget``: its panel's title without its counts ("Flags" for
    "Flags (25) · 10 withdrawn"), else its kind in words ("heat view"), never a class name."""
    title = widget.border_title
    if isinstance(title, str) and title.strip():
        return re.split(r"\s*[(·]", title.strip(), maxsplit=1)[0]
    return re.sub(r"(?<!^)(?=[A-Z])", " ", type(widget).__name__).lower()


def _own_bindings(widget: Widget) -> bool:
    """Widgets of fsscope that bind keys of their own (the views: heatmap, bench, variation…)."""
    return any(cls.__module__.startswith("fsscope.") and "BINDINGS" in cls.__dict__
               for cls in type(widget).__mro__)


def key_sections(screen: Screen) -> list[tuple[str, list[tuple[str, str]]]]:
    """The sections of the keys list for ``screen``: heading and (keys, description) rows."""
    name = (screen.sub_title or type(screen).__name__.removesuffix("Screen")).strip()
    sections = [(f"This screen ({name})", _key_rows(screen))]
    focused = screen.focused
    shown: set[int] = set()
    kinds: set[type] = set()
    for widget in screen.query(Widget):
        # shown, not merely displayed in a view the live screen keeps hidden (a probe's screen
        # holds the bench view's tables too)
        shown_now = all(node.display for node in widget.ancestors_with_self if isinstance(node, Widget))
        if shown_now and _own_bindings(widget):
            shown.add(id(widget))
            if type(widget) in kinds:  # several tables: their keys once
                continue
            kinds.add(type(widget))
            sections.append((f"{widget_name(widget).capitalize()} (when focused)", _key_rows(widget)))
    if focused is not None and id(focused) not in shown:
        sections.append((f"The focused {widget_name(focused)}", _key_rows(focused)))
    sections.append(("Everywhere", _key_rows(screen.app)))
    return [(heading, rows) for heading, rows in sections if rows]


class KeysScreen(ModalScreen[None]):
    """A modal list of the keys of ``screen``; ? or Escape closes it, F1 opens the full help."""

    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close"),
        Binding("f1", "full_help", "Full help"),
    ]
    DEFAULT_CSS = """
    KeysScreen { align: center middle; }
    KeysScreen > VerticalScroll { width: auto; max-width: 96%; height: auto; max-height: 94%;
                                  border: round $primary; background: $surface; padding: 0 1; }
    KeysScreen .keys-heading { text-style: bold; color: $accent; margin-top: 1; width: auto; }
    KeysScreen DataTable { width: auto; height: auto; }
    """

    def __init__(self, screen: Screen) -> None:
        super().__init__()
        self.sections = key_sections(screen)
        """(heading, [(keys, description)]) as listed, for the tests and the snapshot."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="keys-scroll") as scroll:
            scroll.border_title = "Keys (? or Esc closes, F1 full help)"
            for heading, rows in self.sections:
                yield Static(heading, classes="keys-heading")
                table: DataTable = DataTable(show_header=False, cursor_type="none", classes="keys-table")
                table.add_columns("key", "what it does")
                table.add_rows(rows)
                yield table

    def on_mount(self) -> None:
        self.query_one("#keys-scroll").focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_full_help(self) -> None:
        self.dismiss(None)
        self.app.push_screen(HelpScreen())
