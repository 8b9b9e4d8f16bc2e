"""The investigator walked again as a new user would (issue 27).

Each test drives the real app with Pilot and waits on conditions, never on a fixed pause."""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import pytest
from pilot_wait import setup_ready, until
from test_tui import live_app
from textual import events
from textual.widgets import Input

from fsscope import recipes
from fsscope.engine.registry import report_from_data, spec_from_data
from fsscope.format import format_ns
from fsscope.targets import TargetSpec
from fsscope.tui import AppConfig, make_app
from fsscope.tui import messages as msg
from fsscope.tui.model import JobState
from fsscope.tui.screens.live import LiveScreen
from fsscope.tui.screens.runs import RunsScreen

SIZE = (160, 48)
LONG_PROBE = {"probe": {"files": 20000, "runs": 50}}


def type_at_full_speed(app, *keys: str) -> None:
    """Queue keys on the app as a terminal does when someone types fast (or the app is busy):
    every key is waiting before the first is handled (Pilot's press waits after each one)."""
    for key in keys:
        app.post_message(events.Key(key, key if len(key) == 1 else None))


def streaming(live: LiveScreen) -> bool:
    view = live.views.get(0)
    return live.control is not None and view is not None and view.matrix.measured > 0


async def fields_read(pilot, files: Input, runs: Input, expected: tuple[str, str]) -> None:
    try:
        await until(pilot, lambda: (files.value, runs.value) == expected, f"files, runs = {expected}", timeout_s=20)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the fields read {(files.value, runs.value)}") from None


async def test_keys_typed_right_after_focusing_a_field_reach_the_job():
    """Click a field then End, Backspace×5, "777"; Tab to the next then "3": all queued at once
    while a probe streams. The next job runs with exactly 777 files and 3 runs (Tab's keys
    went to the field being left: files 30777… and runs half-edited)."""
    app = make_app(AppConfig(is_root=False, job_defaults=LONG_PROBE, discover_devices=lambda: []))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+r")
        live = app.live
        await until(pilot, lambda: streaming(live), "the first job's samples")
        await pilot.press("f2")
        await until(pilot, lambda: app.current_mode == "setup", "the setup screen")
        files = app.screen.query_one("#param-probe-files", Input)
        runs = app.screen.query_one("#param-probe-runs", Input)
        await pilot.click(files)
        type_at_full_speed(app, "end", *["backspace"] * 5, "7", "7", "7", "tab", "3")
        await fields_read(pilot, files, runs, ("777", "3"))
        assert app.focused is runs
        # Tab into a field and replace it, with the job still streaming
        await pilot.click(files)
        type_at_full_speed(app, "end", *["backspace"] * 3, "5", "0", "tab", "end", "backspace", "2")
        await fields_read(pilot, files, runs, ("50", "2"))
        await pilot.press("f3")
        await pilot.press("c")
        await until(pilot, lambda: live.plan_finished, "the cancelled job to end", timeout_s=120)
        await pilot.press("f2")
        await until(pilot, lambda: app.current_mode == "setup", "the setup screen")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: live.plan_finished and live.jobs and live.jobs[0].run_path, "the second job",
                    timeout_s=120)
        manifest = json.loads((Path(live.jobs[0].run_path) / "manifest.json").read_text())
        assert manifest["spec"]["files"] == 50 and manifest["spec"]["runs"] == 2, manifest["spec"]
        assert live.jobs[0].status == "ok", live.jobs[0].error


async def test_setup_names_a_refused_target_before_anything_starts():
    """A RAM image of 999T: Setup refuses it in its own words (the CLI's check, the screen's
    field names) and stays; it used to switch to Live and fail there with "--ram --size"."""
    app = make_app(AppConfig(is_root=True, discover_devices=lambda: []))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(pilot, lambda: app.focused is not None and app.focused.id == "target-list", "the target list")
        await pilot.press("down", "down")
        picker = app.screen.query_one("#target-picker")
        await until(pilot, lambda: picker.kind == "ram", "the RAM image picked")
        size = app.screen.query_one("#target-size", Input)
        size.focus()
        await pilot.press("ctrl+a", "ctrl+k", *"999T")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: app._notifications, "the refusal")
        messages = " ".join(n.message for n in app._notifications)
        assert app.current_mode == "setup" and app.live.control is None
        assert "RAM image size 999 TiB" in messages and "use size" in messages, messages
        assert "--" not in messages, messages


