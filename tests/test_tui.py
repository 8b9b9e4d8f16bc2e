"""The investigator driven from the keyboard with Textual's Pilot, on real loop images.

Each test builds the app with ``make_app`` (as the CLI does) and presses keys as a user
would: pick the target, the recipe and the job, start, read the flags and notes, cancel,
switch themes. The jobs are real child processes formatting real file systems.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest
from pilot_wait import setup_ready, until, until_screen
from textual.command import CommandList, CommandPalette

from fsscope import paths, recipes
from fsscope.engine import events
from fsscope.engine.registry import spec_from_data
from fsscope.targets import TargetSpec
from fsscope.targets.existing import existing_fs
from fsscope.targets.journal import Journal, loops_backing
from fsscope.trace.tracefs import unavailable_reason
from fsscope.tui import AppConfig, make_app
from fsscope.tui import messages as msg
from fsscope.tui.app import FsscopeApp
from fsscope.tui.model import JobState
from fsscope.tui.screens.compare import CompareScreen
from fsscope.tui.screens.confirm import ConfirmDestroyScreen
from fsscope.tui.screens.help import HelpScreen
from fsscope.tui.screens.live import LiveScreen
from fsscope.tui.screens.runs import RunsScreen
from fsscope.tui.widgets.bench_view import BenchView
from fsscope.tui.widgets.heat_view import HeatView
from fsscope.tui.widgets.heatmap import Heatmap

SIZE = (140, 45)
ViewT = TypeVar("ViewT")
SMALL_PROBE = {"probe": {"files": 200, "runs": 2, "max_runs": 2}, "smoke": {"duration_s": 0.5}}
# enough runs for a flag beyond chance (outliers.OUTLIER_ALPHA): among 200 files, slow in 2 of 2
# runs is chance once ~1.6 % of calls are slow, and 3 of 3 once ~4 % are (this test's probe
# shares the CPUs with the app drawing it); 5 of 5 stands up to ~14 %
FLAGGING_PROBE = {"probe": {"files": 200, "runs": 5, "max_runs": 5}}


def mounts_under(root: Path) -> list[str]:
    root_s = os.path.realpath(root)
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(root_s + "/")]


def assert_clean(image: Path | None = None) -> None:
    """Nothing of fsscope's is left mounted or attached, and the journal is empty."""
    assert mounts_under(paths.home()) == []
    assert Journal().entries() == []
    if image is not None:
        assert loops_backing(str(image)) == []


def plan_over(live: LiveScreen) -> bool:
    """The plan ended and the screen has handled every job's end (reports, final flags)."""
    return live.control is not None and live.plan_finished


async def type_into(pilot, text: str) -> None:
    """Clear the focused Input the way a user would (home, delete to end) and type."""
    await pilot.press("ctrl+a", "ctrl+k")
    await pilot.press(*text)


async def pick_image_target(pilot, app: FsscopeApp, image: Path, size: str) -> None:
    assert app.focused is not None and app.focused.id == "target-list"
    await pilot.press("down")  # Default image -> New image file
    await pilot.press("tab")
    await until(pilot, lambda: app.focused.id == "target-path", "the image path field focused")
    await type_into(pilot, str(image))
    await pilot.press("tab")
    await until(pilot, lambda: app.focused.id == "target-size", "the size field focused")
    await type_into(pilot, size)


async def pick_recipe(pilot, app: FsscopeApp, name: str) -> None:
    await pilot.press("tab")
    await until(pilot, lambda: app.focused.id == "recipe-select", "the recipe list focused")
    await pilot.press("enter", *name, "enter")
    await until(pilot, lambda: app.screen.query_one("#recipe-select").value == name, f"recipe {name} picked")


def live_of(app: FsscopeApp) -> LiveScreen:
    return app.live


async def job_done(pilot, live: LiveScreen, what: str, timeout_s: float,
                   over: Callable[[], object] | None = None) -> JobState:
    """Await the plan's end (or ``over``); its one job, which must have succeeded."""
    await until(pilot, over or (lambda: plan_over(live)), what, timeout_s)
    job = live.jobs[0]
    assert job.status == "ok", (job.status, job.error, live.log_panel.lines_written[-10:])
    return job


async def run_plan(pilot, app: FsscopeApp, what: str, timeout_s: float) -> tuple[LiveScreen, JobState]:
    """Ctrl+R on the setup screen with its parameters as they are; when the plan has ended, the
    live screen and its one job (succeeded)."""
    await setup_ready(pilot, app)
    await pilot.press("ctrl+r")
    live = live_of(app)
    return live, await job_done(pilot, live, what, timeout_s)


