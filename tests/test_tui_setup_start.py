"""The Setup screen is painted before the jobs' parameter panels are mounted (issue 33: its
start-up within 2x a minimal Textual app's, timed in bench/startup.py); what a user does in
between is not lost: a ctrl+r is answered once the panels are there, and the focus comes then."""

from __future__ import annotations

from pilot_wait import setup_ready, until
from textual.widgets import Input

from fsscope.tui import AppConfig, make_app
from fsscope.tui.screens.setup import SetupScreen
from fsscope.tui.widgets.job_picker import JobPicker

SIZE = (160, 48)


async def test_the_first_frame_comes_before_the_job_panel_and_an_early_start_is_answered(scratch):
    missing = scratch / "no-such-dir"
    app = make_app(AppConfig(is_root=False, discover_devices=lambda: []))
    seen: dict = {}
    display = app._display  # where Textual hands every frame to the terminal

    def first_frame(screen, renderable) -> None:
        display(screen, renderable)
        if renderable is None or seen or not (isinstance(screen, SetupScreen) and screen.is_mounted):
            return
        seen.update(ready=screen.query_one("#job-picker", JobPicker).ready,
                    panels=len(screen.query("#params-probe")), focused=app.focused,
                    kind=screen.query_one("#target-picker").kind)
        screen.query_one("#target-path", Input).value = str(missing)
        screen.action_start()  # ctrl+r before the job's panel is mounted

    app._display = first_frame
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await setup_ready(pilot, app)
        await until(pilot, lambda: app._notifications, "the answer to the early ctrl+r")
        assert seen == {"ready": False, "panels": 0, "focused": None, "kind": "dir"}, seen
        text = "\n".join(f"{n.title}: {n.message}" for n in app._notifications)
        assert "Cannot start" in text and f"{missing} does not exist" in text, text
        assert app.current_mode == "setup" and app.focused is app.screen.query_one("#target-list")
        assert app.screen.query_one("#params-probe").display
