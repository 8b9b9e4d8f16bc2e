"""A screen belongs to one job (issue 33): starting a job shows that job's live view (not a replay
or the Lab left on the live screen), the panels count what the job on screen has, and a cancel
says so at once. Real jobs (the smoke job on a plain directory: no root) driven with Pilot."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

from pilot_wait import until, until_screen
from rich.console import Console
from test_tui import plan_over
from test_tui_newuser import live_app, record_smoke_runs, screen_text, start_probe

from fsscope import store
from fsscope.engine import events
from fsscope.targets import TargetSpec
from fsscope.tui import AppConfig, make_app
from fsscope.tui import messages as msg
from fsscope.tui.replay import load_run
from fsscope.tui.screens.lab import LabScreen
from fsscope.tui.screens.live import LiveScreen

SIZE = (160, 48)


def smoke_app(scratch: Path, duration_s: float):
    """The investigator with the smoke job on ``scratch`` (a plain directory)."""
    return make_app(AppConfig(is_root=False, target=TargetSpec("dir", str(scratch)), jobs=("smoke",),
                              job_defaults={"smoke": {"duration_s": duration_s}}))


def progress_row(app, job: str) -> str:
    """The job's row of the progress panel, as the terminal shows it."""
    return next(line for line in screen_text(app).splitlines() if line.strip().startswith(job))


def drawn(widget) -> str:
    """What ``widget`` draws now, as text."""
    console = Console(width=SIZE[0], record=True, file=io.StringIO())
    console.print(widget.render())
    return console.export_text()


async def start_from_setup(pilot, app) -> LiveScreen:
    await pilot.press("f2")
    await until(pilot, lambda: app.current_mode == "setup" and app.screen.query("#job-picker"), "the setup screen")
    await pilot.press("ctrl+r")
    live = app.live
    await until(pilot, lambda: live.jobs and live.jobs[0].run_id, "the job's start")
    return live


async def test_starting_a_job_over_the_lab_shows_the_job(scratch):
    """The Lab opened over the live screen (F3, F5), then F2 and ctrl+r: the live view of the new
    job is in front, not the Lab."""
    app = smoke_app(scratch, 0.3)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.focused is not None, "the setup screen")
        await pilot.press("f3")
        await until(pilot, lambda: app.current_mode == "live", "the live screen")
        await pilot.press("f5")
        await until_screen(pilot, app, LabScreen)
        live = await start_from_setup(pilot, app)
        assert app.screen is live and live.shown == 0, app.screen
        await until(pilot, lambda: plan_over(live), "the smoke job", 60)
        assert app.screen is live and live.jobs[0].status == "ok"
        assert f"smoke · {live.jobs[0].run_id}" in screen_text(app)


async def test_starting_a_job_over_a_replay_shows_the_job_not_the_replay(scratch):
    """A replay opened over the live screen (as the Lab's o does), then F2 and ctrl+r: the new
    job's live view is on screen, not the replay's "finished ok"."""
    (old,) = record_smoke_runs(scratch, 1)
    app = smoke_app(scratch, 0.3)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.focused is not None, "the setup screen")
        await pilot.press("f3")
        await until(pilot, lambda: app.current_mode == "live", "the live screen")
        app.push_screen(LiveScreen(record=load_run(store.find_run(old))))
        await until(pilot, lambda: isinstance(app.screen, LiveScreen) and app.screen.record is not None,
                    "the replay")
        assert f"replay of {old}" in screen_text(app)
        live = await start_from_setup(pilot, app)
        assert app.screen is live and live.record is None
        await until(pilot, lambda: plan_over(live), "the smoke job", 60)
        text = screen_text(app)
        assert "replay of" not in text and live.jobs[0].run_id != old and live.jobs[0].run_id in text