@pytest.mark.privileged
async def test_a_study_is_labelled_with_what_it_ran():
    """Setup says xfs-default, the exploration runs ext4-default: header, plan line, flags
    export and the runs table say ext4-default (they said the Setup recipe)."""
    app = make_app(AppConfig(target=TargetSpec("ram", size_bytes=256 * 2**20), recipe=recipes.load("xfs-default"),
                             jobs=("explore",), discover_devices=lambda: [],
                             job_defaults={"explore": {"recipes": ["ext4-default"], "treatments": 2}}))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+r")
        live = app.live
        await until(pilot, lambda: live.control is not None and live.jobs and live.jobs[0].run_id, "the job's start")
        progress = live.query_one("#progress")
        assert "ext4-default" in progress.headline and "xfs-default" not in progress.headline, progress.headline
        plan_line = next(line for line in live.log_panel.lines_written if "plan:" in line)
        assert "ext4-default" in plan_line and "xfs-default" not in plan_line, plan_line
        exported = live.action_export_flags()
        assert "recipe: ext4-default" in exported.read_text(), exported.read_text()
        await pilot.press("c")
        await until(pilot, lambda: live.plan_finished, "the cancelled study to end", timeout_s=120)
        run_id = live.jobs[0].run_id
        await pilot.press("f4")
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.listed
                    and run_id in {k.value for k in app.screen.query_one("#runs-table").rows}, "the runs table")
        table = app.screen.query_one("#runs-table")
        row = table.get_row(run_id)
        assert "ext4-default" in [str(cell) for cell in row], row
        # the target is named as the live screen named it (it was "ram" there, "RAM image (…)" here),
        # whole, or by its short form where the whole does not fit the column (tui.replay.short_target:
        # the scratch directory's name makes the whole longer in CI)
        cells = [str(cell) for cell in row]
        assert live.plan.target.describe() in cells or "RAM image" in cells, row


def progress_line(app, job: str) -> str:
    """The live screen's progress row of ``job``, as the terminal shows it."""
    progress = app.live.query_one("#progress")
    text = "\n".join(line.text for line in app.live.query_one("#progress").render_lines(progress.region.reset_offset))
    return next(line for line in text.splitlines() if line.strip().startswith(job))


async def test_a_finished_job_says_it_finished():
    """A probe that ended well: its row says finished and how long it took in all, not the
    phase it was last in ("format") nor "0:00 left"."""
    app = make_app(AppConfig(is_root=False, job_defaults={"probe": {"files": 50, "runs": 2}},
                             discover_devices=lambda: []))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+r")
        live = app.live
        await until(pilot, lambda: live.control is not None and live.plan_finished, "the probe to end", timeout_s=120)
        assert live.jobs[0].status == "ok", live.jobs[0].error
        line = progress_line(app, "probe")
        assert "finished" in line and "in all" in line and "left" not in line, line
        assert "100%" in line, line


@pytest.mark.privileged
async def test_a_failed_job_shows_no_full_bar():
    """mkfs refuses the recipe's options: the row says failed (and why) beside a bar that is
    not full (a failed job showed a full bar, as if it had done everything)."""
    app = make_app(AppConfig(target=TargetSpec("ram", size_bytes=64 * 2**20), recipe=recipes.load("ext4-default"),
                             job_defaults={"probe": {"files": 50, "runs": 2}}, discover_devices=lambda: []))
    async with app.run_test(size=SIZE) as pilot:
        app.screen.query_one("#mkfs-extra", Input).focus()
        await pilot.press(*"-O no_such_feature")
        await pilot.press("ctrl+r")
        live = app.live
        await until(pilot, lambda: live.control is not None and live.plan_finished, "the probe to fail", timeout_s=120)
        assert live.jobs[0].status == "failed"
        line = progress_line(app, "probe")
        assert "failed" in line and "█" * 24 not in line and "100%" not in line, line
        # its flags export says it failed and why, and the settings in words (not a dict)
        exported = live.action_export_flags().read_text()
        # the name as Markdown text: its underscores escaped, so it shows as typed
        assert "**The job failed:**" in exported and r"no\_such\_feature" in exported, exported
        assert "files 50, runs 2" in exported and "{'" not in exported, exported


