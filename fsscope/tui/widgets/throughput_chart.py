"""Throughput of one bench run over the band of the others: x = seconds into the run,
y = ops/s (linear, from 0). The run is drawn as bars (eighth blocks at the top); the band of
the other finished runs (min..max at that second) is shaded behind them and in a second
colour where a bar covers it, so it stays visible; their mean is a thin line. With a
Throughput-N window each complete N-s window is one flat step, so the chart shows what the
variation numbers are computed from. ``zero_based`` False zooms the y axis to the data (a
few percent of run-to-run variation is invisible on an axis from 0).

Line API: ``render_line`` returns cached strips, rebuilt when the data, the size or the
theme changes (a bench emits about one bin a second, so a rebuild per bin is cheap).
"""

from __future__ import annotations

import math

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from fsscope.format import SPARK_GLYPHS
from fsscope.tui.bench_model import ChartData

BLOCKS = " " + SPARK_GLYPHS  # a cell filled 0/8 .. 8/8 from below
GUTTER = 8  # "152.6k ┤"


def compact_number(value: float) -> str:
    """152600 -> '152.6k', 1.5e6 -> '1.5M', 950 -> '950'."""
    if value >= 1e6:
        return f"{value / 1e6:.3g}M"
    if value >= 1e4:
        return f"{value / 1e3:.4g}k"
    if value >= 1e3:
        return f"{value / 1e3:.3g}k"
    return f"{value:.0f}"