def job_view(screen: LiveScreen, kind: type[ViewT]) -> ViewT:
    """The job view the screen shows, which must be a ``kind``."""
    view = screen.job_view
    assert isinstance(view, kind), view
    return view


def runs_listed(app: FsscopeApp, *run_ids: str) -> bool:
    """The runs screen shows its table, listing these runs, and no listing is under way."""
    if not isinstance(app.screen, RunsScreen) or not app.screen.listed:
        return False
    keys = {key.value for key in app.screen.query_one("#runs-table").rows}
    return all(run_id in keys for run_id in run_ids)


@asynccontextmanager
async def live_app(size: tuple[int, int] = SIZE):
    """A user's app opened on the live screen (no job yet): (app, pilot, live screen)."""
    app = make_app(AppConfig(is_root=False, start_screen="live"))
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.live.is_mounted, "the live screen")
        yield app, pilot, app.live


async def open_compare(pilot, app: FsscopeApp, *run_ids: str) -> CompareScreen:
    """Mark the first two runs of the runs screen and compare them ("c"), once ``run_ids`` are
    listed; the compare screen."""
    await until(pilot, lambda: runs_listed(app, *run_ids), "the runs listed")
    await pilot.press("space", "down", "space", "c")
    return await until_screen(pilot, app, CompareScreen)


async def compare_runs(pilot, app: FsscopeApp, *run_ids: str) -> tuple[CompareScreen, str]:
    """:func:`open_compare` on these runs: the compare screen, checked to compare exactly them,
    and its verdict line."""
    screen = await open_compare(pilot, app, *run_ids)
    assert screen.comparison is not None
    assert {s.id for s in screen.sides} == set(run_ids)
    return screen, str(screen.query_one("#compare-verdict").content)


async def open_replay(pilot, app: FsscopeApp, run_id: str):
    """From anywhere: F4, put the cursor on ``run_id`` in the runs table, Enter; the replay screen."""
    await pilot.press("f4")
    await until(pilot, lambda: runs_listed(app, run_id), f"run {run_id} in the runs table")
    table = app.screen.query_one("#runs-table")
    table.move_cursor(row=table.get_row_index(run_id))
    table.focus()
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, LiveScreen) and app.screen.record is not None
                and app.screen.record.run.id == run_id, f"the replay of {run_id}")
    return app.screen


@pytest.mark.privileged
async def test_whole_flow_image_xfs_probe_flags_and_note(scratch):
    image = scratch / "flow.img"
    app = make_app(AppConfig(job_defaults=FLAGGING_PROBE))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pick_image_target(pilot, app, image, "512M")
        await pick_recipe(pilot, app, "xfs-default")
        preview = str(app.screen.query_one("#recipe-preview").content)
        assert "mkfs.xfs -f -q" in preview and "mount -t xfs" in preview
        assert app.screen.query_one("#job-picker").selected == ["probe"]
        await pilot.press("ctrl+r")
        live = live_of(app)
        await until(pilot, lambda: app.screen is live and live.control is not None, "the live screen", 10)
        job = await job_done(pilot, live, "the probe to end", 120)
        assert job.fraction == 1.0
        view = live.views[0]
        assert view.matrix.values.shape == (5, 200) and (view.matrix.values > 0).all()
        # the log shows every external command with its result
        log = "\n".join(live.log_panel.lines_written)
        assert "$ mkfs.xfs -f -q" in log and "$ mount -t xfs" in log and "→ exit 0" in log
        # the flags include the directory-format threshold; select it and read its note
        flags = live.flags_panel.flags
        assert flags, "the probe raised no flags"
        structures = [f.finding.structure for f in flags]
        assert "xfs-dir-shortform-to-block" in structures, structures
        position = structures.index("xfs-dir-shortform-to-block")
        live.flags_panel.focus()
        await pilot.press("home", *["down"] * position)
        await until(pilot, lambda: live.flags_panel.highlighted == position, "the flag selected")
        flag = flags[position]
        assert "short-form" in live.notes.text or "shortform" in live.notes.text, live.notes.text
        assert flag.title in live.notes.text
        if unavailable_reason() is None:  # traced (--trace attribute): the kernel's events beside the note
            assert "Kernel events inside this call" in live.notes.text
            assert "xfs_dir2_sf_to_block" in live.notes.text, live.notes.text
        heatmap = live.query_one("#heatmap", Heatmap)
        assert heatmap._selected[flag.indices[0]]  # its cells are highlighted
        assert heatmap.cursor_files()[0] <= flag.indices[0] <= heatmap.cursor_files()[1]
        # the heatmap cursor reports file, run and latency
        heatmap.focus()
        await pilot.press("0", "+", "+", "right", "down")
        await pilot.pause()
        legend = str(live.query_one("#legend").cursor_text)
        assert "run 2" in legend and ("file" in legend) and "not measured" not in legend
        # exports: flags as Markdown, the screen as SVG
        exports = paths.home() / "exports"
        await pilot.press("m")
        flags_md = exports / f"flags-{job.run_id}.md"
        await until(pilot, flags_md.exists, "the flags export", 10)
        assert "xfs-dir-shortform-to-block" in flags_md.read_text()
        await pilot.press("x")
        await until(pilot, lambda: list(exports.glob(f"live-{job.run_id}-*.svg")), "the SVG export")
    assert_clean(image)
    assert not app.worker_errors


