"""The Setup screen's first frame is the whole screen (issue 33: its start-up within 2x a minimal
Textual app's, timed in bench/startup.py): the job's parameter panel is there and the focus
given with it (Textual moves it just after that frame), and a ctrl+r on it is answered."""

from __future__ import annotations

from pilot_wait import setup_ready, until
from textual.widgets import Input

from fsscope.tui import AppConfig, make_app
from fsscope.tui.screens.setup import SetupScreen
from fsscope.tui.widgets.job_picker import JobPicker

SIZE = (160, 48)


async def test_the_first_frame_is_the_whole_setup_screen_and_a_start_on_it_is_answered(scratch):
    missing = scratch / "no-such-dir"
    app = make_app(AppConfig(is_root=False, discover_devices=lambda: []))
    seen: dict = {}
    display = app._display  # where Textual hands every frame to the terminal

    def first_frame(screen, renderable) -> None:
        display(screen, renderable)
        if renderable is None or seen or not (isinstance(screen, SetupScreen) and screen.is_mounted):
            return
        seen.update(ready=screen.query_one("#job-picker", JobPicker).ready,
                    panels=len(screen.query("#params-probe")), shown=screen.query_one("#params-probe").display,
                    kind=screen.query_one("#target-picker").kind)
        screen.query_one("#target-path", Input).value = str(missing)
        screen.action_start()  # ctrl+r on the first frame

    app._display = first_frame
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await setup_ready(pilot, app)
        await until(pilot, lambda: app._notifications, "the answer to the ctrl+r")
        assert seen == {"ready": True, "panels": 1, "shown": True, "kind": "dir"}, seen
        text = "\n".join(f"{n.title}: {n.message}" for n in app._notifications)
        assert "Cannot start" in text and f"{missing} does not exist" in text, text
        assert app.current_mode == "setup" and app.focused is app.screen.query_one("#target-list")


async def test_a_pick_list_mounts_its_options_when_first_opened_and_picks_like_a_select(scratch):
    """The Setup screen's pick-lists (widgets/choice.Choice) are two widgets until opened (a
    Select is six): keys, type-to-search, a click and its value still work as a Select's."""
    from textual.widgets import Select
    from textual.widgets._select import SelectOverlay

    from fsscope.tui.widgets.choice import Choice

    app = make_app(AppConfig(is_root=False, discover_devices=lambda: []))
    async with app.run_test(size=SIZE) as pilot:
        await setup_ready(pilot, app)
        op = app.screen.query_one("#param-probe-op", Choice)
        trace = app.screen.query_one("#param-probe-trace", Choice)
        assert not app.screen.query(SelectOverlay), "no list is built before it is opened"
        assert len(op.query("*")) == 1 and op.region.height == 1  # its value and arrow: one line
        op.focus()
        await pilot.press("enter")
        await until(pilot, lambda: op.expanded and isinstance(app.focused, SelectOverlay), "the op's list open")
        await pilot.press(*"stat", "enter")
        await until(pilot, lambda: op.value == "stat" and not op.expanded and app.focused is op, "stat picked by typing")
        await pilot.press("down")  # opens it again, on the value
        await until(pilot, lambda: op.expanded, "the list open again")
        await pilot.press("down", "enter")
        await until(pilot, lambda: op.value not in ("stat", None) and not op.expanded, "the next op picked")
        picked = op.value
        params = app.screen.query_one("#params-probe")
        assert params.spec_dict()["op"] == picked
        await pilot.click(trace)
        await until(pilot, lambda: trace.expanded, "a click opens the trace's list")
        await pilot.press("escape")
        await until(pilot, lambda: not trace.expanded, "escape closes it")
        assert trace.value == "attribute" and params.spec_dict()["trace"] == "attribute"
        trace.value = "off"  # set as a Select's: the line redrawn
        await until(pilot, lambda: "off" in str(trace.query_one("ChoiceCurrent").render()), "the new value drawn")
        assert params.spec_dict()["trace"] == "off"
        assert isinstance(op, Select)
