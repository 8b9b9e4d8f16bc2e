"""The heatmap's legend: the log latency scale as a colour bar, and what is under the cursor."""

from __future__ import annotations

import math

from rich.text import Text
from textual.widget import Widget

from fsscope.format import format_ns
from fsscope.tui.widgets.heatmap import Heatmap

BAR_CELLS = 24
NO_CURSOR = "cursor: –"


class HeatLegend(Widget):
    """The bar, what the glyphs mean (on the bar's line when they fit, else on lines of their
    own: a compare column at 80 columns is 40 wide, and cut at its end the legend lost "!" and
    "•"), and the cursor's reading."""

    DEFAULT_CSS = """
    HeatLegend { height: auto; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, heatmap: Heatmap, *, id: str | None = None):
        super().__init__(id=id)
        self.heatmap = heatmap
        self.cursor_text = NO_CURSOR
        heatmap.scale_listeners.append(self._rescaled)

    def _rescaled(self) -> None:
        self.refresh(layout=True)  # the scale's words may take another line

    def clear_cursor(self) -> None:
        """A new matrix (another job, another replay): nothing of the last cursor stays."""
        self.cursor_text = NO_CURSOR
        self.refresh()

    def set_cursor(self, run: int, first: int, last: int, latency_ns: int, aggregate: str) -> None:
        files = f"file {first}" if first == last else f"files {first}–{last} ({aggregate})"
        self.cursor_text = f"cursor: run {run + 1} · {files} · {format_ns(latency_ns)}"
        self.refresh()

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self._lines(width))

    def render(self) -> Text:
        return Text("\n").join(self._lines(self.content_size.width or BAR_CELLS + 100))

    def _lines(self, width: int) -> list[Text]:
        low_ns, high_ns = self.heatmap.scale_ns
        low, high = format_ns(low_ns), format_ns(high_ns)
        bar = Text(no_wrap=True, overflow="ellipsis")
        # the bar gives way before the scale's ends do (at 80×24 the upper bound was cut to "…")
        cells = max(4, min(BAR_CELLS, width - len(low) - len(high) - 3))  # 3: two spaces, the "…" of the rest
        bar.append(f"{low} ", style="dim")
        for n in range(cells):
            style = self.heatmap.color_at(n / (cells - 1))
            bar.append(" ", style=style)
        bar.append(f" {high}", style="dim")
        mid = math.sqrt(low_ns * high_ns)
        words = [f"log scale, mid {format_ns(mid)}", "blank: not measured", "!: flagged", "•: selected"]
        return [*_packed(words, width, bar, "dim"), *_packed(self.cursor_text.split(" · "), width)]


def _packed(words: list[str], width: int, first: Text | None = None, style: str = "") -> list[Text]:
    """``words`` joined by " · " on as few lines as ``width`` allows (after ``first`` when they
    fit beside it), a line broken between two words, never inside one."""
    lines = [first] if first is not None else [Text(no_wrap=True, overflow="ellipsis")]
    line, sep = lines[0], "  " if first is not None else ""
    for word in words:
        if line.cell_len and line.cell_len + len(sep) + len(word) > width:
            line, sep = Text(no_wrap=True, overflow="ellipsis"), ""
            lines.append(line)
        line.append(f"{sep}{word}", style=style)
        sep = " · "
    return lines