async def start_long_probe(pilot, app: FsscopeApp, image: Path, recipe: str = "") -> LiveScreen:
    """Start the app's probe on a new 512M image (and ``recipe``); the live screen once the
    probe has measured."""
    await pilot.pause()
    await pick_image_target(pilot, app, image, "512M")
    if recipe:
        await pick_recipe(pilot, app, recipe)
    await pilot.press("ctrl+r")
    live = live_of(app)
    await until(pilot, lambda: live.control is not None and live.views.get(0) is not None
                and live.views[0].matrix.measured > 0, "the first samples", 60)
    return live


@pytest.mark.privileged
async def test_cancel_running_job_cleans_up(scratch):
    image = scratch / "cancel.img"
    app = make_app(AppConfig(job_defaults={"probe": {"files": 20000, "runs": 50}}))
    async with app.run_test(size=SIZE) as pilot:
        live = await start_long_probe(pilot, app, image, "ext4-default")
        assert loops_backing(str(image)), "the job should have its loop device attached while running"
        await pilot.press("c")
        await until(pilot, lambda: plan_over(live), "the cancelled job to end", 60)
        assert live.jobs[0].status == "cancelled"
        assert live.views[0].matrix.measured > 0  # what it measured is kept
        assert live.control.running_handles() == []
    assert_clean(image)


@pytest.mark.privileged
async def test_quitting_with_a_running_job_cancels_it(scratch):
    image = scratch / "quit.img"
    app = make_app(AppConfig(job_defaults={"probe": {"files": 20000, "runs": 50}}))
    async with app.run_test(size=SIZE) as pilot:
        live = await start_long_probe(pilot, app, image)
        handles = list(live.control.handles)
        await pilot.press("ctrl+q")  # asks first: the job would be cancelled
        await until(pilot, lambda: type(app.screen).__name__ == "ConfirmQuitScreen", "the question", 10)
        assert all(h.proc.poll() is None for h in handles), "ctrl+q stopped the job before asking"
        await pilot.press("y")
    for handle in handles:
        assert handle.proc.poll() is not None, "the job process outlived the app"
        assert handle.run_dir.status() == "cancelled"
    assert_clean(image)


@pytest.mark.privileged
async def test_block_device_needs_its_name_typed(loop_device):
    device = loop_device("256M")
    from fsscope.targets import devices

    app = make_app(AppConfig(job_defaults=SMALL_PROBE, jobs=("smoke",),
                             discover_devices=lambda: [devices.describe(Path(device).name)]))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        option_list = app.screen.query_one("#target-list")
        await until(pilot, lambda: any(option_list.get_option_at_index(i).id == f"dev:{device}"
                                          for i in range(option_list.option_count)), "device discovery")
        index = option_list.get_option_index(f"dev:{device}")
        assert app.focused is option_list, app.focused
        await pilot.press("end")
        await pilot.pause()
        assert option_list.highlighted == index, (option_list.highlighted, index)
        assert app.screen.query_one("#target-picker").choice == f"dev:{device}"
        await pilot.press("ctrl+r")
        await until_screen(pilot, app, ConfirmDestroyScreen)
        await pilot.press(*"wrong", "enter")
        assert isinstance(app.screen, ConfirmDestroyScreen)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmDestroyScreen), "the question dismissed")
        assert live_of(app).control is None  # nothing started
        await pilot.press("ctrl+r")
        await until_screen(pilot, app, ConfirmDestroyScreen)
        await pilot.press(*Path(device).name, "enter")
        live = live_of(app)
        await until(pilot, lambda: plan_over(live), "the smoke job", 60)
        assert live.jobs[0].status == "ok", live.jobs[0].error
        # smoke streams no samples: the recorded array is read (in a worker) and shown
        await until(pilot, lambda: live.views[0].matrix.measured > 0, "the recorded latencies")
    assert_clean()


