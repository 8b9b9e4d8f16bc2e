"""Issue 33's walk, the parts a user sees: at 80×24 and 160×48 each job's key result shows
without scrolling sideways (check's traffic lights, the bench's latency and variation tables),
the heatmap's cursor is drawn only once placed and is not the threshold's ◆, zoomed out a
series does not mark every bucket, a click on a job's name shows it without ticking it, runs
a probe added are counted as such, and XFS on 256M is refused at Setup in one line.

The replays are the snapshot tests' recorded runs (real run directories, read by the app)."""

from __future__ import annotations

import json
import shutil
from contextlib import asynccontextmanager

import numpy as np
import pytest
from pilot_wait import until
from rich.cells import cell_len
from test_tui_snapshots import JOB_RUNS, app_for, own_home, replay_newest, settle, write_bench_run, write_run
from textual.geometry import Region
from textual.widgets import DataTable, Sparkline
from textual.widgets._footer import FooterKey

from fsscope import recipes
from fsscope.errors import FsscopeError
from fsscope.layout.summary import FRAG_ROWS
from fsscope.targets import TargetSpec, filesystem
from fsscope.tui import AppConfig, make_app
from fsscope.tui.model import spec_words
from fsscope.tui.screens.live import LiveScreen
from fsscope.tui.screens.setup import SetupScreen
from fsscope.tui.widgets.fit_footer import FitFooter
from fsscope.tui.widgets.heat_legend import NO_CURSOR, HeatLegend
from fsscope.tui.widgets.heatmap import CURSOR_GLYPH, Heatmap
from fsscope.workloads.probe import ProbeSpec
from fsscope.workloads.probe_job import runs_words

SIZES = [(80, 24), (160, 48)]
SIZE_IDS = ["80x24", "160x48"]


@pytest.fixture
def home(monkeypatch):
    with own_home() as _:
        from test_tui_snapshots import HOME

        monkeypatch.setenv("FSSCOPE_HOME", str(HOME))
        yield HOME


def recorded_app(home, job: str):
    """The app on Runs, over the snapshot tests' recorded run of ``job``."""
    shutil.copytree(JOB_RUNS[job], home / "runs" / JOB_RUNS[job].name)
    return app_for(start_screen="runs")


def line_text(widget, y: int) -> str:
    return "".join(segment.text for segment in widget.render_line(y))


def assert_table_fits(table: DataTable, least_rows: int) -> None:
    """Rows on screen (at least ``least_rows``, or all) and no column off the side."""
    region = table.scrollable_content_region
    assert table.row_count >= least_rows, table.row_count
    assert region.height - 1 >= min(least_rows, table.row_count), (table.id, region)  # 1: the header
    assert table.virtual_size.width <= region.width, (table.id, table.virtual_size, region)


LONG_HEADLINE = ("unfit: runs vary too much: CV 31.2% would need 165 runs for ±5 % — find the noise first "
                 "(the findings above, or a quieter machine)")


