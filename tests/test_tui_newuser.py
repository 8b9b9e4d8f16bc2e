"""The investigator as a new user meets it (issue 12): what is on screen must be true.

Each test drives the real app with Pilot and reads what the screen shows (the exported
screenshot), waiting on conditions (a message handled, a value reached), never on a fixed pause.
"""

from __future__ import annotations

import html
import os
import re

import pytest
from pilot_wait import until
from test_tui import live_app

from fsscope.engine import events
from fsscope.engine.registry import spec_from_data
from fsscope.format import format_ns
from fsscope.tui import AppConfig, make_app
from fsscope.tui import messages as msg
from fsscope.tui.model import JobState
from fsscope.tui.widgets.heatmap import Heatmap

SIZE = (160, 48)


def screen_text(app) -> str:
    """What the terminal shows, as text (tags of the SVG screenshot stripped)."""
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


def legend_line(app) -> str:
    text = screen_text(app)
    line = next((ln for ln in text.splitlines() if "log scale, mid" in ln), "")
    assert line, "no legend on screen"
    return line


def start_probe(live, index: int, files: int, runs: int, run_id: str) -> None:
    live.jobs = [JobState(i, "probe", spec_from_data("probe", {"files": files, "runs": runs})) for i in range(index + 1)]
    live.views = {}
    live.post_message(msg.JobStarted(index, "probe", run_id, "/nonexistent-run", 1))


async def test_legend_always_shows_the_scale_the_cells_use():
    """Batches whose latencies widen the range: after each one is drawn, the legend on screen
    names the heatmap's current low and high ends (it used to keep 1 µs … 1 ms)."""
    async with live_app(SIZE) as (app, pilot, live):
        start_probe(live, 0, files=300, runs=2, run_id="run-a")
        await until(pilot, lambda: live.shown == 0, "the job's view")
        heatmap = live.query_one("#heatmap", Heatmap)
        batches = [(0, [45_000] * 100), (100, [20_000] * 50 + [1_580_000] * 50), (200, [9_000_000] * 100)]
        for n, (start, latency_ns) in enumerate(batches, 1):
            live.post_message(msg.SamplesArrived(0, 0, start, latency_ns, float(n)))
            expected = start + len(latency_ns)
            await until(pilot, lambda n=expected: live.views[0].matrix.measured == n, "the batch")
            await pilot.pause()
            low_ns, high_ns = heatmap.scale_ns
            line = legend_line(app)
            assert format_ns(low_ns) in line and format_ns(high_ns) in line, (line, low_ns, high_ns)
        assert heatmap.scale_ns[0] < 20_000 and heatmap.scale_ns[1] >= 9_000_000


async def test_a_second_job_shows_nothing_of_the_first():
    """Cursor line, calls/s reading, colour scale: a new job's view starts empty."""
    async with live_app(SIZE) as (app, pilot, live):
        start_probe(live, 0, files=200, runs=2, run_id="run-a")
        await until(pilot, lambda: live.shown == 0, "the first job's view")
        for run in range(2):
            live.post_message(msg.SamplesArrived(0, run, 0, [38_100 + run] * 200, 1.0 + run))
        await until(pilot, lambda: live.views[0].matrix.measured == 400, "the first job's samples")
        heatmap = live.query_one("#heatmap", Heatmap)
        heatmap.focus()
        await pilot.press("right", "down")
        await until(pilot, lambda: "cursor: run 2" in screen_text(app), "the cursor reading")
        assert "/s" in screen_text(app)  # a calls/s reading of the first job
        first_scale = heatmap.scale_ns

        start_probe(live, 1, files=50, runs=1, run_id="run-b")
        await until(pilot, lambda: live.shown == 1, "the second job's view")
        await pilot.pause()
        text = screen_text(app)
        assert "cursor: run 2" not in text and "38.1 µs" not in text
        rate_row = next(ln for ln in text.splitlines() if "calls/s" in ln or "rate" in ln)
        assert "/s" not in rate_row.split("calls/s")[-1], rate_row
        assert heatmap.matrix is live.views[1].matrix and heatmap.matrix.measured == 0
        assert heatmap.scale_ns != first_scale  # back to the default until the new job's data


def record_smoke_runs(scratch, count: int) -> list[str]:
    """Real recorded runs (the smoke job on a plain directory: no root, under a second)."""
    from fsscope.engine import runner
    from fsscope.targets import TargetSpec

    ids = []
    for _ in range(count):
        handle = runner.start("smoke", spec_from_data("smoke", {"duration_s": 0.2}), TargetSpec("dir", path=str(scratch)), None)
        handle.drain()
        ids.append(handle.run_dir.id)
    return ids


