"""Waiting in tests on facts, never on a fixed time: :func:`wait_for` in plain tests (a child
process, a mount, a file), :func:`until` in Pilot tests.

``await pilot.pause()`` (no argument) returns once every widget of the screen has handled the
messages queued so far: enough after a key press whose effect is synchronous. What a worker
thread or a child process produces arrives later; wait for it with :func:`until`, which polls
with that same pause and fails with a clear message after a generous timeout (a loaded CI
machine is slow, never wrong)."""

from __future__ import annotations

import time
from collections.abc import Callable

TIMEOUT_S = 60.0


def wait_for(condition: Callable[[], object], what: str = "", timeout_s: float = TIMEOUT_S,
             interval_s: float = 0.05):
    """``condition()``'s first true value, polled every ``interval_s``; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for "
                                 f"{what or getattr(condition, '__name__', 'a condition')}")
        time.sleep(interval_s)


async def until(pilot, condition: Callable[[], object], what: str, timeout_s: float = TIMEOUT_S) -> None:
    """Return as soon as ``condition()`` is true (checked after each settled pause)."""
    deadline = time.monotonic() + timeout_s
    await pilot.pause()
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        await pilot.pause()


async def until_screen(pilot, app, screen_type: type, what: str = "", timeout_s: float = TIMEOUT_S):
    """Wait until the app shows a screen of ``screen_type``; return it."""
    await until(pilot, lambda: isinstance(app.screen, screen_type), what or f"the {screen_type.__name__}",
                timeout_s)
    return app.screen


async def setup_ready(pilot, app, timeout_s: float = TIMEOUT_S):
    """Wait until the Setup screen is whole: its jobs' parameter panels are mounted (issue 33:
    start-up), so a test reads or types into a field only then."""
    await until(pilot, lambda: app.screen.query("#job-picker") and app.screen.query_one("#job-picker").ready,
                "the Setup screen's job panels", timeout_s)
    return app.screen
