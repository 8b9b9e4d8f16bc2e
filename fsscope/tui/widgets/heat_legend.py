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
    DEFAULT_CSS = """
    HeatLegend { height: 2; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, heatmap: Heatmap, *, id: str | None = None):
        super().__init__(id=id)
        self.heatmap = heatmap
        self.cursor_text = NO_CURSOR
        heatmap.scale_listeners.append(self.refresh)

    def clear_cursor(self) -> None:
        """A new matrix (another job, another replay): nothing of the last cursor stays."""
        self.cursor_text = NO_CURSOR
        self.refresh()

    def set_cursor(self, run: int, first: int, last: int, latency_ns: int, aggregate: str) -> None:
        files = f"file {first}" if first == last else f"files {first}–{last} ({aggregate})"
        self.cursor_text = f"cursor: run {run + 1} · {files} · {format_ns(latency_ns)}"
        self.refresh()

    def render(self) -> Text:
        low_ns, high_ns = self.heatmap.scale_ns
        text = Text(no_wrap=True, overflow="ellipsis")
        low, high = format_ns(low_ns), format_ns(high_ns)
        # the bar gives way before the scale's ends do (at 80×24 the upper bound was cut to "…")
        cells = max(4, min(BAR_CELLS, (self.content_size.width or BAR_CELLS + 20) - len(low) - len(high) - 3))  # 3: two spaces, the "…" of the rest
        text.append(f"{low} ", style="dim")
        for n in range(cells):
            style = self.heatmap.color_at(n / (cells - 1))
            text.append(" ", style=style)
        text.append(f" {high}", style="dim")
        mid = math.sqrt(low_ns * high_ns)
        text.append(f"  log scale, mid {format_ns(mid)} · blank: not measured · !: flagged · •: selected",
                    style="dim")
        text.append("\n")
        text.append(self.cursor_text)
        return text
