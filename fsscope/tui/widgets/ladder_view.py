"""The hygiene ladder's view (Cao et al., Fig. 3): one row per step, its runs' ops/s on a
scale shared by all steps (● a run, ┼ the mean) and the relative range beside it, filling in
run by run; the alloc step says whether its runs really started from one image."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from fsscope.format import format_pct
from fsscope.tui.ladder_model import WHAT, LadderModel
from fsscope.tui.widgets.live_view import TextModelView
from fsscope.tui.widgets.syncwrite_view import bar
from fsscope.tui.widgets.throughput_chart import compact_number
from fsscope.tui.widgets.variation_view import BAR_W, range_cells

RR_W = 10
"""Cells of the relative range's bar, at most."""
ROW_WORDS = 20
"""A step's row without its bars: indent, step name, the range in %, spaces."""
WIDE = ROW_WORDS + BAR_W + RR_W


class LadderView(TextModelView):
    VIEW_ID = "ladder-view"
    MODEL = LadderModel

    PART = "ladder"
    TITLE = "Hygiene ladder: run-to-run variation per step"

    def draw(self, model: LadderModel) -> None:
        # the bars fit the panel (at 80 columns, beside the flags, a row of fixed bars wrapped)
        width = self.query_one(f"#{self.PART}-text", Static).content_size.width or WIDE
        self.query_one(f"#{self.PART}-text", Static).update(self.render_model(model, width))

    def on_resize(self) -> None:
        model = self.model_of(self._view)
        if model is not None:
            self.draw(model)

    @staticmethod
    def render_model(model: LadderModel, width: int = WIDE) -> Text:
        """``width``: the columns a row may take; the bars shrink to fit it (to their least)."""
        room = max(0, width - ROW_WORDS)
        range_w = max(8, min(BAR_W, room - RR_W))
        rr_w = max(4, min(RR_W, room - range_w))
        text = Text()
        ops = [v for runs in model.steps.values() for v in runs]
        state = "final" if model.report is not None else "so far"
        text.append(f"{len(ops)} runs {state}", style="bold")
        if not ops:
            text.append("\n  waiting for the first run\n", style="dim")
            return text
        lo, hi = min(ops), max(ops)
        text.append(f"   ops/s {compact_number(lo)} … {compact_number(hi)}; ● a run, ┼ mean\n\n", style="dim")
        ranges = dict(model.relative_ranges())
        top = max((rr for rr in ranges.values() if rr is not None), default=0.0) or 1.0
        for step, runs in model.steps.items():
            rr = ranges.get(step)
            text.append(f"  {'+' if step != 'baseline' else ' '}{step:9s}", style="bold")
            text.append(range_cells(runs, lo, hi, range_w) if runs else "·" * range_w, style="cyan")
            text.append(f" {format_pct(rr, '-'):>6s} ")
            text.append_text(bar(None if rr is None else rr / top, rr_w, "magenta"))
            text.append(f"\n             {WHAT.get(step, '')}", style="dim")
            if step in model.images:
                n = model.images[step]
                text.append(f"; {n} image checksum{'s' if n != 1 else ''} at the runs' start", style="dim")
            text.append("\n")
        for note in model.notes:
            text.append("\n▲ ", style="bold yellow")
            text.append(note + "\n")
        return text