def widget_text(widget) -> str:
    """What a widget shows inside its border, its lines joined and spaces folded (wrapped words
    read as one text)."""
    inside = widget.content_region
    lines = widget.render_lines(Region(inside.x - widget.region.x, inside.y - widget.region.y, *inside.size))
    return " ".join(word for line in lines for word in "".join(segment.text for segment in line).split())


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_checks_traffic_lights_have_rows(home, size):
    """And the verdict whole beside them: at 80×24 the calibration box showed one line, so a
    calibration's headline was cut before "165 runs"."""
    app = recorded_app(home, "check")
    # the run's result says so (the model reads the report from the recorded Result event)
    recorded = home / "runs" / JOB_RUNS["check"].name / "events.ndjson"
    lines = [json.loads(line) for line in recorded.read_text().splitlines()]
    for line in lines:
        if line["kind"] == "result":
            line["report"]["headline"] = LONG_HEADLINE
    recorded.write_text("".join(json.dumps(line) + "\n" for line in lines))
    async with app.run_test(size=size) as pilot:
        await replay_newest(pilot)
        table = app.screen.query_one("#check-table", DataTable)
        assert table.scrollable_content_region.height - 1 >= (3 if size == (80, 24) else 10), table.region
        # the verdict (the calibration's headline) is on screen too, every word of it
        cal = app.screen.query_one("#check-cal")
        await until(pilot, lambda: "165 runs" in widget_text(cal), "the verdict")
        assert cal.region.bottom <= app.screen.query_one("#live-main").region.bottom, cal.region
        assert " ".join(LONG_HEADLINE.split()) in widget_text(cal), widget_text(cal)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_bench_latency_and_variation_tables_show_rows_and_every_column(home, size):
    write_bench_run("20250101-140000-bench", seed=3)
    app = app_for(start_screen="runs")
    async with app.run_test(size=size) as pilot:
        await replay_newest(pilot)
        await until(pilot, lambda: app.screen.query_one("#bench-variation", DataTable).row_count == 3, "the runs")
        await pilot.pause()
        assert_table_fits(app.screen.query_one("#bench-ops", DataTable), 3)
        assert_table_fits(app.screen.query_one("#bench-variation", DataTable), 3)
        summary = str(app.screen.query_one("#bench-summary").content)
        assert "range 14.4%" in summary and "RSD" in summary, summary
        wide = size == (160, 48)
        assert (len(app.screen.query_one("#bench-variation", DataTable).columns) == 4) is wide


async def test_heatmap_cursor_is_drawn_once_placed_and_a_series_marks_one_bucket(home):
    """Nothing placed: no cursor drawn, the legend says "cursor: –"; focused, the cursor ╋
    is drawn and read out. Zoomed out (×15) the outlier, the series' first member and the
    level shift are marked: three ``!``, not one per bucket holding a series member."""
    write_run("20250101-120000-probe", seed=1)
    app = app_for(start_screen="runs")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LiveScreen), "the replay")
        await settle(pilot)
        heatmap = app.screen.query_one("#heatmap", Heatmap)
        legend = app.screen.query_one("#legend")
        # the replay focuses the heatmap: its cursor is drawn and read out at once
        await until(pilot, lambda: legend.cursor_text != NO_CURSOR, "the cursor read out")
        assert heatmap.cursor_shown and CURSOR_GLYPH in line_text(heatmap, 2)
        # the focus elsewhere, a view shown anew: no cursor drawn while the legend says "cursor: –"
        app.screen.query_one("#flags").focus()
        await pilot.pause()
        view = app.screen.views[0]
        heatmap.set_matrix(None)
        app.screen.job_view.show(view, live=False)
        await pilot.pause()
        assert not heatmap.cursor_shown and legend.cursor_text == NO_CURSOR
        lines = [line_text(heatmap, y) for y in range(heatmap.size.height)]
        assert not any(CURSOR_GLYPH in line or "◆" in line for line in lines), lines
        assert heatmap.effective_zoom > 1 and lines[1].count("!") == 3, (heatmap.effective_zoom, lines[1])
        heatmap.focus()
        await until(pilot, lambda: legend.cursor_text != NO_CURSOR, "the cursor read out")
        assert heatmap.cursor_shown and CURSOR_GLYPH in line_text(heatmap, 2)
        await pilot.press("home")
        for _ in range(7):  # zoomed in to one file a column: each of the series' 8 members marked
            await pilot.press("plus")
        await until(pilot, lambda: heatmap.effective_zoom == 1, "one file a column")
        flagged, _ = heatmap._mark_columns()
        assert flagged[[12, 64, 128, 192, 300, 512]].all() and flagged.sum() == 10, np.flatnonzero(flagged)
        assert line_text(heatmap, 1)[7:].index("!") == 12  # drawn over file 12's column