async def test_aging_out_of_inodes_says_so_in_its_stop_note():
    """An ext4 aging run that ran out of inodes: the stop note beside the out-of-inodes flag
    gives that cause, not the ager's guess about blocks ("block rounding … lower the fullness")."""
    from test_tui_aging import REPORT

    inodes = ("out of inodes, not blocks: 16,384 of 16,384 in use. The profile's files (mean 3 KiB) are smaller "
              "than the space mkfs set aside per inode; give it more inodes (ext4: --mkfs-opts '-i 4096')")
    report = REPORT | {"stop_reason": "enospc", "notes": [inodes],
                       "stop_note": "the file system ran out of space (ENOSPC) creating d0/f12 at 63.0% full "
                                    "(target 80%): block rounding, metadata or other files took the room the plan "
                                    "counted on. The tree is consistent (the failed create was undone); lower the "
                                    "fullness, or free space and resume."}
    async with live_app(SIZE) as (app, pilot, live):
        live.jobs = [JobState(0, "age", spec_from_data("age", {"profile": "small", "fullness": 0.8}))]
        live.post_message(msg.JobStarted(0, "age", "run-age", "/nonexistent-run", 1))
        await until(pilot, lambda: live.shown == 0, "the aging view")
        live.post_message(msg.JobFinished(0, "ok", None, report_from_data("age", report), 0))
        await until(pilot, lambda: live.flags_panel.flags, "the stop flag")
        stop = live.flags_panel.flags[0]
        assert stop.title == "stopped: enospc" and "out of inodes" in stop.note, stop.note
        assert "block rounding" not in stop.note and "lower the fullness" not in stop.note, stop.note
        assert "block rounding" not in live.notes.text, live.notes.text


def test_a_report_into_a_pipe_keeps_its_numbers_whole(cli, scratch):
    """``fsscope report latest | less``: rich sized a pipe at 80 columns and cut the report's
    numbers to "…"; a pipe now gets a wide page."""
    # as from a shell, where COLUMNS is not exported (set, it is the width asked for)
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    probe = cli("probe", "--dir", str(scratch), "--files", "300", "--runs", "3", env=env)
    assert probe.returncode == 0, probe.stderr
    assert "…" not in _cut_marks(probe.stdout), probe.stdout
    report = cli("report", "latest", env=env)
    assert report.returncode == 0, report.stderr
    assert "p99" in report.stdout and "…" not in _cut_marks(report.stdout), report.stdout


def _cut_marks(text: str) -> str:
    """``text`` without the report's own shortened lists ("1, 2, … (9)", "a, b, …": long lists
    of undecided files, runs or kernel members, which a busy shared disk can produce): what is
    left shows a "…" only where rich cut a cell."""
    return re.sub(r", … \(\d+\)|, …", "", text)


def screen_text(app) -> str:
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


async def test_toggles_read_without_colour_and_only_where_they_apply():
    """An xfs recipe: no ext4-only toggles; a toggle that is on shows ✓, one that is off shows
    an empty box (both showed an X, told apart by colour only)."""
    app = make_app(AppConfig(target=TargetSpec("ram", size_bytes=256 * 2**20), recipe=recipes.load("xfs-default"),
                             is_root=True, discover_devices=lambda: []))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert not screen.query_one("#prep-no_lazy_init").display and not screen.query_one("#prep-null_hash_seed").display
        drop, remount = screen.query_one("#prep-drop_caches"), screen.query_one("#prep-remount_after_populate")
        drop.value, remount.value = True, False
        await pilot.pause()
        lines = screen_text(app).splitlines()
        drop_line = next(line for line in lines if "drop caches before each run" in line)
        remount_line = next(line for line in lines if "remount after populating" in line)
        assert "✓" in drop_line and "X" not in drop_line, drop_line
        assert "✓" not in remount_line and "X" not in remount_line, remount_line
        assert "ext4:" not in screen_text(app)
        await pilot.press("f1")
        await until(pilot, lambda: "next / previous field" in screen_text(app), "the help")
        assert "for `files` files" not in screen_text(app)


