"""Keys reach the widget that has the focus when they are handled, not when they arrived.

Textual routes a key to the widget focused *when the app reads it from its queue*, but a
non-priority binding (Tab → next field, a click-then-key…) moves the focus only once the key
has gone to the focused widget and bubbled back up to the app. Typed fast, or on a busy app,
the keys behind a Tab were already routed to the field being left: "Tab 3 0" into a budget
left "30" in the previous field and a half-edited budget (issue 27). The job then ran with a
value nobody typed.

:class:`OrderedInput` holds every raw input event that arrives while a key is still on its
way, and lets the next one go only when the previous key has been handled all the way up: a
marker message posted to the same widget right behind the key bubbles up the same path, so
it reaches the app after the key did (message queues are first in, first out)."""

from __future__ import annotations

import time
from collections import deque

from textual import events
from textual.app import App
from textual.message import Message
from textual.widget import Widget

STUCK_AFTER_S = 2.0
"""A key whose widget went away (a screen closed under it) never reports back: after this
long, or as soon as its widget is detached, the held input goes on as Textual would route it."""


class KeyHandled(Message):
    """Posted right behind a key to the widget it went to; bubbles up to the app."""

    def __init__(self, serial: int) -> None:
        super().__init__()
        self.serial = serial


class OrderedInput(App):
    """An App whose keyboard, mouse and paste input is handled strictly in arrival order."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._held_input: deque[events.Event] = deque()
        self._key_serial = 0
        self._key_in_flight: tuple[int, Widget, float] | None = None
        """(serial, widget the key went to, monotonic time it went) of the key on its way."""

    def _on_mount(self, event: events.Mount) -> None:
        self.set_interval(0.2, self._release_if_stuck, name="key-order")

    @staticmethod
    def _raw_input(event: events.Event) -> bool:
        return isinstance(event, (events.InputEvent, events.Paste)) and not event.is_forwarded

    async def on_event(self, event: events.Event) -> None:
        if not self._raw_input(event):
            await super().on_event(event)
            return
        if self._key_in_flight is not None:
            self._held_input.append(event)
            return
        await self._route(event)

    async def _route(self, event: events.Event) -> None:
        await super().on_event(event)
        if isinstance(event, events.Key) and event.is_forwarded:  # not taken by a priority binding
            target = self.focused or self.screen
            self._key_serial += 1
            self._key_in_flight = (self._key_serial, target, time.monotonic())
            target.post_message(KeyHandled(self._key_serial))

    async def on_key_handled(self, message: KeyHandled) -> None:
        message.stop()
        if self._key_in_flight is not None and self._key_in_flight[0] == message.serial:
            self._key_in_flight = None
            await self._release_held()

    async def _release_held(self) -> None:
        while self._held_input and self._key_in_flight is None:
            await self._route(self._held_input.popleft())

    async def _release_if_stuck(self) -> None:
        if self._key_in_flight is None:
            return
        _, target, since = self._key_in_flight
        if not target.is_attached or time.monotonic() - since > STUCK_AFTER_S:
            self._key_in_flight = None
            await self._release_held()