async def test_a_click_on_a_jobs_name_shows_it_and_only_its_box_ticks_it(home):
    app = make_app(AppConfig(is_root=False, discover_devices=lambda: [], jobs=("smoke", "probe"),
                             job_defaults={"probe": {"files": 200, "runs": 2}}))
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.screen.query("#job-list"), "the job list")
        jobs = app.screen.query_one("#job-list")
        before = list(jobs.selected)
        smoke = 0  # the first row
        await pilot.click("#job-list", offset=(12, smoke))
        await until(pilot, lambda: jobs.highlighted == smoke, "smoke highlighted")
        assert list(jobs.selected) == before, "a click on the name ticked the job"
        await pilot.click("#job-list", offset=(1, smoke))
        await until(pilot, lambda: "smoke" in jobs.selected, "smoke ticked from its box")


def test_the_runs_a_probe_may_add_are_counted_as_such():
    assert runs_words(ProbeSpec(runs=5)) == "5–15"
    assert runs_words(ProbeSpec(runs=5, max_runs=5)) == "5"
    spec = {"runs": 5, "max_runs": 15, "fresh_fs": True, "write_bytes": 4096, "in_root": False}
    words = spec_words(spec, runs_made=8, sep=" · ")
    assert words.startswith("runs 8 (5 asked, up to 15)") and "fresh fs yes" in words and "write 4 KiB" in words
    assert "True" not in words and "4096" not in words, words


@pytest.mark.privileged
async def test_xfs_on_256m_is_refused_at_setup_in_one_line(home):
    xfs = recipes.load("xfs-default")
    with pytest.raises(FsscopeError, match="XFS needs at least 300M"):
        filesystem.check_size(xfs, 256 * 2**20)
    filesystem.check_size(xfs, 300 * 2**20)  # mkfs.xfs takes 300 MiB
    app = make_app(AppConfig(target=TargetSpec("ram", size_bytes=256 * 2**20), recipe=xfs, is_root=True,
                             discover_devices=lambda: [], jobs=("probe",)))
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.screen.query("#job-list"), "the setup screen")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: app._notifications, "a message")
        (note,) = [n for n in app._notifications if n.title.startswith("Cannot start")]
        assert "XFS needs at least 300M" in note.message and len(note.message.splitlines()) == 1, note.message
        assert isinstance(app.screen, SetupScreen) and not app.plan_controls


async def test_setup_says_what_a_ram_or_directory_target_takes_and_scans_fields_have_hints(home):
    """A RAM image has no path (the field said "path  path"), a directory or a device no size
    (512M stayed on a directory); scan's fields say what they do (the generic panel had none)."""
    app = make_app(AppConfig(is_root=True, discover_devices=lambda: [], jobs=("scan", "probe")))
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.screen.query("#target-list"), "the setup screen")
        targets = app.screen.query_one("#target-list")
        size_row = app.screen.query_one("#target-size-row")
        path = app.screen.query_one("#target-path")
        kinds = {option.id: n for n, option in enumerate(targets._options)}
        targets.highlighted = kinds["ram"]
        await until(pilot, lambda: "a new file in" in path.placeholder, "the RAM image's path placeholder")
        assert path.disabled and size_row.display
        targets.highlighted = kinds["dir"]
        await until(pilot, lambda: not size_row.display, "no size for a directory")
        jobs = app.screen.query_one("#job-list")
        jobs.highlighted = 0  # scan: its panel mounts on first highlight
        await until(pilot, lambda: app.screen.query("#hint-scan-near"), "scan's hints")
        hint = str(app.screen.query_one("#hint-scan-near").render())
        assert "structural change" in hint, hint


