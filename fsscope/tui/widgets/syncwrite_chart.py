"""Log–log curves of a sync-write sweep: throughput (or latency) against buffer size, one
curve per recipe with its 95 % confidence band (░ behind the ● means), the latency-rise knee
(┊ and "r" under the axis) and the throughput-saturation knee ("s"), the best-ratio size ★.
Both axes are logarithmic, as in the paper (sizes double; values span decades).

The drawing is a pure function of the curves (:func:`chart_text`) so the compare screen draws
two recipes on one chart and tests read it without a terminal."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from fsscope.tui.syncwrite_model import Curves, curves_of, rows_of_report, size_label
from fsscope.workloads.syncwrite_records import Report

COLOURS = ("bold cyan", "bold magenta", "bold yellow", "bold green")
BANDS = ("cyan", "magenta", "yellow", "green")
GUTTER = 9


def _fmt(metric: str, value: float) -> str:
    """At most 7 characters: MB/s (the unit is in the title) or a latency with its unit."""
    if metric == "throughput":
        mb = value / 1e6
        return f"{mb / 1e3:.3g}k" if mb >= 1e4 else f"{mb:.0f}" if mb >= 100 else f"{mb:.3g}"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if value >= scale:
            return f"{value / scale:.3g}{unit}"
    return f"{value:.0f}ns"


def chart_text(curves: list[Curves], metric: str, width: int = 60, height: int = 10) -> Text:
    """``metric`` "throughput" or "latency"; ``width``/``height`` of the plot area in cells."""
    series = [(c, c.throughput if metric == "throughput" else c.latency) for c in curves]
    values = [v for _, s in series for band in s if band for v in band if v and v > 0]
    sizes = sorted({size for c in curves for size in c.sizes})
    unit = " MB/s" if metric == "throughput" else ""
    title = Text(f"{metric}{unit} (log) vs buffer size (log)", style="bold")
    if not values or not sizes:
        return title + Text("\nwaiting for the first point…", style="dim")
    lo, hi = math.log10(min(values)), math.log10(max(values))
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    width = max(width, 2 * len(sizes))
    step = (width - 1) / max(1, len(sizes) - 1)
    col_of = {size: round(i * step) for i, size in enumerate(sizes)}

    def row_of(value: float) -> int:
        return height - 1 - round((math.log10(value) - lo) / (hi - lo) * (height - 1))

    grid = [[(" ", "")] * width for _ in range(height)]
    first = curves[0]
    for knee in (first.rise_bytes, first.saturation_bytes):
        if knee in col_of:
            for r in range(height):
                grid[r][col_of[knee]] = ("┊", "dim")
    for n, (curve, bands) in enumerate(series):
        for size, band in zip(curve.sizes, bands):
            if band is None:
                continue
            mean, low, high = band
            col = col_of[size]
            top, bottom = row_of(high), row_of(low)
            for r in range(top, bottom + 1):
                grid[r][col] = ("░", BANDS[n % len(BANDS)])
            grid[row_of(mean)][col] = ("★" if size == curve.best_bytes else "●", COLOURS[n % len(COLOURS)])
    out = title
    for r in range(height):
        label = ""
        if r in (0, height - 1, height // 2):
            label = _fmt(metric, 10 ** (hi - (hi - lo) * r / (height - 1)))
        out.append(f"\n{label:>{GUTTER - 2}} ┤", style="dim")
        for ch, style in grid[r]:
            out.append(ch, style=style)
    axis = [" "] * (width + 8)
    marks = [" "] * (width + 8)
    for size, col in col_of.items():
        text = size_label(size)
        if all(c == " " for c in axis[max(0, col - 1):col + len(text) + 1]):
            axis[col:col + len(text)] = text
    for letter, knee in (("r", first.rise_bytes), ("s", first.saturation_bytes)):
        if knee in col_of:
            marks[col_of[knee]] = letter if marks[col_of[knee]] == " " else "b"
    out.append("\n" + " " * GUTTER + "".join(axis).rstrip(), style="dim")
    out.append("\n" + " " * GUTTER + "".join(marks).rstrip(), style="bold yellow")
    legend = Text("\n")
    for n, curve in enumerate(curves):
        legend.append("● ", style=COLOURS[n % len(COLOURS)])
        legend.append(f"{curve.label}  ")
    legend.append("░ 95% CI  r latency rises after  s throughput saturates  ★ best ratio", style="dim")
    return out + legend


class SyncWriteChart(Static):
    """One metric's log–log chart; ``set_curves`` redraws at the widget's size."""

    DEFAULT_CSS = """
    SyncWriteChart { height: 1fr; width: 1fr; border: round $panel; padding: 0 1; }
    """

    def __init__(self, metric: str, *, id: str | None = None):
        super().__init__("", id=id)
        self.metric = metric
        self._curves: list[Curves] = []

    def set_curves(self, curves: list[Curves]) -> None:
        self._curves = curves
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        width = max(20, self.content_size.width - GUTTER - 1) if self.content_size.width else 50
        height = max(4, self.content_size.height - 5) if self.content_size.height else 8
        self.update(chart_text(self._curves, self.metric, width, height))


class CompareCharts(Horizontal):
    """The compare screen's charts of two sync-write runs (the descriptor's ``compare_charts``):
    both recipes' log–log curves on one throughput chart and one latency chart."""

    DEFAULT_CSS = """
    CompareCharts { height: 20; }
    """

    def __init__(self, a, b) -> None:
        super().__init__(id="compare-sync-charts")
        # sides of the compare model (A and B): their recipe and their report
        self.curves = [curves_of(f"{label} {side.recipe}", rows_of_report(side.report), side.report.knees,
                                 side.report.recommended_bytes)
                       for label, side in (("A", a), ("B", b)) if isinstance(side.report, Report)]

    def compose(self) -> ComposeResult:
        yield SyncWriteChart("throughput", id="compare-chart-throughput")
        yield SyncWriteChart("latency", id="compare-chart-latency")

    def on_mount(self) -> None:
        for chart in self.query(SyncWriteChart):
            chart.set_curves(self.curves)