async def test_notes_speak_words_not_ids_or_ascii_arrows():
    """A flag's note: its kind in words ("level shift", not "levelshift"), the structure named
    once (not as a "code name"), and the rules' ASCII (->, --, //) shown as →, —, ÷ (also in the export)."""
    from fsscope.engine import events

    async with live_app(SIZE) as (app, pilot, live):
        live.jobs = [JobState(0, "probe", spec_from_data("probe", {"files": 300, "runs": 2}))]
        live.post_message(msg.JobStarted(0, "probe", "run-words", "/nonexistent-run", 1))
        finding = {"flag": "levelshift", "index": 27, "structure": "xfs-dir-shortform-to-block",
                   "title": "calls get slower from file 27 on",
                   "note": "(256 - 6) // 9 = 27 entries fit -> file 27 converts -- a format change"}
        live.post_message(msg.FindingArrived(0, events.finding_from_dict(finding)))
        await until(pilot, lambda: live.flags_panel.flags, "the flag")
        live.flags_panel.focus()
        await pilot.press("home")
        await until(pilot, lambda: "file 27 converts" in live.notes.text, "the note")
        text = live.notes.text
        assert "level shift" in text and "levelshift" not in text, text
        assert "structure xfs-dir-shortform-to-block" in text and "code name" not in text, text
        assert "→ file 27" in text and "— a format" in text and "÷ 9" in text, text
        assert "->" not in text and " -- " not in text and "//" not in text, text
        exported = live.action_export_flags().read_text()
        assert "*level shift*" in exported and "→ file 27" in exported and "->" not in exported, exported


async def test_a_studys_conclusions_are_flags_with_notes():
    """Explore's findings ("FreeSpaceLayout drives the d-span most…") were only cut-off log
    lines beside "Flags (0)": they are flags now, each with its note."""
    conclusion = ("FreeSpaceLayout drives the d-span most: it alone explains 16 % of its variance "
                  "(first-order share), 41 % with its interactions")
    report = {"notes": [conclusion, "ChunkCount hardly matters: under 2 % of the variance"], "treatments": []}
    async with live_app(SIZE) as (app, pilot, live):
        live.jobs = [JobState(0, "explore", spec_from_data("explore", {"treatments": 24, "recipes": "ext4-default"}))]
        live.post_message(msg.JobStarted(0, "explore", "run-explore", "/nonexistent-run", 1))
        await until(pilot, lambda: live.shown == 0, "the explore view")
        live.post_message(msg.JobFinished(0, "ok", None, report_from_data("explore", report), 0))
        await until(pilot, lambda: len(live.flags_panel.flags) == 2, "the conclusions as flags")
        first = live.flags_panel.flags[0]
        assert first.title == "FreeSpaceLayout drives the d-span most" and first.note == conclusion
        live.flags_panel.focus()
        await pilot.press("home")
        await until(pilot, lambda: "41 % with its interactions" in live.notes.text, "its note")
        assert "Flags (2)" in screen_text(app)


async def test_a_faster_level_is_called_a_speed_up():
    """A level shift down (38 → 34 µs from file 1200 on) was flagged like a slowdown,
    "repeatable, unexplained": it is a speed-up, and the flag says so."""
    from fsscope.engine import events

    async with live_app(SIZE) as (app, pilot, live):
        live.jobs = [JobState(0, "probe", spec_from_data("probe", {"files": 3000, "runs": 5}))]
        live.post_message(msg.JobStarted(0, "probe", "run-faster", "/nonexistent-run", 1))
        faster = {"flag": "levelshift", "index": 1200, "before_ns": 38_000.0, "after_ns": 34_200.0,
                  "structure": None, "title": "level shift at file 1200: 38.0 → 34.2 µs — repeatable, unexplained",
                  "note": "repeatable, unexplained"}
        slower = faster | {"index": 2000, "before_ns": 34_200.0, "after_ns": 51_000.0,
                           "title": "level shift at file 2000: 34.2 → 51.0 µs — repeatable, unexplained"}
        for finding in (faster, slower):
            live.post_message(msg.FindingArrived(0, events.finding_from_dict(finding)))
        await until(pilot, lambda: len(live.flags_panel.flags) == 2, "both flags")
        up, down = live.flags_panel.flags
        assert "10% faster from file 1200" in up.title and "speed-up" in up.title, up.title
        assert "unexplained" not in up.title and "Nothing here is slow" in up.note
        assert down.title == slower["title"]