def assert_footer_fits(screen) -> list[str]:
    """Every key the footer shows is whole and inside it (Textual's footer cut the last ones
    mid-label); F1 Help is always there. The shown keys' labels."""
    footer = screen.query_one(FitFooter)
    shown = [k for k in footer.query(FooterKey) if k.display]
    for key in shown:
        assert key.region.right <= footer.region.right, (key.description, key.region, footer.region)
        assert key.region.width >= len(key.render().plain), (key.description, key.region)
    labels = [k.description for k in shown]
    assert "Help" in labels, labels
    return labels


async def walk_screens(pilot, app):
    """Setup, Runs, a probe's replay, the compare screen of two probes, the Lab, and the keys:
    each yields once it is on screen."""
    from test_tui_snapshots import compare_two

    await until(pilot, lambda: app.screen.query("#job-list"), "the setup screen")
    yield "setup"
    await pilot.press("f4")
    await settle(pilot)
    yield "runs"
    await replay_newest(pilot)
    yield "replay"
    await pilot.press("escape")
    await until(pilot, lambda: not isinstance(app.screen, LiveScreen), "back in Runs")
    await compare_two(pilot)
    yield "compare"
    await pilot.press("escape")
    await pilot.press("f5")
    await until(pilot, lambda: app.screen.query("#lab-tree"), "the Lab")
    yield "lab"


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_footer_keys_and_the_compare_legend_are_whole(home, size):
    """At 80×24 the footer's last keys and the compare legend's explanation were cut; now a
    narrow footer leaves out the app's least needed keys, says "? keys", and the legend puts
    what its glyphs mean on lines of their own when they do not fit beside the bar."""
    write_run("20250101-120000-probe", seed=1)
    write_run("20250101-130000-probe", seed=2, shift=1.3)
    app = make_app(AppConfig(is_root=True, discover_devices=lambda: [], jobs=("smoke", "probe"),
                             job_defaults={"probe": {"files": 200, "runs": 2}}))
    async with app.run_test(size=size) as pilot:
        async for name in walk_screens(pilot, app):
            await pilot.pause()
            labels = assert_footer_fits(app.screen)
            narrow = size == (80, 24)
            if name == "replay":  # the heatmap focused: its keys and the screen's stay, the app's give way
                app.screen.query_one("#heatmap").focus()
                await pilot.pause()
                await until(pilot, lambda: "zoom in" in assert_footer_fits(app.screen), "the heatmap's keys")
                labels = assert_footer_fits(app.screen)
                assert {"Flags→MD", "Back", "zoom in", "zoom out", "fit"} <= set(labels), labels
                assert ("Theme" not in labels) is narrow, labels
            if name == "compare":
                for legend in app.screen.query(HeatLegend):
                    lines = legend._lines(legend.content_size.width)
                    assert all(line.cell_len <= legend.content_size.width for line in lines), lines
                    words = " ".join(line.plain for line in lines)
                    assert "!: flagged" in words and "•: selected" in words, words
                    assert legend.region.height == len(lines)
            footer = app.screen.query_one(FitFooter)
            left_out = [k for k in footer.query(FooterKey) if not k.display
                        and not k.has_class("-command-palette") and not k.has_class("-all-keys")]
            assert ("keys" in labels) == bool(left_out), (name, labels)  # where the rest are listed
            assert not left_out or narrow, (name, labels)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_the_ladders_rows_do_not_wrap(home, size):
    app = recorded_app(home, "ladder")
    async with app.run_test(size=size) as pilot:
        await replay_newest(pilot)
        text = app.screen.query_one("#ladder-text")
        await until(pilot, lambda: "runs final" in str(text.content), "the ladder")
        width = text.content_size.width
        rows = [line for line in str(text.content).splitlines() if line.startswith("  ") and line[3:4].strip()]
        assert len(rows) >= 2, str(text.content)
        assert all(cell_len(row) <= width for row in rows), (width, rows)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_the_job_list_shows_each_jobs_label_whole(home, size):
    """The summaries were cut mid-word at 80 columns ("write+fsync small fi…"); the list shows
    each job's short label, whole, and the summary stays above its panel."""
    from fsscope.engine import jobs

    app = make_app(AppConfig(is_root=True, discover_devices=lambda: []))
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.screen.query("#job-list"), "the job list")
        listed = app.screen.query_one("#job-list")
        await pilot.pause()
        for n in range(listed.option_count):
            listed.highlighted = n
            await pilot.pause()
            y = n - listed.scroll_offset.y
            line = line_text(listed, y)
            name = listed.get_option_at_index(n).value
            assert f"{name}  {jobs.job(name).label}" in line and "…" not in line, line
        await until(pilot, lambda: app.screen.query(".job-summary"), "a job's summary")
        assert any(str(s.render()) == jobs.job(name).summary for s in app.screen.query(".job-summary"))


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_the_runs_table_does_not_scroll_sideways(home, size):
    """At 80 columns the runs table ran off the side after the target's path (recipe and
    started unseen); now the target is last, takes the room left, and "started" (the run's id
    says it) gives way first."""
    write_run("20250101-120000-probe", seed=1)
    app = app_for(start_screen="runs")
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#runs-table", DataTable)
        assert_table_fits(table, 1)
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[-1] == "target" and "recipe" in labels and ("started" in labels) is (size == (160, 48)), labels
        (row,) = [[str(c) for c in table.get_row_at(0)]]
        # what tells the target apart where the whole does not fit (it ended "image /var/tmp/d…")
        assert row[1] == "20250101-120000-probe" and row[-1] == (
            "image demo.img" if size == (80, 24) else "image /var/tmp/demo.img"), row
        await pilot.press("enter")  # the opened run names it whole
        await until(pilot, lambda: isinstance(app.screen, LiveScreen), "the replay")
        await until(pilot, lambda: "image /var/tmp/demo.img" in widget_text(app.screen.query_one("#progress")),
                    "the whole target")