async def test_theme_switching_by_key_and_palette():
    app = make_app(AppConfig(is_root=False, start_screen="runs"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "fsscope-dark"
        await pilot.press("t")
        await until(pilot, lambda: app.theme == "fsscope-light", "the light theme")
        await pilot.press("t")
        await until(pilot, lambda: app.theme == "fsscope-high-contrast", "the high-contrast theme")
        await pilot.press("t")
        await until(pilot, lambda: app.theme == "fsscope-dark", "the dark theme again")
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the command palette")
        await pilot.press(*"Next theme")
        await until(pilot, lambda: app.screen.query(CommandList) and app.screen.query_one(CommandList).option_count,
                    "the palette's matches")
        await pilot.press("enter")
        await until(pilot, lambda: app.theme == "fsscope-light", "the next theme")
        assert app.get_css_variables()["heat-4"].lower() == "#7f0000"  # the theme file's value


async def test_non_root_opens_on_a_scratch_directory_with_a_banner():
    app = make_app(AppConfig(is_root=False))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        banner = str(app.screen.query_one("#banner").content)
        assert "Not running as root" in banner and "cannot format" in banner
        picker = app.screen.query_one("#target-picker")
        assert picker.kind == "dir" and picker.spec().path == str(paths.home() / "scratch")
        # before anything starts, the directory target says which file system holds it
        note = " ".join(str(app.screen.query_one("#target-note").content).split())
        found = existing_fs(picker.spec().path)
        assert f"Found there: {found.fs} " in note and found.mountpoint in note, note
        assert app.screen.query_one("#recipe-picker").disabled
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        text = app.screen.query_one("#help-text").source
        assert "repeatable" in text and "level shift" in text and "each row is one run" in text
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen), "the help screen closed")


async def test_setup_refuses_bad_parameters_with_a_clear_message():
    app = make_app(AppConfig(is_root=True, discover_devices=lambda: []))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await setup_ready(pilot, app)
        files = app.screen.query_one("#param-probe-files")
        files.focus()
        await type_into(pilot, "0")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: app._notifications, "the refusal")
        assert app.current_mode == "setup"
        messages = [n.message for n in app._notifications]
        assert any("files must be at least 1" in m for m in messages), messages


@pytest.mark.privileged
async def test_runs_screen_replays_and_compares(scratch):
    """Two real probe runs, then: runs screen, replay, compare (all from the keyboard)."""
    from fsscope import recipes
    from fsscope.engine import runner
    from fsscope.targets import TargetSpec

    for _ in range(2):
        handle = runner.start("probe", spec_from_data("probe", FLAGGING_PROBE["probe"]), TargetSpec("ram", size_bytes=400 * 2**20),
                              recipes.load("xfs-default"))
        handle.drain()
    app = make_app(AppConfig(start_screen="runs"))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: runs_listed(app) and app.screen.query_one("#runs-table").row_count >= 2,
                    "the two runs listed")
        await pilot.press("enter")
        replay = await until_screen(pilot, app, LiveScreen, "the replay")
        assert replay.record is not None
        assert replay.views[0].matrix.values.shape == (5, 200)
        assert replay.flags_panel.flags  # findings come back from events.ndjson
        await pilot.press("escape")
        await open_compare(pilot, app)
        verdict = str(app.screen.query_one("#compare-verdict").content)
        assert "K-S distance" in verdict and "median" in verdict
        await pilot.press("escape")
    assert_clean()