def exported(pattern: str) -> list:
    from fsscope import paths

    return sorted((paths.home() / "exports").glob(pattern))


async def focus_a_parameter(pilot, app):
    """Focus a setup screen field that takes any text (an integer field refuses letters) once
    the screen has a focus; return it: the directory target's path (the probe's panel has no
    such field; a hidden panel of another job, mounted at start, used to lend one)."""
    from textual.widgets import Input

    await until(pilot, lambda: app.focused is not None, "the first focus")
    field = app.screen.query_one("#target-path", Input)
    assert field.type == "text" and not field.disabled
    field.focus()
    await until(pilot, lambda: app.focused is field, "the field's focus")
    return field


async def test_focus_after_returning_to_setup_is_not_in_a_field():
    """Typing into a parameter field, going to Live and back with F2: the focus is on the
    target list again, so space/x/m do not type into the field unseen."""
    from textual.widgets import Input

    app = make_app(AppConfig(is_root=False))
    async with app.run_test(size=SIZE) as pilot:
        field = await focus_a_parameter(pilot, app)
        before = field.value
        await pilot.press("f3")
        await until(pilot, lambda: app.current_mode == "live", "the live screen")
        await pilot.press("f2")
        await until(pilot, lambda: app.current_mode == "setup" and app.focused is not None, "setup again")
        assert not isinstance(app.focused, Input), app.focused
        await pilot.press("space")
        assert field.value == before


async def test_ctrl_s_exports_from_a_field_and_x_stays_a_letter():

    app = make_app(AppConfig(is_root=False))
    async with app.run_test(size=SIZE) as pilot:
        field = await focus_a_parameter(pilot, app)
        before = set(exported("setup-*.svg"))
        await pilot.press("ctrl+s")
        await until(pilot, lambda: set(exported("setup-*.svg")) - before, "the SVG export")
        await pilot.press("end", "x")
        await until(pilot, lambda: field.value.endswith("x"), "the letter typed")  # as a letter in a field should be


async def test_exports_from_every_screen_land_in_one_folder(scratch):
    """x and m from Runs (the HIGHLIGHTED run's flags), a replay and Compare, and Setup: all in
    <home>/exports, named after the run; m on a screen without flags says so."""
    record_smoke_runs(scratch, 2)
    app = make_app(AppConfig(is_root=False, start_screen="runs"))
    async with app.run_test(size=SIZE) as pilot:
        runs = app.screen
        table = runs.query_one("#runs-table")
        await until(pilot, lambda: table.row_count >= 2, "the runs table")
        await pilot.press("x")
        await until(pilot, lambda: exported("runs-*.svg"), "the runs screen SVG")
        await pilot.press("end")  # the oldest run
        await until(pilot, lambda: table.cursor_row == table.row_count - 1, "End in the table")
        oldest, newest = runs.runs[-1].id, runs.runs[0].id
        await pilot.press("m")
        await until(pilot, lambda: exported(f"flags-{oldest}.md"), "the highlighted run's flags")
        assert not exported(f"flags-{newest}.md")
        await pilot.press("home")
        await until(pilot, lambda: table.cursor_row == 0, "Home in the table")
        await pilot.press("enter")
        await until(pilot, lambda: getattr(app.screen, "record", None) is not None, "the replay")
        await pilot.press("x")
        await until(pilot, lambda: exported(f"live-{newest}-*.svg"), "the replay SVG")
        await pilot.press("f4")  # back to the list, not the replay
        await until(pilot, lambda: app.screen is runs, "the runs list")
        await pilot.press("space", "down", "c")
        await until(pilot, lambda: type(app.screen).__name__ == "CompareScreen", "the comparison")
        second = runs.runs[1].id
        for path in exported("flags-*.md"):
            path.unlink()
        await pilot.press("m")
        await until(pilot, lambda: exported(f"flags-{newest}.md") and exported(f"flags-{second}.md"),
                       "both runs' flags")
        await pilot.press("f2")
        await until(pilot, lambda: app.current_mode == "setup", "setup")
        app.query_one("#target-list").focus()
        await pilot.press("m")
        await until(pilot, lambda: any("shows no flags" in str(n.message) for n in app._notifications),
                       "the 'no flags here' notice")


async def test_job_list_marks_checked_jobs_with_a_tick():
    app = make_app(AppConfig(is_root=False))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.focused is not None, "the first focus")
        jobs = app.screen.query_one("#job-list")
        await pilot.pause()
        lines = [''.join(seg.text for seg in jobs.render_line(y)) for y in range(jobs.option_count)]
        chosen = set(jobs.selected)
        for y, line in enumerate(lines):
            value = jobs.get_option_at_index(y).value
            assert line[1] == ("✓" if value in chosen else " "), line
        assert chosen and len(chosen) < len(lines)