@asynccontextmanager
async def focused_heatmap(size):
    """A recorded probe replayed at ``size``, its heatmap focused: (pilot, heatmap, legend)."""
    write_run("20250101-120000-probe", seed=1)
    app = app_for(start_screen="runs")
    async with app.run_test(size=size) as pilot:
        await replay_newest(pilot)
        heatmap = app.screen.query_one("#heatmap", Heatmap)
        heatmap.focus()
        yield pilot, heatmap, app.screen.query_one("#legend", HeatLegend)


async def test_the_cursors_reading_follows_the_values_arriving_under_it(home):
    """In the walk the cursor, placed as the probe started, said "not measured" over a run
    long finished: the reading is taken again when values arrive under the cursor."""
    from fsscope.format import format_ns
    from fsscope.tui.model import LatencyMatrix

    async with focused_heatmap((80, 24)) as (pilot, heatmap, legend):
        heatmap.set_matrix(LatencyMatrix(runs=2, files=100))  # a job starting: nothing measured yet
        await until(pilot, lambda: "not measured" in legend.cursor_text, "the empty reading")
        matrix = heatmap.matrix
        assert matrix is not None
        heatmap.samples_added(*matrix.put(0, 0, [5_000] * 100))
        await until(pilot, lambda: format_ns(5_000) in legend.cursor_text, "the reading of the values that came")
        heatmap.samples_added(*matrix.put(1, 0, [9_000] * 100))  # another run: the cursor's reading stays
        await pilot.pause()
        assert format_ns(5_000) in legend.cursor_text, legend.cursor_text


async def test_a_replayed_check_focuses_its_table_not_its_closed_filter(home):
    """Opened from Runs, check's view gave the focus to its hidden filter: the footer offered
    "esc Clear filter" and the keys typed went into a field nobody could see."""
    app = recorded_app(home, "check")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, LiveScreen), "the replay")
        await settle(pilot)
        await until(pilot, lambda: app.focused is not None and app.focused.id == "check-table", "the table focused")
        assert "Clear filter" not in assert_footer_fits(app.screen)