def nice_ceiling(value: float) -> float:
    """The next 'round' number at or above value (1, 2, 2.5, 5 × 10^k)."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0):
        candidate = step * 10 ** exponent
        if candidate >= value * 0.999:
            return candidate
    return 10 ** (exponent + 1)


def nice_floor(value: float) -> float:
    """``value`` rounded down to two significant digits (0 stays 0)."""
    if value <= 0:
        return 0.0
    step = 10 ** (math.floor(math.log10(value)) - 1)
    return math.floor(value / step) * step


def resample(values: list[float | None], columns: int) -> list[float | None]:
    """``values`` (per second) onto ``columns`` screen columns: a second spread over several
    columns when they are few, the mean of the seconds a column covers when they are many."""
    n = len(values)
    if n == 0 or columns <= 0:
        return [None] * max(columns, 0)
    out: list[float | None] = []
    for c in range(columns):
        a = c * n // columns
        b = max(a + 1, (c + 1) * n // columns)
        chunk = [v for v in values[a:b] if v is not None]
        out.append(sum(chunk) / len(chunk) if chunk else None)
    return out


class ThroughputChart(Widget, can_focus=True):
    COMPONENT_CLASSES = {"throughput--bar", "throughput--band", "throughput--mean", "throughput--axis",
                         "throughput--plot"}

    DEFAULT_CSS = """
    ThroughputChart { height: 1fr; min-height: 6; }
    ThroughputChart > .throughput--bar { color: $accent; }
    ThroughputChart > .throughput--band { background: $primary 35%; }
    ThroughputChart > .throughput--mean { color: $foreground; }
    ThroughputChart > .throughput--axis { color: $foreground 60%; }
    ThroughputChart > .throughput--plot { background: $surface; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.data: ChartData | None = None
        self.zero_based = True
        self._lines: list[Strip] = []
        self._key: tuple | None = None

    def set_data(self, data: ChartData | None) -> None:
        self.data = data
        self._key = None
        self.refresh()

    def on_resize(self) -> None:
        self._key = None

    def set_zero_based(self, zero_based: bool) -> None:
        self.zero_based = zero_based
        self._key = None
        self.refresh()

    # -- drawing ---------------------------------------------------------------------------
    def _styles(self) -> dict[str, Style]:
        """Rich styles from the component classes; the band's colour is translucent, so it is
        blended here: over the plot's background, and over the bar where the two overlap."""
        def styles(name: str):
            return self.get_component_styles(f"throughput--{name}")

        plot = styles("plot").background
        if plot.a < 1:
            plot = self.background_colors[1] + plot
        band_color = styles("band").background
        bar_color = styles("bar").color
        plot_bg = plot.rich_color
        band_bg = (plot + band_color).rich_color
        bar = (plot + bar_color).rich_color
        overlap = (plot + bar_color + band_color).rich_color
        mean = (plot + styles("mean").color).rich_color
        return {"top": Style(color=bar, bgcolor=plot_bg), "band_top": Style(color=overlap, bgcolor=band_bg),
                "full": Style(color=mean, bgcolor=bar), "band_full": Style(color=mean, bgcolor=overlap),
                "band": Style(color=mean, bgcolor=band_bg), "plot": Style(color=mean, bgcolor=plot_bg),
                "axis": Style(color=(self.background_colors[1] + styles("axis").color).rich_color)}

    def render_line(self, y: int) -> Strip:
        width, height = self.size.width, self.size.height
        key = (id(self.data), width, height, self.zero_based, self.app.theme if self.is_attached else "")
        if key != self._key:
            self._lines = self._build(width, height)
            self._key = key
        if 0 <= y < len(self._lines):
            return self._lines[y]
        return Strip.blank(width, self.rich_style)

    def _build(self, width: int, height: int) -> list[Strip]:
        styles = self._styles()
        plot_h = max(1, height - 1)
        plot_w = max(1, width - GUTTER)
        data = self.data
        if data is None or data.empty:
            message = "waiting for the first second of the run…" if data is not None else "no bench data"
            blank = [Strip.blank(width, self.rich_style) for _ in range(height)]
            if height:
                text = Segment(message[:width].center(width), styles["axis"])
                blank[height // 2 if height > 1 else 0] = Strip([text], width)
            return blank
        y_min = 0.0 if self.zero_based else nice_floor(data.y_min * 0.98)
        y_max = nice_ceiling(data.y_max * 1.05) if self.zero_based else data.y_max + (data.y_max - y_min) * 0.05
        if y_max <= y_min:
            y_max = y_min + 1.0
        eighths_per_unit = plot_h * 8 / (y_max - y_min)
        current = resample(data.current, plot_w)
        low, mean, high = (resample(s, plot_w) for s in (data.band_low, data.band_mean, data.band_high))

        def eighths(v: float | None) -> int | None:
            return None if v is None else max(0, int(round((v - y_min) * eighths_per_unit)))

        # a measured second above the floor is never drawn as nothing: a last second far below
        # the rest (a run stopped early) rounded to no eighth, while the table's 1 s min was it
        cur_e = [None if e is None else max(e, 1) if v is not None and v > y_min else e
                 for v, e in ((v, eighths(v)) for v in current)]
        low_e = [eighths(v) for v in low]
        high_e = [eighths(v) for v in high]
        mean_e = [eighths(v) for v in mean]
        labels = {0: compact_number(y_max)}
        if plot_h > 4:  # half way up, on the row whose top edge is nearest to it
            labels[plot_h - int(round(plot_h / 2))] = compact_number((y_min + y_max) / 2)
        lines: list[Strip] = []
        for row in range(plot_h):
            k = plot_h - 1 - row  # cell row counted from the bottom
            cell_lo, cell_hi = k * 8, k * 8 + 8
            label = labels.get(row, "")
            segments = [Segment(f"{label:>{GUTTER - 2}} " + ("┤" if label else "│"), styles["axis"])]
            for c in range(plot_w):
                lo, hi, bar, avg = low_e[c], high_e[c], cur_e[c], mean_e[c]
                in_band = lo is not None and hi is not None and lo < cell_hi and max(hi, lo + 1) > cell_lo
                fill = 0 if bar is None else max(0, min(8, bar - cell_lo))
                on_mean = avg is not None and cell_lo <= avg < cell_hi
                if fill == 8:  # a full cell: a solid background, so the mean line can cross it
                    char, style = ("─" if on_mean else " "), styles["band_full" if in_band else "full"]
                elif fill:
                    char, style = BLOCKS[fill], styles["band_top" if in_band else "top"]
                else:
                    char, style = ("─" if on_mean else " "), styles["band" if in_band else "plot"]
                segments.append(Segment(char, style))
            lines.append(Strip(segments).crop_extend(0, width, styles["plot"]).simplify())
        lines.append(self._axis(width, plot_w, data.span_s, y_min, styles["axis"]))
        return lines

    def _axis(self, width: int, plot_w: int, span_s: float, y_min: float, style: Style) -> Strip:
        left, mid, right = "0 s", f"{span_s / 2:g} s", f"{span_s:g} s"
        axis = [" "] * plot_w
        for pos, text in ((0, left), (max(0, plot_w // 2 - len(mid) // 2), mid), (plot_w - len(right), right)):
            for i, ch in enumerate(text):
                if 0 <= pos + i < plot_w:
                    axis[pos + i] = ch
        line = f"{compact_number(y_min):>{GUTTER - 2}} └" + "".join(axis)
        return Strip([Segment(line[:width], style)], width).crop_extend(0, width, style)
