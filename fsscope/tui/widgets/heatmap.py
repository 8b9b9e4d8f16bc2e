"""The per-file latency heatmap: one row per run, one column per file index (or per bucket of
file indices when zoomed out), colour on a log latency scale.

A file that is slow in every run is a bright vertical stripe through all rows: a repeatable
outlier. A colour change at one column across all rows is a level shift.

Line API: a ScrollView whose ``render_line`` returns one Strip per screen line. The bucketed
values (numpy: max / a percentile / the mean of each bucket of ``zoom`` files) are computed
once per data version, zoom and aggregate; strips are cached per screen line for the current
horizontal window; a batch of new samples recomputes only its own run's columns and lines.
After a frame that bucketed the data, the next aggregate of the cycle is bucketed too, between
frames: pressing ``a`` then draws without bucketing anything.

Screen lines: 0 = file-index axis, 1 = flag markers (``!`` a flagged file, ``▼`` the selected
flag's files), then ``row_height`` lines per run. A fixed gutter on the left names the runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.color import Color, Gradient
from textual.filter import ANSIToTruecolor
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from fsscope.analysis.heatbuckets import AGGREGATES, Bucketings, bucket, bucket_mask, levels
from fsscope.tui.messages import HeatCursorMoved
from fsscope.tui.model import Flag, LatencyMatrix

LEVELS = 64  # colours on the scale
GUTTER = 7  # "run 10 "
HEADER_LINES = 2
DEFAULT_SCALE = (3.0, 6.0)  # log10 ns: 1 µs .. 1 ms until the data says otherwise
CONTENT_CACHE_STRIPS = 512  # strips kept by content: a few frames' worth
CURSOR_GLYPH = "╋"
ZOOM_STEPS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000)


def flag_marks(flags: Sequence[Flag]) -> tuple[list[int], list[int]]:
    """(files marked ``!``, those of them marked only at one file per column) for ``flags``:
    point-like flags (outliers, series members, thresholds, level shifts), not ranges (linear
    growth: marked when selected) nor withdrawn ones; a series' members after its first are
    the second list (zoomed out they put a ``!`` over every bucket)."""
    shown = [flag for flag in flags if flag.kind not in ("lineargrowth", "linear") and not flag.withdrawn]
    flagged = sorted({i for flag in shown for i in flag.indices})
    firsts = {flag.indices[0] for flag in shown if flag.indices}
    dense = sorted({i for flag in shown if flag.kind == "series" for i in flag.indices[1:]} - firsts)
    return flagged, dense


class Heatmap(ScrollView, can_focus=True):
    """Files x runs latency heatmap with cursor, zoom and bucket aggregate."""

    COMPONENT_CLASSES = {
        "heatmap--empty", "heatmap--c0", "heatmap--c1", "heatmap--c2", "heatmap--c3", "heatmap--c4",
        "heatmap--mark", "heatmap--axis", "heatmap--gutter", "heatmap--flagged", "heatmap--cursor",
    }

    DEFAULT_CSS = """
    Heatmap { background: $surface; scrollbar-size-vertical: 1; scrollbar-size-horizontal: 1; }
    /* the horizontal scrollbar's line kept for good (_reserve_scrollbar_line): its track is
       the heatmap's own background, so the line is blank while nothing scrolls */
    Heatmap.-reserved {
        overflow-x: scroll;
        scrollbar-background: $surface; scrollbar-background-hover: $surface; scrollbar-background-active: $surface;
    }
    Heatmap > .heatmap--empty { background: $heat-empty; }
    Heatmap > .heatmap--c0 { background: $heat-0; }
    Heatmap > .heatmap--c1 { background: $heat-1; }
    Heatmap > .heatmap--c2 { background: $heat-2; }
    Heatmap > .heatmap--c3 { background: $heat-3; }
    Heatmap > .heatmap--c4 { background: $heat-4; }
    Heatmap > .heatmap--mark { color: $heat-mark; text-style: bold; }
    Heatmap > .heatmap--axis { color: $foreground 70%; }
    Heatmap > .heatmap--gutter { color: $foreground 70%; }
    Heatmap > .heatmap--flagged { color: $warning; text-style: bold; }
    Heatmap > .heatmap--cursor { color: $heat-mark; text-style: bold; }
    """

    BINDINGS = [
        Binding("left", "cursor(-1, 0)", "cursor left", show=False),
        Binding("right", "cursor(1, 0)", "cursor right", show=False),
        Binding("up", "cursor(0, -1)", "previous run", show=False),
        Binding("down", "cursor(0, 1)", "next run", show=False),
        Binding("shift+left,pageup", "page(-1)", "page left", show=False),
        Binding("shift+right,pagedown", "page(1)", "page right", show=False),
        Binding("home", "jump(0)", "first file", show=False),
        Binding("end", "jump(-1)", "last file", show=False),
        Binding("plus,equals_sign", "zoom_in", "zoom in"),
        Binding("minus", "zoom_out", "zoom out"),
        Binding("0", "zoom_fit", "fit"),
        Binding("a", "cycle_aggregate", "bucket agg"),
    ]

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None):
        super().__init__(name=name, id=id, classes=classes)
        self.matrix: LatencyMatrix | None = None
        self.zoom = 0  # files per column; 0 = fit the width
        self.aggregate = "max"
        self.cursor_col = 0
        self.cursor_run = 0
        self.cursor_shown = False  # drawn once it is somewhere (moved, focused, a flag picked)
        self._cursor_file = 0  # the first file of the cursor's bucket when last read out
        self._selected = np.zeros(0, dtype=bool)  # files of the selected flag
        self._flagged = np.zeros(0, dtype=bool)  # files of any flag
        self._dense = np.zeros(0, dtype=bool)  # of those, marked only at one file per column
        # bucketings of the current data version by (zoom, aggregate): made once per data
        # change, patched by live batches, kept while the user switches zoom or aggregate
        self._bucketings = Bucketings()
        self._drawn_data: tuple | None = None  # (version, zoom, aggregate, runs, files) the strips show
        self._prepare_pending = False
        self._selected_cols = np.zeros(0, dtype=bool)
        self._flagged_cols = np.zeros(0, dtype=bool)
        self._cols_key: tuple | None = None
        self._strips: dict[int, Strip] = {}
        self._strips_key: tuple | None = None
        self._run_cells: dict[int, tuple[bytes, list[Segment], int]] = {}  # run -> content, cells, width
        # strips by content: (label, the cells' codes, width) -> Strip, across invalidations
        self._content_strips: dict[tuple, Strip] = {}
        self._content_cells: dict[bytes, tuple[list[Segment], int]] = {}
        self._scale: tuple[float, float] = DEFAULT_SCALE
        self._fixed_scale: tuple[float, float] | None = None
        self._scale_from_data = False
        self._styles: list[Style] | None = None
        self._styles_theme: tuple | None = None  # (theme, the truecolor filter or None) of _styles
        self._named: dict[str, Style] = {}  # component styles of _styles_theme
        self._cell_segments: dict[tuple[int, int], Segment] = {}  # (level*2+selected, width) -> segment
        self._geometry: tuple[int, int, int] = (1, 1, 1)  # row height, zoom, cell width of _strips_key
        self.scale_listeners: list = []  # callables run when the colour scale changes (the legend)
        self._frame: tuple[int, int, int] | None = None  # _frame_state() while Textual draws a frame

    # -- data ------------------------------------------------------------------------------
    def set_matrix(self, matrix: LatencyMatrix | None) -> None:
        self.matrix = matrix
        self.cursor_col = self.cursor_run = 0
        self.cursor_shown = False  # the legend says "cursor: –" until it is placed
        self._scale_from_data = False
        if self._fixed_scale is None:
            self._scale = DEFAULT_SCALE  # a new matrix starts from nothing of the last one's
        self._rescale()
        self._scale_changed()
        self._invalidate(buckets=True)
        self._update_virtual_size()
        self.refresh()
        self._place_cursor()  # focused already: the cursor shows (and is read out) at once

    def set_scale(self, low_ns: float | None, high_ns: float | None) -> None:
        """Pin the colour scale (compare view: both runs on one scale); None = automatic."""
        if low_ns and high_ns and high_ns > low_ns > 0:
            self._fixed_scale = (math.log10(low_ns), math.log10(high_ns))
        else:
            self._fixed_scale = None
        self._rescale()
        self._scale_changed()
        self._invalidate()
        self.refresh()

    def samples_added(self, run: int, start: int, stop: int) -> None:
        """New values in run ``run``, files [start, stop): recompute just those columns."""
        matrix = self.matrix
        if matrix is None:
            return
        scale_changed = self._rescale(matrix.values[run, start:stop])
        if scale_changed:
            self._scale_changed()
        zoom = self.effective_zoom
        drawn = self._drawn_data
        patched = (self._bucketings.patch(matrix.version, matrix.values, run, start, stop)
                   or zoom == 1) and drawn is not None and drawn[:4] == (matrix.version - 1, zoom, self.aggregate,
                                                                          matrix.runs)
        if patched:
            self._drawn_data = (matrix.version, zoom, self.aggregate, matrix.runs, matrix.files)
            if scale_changed:  # the same buckets in other colours: every line, no bucketing
                self._invalidate()
            else:
                self._drop_run_lines(run)
        else:
            self._invalidate(buckets=True)
        size = self.virtual_size
        self._update_virtual_size()
        if patched and not scale_changed and size == self.virtual_size:
            self._refresh_run(run)  # Textual redraws only the header and this run's lines
        else:
            self.refresh()
        if self.cursor_shown and run == self.cursor_run:
            first, last = self.cursor_files()
            if first < stop and last >= start:  # the reading under the cursor said "not measured"
                self._post_cursor()

    def _refresh_run(self, run: int) -> None:
        h, width = self.row_height, self.size.width
        top = HEADER_LINES + run * h - int(self.scroll_offset.y)
        self.refresh(Region(0, 0, width, HEADER_LINES), Region(0, max(HEADER_LINES, top), width, h))

    def set_flags(self, flagged: list[int] | tuple[int, ...], selected: list[int] | tuple[int, ...] = (),
                  dense: list[int] | tuple[int, ...] | None = None) -> None:
        """Mark ``flagged`` files ``!`` and ``selected`` ones ``▼``/``•``. ``dense``: flagged
        files marked only one file per column (a series' later members): zoomed out, a
        series every 64 files put a ``!`` over every bucket of 20,000 files; its first member
        stays marked and selecting it marks them all. None: keep the last ``dense``."""
        files = self.matrix.files if self.matrix is not None else 0
        if dense is None:
            dense = np.flatnonzero(self._dense).tolist()
        size = max(files, max(flagged, default=-1) + 1, max(selected, default=-1) + 1)
        self._flagged = np.zeros(size, dtype=bool)
        self._selected = np.zeros(size, dtype=bool)
        self._dense = np.zeros(size, dtype=bool)
        if flagged:
            self._flagged[np.asarray(flagged, dtype=np.int64)] = True
        if selected:
            self._selected[np.asarray(selected, dtype=np.int64)] = True
        dense = [i for i in dense if i < size]
        if dense:
            self._dense[np.asarray(dense, dtype=np.int64)] = True
        self._cols_key = None
        self._invalidate()
        self.refresh()

    def select_files(self, indices: tuple[int, ...] | list[int]) -> None:
        """Highlight a flag's files and move the cursor to the first of them."""
        self.set_flags(np.flatnonzero(self._flagged).tolist(), indices)
        if indices:
            self.move_to_file(int(indices[0]))

    # -- geometry --------------------------------------------------------------------------
    @property
    def view_width(self) -> int:
        return max(1, self.scrollable_content_region.width - GUTTER)

    @property
    def effective_zoom(self) -> int:
        if self.zoom:
            return self.zoom
        files = self.matrix.files if self.matrix is not None else 0
        return max(1, -(-files // self.view_width))

    @property
    def cell_width(self) -> int:
        """Characters per column: >1 only when fitting fewer files than the width (no scroll)."""
        files = self.matrix.files if self.matrix is not None else 0
        if self.zoom or not files or files > self.view_width:
            return 1
        return max(1, min(8, self.view_width // files))

    @property
    def columns(self) -> int:
        files = self.matrix.files if self.matrix is not None else 0
        return -(-files // self.effective_zoom) if files else 0

    @property
    def runs(self) -> int:
        return self.matrix.runs if self.matrix is not None else 0

    @property
    def row_height(self) -> int:
        runs = max(1, self.runs)
        return max(1, min(3, (self.scrollable_content_region.height - HEADER_LINES) // runs))

    def _reserve_scrollbar_line(self) -> None:
        """Keep the horizontal scrollbar's line for good where the runs leave a line free.
        A zoom from or to the fit would otherwise show or hide the scrollbar, and Textual
        then lays the screen out again and paints the heatmap twice (the worst frames at 1M
        files: 30-77 ms against 33). The kept line's track is the heatmap's background, so
        it is blank at the fit and shows only the thumb when zoomed: nothing changes class
        or style at a zoom (a style update cost a fit switch 2-3 ms). Where no line is free
        (three runs in an 80x24 Compare column) the scrollbar comes only when needed, so
        that line shows a run."""
        if not self.is_attached or not self.region:
            return
        height = self.content_region.height  # without any scrollbar
        runs = max(1, self.runs)
        rows = max(1, min(3, (height - HEADER_LINES) // runs))  # row_height without the scrollbar
        # a change lays out: only on a resize or a new run, never on a zoom
        self.set_class(HEADER_LINES + runs * rows < height, "-reserved")

    def _update_virtual_size(self) -> None:
        self._reserve_scrollbar_line()
        size = Size(GUTTER + self.columns * self.cell_width, HEADER_LINES + self.runs * self.row_height)
        if size == self.virtual_size:
            return
        if not self.is_attached or not self.container_size:
            self.virtual_size = size
            return
        # A zoom changes only how far the view scrolls, not the widget's place on screen: set
        # it without Textual's layout of the whole screen (``virtual_size`` asks for one) and
        # its second full repaint; the scrollbars take the new extent. The horizontal
        # scrollbar's line is kept where one is free (``_reserve_scrollbar_line``); elsewhere
        # a scrollbar that comes or goes changes the content region, and its reactive lays out.
        self.set_reactive(Heatmap.virtual_size, size)
        self._scroll_update(size)
        self.refresh()

    def on_resize(self) -> None:
        self._invalidate()  # a new width is a new zoom (fit) and so a new bucketing key
        self._update_virtual_size()
        if self.cursor_shown:
            # fitted to the width, the zoom changed with it: the cursor's column now holds
            # other files, so keep it on the file it was on and read that bucket out again
            # (the legend kept the earlier zoom's file range)
            self.move_to_file(self._cursor_file)

    # -- colours ---------------------------------------------------------------------------
    def _rescale(self, values: np.ndarray | None = None) -> bool:
        """Keep the log scale spanning the data, snapped to 0.1 decade so a live run redraws
        everything only when the range really grows. ``values``: a new batch (None: all)."""
        if self._fixed_scale is not None:
            changed = self._scale != self._fixed_scale
            self._scale = self._fixed_scale
            return changed
        if values is None:
            self._scale_from_data = False
            values = self.matrix.all_measured() if self.matrix is not None else np.zeros(0, np.int64)
        measured = values[values >= 0]
        if not measured.size:
            return False
        lo = math.floor(math.log10(max(1, int(measured.min()))) * 10) / 10
        hi = math.ceil(math.log10(max(1, int(measured.max()))) * 10) / 10
        if self._scale_from_data:
            lo, hi = min(lo, self._scale[0]), max(hi, self._scale[1])
        if hi - lo < 0.5:
            hi = lo + 0.5
        changed = (lo, hi) != self._scale
        self._scale = (lo, hi)
        self._scale_from_data = True
        return changed

    def _scale_changed(self) -> None:
        """Tell the listeners at once (not by message): the legend must never show another
        scale than the one the cells are drawn with, not even for one frame."""
        for listener in self.scale_listeners:
            listener()

    @property
    def scale_ns(self) -> tuple[float, float]:
        return 10 ** self._scale[0], 10 ** self._scale[1]

    def _cell_styles(self) -> list[Style]:
        theme = self.app.theme if self.is_attached else ""
        # Textual turns ANSI colours into truecolor after render_line, segment by segment;
        # doing it here once per theme for the few styles drawn lets get_line_filters skip it.
        to_truecolor = next((f for f in super().get_line_filters() if isinstance(f, ANSIToTruecolor)), None) \
            if self.is_attached else None
        key = (theme, to_truecolor)
        if self._styles is None or self._styles_theme != key:
            stops = []
            for n in range(5):
                style = self.get_component_rich_style(f"heatmap--c{n}", partial=True)
                stops.append(Color.from_rich_color(style.bgcolor) if style.bgcolor else Color(0, 0, 0))
            gradient = Gradient(*[(n / 4, c) for n, c in enumerate(stops)], quality=LEVELS)
            convert = (lambda style: to_truecolor.truecolor_style(style, None)) if to_truecolor else (lambda style: style)
            self._styles = [convert(Style(bgcolor=gradient.get_rich_color(n / (LEVELS - 1)))) for n in range(LEVELS)]
            self._named = {name: convert(self.get_component_rich_style(f"heatmap--{name}"))
                           for name in ("empty", "mark", "axis", "gutter", "flagged", "cursor")}
            self._named["base"] = convert(self.rich_style)
            self._styles_theme = key
            self._cell_segments = {}
            self._clear_strips(content=True)
        return self._styles

    def _style(self, name: str) -> Style:
        """A component style ("axis", "mark", ...; "base" = the widget's own) in truecolor."""
        if self._frame is None:  # (within a frame, the theme was looked at already)
            self._cell_styles()
        return self._named[name]

    def get_line_filters(self):
        """Without Textual's per-segment ANSI-to-truecolor pass (a quarter of a full redraw's
        time): when it is on, every style drawn here is converted already (_cell_styles)."""
        return [f for f in super().get_line_filters() if not isinstance(f, ANSIToTruecolor)]

    def levels(self, values: np.ndarray) -> np.ndarray:
        """Colour level 0..LEVELS-1 of each value on the log scale; -1 for not measured."""
        return levels(values, self._scale, LEVELS)

    def color_at(self, fraction: float) -> Style:
        return self._cell_styles()[int(round(max(0.0, min(1.0, fraction)) * (LEVELS - 1)))]

    # -- caches ----------------------------------------------------------------------------
    def _invalidate(self, *, buckets: bool = False) -> None:
        """Draw every line anew (their content may still come from the content cache);
        ``buckets``: bucket the data anew too (a new matrix)."""
        if buckets:
            self._bucketings.clear()
            self._drawn_data = None
            self._cols_key = None
        self._clear_strips()
        self._strips_key = None

    def _clear_strips(self, *, content: bool = False) -> None:
        self._strips.clear()
        self._run_cells.clear()
        if content:  # a new theme: other styles in every segment
            self._content_strips.clear()
            self._content_cells.clear()

    def _drop_run_lines(self, run: int) -> None:
        h = self._geometry[0] if self._strips_key is not None else self.row_height
        for line in range(run * h, (run + 1) * h):
            self._strips.pop(HEADER_LINES + line, None)
        self._run_cells.pop(run, None)
        self._strips.pop(0, None)
        self._strips.pop(1, None)

    def _window(self, scroll_x: int, width: int) -> tuple[int, int]:
        """The columns a view scrolled to ``scroll_x``, ``width`` wide, shows: all a frame
        buckets (1M files at a zoom of 500 are 2,000 columns, 193 of them on screen)."""
        cw = self._geometry[2]
        return scroll_x // cw, -(-(scroll_x + max(0, width - GUTTER)) // cw)

    def _bucketed(self, scroll_x: int, width: int) -> np.ndarray:
        matrix = self.matrix
        assert matrix is not None
        zoom = self.effective_zoom
        data = (matrix.version, zoom, self.aggregate, matrix.runs, matrix.files)
        if data != self._drawn_data:  # other data than the strips show: draw every line anew
            self._clear_strips()
            self._drawn_data = data
            self._prepare_next()
        return self._bucketings.get(matrix.version, matrix.values, zoom, self.aggregate,
                                    self._window(scroll_x, width))

    def _prepare_next(self) -> None:
        """Bucket the data for the next aggregate of the cycle once the frame is drawn (``a``
        then switches without bucketing); a live batch patches it along with the shown one."""
        if self._prepare_pending or not self.is_attached:
            return
        self._prepare_pending = True

        def prepare() -> None:
            self._prepare_pending = False
            matrix = self.matrix
            if matrix is None or matrix.files == 0:
                return
            following = AGGREGATES[(AGGREGATES.index(self.aggregate) + 1) % len(AGGREGATES)]
            zoom = self.effective_zoom
            drawn = self._strips_key
            if drawn is None or self._geometry[1] != zoom:
                return  # not drawn at this zoom yet: the frame that draws it prepares again
            # the columns the last frame showed, and their lines (the content caches)
            scroll_x, width, h = drawn[0], drawn[1], self._geometry[0]
            window = self._window(scroll_x, width)
            self._bucketings.get(matrix.version, matrix.values, zoom, self.aggregate, window)
            buckets = self._bucketings.get(matrix.version, matrix.values, zoom, following, window)
            if self._styles is None:
                return
            for run in range(min(matrix.runs, buckets.shape[0])):
                cells = self._cells(buckets, run, scroll_x, max(0, width - GUTTER))
                for label in (f"run {run + 1}", "")[: min(h, 2)]:
                    self._content_strip(label, *cells, width)

        self.call_after_refresh(prepare)

    def _mark_columns(self) -> tuple[np.ndarray, np.ndarray]:
        zoom = self.effective_zoom
        key = (zoom, self._flagged.size, self._selected.size)
        if self._cols_key != key:
            self._flagged_cols = bucket_mask(self._flagged if zoom <= 1 else self._flagged & ~self._dense, zoom)
            self._selected_cols = bucket_mask(self._selected, zoom)
            self._cols_key = key
        return self._flagged_cols, self._selected_cols

    # -- rendering -------------------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        """Textual asks for a frame's lines in batches: the geometry, the theme and the cache
        keys are looked at once per batch here, not once per line."""
        self._frame = self._frame_state()
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def _frame_state(self) -> tuple[int, int, int]:
        """(width, scroll x, scroll y) of what is drawn now, with the strip caches made
        current for it; scroll x is -1 without data."""
        region = self.scrollable_content_region
        width = region.width
        self._cell_styles()  # a new theme clears the strips before the key is checked
        if self.matrix is None or self.matrix.files == 0:
            return width, -1, -1
        scroll_x, scroll_y = self.scroll_offset
        # everything the row height, zoom and cell width (and so every strip) depend on
        key = (scroll_x, width, region.height, self._scale, self.zoom, self.matrix.files, self.matrix.runs,
               self.aggregate, self._styles_theme)
        if key != self._strips_key:
            self._clear_strips()
            self._strips_key = key
            self._geometry = (self.row_height, self.effective_zoom, self.cell_width)
        return width, scroll_x, scroll_y

    def render_line(self, y: int) -> Strip:
        width, scroll_x, scroll_y = self._frame or self._frame_state()
        if scroll_x < 0:  # no data
            style = self._style("base")
            if y == 1:
                return Strip([Segment(" no latencies yet"[:width], self._style("axis"))]).extend_cell_length(width, style)
            return Strip.blank(width, style)
        line = y if y < HEADER_LINES else y + scroll_y
        strip = self._strips.get(line)
        if strip is None:
            strip = self._render_line(line, scroll_x, width)
            self._strips[line] = strip
        h = self._geometry[0]
        if not self.cursor_shown:
            return strip
        if line == 1:
            return self._with_cursor(strip, scroll_x, width, "↓")
        if line >= HEADER_LINES and (line - HEADER_LINES) // h == self.cursor_run:
            # ╋, not ◆: the flags list and the help mark a predicted threshold with ◆
            first = (line - HEADER_LINES) % h == 0
            return self._with_cursor(strip, scroll_x, width, CURSOR_GLYPH if first else "┃")
        return strip

    def _with_cursor(self, strip: Strip, scroll_x: int, width: int, glyph: str) -> Strip:
        """The cached strip with the cursor cell drawn over it (never cached itself)."""
        x = GUTTER + self.cursor_col * self._geometry[2] - scroll_x
        if not GUTTER <= x < width:
            return strip
        left, cell, right = strip.crop(0, x), strip.crop(x, x + 1), strip.crop(x + 1, width)
        segments = list(cell)
        base = segments[0].style if segments and segments[0].style else Style()
        mark = self._style("cursor")
        return Strip.join([left, Strip([Segment(glyph, base + Style(color=mark.color, bold=True))], 1), right])

    def _render_line(self, line: int, scroll_x: int, width: int) -> Strip:
        view = max(0, width - GUTTER)
        if line == 0:
            return self._axis_line(scroll_x, view, width)
        if line == 1:
            return self._marker_line(scroll_x, view, width)
        h = self._geometry[0]
        run, sub = divmod(line - HEADER_LINES, h)
        if run >= self.runs:
            return Strip.blank(width, self._style("base"))
        # the lines of one run (row_height of them) share their cells: build them once
        cached = self._run_cells.get(run)
        if cached is None:
            cached = self._run_cells[run] = self._cells(self._bucketed(scroll_x, width), run, scroll_x, view)
        return self._content_strip(f"run {run + 1}" if sub == 0 else "", *cached, width)

    def _content_strip(self, label: str, content: bytes, cells: list[Segment], cells_width: int,
                       width: int) -> Strip:
        """A run's line: its gutter label and cells, made once per content."""
        key = (label, content, width)
        strip = self._content_strips.get(key)
        if strip is None:
            strip = Strip([Segment(f"{label:<{GUTTER - 1}} "[:GUTTER], self._style("gutter")), *cells],
                          GUTTER + cells_width)
            if GUTTER + cells_width < width:
                strip = strip.extend_cell_length(width, self._style("base"))
            if len(self._content_strips) >= CONTENT_CACHE_STRIPS:  # a live run adds lines forever
                self._content_strips.clear()
                self._content_cells.clear()
            self._content_strips[key] = strip
        return strip

    def _cells(self, buckets: np.ndarray, run: int, scroll_x: int, view: int) -> tuple[bytes, list[Segment], int]:
        """One run's visible cells of ``buckets``: their content (one code per cell), as
        run-length-encoded segments (made once per content), and their width."""
        _, zoom, cw = self._geometry
        c0, c1 = scroll_x // cw, -(-(scroll_x + view) // cw)
        levels = self.levels(buckets[run, c0:c1])
        _, selected = self._mark_columns()
        sel = np.zeros(levels.size, dtype=np.int64)
        part = selected[c0:c1][: levels.size]
        sel[: part.size] = part
        # one code per cell: (level + 1) * 2 + selected, so "not measured" (-1) is 0 or 1
        codes = (levels + 1) * 2 + sel
        if cw > 1:
            skip = scroll_x - c0 * cw
            codes = np.repeat(codes, cw)[skip: skip + view]
        content = codes.tobytes()
        known = self._content_cells.get(content)
        if known is not None:
            return content, *known
        if not codes.size:
            return content, [], 0
        # Run-length encode so a smooth row is a handful of segments; the segments of each
        # (code, length) are made once per theme, so a redraw builds no styles.
        cuts = np.flatnonzero(np.diff(codes)) + 1
        starts = np.concatenate([[0], cuts])
        lengths = np.diff(np.concatenate([starts, [codes.size]]))
        made = self._cell_segments
        segments = []
        for code, n in zip(codes[starts].tolist(), lengths.tolist()):
            segment = made.get((code, n))
            if segment is None:
                segment = made[(code, n)] = self._cell_segment(code, n)
            segments.append(segment)
        self._content_cells[content] = (segments, int(codes.size))
        return content, segments, int(codes.size)

    def _cell_segment(self, code: int, width: int) -> Segment:
        level, selected = code // 2 - 1, code % 2
        styles = self._styles
        assert styles is not None  # _cell_styles() has run: the line being drawn asked it first
        style = self._style("empty") if level < 0 else styles[level]
        if selected:
            return Segment("•" * width, style + Style(color=self._style("mark").color, bold=True))
        return Segment(" " * width, style)

    def _axis_line(self, scroll_x: int, view: int, width: int) -> Strip:
        zoom, cw = self.effective_zoom, self.cell_width
        chars = [" "] * view
        step = max(1, -(-12 // cw))  # columns between labels: at least 12 characters
        col = (scroll_x // cw) // step * step
        while col < self.columns and col * cw < scroll_x + view:
            pos = col * cw - scroll_x
            if pos >= 0:
                label = f"|{col * zoom}"
                if pos + len(label) <= view:
                    chars[pos: pos + len(label)] = label
            col += step
        axis = self._style("axis")
        head = f"{'file':<{GUTTER}}"
        return Strip([Segment(head, axis), Segment("".join(chars), axis)]).extend_cell_length(width, self._style("base"))

    def _marker_line(self, scroll_x: int, view: int, width: int) -> Strip:
        flagged, selected = self._mark_columns()
        cw = self.cell_width
        c0, c1 = scroll_x // cw, -(-(scroll_x + view) // cw)
        chars = [" "] * view
        for mask, glyph in ((flagged, "!"), (selected, "▼")):
            for col in (np.flatnonzero(mask[c0:c1]) + c0).tolist():
                pos = col * cw - scroll_x
                if 0 <= pos < view:
                    chars[pos] = glyph
        zoom = self.effective_zoom
        head = f"{'×' + str(zoom):<{GUTTER}}"
        return Strip([Segment(head, self._style("axis")), Segment("".join(chars), self._style("flagged"))]
                     ).extend_cell_length(width, self._style("base"))

    # -- cursor ----------------------------------------------------------------------------
    def cursor_files(self) -> tuple[int, int]:
        zoom = self.effective_zoom
        first = self.cursor_col * zoom
        files = self.matrix.files if self.matrix is not None else 0
        return first, max(first, min(files, first + zoom) - 1)

    def cursor_value(self) -> int:
        if self.matrix is None or self.matrix.files == 0:
            return -1
        first, last = self.cursor_files()
        if self.cursor_run >= self.matrix.runs or first >= self.matrix.files:
            return -1
        # the cursor's own bucket, exactly (a big data set's percentiles are drawn from
        # histograms, within a colour level; the readout is the value itself)
        values = self.matrix.values[self.cursor_run:self.cursor_run + 1, first:last + 1]
        return int(bucket(values, max(1, last + 1 - first), self.aggregate)[0, 0])

    def _post_cursor(self) -> None:
        first, last = self.cursor_files()
        self._cursor_file = first
        self.post_message(HeatCursorMoved(self.cursor_run, first, last, self.cursor_value(),
                                          self.aggregate if self.effective_zoom > 1 else "value"))

    def _set_cursor(self, col: int, run: int) -> None:
        col = max(0, min(col, max(0, self.columns - 1)))
        run = max(0, min(run, max(0, self.runs - 1)))
        self.cursor_col, self.cursor_run = col, run
        self.cursor_shown = True
        view = self.view_width
        scroll_x = int(self.scroll_offset.x)
        left = col * self.cell_width
        if left < scroll_x:
            self.scroll_to(x=left, animate=False, immediate=True)
        elif left + self.cell_width > scroll_x + view:
            self.scroll_to(x=left + self.cell_width - view, animate=False, immediate=True)
        h = self.row_height
        top = HEADER_LINES + run * h - HEADER_LINES
        if top < self.scroll_offset.y:
            self.scroll_to(y=top, animate=False, immediate=True)
        elif top + h > self.scroll_offset.y + self.scrollable_content_region.height - HEADER_LINES:
            self.scroll_to(y=top + h - (self.scrollable_content_region.height - HEADER_LINES),
                           animate=False, immediate=True)
        self.refresh()
        self._post_cursor()

    def move_to_file(self, index: int, run: int | None = None) -> None:
        self._set_cursor(index // self.effective_zoom, self.cursor_run if run is None else run)

    def action_cursor(self, dx: int, dy: int) -> None:
        self._set_cursor(self.cursor_col + dx, self.cursor_run + dy)

    def action_page(self, direction: int) -> None:
        self._set_cursor(self.cursor_col + direction * max(1, self.view_width // self.cell_width - 1), self.cursor_run)

    def action_jump(self, where: int) -> None:
        self._set_cursor(0 if where == 0 else self.columns - 1, self.cursor_run)

    def _set_zoom(self, zoom: int) -> None:
        first = self._cursor_file if self.cursor_shown else self.cursor_files()[0]
        self.zoom = zoom
        self._invalidate()  # the zoom is in the bucketing key
        self._update_virtual_size()
        self.move_to_file(first)

    def action_zoom_in(self) -> None:
        current = self.effective_zoom
        smaller = [z for z in ZOOM_STEPS if z < current]
        self._set_zoom(smaller[-1] if smaller else 1)

    def action_zoom_out(self) -> None:
        current = self.effective_zoom
        fit = max(1, -(-(self.matrix.files if self.matrix else 0) // self.view_width))
        larger = [z for z in ZOOM_STEPS if z > current]
        if not larger or larger[0] >= fit:
            self._set_zoom(0)
        else:
            self._set_zoom(larger[0])

    def action_zoom_fit(self) -> None:
        self._set_zoom(0)

    def action_cycle_aggregate(self) -> None:
        self.aggregate = AGGREGATES[(AGGREGATES.index(self.aggregate) + 1) % len(AGGREGATES)]
        self._invalidate()  # the aggregate is in the bucketing key
        self.refresh()
        self._post_cursor()
        self._prepare_next()
        self.notify(f"buckets show the {self.aggregate} of their files", timeout=2)

    def on_focus(self) -> None:
        self.call_later(self._place_cursor)  # after Widget's own handler has set has_focus

    def _place_cursor(self) -> None:
        """Focused, the arrows move the cursor: show it where it is, and what is under it."""
        if not self.cursor_shown and self.has_focus and self.matrix is not None and self.matrix.files:
            self.cursor_shown = True
            self.refresh()
            self._post_cursor()

    def on_click(self, event) -> None:
        x, y = event.x, event.y
        if x < GUTTER or y < HEADER_LINES:
            return
        col = (int(self.scroll_offset.x) + x - GUTTER) // self.cell_width
        run = (y - HEADER_LINES + int(self.scroll_offset.y)) // self.row_height
        self._set_cursor(col, run)