async def test_a_resize_reads_out_the_files_under_the_cursor_again(home):
    """Fitted to the width, a resize changes the zoom: the legend kept the earlier zoom's file
    range while the cursor's column held other files. The cursor stays on its file and its
    bucket is read out again, as after a zoom."""
    async with focused_heatmap((160, 48)) as (pilot, heatmap, legend):
        await until(pilot, lambda: legend.cursor_text != NO_CURSOR, "the cursor read out")
        start = heatmap.cursor_col
        for _ in range(40):
            await pilot.press("right")
        await until(pilot, lambda: heatmap.cursor_col == start + 40, "the cursor moved")
        wide_zoom, (first, last) = heatmap.effective_zoom, heatmap.cursor_files()
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: heatmap.effective_zoom != wide_zoom, "the narrower fit")
        now_first, now_last = heatmap.cursor_files()
        assert now_first <= first <= now_last, (first, last, now_first, now_last)  # still on its file
        files = f"file {now_first} ·" if now_first == now_last else f"files {now_first}–{now_last} ("
        await until(pilot, lambda: files in legend.cursor_text, f"the reading of {files}")


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_the_spark_rows_labels_and_values_keep_a_space_from_their_bars(home, size):
    """A label or value as wide as its column ("p50 worst op", "12,345 all dis") ran into the
    sparkline: one blank cell each side of the bars, whatever the words."""
    write_bench_run("20250101-140000-bench", seed=3)
    app = app_for(start_screen="runs")
    async with app.run_test(size=size) as pilot:
        await replay_newest(pilot)
        sparks = app.screen.query_one("#sparks")
        sparks.show("iops", [120.0, 5_000.0, 12_345.0], "12,345 all disks"[:14])
        sparks.show("p50", [1.0, 2.0], "12 µs write", label="p50 worst op")
        await pilot.pause()
        for key, words, shown in (("p50", "p50 worst op", "12 µs write"), ("iops", "device IOPS", "12,345 all dis")):
            row = sparks.query_one(f"#spark-row-{key}")
            label, line, value = row.query_one(".spark-label"), row.query_one(Sparkline), row.query_one(".spark-value")
            assert widget_text(label) == words and widget_text(value) == shown, (widget_text(label), widget_text(value))
            # the words end a cell before the bars begin, and start a cell after they end
            assert label.content_region.x + cell_len(words) < line.region.x, (key, label.content_region, line.region)
            assert line.region.right < value.content_region.right - cell_len(shown), (key, line.region, value.content_region)
            assert line.region.width >= 8, line.region


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_the_bench_views_titles_are_whole(home, size):
    """At 80×24 the chart's title and legend and the variation box's title ended in "…"."""
    write_bench_run("20250101-140000-bench", seed=3)
    app = app_for(start_screen="runs")
    async with app.run_test(size=size) as pilot:
        await replay_newest(pilot)
        chart = app.screen.query_one("#throughput")
        await until(pilot, lambda: "run 3" in str(chart.border_title), "the chart's title")
        box = app.screen.query_one("#bench-variation-box")
        for widget, words in ((chart, chart.border_title), (chart, chart.border_subtitle), (box, box.border_title)):
            assert cell_len(str(words)) <= widget.region.width - 4, (widget.region, words)  # corners, spaces


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_a_finished_agings_fresh_vs_aged_table_shows_its_rows(home, size):
    """At 80×24 the finished aging's status box (its stop note's four lines) filled the pane:
    the fresh-vs-aged table, its result, had no row on screen. There the status keeps its
    headline lines and the fits give way (their p are the Live panel's rows); at 160×48 all
    of them show."""
    from test_tui_aging import REPORT

    app = recorded_app(home, "age")
    # the recorded run (a directory target) measured no fragmentation: the fresh and aged
    # measurements of an image's run put in its result
    recorded = home / "runs" / JOB_RUNS["age"].name / "events.ndjson"
    lines = [json.loads(line) for line in recorded.read_text().splitlines()]
    for line in lines:
        if line["kind"] == "result":
            line["report"].update(fresh=REPORT["fresh"], aged=REPORT["aged"], fs="ext4")
    recorded.write_text("".join(json.dumps(line) + "\n" for line in lines))
    async with app.run_test(size=size) as pilot:
        await replay_newest(pilot)
        table = app.screen.query_one("#age-frag", DataTable)
        await until(pilot, lambda: table.row_count == len(FRAG_ROWS), "the fresh-vs-aged rows")
        await pilot.pause()
        short = size == (80, 24)
        assert_table_fits(table, 5 if short else len(FRAG_ROWS))
        assert table.region.bottom <= app.screen.query_one("#live-main").region.bottom, table.region
        status = app.screen.query_one("#age-status")
        assert "stopped: convergence_bound" in widget_text(status) and "ops 3,519" in widget_text(status)
        fits = app.screen.query_one("#age-fits")
        assert fits.display is not short and (short or fits.region.height >= 10), fits.region


