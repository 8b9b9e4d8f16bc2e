"""``?`` lists the keys of the screen in front of you (issue 27): on setup, live, runs, a
replay, a comparison and the Lab, each list carries that screen's own keys (and its views'),
read from the real bindings, and ? closes it again. Driven by keys on real recorded runs."""

from __future__ import annotations

import re

from pilot_wait import until, until_screen
from test_tui import open_compare, runs_listed

from fsscope.tui import AppConfig, make_app
from fsscope.tui.screens.compare import CompareScreen
from fsscope.tui.screens.help import HelpScreen
from fsscope.tui.screens.keys import KeysScreen
from fsscope.tui.screens.lab import LabScreen
from fsscope.tui.screens.live import LiveScreen
from fsscope.tui.screens.runs import RunsScreen
from fsscope.tui.screens.setup import SetupScreen

SIZE = (160, 48)


def listed(keys: KeysScreen) -> dict[str, str]:
    """description → keys, over every section of the list."""
    return {description: key for _heading, rows in keys.sections for key, description in rows}


async def keys_of(pilot, app, screen_type: type) -> dict[str, str]:
    """Press ? on a ``screen_type`` screen; the keys it lists (after closing it with ?)."""
    assert isinstance(app.screen, screen_type), app.screen
    await pilot.press("question_mark")
    keys = await until_screen(pilot, app, KeysScreen, f"the keys of the {screen_type.__name__}")
    headings = [heading for heading, _rows in keys.sections]
    assert headings[0].startswith("This screen") and headings[-1] == "Everywhere", headings
    # widgets named in words ("Flags (when focused)", "The focused option list"), never by class
    assert not any(re.search(r"[a-z][A-Z]", heading) for heading in headings), headings
    shown = listed(keys)
    await pilot.press("question_mark")
    await until(pilot, lambda: isinstance(app.screen, screen_type), f"back on the {screen_type.__name__}")
    return shown


async def test_question_mark_lists_the_keys_of_the_screen_in_front(scratch, recorded_run):
    ids = [recorded_run("probe", {"files": 200, "runs": 2}, scratch) for _ in range(2)]
    app = make_app(AppConfig(is_root=False, discover_devices=lambda: []))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.focused is not None, "the first field focused")
        setup = await keys_of(pilot, app, SetupScreen)
        assert setup["Start"] == "^r" and setup["Help"] == "f1" and setup["Lab"] == "f5", setup

        await pilot.press("f3")
        await until(pilot, lambda: app.current_mode == "live", "the live screen")
        live = await keys_of(pilot, app, LiveScreen)
        # nothing runs: c is not offered, here as in the footer (issue 33)
        assert "Flags→MD" in live and "Cancel job" not in live, live

        await pilot.press("f4")
        await until(pilot, lambda: runs_listed(app, *ids), "both runs listed")
        runs = await keys_of(pilot, app, RunsScreen)
        assert runs["Compare 2"] == "c" and runs["Open"] == "⏎ / o", runs
        assert "Cancel job" not in runs  # the live screen's keys are not this screen's

        await pilot.press("enter")  # replay the highlighted run: heatmap keys appear
        await until(pilot, lambda: isinstance(app.screen, LiveScreen) and app.screen.shown_job is not None,
                    "the replay")
        replay = await keys_of(pilot, app, LiveScreen)
        assert {"zoom in", "fit", "bucket agg"} <= replay.keys(), replay
        await pilot.press("f4")
        await open_compare(pilot, app, *ids)
        compare = await keys_of(pilot, app, CompareScreen)
        assert compare["Back"] == "esc" and "Compare 2" not in compare, compare

        await pilot.press("f5")
        await until_screen(pilot, app, LabScreen)
        lab = await keys_of(pilot, app, LabScreen)
        assert lab["Run (quick)"] == "r" and lab["Replay runs"] == "o", lab

        await pilot.press("question_mark", "f1")  # F1 from the keys list: the full help
        await until_screen(pilot, app, HelpScreen)