async def test_the_flags_title_counts_the_shown_jobs_flags():
    """A job with flags (two kept, one withdrawn), then a job with none: its title counts its
    own (none), not "Flags (2) · 1 withdrawn"."""
    async with live_app(SIZE) as (app, pilot, live):
        start_probe(live, 0, files=300, runs=2, run_id="run-a")
        await until(pilot, lambda: live.shown == 0, "the first job's view")
        for index in (11, 22, 33):
            live.post_message(msg.FindingArrived(0, events.Finding(
                flag="outlier", title=f"file {index} slow in 2/2 runs", note="", index=index,
                fields={"runs_flagged": 2, "runs": 2})))
        await until(pilot, lambda: len(live.flags_panel.flags) == 3, "the first job's flags")
        flags = list(live.views[0].flags)
        live._replace_flags(0, [*flags[:2], replace(flags[2], withdrawn="noise after 2 runs")])
        await until(pilot, lambda: "Flags (2) · 1 withdrawn" in screen_text(app), "the first job's count")
        start_probe(live, 1, files=50, runs=1, run_id="run-b")
        await until(pilot, lambda: live.shown == 1, "the second job's view")
        text = screen_text(app)
        assert "─ Flags ─" in text and "withdrawn" not in text and "Flags (2)" not in text, text
        assert live.flags_panel.border_subtitle == ""  # no "↑↓ select" over an empty list


async def test_cancel_says_cancelling_at_once_and_a_finished_job_offers_no_cancel(scratch):
    """c on a running job: its row says "cancelling…" before the job has stopped (it kept
    counting down for 15 s); once it has ended, c is no longer offered in the footer."""
    app = smoke_app(scratch, 60.0)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.focused is not None, "the setup screen")
        live = await start_from_setup(pilot, app)
        await until(pilot, lambda: live.jobs[0].total, "the job's progress")
        assert "Cancel job" in screen_text(app)
        # what c does, and the row drawn right after it, before anything else is handled (the
        # smoke job stops within a tenth of a second: a screenshot after a pause may be too late)
        live.action_cancel_job()
        row = drawn(live.query_one("#progress")).splitlines()[1]
        assert "cancelling…" in row and "left" not in row and "stopping" in row, row
        await until(pilot, lambda: plan_over(live), "the cancelled job's end", 60)
        assert live.jobs[0].status == "cancelled"
        row = progress_row(app, "smoke")
        assert "cancelled" in row and "cancelling" not in row, row
        assert "Cancel job" not in screen_text(app) and not live.check_action("cancel_job", ())


async def test_quitting_says_what_it_cancelled(scratch, capfd):
    """q with a job running, then yes: the job is cancelled, and what fsscope prints as it exits
    names it (it exited without a word about the run)."""
    app = smoke_app(scratch, 60.0)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.focused is not None, "the setup screen")
        live = await start_from_setup(pilot, app)
        run_id = live.jobs[0].run_id
        await pilot.press("ctrl+q")
        await until(pilot, lambda: type(app.screen).__name__ == "ConfirmQuitScreen", "the question")
        await pilot.press("y")
    said = " ".join(capfd.readouterr().err.split())  # printed once the screen is gone
    assert f"smoke run {run_id}: cancelled" in said and "kept" in said, said
    assert store.find_run(run_id).status() == "cancelled"


async def test_setup_says_how_many_runs_the_probe_may_add():
    """5 runs asked, 8 made, read as a miscount: Setup says the probe adds runs up to 3x those
    asked until every candidate is decided, and follows the field as it is edited."""
    from test_tui import set_param

    app = make_app(AppConfig(is_root=False))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.focused is not None, "the setup screen")
        hint = app.screen.query_one("#hint-probe-runs")
        said = lambda: " ".join(str(hint.content).split())  # noqa: E731 - what the hint says now
        await until(pilot, lambda: "5 runs, up to 15 until every candidate file is decided" in said(), "the runs' hint")
        assert hint.region.height > 0  # on screen, under the field
        await set_param(pilot, app, "param-probe-runs", "4")
        await until(pilot, lambda: "4 runs, up to 12 until" in said(), "the hint for 4 runs")
        await set_param(pilot, app, "param-probe-runs", "1")  # one run is a look: it stays one
        await until(pilot, lambda: "up to" not in said(), "the hint for one run")