async def test_setup_names_every_problem_before_anything_starts(scratch):
    """A missing directory target and two wrong fields: one notice lists all three in the
    screen's words; no job starts and no run record is made."""
    from textual.widgets import Input

    from fsscope import store

    missing = scratch / "no-such-dir"
    app = make_app(AppConfig(is_root=False))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(pilot, lambda: app.focused is not None, "the first focus")
        picker = app.screen.query_one("#target-picker")
        await until(pilot, lambda: picker.kind == "dir", "the directory target")
        app.screen.query_one("#target-path", Input).value = str(missing)
        app.screen.query_one("#param-probe-files", Input).value = "many"
        app.screen.query_one("#param-probe-runs", Input).value = ""
        before = len(store.list_runs())
        await pilot.press("ctrl+r")
        await until(pilot, lambda: app._notifications, "the notice")
        assert app.current_mode == "setup" and len(store.list_runs()) == before
        text = "\n".join(str(n.message) for n in app._notifications)
        assert f"{missing} does not exist" in text, text
        assert "files must be a whole number, not 'many'" in text and "runs needs a value" in text, text
        assert "_s " not in text and "spec" not in text.lower()


async def test_a_streamed_flag_follows_its_runs():
    """The same finding after run 2 and after run 5: one flag, whose title says 5/5."""
    async with live_app(SIZE) as (app, pilot, live):
        start_probe(live, 0, files=300, runs=5, run_id="run-a")
        await until(pilot, lambda: live.shown == 0, "the job's view")
        for done in (2, 5):
            live.post_message(msg.FindingArrived(0, events.Finding(
                flag="outlier", title=f"file 253 slow in {done}/{done} runs — repeatable, unexplained",
                note=f"{done} runs", fields={"index": 253, "structure": None, "runs_flagged": done, "runs": done})))
        await until(pilot, lambda: "5/5" in screen_text(app), "the updated title")
        assert [f.title for f in live.flags_panel.flags] == ["file 253 slow in 5/5 runs — repeatable, unexplained"]
        assert "2/2" not in screen_text(app)


async def test_a_huge_plan_asks_before_it_starts(scratch):
    from textual.widgets import Input

    from fsscope import store

    app = make_app(AppConfig(is_root=False))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.focused is not None, "the first focus")
        picker = app.screen.query_one("#target-picker")
        await until(pilot, lambda: picker.kind == "dir", "the directory target")
        app.screen.query_one("#target-path", Input).value = str(scratch)
        app.screen.query_one("#param-probe-runs", Input).value = "30000"
        before = len(store.list_runs())
        await pilot.press("ctrl+r")
        await until(pilot, lambda: type(app.screen).__name__ == "ConfirmScreen", "the question")
        assert "30,000 runs" in screen_text(app)
        await pilot.press("n")
        await until(pilot, lambda: app.current_mode == "setup" and type(app.screen).__name__ == "SetupScreen",
                       "setup again")
        assert len(store.list_runs()) == before and not app.live.running


@pytest.mark.privileged
async def test_first_run_on_an_empty_data_directory_probes_the_default_image(monkeypatch):
    """The README's first command on a new machine: no data directory yet, ctrl+r on the embedded
    default (Default image, ext4-default, probe). The image is made where the target says (it was
    made one directory too high, and the job then refused it as "no longer the file fsscope
    checked"), the probe finishes, and nothing stays attached or journalled."""
    from conftest import BASE
    from test_tui import job_done, mounts_under

    from fsscope import paths
    from fsscope.targets.journal import Journal, loops_backing
    from fsscope.tui.config import default_image_path

    home = BASE / f"new-machine-{os.getpid()}" / "fsscope"
    assert not home.parent.exists()
    monkeypatch.setenv("FSSCOPE_HOME", str(home))
    app = make_app(AppConfig(job_defaults={"probe": {"files": 100, "runs": 1, "max_runs": 1}}))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.screen.query("#job-picker") and app.focused is not None, "the setup screen")
        assert app.config.target.path == str(home / "images" / "default.img")
        assert app.config.recipe is not None and app.config.recipe.name == "ext4-default"
        assert app.screen.query_one("#job-picker").requests()[0].job == "probe"
        await pilot.press("ctrl+r")
        job = await job_done(pilot, app.live, "the first probe", timeout_s=240)
        assert job.run_id and (home / "runs" / job.run_id).is_dir()
    image = default_image_path()
    assert image.is_file() and not (home.parent / "images").exists() and not (BASE / "images").exists()
    assert loops_backing(str(image)) == [] and mounts_under(paths.home()) == [] and Journal().entries() == []