async def test_slash_filters_the_runs_table(scratch, recorded_run):
    """/ then text: runs not containing it hide (any column); Enter keeps the filter and the
    cursor on what is shown; Escape clears it and every run is back."""
    ids = [recorded_run("probe", {"files": 100, "runs": 1}, scratch),
           recorded_run("syncwrite", {"buffer_sizes_bytes": [4096], "file_size_bytes": 64 << 10,
                                        "mode": "fdatasync", "repeats": 1}, scratch)]
    app = make_app(AppConfig(is_root=False, start_screen="runs"))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: runs_listed(app, *ids), "both runs listed")
        screen = app.screen
        table = screen.query_one("#runs-table")
        total = table.row_count
        await pilot.press("slash", *"syncwrite")
        await until(pilot, lambda: table.row_count < total, "the filter applied")
        shown = [key.value for key in table.rows]
        assert ids[1] in shown and ids[0] not in shown, shown
        assert all(r.manifest().get("job") == "syncwrite" for r in screen.runs)
        assert "containing “syncwrite”" in str(table.border_title)
        await pilot.press("enter")  # back to the rows, the filter kept: Enter opens the run shown
        await until(pilot, lambda: app.focused is table, "the table focused")
        assert screen._current().id in shown
        await pilot.press("slash", "escape")
        await until(pilot, lambda: table.row_count == total, "every run back")
        assert app.focused is table and "containing" not in str(table.border_title)


async def test_slash_filters_the_flags_and_keeps_their_positions():
    """On the live screen / filters the flags list; the flag picked in the filtered list is the
    one whose note shows (positions are the full list's); Escape lists them all again."""
    from fsscope.engine import events
    from fsscope.engine.registry import spec_from_data
    from fsscope.tui import messages as msg
    from fsscope.tui.model import JobState

    app = make_app(AppConfig(is_root=False, start_screen="live"))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.current_mode == "live", "the live screen")
        live = app.screen
        live.jobs = [JobState(0, "probe", spec_from_data("probe", {"files": 300, "runs": 5}))]
        live.post_message(msg.JobStarted(0, "probe", "run-x", "/nonexistent-run", 1))
        findings = [{"flag": "outlier", "index": i, "structure": None, "runs_flagged": 2, "runs": 2,
                     "title": f"file {i} slow in 2/2 runs", "note": f"note of file {i}"} for i in (11, 22, 33)]
        findings.append({"flag": "levelshift", "index": 40, "structure": None, "title": "level shift at file 40",
                         "note": "the step at 40"})
        for finding in findings:
            live.post_message(msg.FindingArrived(0, events.finding_from_dict(finding)))
        panel = live.flags_panel
        await until(pilot, lambda: panel.option_count == 4, "four flags listed")
        await pilot.press("slash", *"level")
        await until(pilot, lambda: panel.option_count == 1, "only the level shift listed")
        await pilot.press("enter")
        await until(pilot, lambda: app.focused is panel, "the flags list focused")
        await pilot.press("home")
        await until(pilot, lambda: "the step at 40" in live.notes.text, "the level shift's note")
        assert panel.position == 3 and "with “level”" in str(panel.border_title)
        await pilot.press("slash", "escape")
        await until(pilot, lambda: panel.option_count == 4, "all flags back")
        assert panel.position == 3 and panel.highlighted == 3  # still the level shift


async def test_question_mark_on_a_probe_lists_no_keys_of_a_view_not_shown(scratch, recorded_run):
    """A probe's replay lists the heatmap's and the flags' keys, not those of the bench view's
    tables that the live screen keeps hidden beside it (the walk at 160x48 saw "Latency per op
    (when focused)" with y, s and a table's cursor keys under a probe: issue 33, item 8)."""
    recorded_run("probe", {"files": 200, "runs": 2}, scratch)
    app = make_app(AppConfig(is_root=False, discover_devices=lambda: []))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.focused is not None, "the first field focused")
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen), "the runs screen")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LiveScreen) and app.screen.shown_job is not None,
                    "the replay")
        await pilot.press("question_mark")
        keys = await until_screen(pilot, app, KeysScreen, "the keys of the replay")
        headings = [heading for heading, _rows in keys.sections]
        assert "Latency per op (when focused)" not in headings, headings
        assert any(heading.startswith("Latency per file") for heading in headings), headings
        assert "Flags (when focused)" in headings, headings