@pytest.mark.privileged
async def test_probe_final_flags_are_the_reports(scratch):
    """Findings stream after each run (from the runs so far); when the report arrives the
    flags list is exactly its final list (no stale titles, no duplicates from interim runs)."""
    app = make_app(AppConfig(target=TargetSpec("ram", size_bytes=400 * 2**20), recipe=recipes.load("xfs-default"),
                             job_defaults={"probe": {"files": 300, "runs": 4}}))
    async with app.run_test(size=SIZE) as pilot:
        live, job = await run_plan(pilot, app, "the probe", 120)
        final = [f.title for f in job.report.flags]
        assert final, "the probe raised no flags"
        # the report's list, then any streamed flag it did not keep, marked withdrawn (issue 27)
        assert [f.title for f in live.flags_panel.flags if not f.withdrawn] == final
        assert [f.title for f in live.views[0].flags if not f.withdrawn] == final
        assert all(f.withdrawn for f in live.views[0].flags[len(final):])
        streamed = [e for e in Path(job.run_path, "events.ndjson").read_text().splitlines() if '"finding"' in e]
        assert streamed, "no finding was streamed while the probe ran"
        marked = {i for f in live.views[0].flags if f.kind not in ("lineargrowth", "linear") and not f.withdrawn
                  for i in f.indices}
        heatmap = live.query_one("#heatmap", Heatmap)
        assert set(np.flatnonzero(heatmap._flagged).tolist()) == marked
    assert_clean()
    assert not app.worker_errors