@pytest.mark.privileged
async def test_scan_on_a_target_it_cannot_read_is_refused_at_setup_and_a_failed_scan_says_so(home):
    """Scan was offered for a RAM image, then failed once running, its view still saying
    "scanning… (shown when the job ends)" under a row that said failed."""
    from fsscope.engine import registry
    from fsscope.tui.config import JobRequest, RunPlan

    ram = TargetSpec("ram", size_bytes=64 * 2**20)
    ext4 = recipes.load("ext4-default")
    app = make_app(AppConfig(target=ram, recipe=ext4, is_root=True, discover_devices=lambda: [],
                             jobs=("scan",)))
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.screen.query("#job-list"), "the setup screen")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: app._notifications, "a message")
        (note,) = [n for n in app._notifications if n.title.startswith("Cannot start")]
        assert note.title == "Cannot start" and len(note.message.splitlines()) == 1, note.message
        assert note.message.startswith("scan reads a tree you already have: choose a directory target "
                                       "(pick Directory), not RAM image (64 MiB in "), note.message
        assert isinstance(app.screen, SetupScreen) and not app.plan_controls
        # past Setup (a plan started as the CLI would), the job refuses in the same words and
        # its view says it failed, with why
        app.start_plan(RunPlan(ram, ext4, (JobRequest("scan", registry.spec_from_data("scan", {})),)))
        live = app.live
        await until(pilot, lambda: live.jobs and live.jobs[0].status not in ("", "running", "waiting")
                    and live.control is not None and live.control.done.is_set(), "the scan to end", 60)
        job = live.jobs[0]
        assert job.status == "failed", (job.status, job.error)
        summary = live.query_one("#scan-summary")
        await until(pilot, lambda: "failed" in widget_text(summary), "the scan view's failure")
        words = widget_text(summary)
        assert "scanning" not in words and words.startswith("failed: scan reads a tree you already have"), words
        assert "not RAM image (64 MiB in" in words, words


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_the_recipes_text_fields_placeholders_are_whole(home, size):
    """At 80×24 +mount's placeholder read "extra mount options," (and +mkfs's, I/O sched's
    were cut too): there the short forms; at 160×48 the long ones, whole."""
    from textual.widgets import Input

    app = make_app(AppConfig(is_root=True, discover_devices=lambda: []))
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.screen.query("#job-list"), "the setup screen")
        await pilot.pause()
        for key in ("prep-io_scheduler", "mkfs-extra", "mount-extra"):
            field = app.screen.query_one(f"#{key}", Input)
            assert cell_len(field.placeholder) <= field.content_region.width, (key, field.placeholder, field.region)
        if size == (160, 48):
            assert app.screen.query_one("#mount-extra", Input).placeholder == "extra mount options, e.g. nobarrier"
