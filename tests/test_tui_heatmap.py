"""The heatmap draws what the data says: every cell on screen against a per-bucket reference
computed here, in each mode (fit with many files per column, several characters per file,
one file per column scrolled), every bucket aggregate, after a live batch, and in an ANSI
theme (the widget draws only truecolor styles and so skips Textual's per-segment conversion)."""

from __future__ import annotations

import numpy as np
import pytest
from pilot_wait import until
from textual.app import App, ComposeResult
from textual.filter import ANSIToTruecolor

from fsscope.analysis.heatbuckets import AGGREGATES, bucket
from fsscope.tui.model import LatencyMatrix
from fsscope.tui.themes import VARIABLE_DEFAULTS
from fsscope.tui.widgets.heatmap import GUTTER, HEADER_LINES, LEVELS, Heatmap

SIZE = (120, 30)


class HeatApp(App):
    def __init__(self, ansi_color: bool = False):
        super().__init__(ansi_color=ansi_color)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(VARIABLE_DEFAULTS)

    def compose(self) -> ComposeResult:
        yield Heatmap(id="heat")


def matrix(runs: int, files: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.lognormal(np.log(20_000), 0.8, size=(runs, files)).astype(np.int64)
    values[rng.random(values.shape) < 0.05] = -1  # not measured
    values[0, 3] = 3 * 10**9  # beyond 2**31 ns: exact in every aggregate
    return values


def reference(block: np.ndarray, aggregate: str) -> int:
    """One bucket's value, the slow obvious way."""
    block = block[block >= 0]
    if not block.size:
        return -1
    if aggregate == "max":
        return int(block.max())
    if aggregate == "mean":
        return int(block.sum() // block.size)
    q = {"p99": 0.99, "p90": 0.90, "p50": 0.50}[aggregate]
    return int(np.sort(block)[int(np.floor(q * (block.size - 1)))])


def screen_cells(heat: Heatmap, y: int) -> list[tuple[str, object]]:
    """(character, background colour) of each cell of screen line ``y``."""
    return [(ch, seg.style.bgcolor if seg.style else None) for seg in heat.render_line(y) for ch in seg.text]


def assert_cells_match(heat: Heatmap, values: np.ndarray, selected: set[int]) -> None:
    zoom, cw, h = heat.effective_zoom, heat.cell_width, heat.row_height
    scroll_x, scroll_y = (int(v) for v in heat.scroll_offset)
    width = heat.scrollable_content_region.width
    empty = heat._style("empty").bgcolor  # noqa: SLF001
    checked = 0
    for y in range(HEADER_LINES, heat.scrollable_content_region.height):
        run = (y - HEADER_LINES + scroll_y) // h
        if run >= values.shape[0] or run == heat.cursor_run:
            continue
        cells = screen_cells(heat, y)
        assert len(cells) == width
        for x in range(GUTTER, width):
            col = (scroll_x + x - GUTTER) // cw
            if col * zoom >= values.shape[1]:
                break
            expected = reference(values[run, col * zoom:(col + 1) * zoom], heat.aggregate)
            level = int(heat.levels(np.array([expected]))[0])
            colour = empty if level < 0 else heat.color_at(level / (LEVELS - 1)).bgcolor
            glyph = "•" if selected & set(range(col * zoom, (col + 1) * zoom)) else " "
            assert cells[x] == (glyph, colour), (heat.aggregate, run, col, expected, level)
            checked += 1
    assert checked > 0


def test_bucket_equals_the_per_bucket_reference():
    values = matrix(3, 1037)
    for zoom in (1, 2, 7, 100, 1037, 5000):
        for aggregate in AGGREGATES:
            got = bucket(values, zoom, aggregate)
            expected = [[reference(values[r, c * zoom:(c + 1) * zoom], aggregate) for c in range(got.shape[1])]
                        for r in range(values.shape[0])]
            assert got.tolist() == expected, (zoom, aggregate)


@pytest.mark.parametrize("mode", ["fit-many", "fit-wide", "one-per-column"])
async def test_every_cell_shows_its_buckets_colour(mode):
    files = {"fit-many": 20_000, "fit-wide": 23, "one-per-column": 5_000}[mode]
    values = matrix(4, files)
    selected = {5, 17, files // 2, files // 2 + 3}
    app = HeatApp()
    async with app.run_test(size=SIZE) as pilot:
        heat = app.query_one(Heatmap)
        heat.set_matrix(LatencyMatrix.from_array(values))
        heat.set_flags(sorted(selected), sorted(selected))
        if mode == "one-per-column":
            heat.zoom = 1
            heat._invalidate(buckets=True)  # noqa: SLF001
            heat._update_virtual_size()  # noqa: SLF001
            await until(pilot, lambda: heat.max_scroll_x > 0, "the zoomed view scrollable")
            heat.move_to_file(files // 2)
            await until(pilot, lambda: heat.scroll_offset.x > 0, "the view scrolled to the middle")
        assert (heat.effective_zoom > 1) == (mode == "fit-many") and (heat.cell_width > 1) == (mode == "fit-wide")
        for aggregate in AGGREGATES:
            heat.aggregate = aggregate
            heat._invalidate(buckets=True)  # noqa: SLF001
            assert_cells_match(heat, values, selected)


async def show_runs_in_progress(pilot, app, values: np.ndarray, measured: int):
    """The heatmap showing ``values`` measured up to file ``measured`` in every run: (the
    heatmap, its live matrix, its lines on screen)."""
    heat = app.query_one(Heatmap)
    live = LatencyMatrix.from_array(np.where(np.arange(values.shape[1]) < measured, values, -1))
    heat.set_matrix(live)
    await pilot.pause()
    return heat, live, heat.scrollable_content_region.height


async def test_a_live_batch_redraws_as_a_full_redraw_would():
    values = matrix(3, 20_000)
    app = HeatApp()
    async with app.run_test(size=SIZE) as pilot:
        heat, live, lines = await show_runs_in_progress(pilot, app, values, 15_000)
        before = [screen_cells(heat, y) for y in range(lines)]  # fills the strip cache
        live.put(1, 15_000, values[1, 15_000:].tolist())  # one batch of run 2
        heat.samples_added(1, 15_000, 20_000)
        patched = [screen_cells(heat, y) for y in range(lines)]
        assert patched != before
        heat._invalidate(buckets=True)  # noqa: SLF001
        assert patched == [screen_cells(heat, y) for y in range(lines)]
        assert_cells_match(heat, live.values, set())


async def test_data_is_bucketed_once_per_change_and_strips_are_kept_by_content(monkeypatch):
    """Frames without new data bucket nothing; after the first frame the next aggregate of the
    cycle is bucketed ahead, so switching to it and back buckets nothing more; a batch that widens the colour scale patches its columns (no full bucketing) and
    still draws what a full redraw would; lines whose cells did not change keep their strips."""
    from fsscope.analysis import heatbuckets

    calls = []

    def counted(values, zoom, aggregate, summary=None, columns=None):
        calls.append((values.shape, aggregate))
        return bucket(values, zoom, aggregate, summary=summary, columns=columns)

    monkeypatch.setattr(heatbuckets, "bucket", counted)
    values = matrix(3, 20_000)
    app = HeatApp()
    async with app.run_test(size=SIZE) as pilot:
        heat, live, lines = await show_runs_in_progress(pilot, app, values, 15_000)
        first = [heat.render_line(y) for y in range(lines)]
        await until(pilot, lambda: len(calls) == 2, "the next aggregate bucketed after the frame")
        assert [a for _, a in calls] == ["max", "p99"]
        heat._invalidate()  # noqa: SLF001 - a frame that must draw every line anew
        again = [heat.render_line(y) for y in range(lines)]
        assert len(calls) == 2
        kept = [y for y in range(HEADER_LINES, lines) if (y - HEADER_LINES) // heat.row_height != heat.cursor_run
                and (y - HEADER_LINES) // heat.row_height < 3]
        assert kept and all(again[y] is first[y] for y in kept)  # the same content, the same strip
        for aggregate in ("p99", "max", "p99"):
            heat.aggregate = aggregate
            heat._invalidate()  # noqa: SLF001
            [heat.render_line(y) for y in range(lines)]
        assert [a for _, a in calls] == ["max", "p99"]
        tail = values[2, 15_000:]
        slow = np.where(tail >= 0, tail * 10**6, -1)  # far above the scale: every colour moves
        live.put(2, 15_000, slow.tolist())
        scale = heat.scale_ns
        heat.samples_added(2, 15_000, 20_000)
        assert heat.scale_ns != scale
        patched = [screen_cells(heat, y) for y in range(lines)]
        assert calls[-1][0][0] == 1  # one run's columns
        heat._invalidate(buckets=True)  # noqa: SLF001 - the full redraw to compare with
        assert patched == [screen_cells(heat, y) for y in range(lines)]
        assert_cells_match(heat, live.values, set())


async def test_the_aggregate_bucketed_ahead_follows_live_batches():
    """The next aggregate, bucketed after a frame, is patched by each live batch too: switching
    to it then shows what a full bucketing of the new data shows."""
    values = matrix(3, 20_000)
    app = HeatApp()
    async with app.run_test(size=SIZE) as pilot:
        heat = app.query_one(Heatmap)
        live = LatencyMatrix.from_array(np.where(np.arange(20_000) < 15_000, values, -1))
        heat.set_matrix(live)
        version = live.version
        await until(pilot, lambda: heat._bucketings.has(version, live.values, heat.effective_zoom, "p99"),  # noqa: SLF001
                    "p99 bucketed ahead")
        live.put(0, 15_000, values[0, 15_000:].tolist())
        heat.samples_added(0, 15_000, 20_000)
        assert heat._bucketings.has(live.version, live.values, heat.effective_zoom, "p99")  # noqa: SLF001
        heat.action_cycle_aggregate()
        assert heat.aggregate == "p99"
        lines = heat.scrollable_content_region.height
        shown = [screen_cells(heat, y) for y in range(lines)]
        heat._invalidate(buckets=True)  # noqa: SLF001 - the full bucketing to compare with
        assert shown == [screen_cells(heat, y) for y in range(lines)]
        assert_cells_match(heat, live.values, set())


@pytest.mark.parametrize("native_ansi", [False, True])
async def test_ansi_theme_looks_as_textuals_own_conversion_would(native_ansi):
    """ansi_color=False: Textual would convert each ANSI colour to truecolor; the heatmap
    does it once per theme instead and skips the filter. Native ANSI: colours stay ANSI."""
    values = matrix(3, 2_000)
    app = HeatApp(ansi_color=native_ansi)
    async with app.run_test(size=SIZE) as pilot:
        heat = app.query_one(Heatmap)
        heat.set_matrix(LatencyMatrix.from_array(values))
        heat.set_flags([10], [10])
        app.theme = "ansi-dark"
        await pilot.pause()
        raw = heat.get_component_rich_style("heatmap--gutter").color  # what Textual hands out
        assert raw is not None and raw.triplet is None, "the theme should use ANSI colours"
        filters = [f for f in app.get_line_filters() if isinstance(f, ANSIToTruecolor)]
        assert bool(filters) != native_ansi
        assert not any(isinstance(f, ANSIToTruecolor) for f in heat.get_line_filters())
        strips = [heat.render_line(y) for y in range(heat.scrollable_content_region.height)]
        colours = [c for strip in strips for seg in strip if seg.style
                   for c in (seg.style.color, seg.style.bgcolor) if c is not None]
        assert colours and all(c.triplet is not None for c in colours) != native_ansi
        for strip in strips:  # what the skipped filter would have made of each line: no change
            for f in filters:
                assert list(strip.apply_filter(f, heat.background_colors[1])) == list(strip)


def screen_backgrounds(app: App, y: int, x0: int, x1: int) -> set[object]:
    """The background colours cells x0..x1-1 of screen line ``y`` show, as the compositor
    paints the whole screen (the scrollbars included: their thumb is a reversed style)."""
    update = app.screen._compositor.render_full_update(simplify=True)  # noqa: SLF001
    cells = [(seg.style.color if seg.style.reverse else seg.style.bgcolor) if seg.style else None
             for strip in update.strips[y] for seg in strip for _ in seg.text]
    return set(cells[x0:x1])


async def test_a_zoom_buckets_only_the_columns_on_screen_and_lays_out_nothing(monkeypatch):
    """Zoomed in on many files, a frame buckets the columns it shows, not every column (its
    cost follows the screen, not the files), and still shows what the reference says; a zoom
    changes only how far the view scrolls, so Textual lays out nothing (a layout repainted
    the whole screen twice at every zoom). With a line to spare below the runs, the
    horizontal scrollbar's line is kept for good, so zooming from and to the fit lays out
    nothing either (a scrollbar that came and went made those the slowest frames at 1M
    files): the kept line is blank at the fit, shows the thumb when zoomed, and the runs
    keep their row height."""
    from textual.screen import Screen

    from fsscope.analysis import heatbuckets

    bucketed: list[int] = []  # columns of each bucketing made

    def counted(values, zoom, aggregate, summary=None, columns=None):
        got = bucket(values, zoom, aggregate, summary=summary, columns=columns)
        bucketed.append(got.shape[1])
        return got

    layouts = []
    refresh_layout = Screen._refresh_layout

    def counted_layout(self, *args, **kwargs):
        layouts.append(args)
        return refresh_layout(self, *args, **kwargs)

    monkeypatch.setattr(heatbuckets, "bucket", counted)
    monkeypatch.setattr(Screen, "_refresh_layout", counted_layout)
    values = matrix(3, 200_000)
    app = HeatApp()
    async with app.run_test(size=SIZE) as pilot:
        heat = app.query_one(Heatmap)
        heat.set_matrix(LatencyMatrix.from_array(values))
        heat.focus()
        await until(pilot, lambda: heat.show_horizontal_scrollbar, "the scrollbar's line kept")
        rows, kept = heat.row_height, heat.region.bottom - 1
        surface = heat.background_colors[1].rich_color
        assert heat.max_scroll_x == 0 and rows == 3  # fitted: nothing to scroll
        assert screen_backgrounds(app, kept, heat.region.x, heat.region.right) == {surface}
        for key in ("plus", "0", "plus"):  # from the fit, back to it, from it again
            layouts.clear()
            await pilot.press(key)
            await pilot.pause()
            assert not layouts, (key, heat.effective_zoom)
            assert heat.row_height == rows and heat.show_horizontal_scrollbar
            line = screen_backgrounds(app, kept, heat.region.x, heat.region.right)
            if key == "0":
                assert heat.max_scroll_x == 0 and line == {surface}  # blank, not an empty track
            else:
                assert heat.max_scroll_x > 0 and len(line) > 1  # the thumb
        for _ in range(3):
            layouts.clear()
            bucketed.clear()
            await pilot.press("plus")
            await pilot.pause()
            shown = -(-heat.view_width // heat.cell_width) + 1
            assert heat.columns > 2 * shown  # most columns are off screen
            assert bucketed and max(bucketed) <= shown, (heat.effective_zoom, bucketed, shown)
            assert not layouts, heat.effective_zoom
            heat.cursor_run = 99  # no cursor over the cells compared
            assert_cells_match(heat, values, set())
            heat.cursor_run = 0
        heat.move_to_file(150_000)  # scrolled: the columns now shown are bucketed and right
        await until(pilot, lambda: heat.scroll_offset.x > 0, "the view scrolled")
        heat.cursor_run = 99
        assert_cells_match(heat, values, set())


async def test_without_a_line_to_spare_every_run_shows_and_the_scrollbar_comes_when_needed():
    """Where the runs fill the heatmap (three runs in a Compare column at 80x24), no line is
    kept for the scrollbar: at the fit every run is on screen, and the scrollbar comes only
    once the view scrolls."""

    class Short(HeatApp):
        CSS = "Heatmap { height: 5; }"  # the axis, the markers and three runs of one line

    values = matrix(3, 5_000)
    app = Short()
    async with app.run_test(size=(80, 24)) as pilot:
        heat = app.query_one(Heatmap)
        heat.set_matrix(LatencyMatrix.from_array(values))
        heat.focus()
        await pilot.pause()
        assert not heat.show_horizontal_scrollbar
        assert heat.row_height == 1 and heat.scrollable_content_region.height == HEADER_LINES + 3
        await pilot.press("plus")
        await until(pilot, lambda: heat.show_horizontal_scrollbar, "the scrollbar once the view scrolls")
        assert heat.max_scroll_x > 0