async def test_final_flags_replace_interim_ones_and_keep_the_selection():
    """Interim findings (a 2/2-run outlier, level shifts at 27 and 28 from two analyses), one
    selected; the report's list replaces them and the same flag stays selected."""
    from test_tui_model import probe_report

    app = make_app(AppConfig(is_root=False, start_screen="live"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        live = live_of(app)
        live.jobs = [JobState(0, "probe", spec_from_data("probe", {"files": 300, "runs": 5}))]
        live.post_message(msg.JobStarted(0, "probe", "run-x", "/nonexistent-run", 1))
        interim = [
            {"flag": "outlier", "index": 253, "structure": None, "runs_flagged": 2, "runs": 2,
             "title": "file 253 slow in 2/2 runs (9.0× typical) — repeatable, unexplained", "note": "2 runs"},
            {"flag": "levelshift", "index": 27, "structure": None, "title": "level shift at file 27", "note": "a"},
            {"flag": "levelshift", "index": 28, "structure": None, "title": "level shift at file 28", "note": "b"},
        ]
        for finding in interim:
            live.post_message(msg.FindingArrived(0, events.finding_from_dict(finding)))
        await until(pilot, lambda: len(live.flags_panel.flags) == 3, "the interim flags")
        live.flags_panel.focus()
        await pilot.press("home", "down")  # the level shift at 27
        await until(pilot, lambda: "file 27" in live.notes.text, "the note of the level shift at 27")
        report = probe_report()
        live.post_message(msg.JobFinished(0, "ok", None, report, 0))
        await until(pilot, lambda: live.jobs[0].report is report, "the report handled")
        assert [f.title for f in live.flags_panel.flags if not f.withdrawn] == [f.title for f in report.flags]
        # the level shift at 28 the report does not keep stays, struck through, saying why
        (gone,) = [f for f in live.flags_panel.flags if f.withdrawn]
        assert gone.indices == (28,) and "noise after 5 runs" in gone.withdrawn
        assert live.flags_panel.highlighted == 2  # still the level shift at 27, now third
        assert "9.0 → 18.0 µs" in live.notes.text
        assert isinstance(live.job_view, HeatView)
        heatmap = live.query_one("#heatmap", Heatmap)
        assert heatmap._flagged[[253, 64, 128, 192, 27]].all() and not heatmap._flagged[28]


async def set_param(pilot, app: FsscopeApp, field_id: str, text: str) -> None:
    app.screen.query_one(f"#{field_id}").focus()
    await pilot.pause()
    await type_into(pilot, text)


@pytest.mark.privileged
async def test_bench_live_view_variation_table_and_replay(scratch):
    """A short bench (2 runs × 3 s on a RAM image) picked and parametrised from the keyboard:
    the throughput view draws the current run over the band of the first, the variation table
    fills in as runs finish, the flags are the report's, the job's own counters feed the
    device sparklines; the recorded run replays in the same view."""
    app = make_app(AppConfig(target=TargetSpec("ram", size_bytes=256 * 2**20), jobs=("probe", "bench"),
                             job_defaults={"bench": {"nfiles": 60, "mean_file_size_bytes": 8192}}))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.screen.query_one("#job-list").focus()
        await pilot.press("space", "down", "space")  # probe off, bench on (its panel shows)
        await until(pilot, lambda: app.screen.query_one("#job-picker").selected == ["bench"], "bench alone picked")
        for field, text in (("runs", "2"), ("duration_s", "3"), ("workers", "2"), ("window_sizes_s", "1")):
            await set_param(pilot, app, f"param-bench-{field}", text)
        await pilot.press("ctrl+r")
        live = live_of(app)
        await until(pilot, lambda: live.control is not None and live.views.get(0) is not None
                       and live.views[0].data.runs.get(0) is not None and live.views[0].data.runs[0].bins, "the first second of run 1", 60)
        bench = job_view(live, BenchView)
        assert live.query_one("#job-view").current == "bench-view"
        assert bench.chart.data is not None and not bench.chart.data.empty
        model = live.views[0].data
        await until(pilot, lambda: model.current == 1 or live.control.done.is_set(), "run 2", 60)
        if not live.control.done.is_set():  # between the runs: run 1 is in the table as an estimate
            assert bench.variation_table.row_count >= 1
            assert str(bench.variation_table.get_row_at(0)[1]).startswith("≈")
        job = await job_done(pilot, live, "the bench to end", 60)
        report = job.report

        def check_view(screen: LiveScreen) -> None:
            view = job_view(screen, BenchView)
            table = view.variation_table
            assert table.row_count == 2
            for r, run in enumerate(report.runs):
                assert table.get_row_at(r)[1] == f"{run.ops_per_s:,.0f}"
            assert f"relative range {report.variation.relative_range:.1%}" in view.summary_text
            assert view.ops_table.row_count == len(report.runs[0].ops)
            data = view.chart.data
            assert data is not None and not data.empty and data.run == 1 and data.band_runs == (0,)
            assert sum(v is not None for v in data.current) == 3
            assert [f.title for f in screen.flags_panel.flags] == [f["title"] for f in report.flags]
            assert screen.query_one("#spark-rate").data
            kernel = report.runs[1].kernel_windows
            if kernel is not None:  # traced: the kernel's events of the drawn run under the chart
                commits = sum(kernel.journal_commits)
                assert ("J" in view.kernel_strip.text) == (commits > 0), view.kernel_strip.text
                assert "written" in view.kernel_strip.text

        check_view(live)
        assert live._job_telemetry_s is not None and live.iops.values  # the job's own counters
        # replay the recorded run from the runs screen
        replay = await open_replay(pilot, app, job.run_id)
        assert isinstance(replay, LiveScreen) and replay.record is not None
        check_view(replay)
        await pilot.press("escape")
    assert_clean()
    assert not app.worker_errors


@pytest.mark.privileged
async def test_syncwrite_view_table_per_buffer_size(scratch):
    """A tiny sync-write sweep (sizes typed as 4K,64K): log–log curves for throughput and
    latency, one row per size with the report's throughput ± CI, the best-ratio size starred,
    and the same when replayed."""
    from fsscope.tui.widgets.syncwrite_chart import SyncWriteChart
    from fsscope.tui.widgets.syncwrite_view import SyncWriteView

    app = make_app(AppConfig(target=TargetSpec("ram", size_bytes=256 * 2**20), jobs=("syncwrite",)))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#job-picker").selected == ["syncwrite"]  # the only job offered
        for field, text in (("buffer_sizes_bytes", "4K,64K"), ("file_size_bytes", "1M"), ("repeats", "3")):
            await set_param(pilot, app, f"param-syncwrite-{field}", text)
        live, job = await run_plan(pilot, app, "the sweep", 60)
        report = job.report
        assert [p.buffer_bytes for p in report.sizes] == [4096, 65536]

        def check(screen: LiveScreen) -> None:
            view = job_view(screen, SyncWriteView)
            table = view.table
            assert table.row_count == 2
            for r, point in enumerate(report.sizes):
                row = table.get_row_at(r)
                assert row[2].startswith(f"{point.throughput_mean / 1e6:,.1f} ±")
                assert ("★" in str(row[0])) == (point.buffer_bytes == report.recommended_bytes)
            charts = {c.metric: str(c.content) for c in view.query(SyncWriteChart)}
            assert set(charts) == {"throughput", "latency"}
            for text in charts.values():
                assert "(log) vs buffer size (log)" in text and "4K" in text and "64K" in text
                assert text.count("●") + text.count("★") >= 2 and "95% CI" in text

        check(live)
        check(await open_replay(pilot, app, job.run_id))
    assert_clean()
    assert not app.worker_errors


if __name__ == "__main__":  # pragma: no cover
    asyncio.run(test_theme_switching_by_key_and_palette())