async def test_80x24_gives_the_data_the_room():
    """At 80×24 the heatmap is wider than the flags/notes column (it got 34 columns to their
    44), its legend shows both ends of the scale, and Setup's Start button is on screen."""
    app = make_app(AppConfig(is_root=True, discover_devices=lambda: []))
    async with app.run_test(size=(80, 24)) as pilot:
        await setup_ready(pilot, app)
        start = app.screen.query_one("#start")
        assert start.region.bottom <= 23 and start.region.height > 0, start.region  # above the footer
        files = app.screen.query_one("#param-probe-files")
        files.focus()
        await until(pilot, lambda: app.screen.query_one("#hint-probe-files").display, "the focused field's hint")
        assert not app.screen.query_one("#hint-probe-runs").display  # the others wait for their field
        await pilot.press("f3")
        live = app.live
        await until(pilot, lambda: live.is_mounted and app.screen is live, "the live screen")
        live.jobs = [JobState(0, "probe", spec_from_data("probe", {"files": 300, "runs": 2}))]
        live.post_message(msg.JobStarted(0, "probe", "run-small", "/nonexistent-run", 1))
        await until(pilot, lambda: live.shown == 0, "the job's view")
        for run in range(2):
            live.post_message(msg.SamplesArrived(0, run, 0, [20_000 + 40 * i for i in range(300)], 1.0 + run))
        await until(pilot, lambda: live.views[0].matrix.measured == 600, "the samples")
        await pilot.pause()
        heatmap, side = live.query_one("#heatmap"), live.query_one("#side")
        assert heatmap.region.width > side.region.width, (heatmap.region, side.region)
        low_ns, high_ns = heatmap.scale_ns
        legend = live.query_one("#legend")
        shown = "".join(seg.text for seg in legend.render_line(0))  # the legend's first line as drawn
        assert format_ns(low_ns) in shown and format_ns(high_ns) in shown, shown
        live.query_one("#side").styles.width = 50  # narrower still: the bar gives way, the ends stay
        await until(pilot, lambda: heatmap.region.width <= 30, "a narrower heatmap")
        shown = "".join(seg.text for seg in legend.render_line(0))
        assert format_ns(low_ns) in shown and format_ns(high_ns) in shown, shown


async def test_a_coarse_bar_counts_down_instead_of_growing_its_estimate():
    """A variation study reports progress per configuration: before the first report the row
    says it is estimating (it showed "– left" for 32 s); sitting at 50 % its time left counts
    down from the last estimate (it grew with the clock), then says it is overdue."""
    async with live_app(SIZE) as (app, pilot, live):
        job = JobState(0, "variation", spec_from_data("variation", {"configurations": 2}))
        job.start(now_s=1000.0)
        progress = live.query_one("#progress")
        progress.set_jobs([job], "a variation study")
        progress.frozen_now = 1010.0
        await pilot.pause()
        assert "estimating" in progress_line(app, "variation"), progress_line(app, "variation")
        job.set_progress(1, 2, now_s=1010.0)  # half done after 10 s: 10 s left
        for now, expected in ((1012.0, "0:08 left"), (1016.0, "0:04 left"), (1030.0, "overdue")):
            progress.frozen_now = now
            progress.refresh()
            await pilot.pause()
            line = progress_line(app, "variation")
            assert expected in line, (now, line)


async def test_keys_after_one_that_closes_a_screen_still_arrive():
    """Escape closes the help screen under the key's own widget (the marker behind it never
    comes back): the keys queued behind it still go, in order."""
    from fsscope.tui.screens.help import HelpScreen
    from fsscope.tui.screens.runs import RunsScreen as Runs

    app = make_app(AppConfig(is_root=False, discover_devices=lambda: []))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        type_at_full_speed(app, "escape", "f4")
        await until(pilot, lambda: isinstance(app.screen, Runs), "the runs screen", timeout_s=20)
