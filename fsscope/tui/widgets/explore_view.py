"""The explore view: treatments streaming in, the d-span CDF per file system (as quantile
lines), factor bars (share of the d-span variance) and tail-share heatmaps per factor level
-- per file system beside the pooled ones when there are several --, the share of repeats
that landed differently, and the two top factors' tail shares against each other. Darker =
more runs in the tail."""

from __future__ import annotations

import math

from rich.text import Text
from textual.binding import Binding

from fsscope.format import format_bytes, spark
from fsscope.tui.explore_model import ExploreModel
from fsscope.tui.widgets.live_view import TextModelView
from fsscope.tui.widgets.syncwrite_view import bar

SHADES = " ░▒▓█"


def shade(share: float | None) -> str:
    if share is None or math.isnan(share):
        return "·"
    return SHADES[min(len(SHADES) - 1, int(round(share * (len(SHADES) - 1))))]


def level_text(level) -> str:
    if isinstance(level, int) and level >= 4096 and level % 1024 == 0:
        return format_bytes(level).replace(".0 ", "").replace(" ", "")
    return str(level)


class ExploreView(TextModelView):
    VIEW_ID = "explore-view"
    MODEL = ExploreModel

    PART = "explore"
    TITLE = "Layout exploration: d-span per treatment"

    BINDINGS = [Binding("p", "next_pair", "Factor pair")]

    def action_next_pair(self) -> None:
        view = self._view
        model = self.model_of(view)
        if view is not None and model is not None:
            model.next_pair()
            self.update_view(view)

    @staticmethod
    def render_model(model: ExploreModel) -> Text:
        text = Text()
        state = "final" if model.report is not None else "so far"
        text.append(f"{len(model.rows)} treatments {state}", style="bold")
        if model.failed:
            text.append(f", {model.failed} failed", style="red")
        text.append("\n\nd-span CDF per file system (quantiles 0 → 1, log scale)\n", style="bold")
        for fs, qs in model.quantiles().items():
            text.append(f"  {fs:6s} {spark([max(v, 1.0) for v in qs], log=True)}  P50 {format_bytes(qs[len(qs) // 2])}  max {format_bytes(qs[-1])}\n")
        fss = model.file_systems()
        several = len(fss) > 1
        shares = model.shares()
        if shares:
            # several file systems: each ranked on its own (as the paper does), pooled first
            cols = [(None, "pooled")] + [(fs, fs) for fs in fss] if several else [(None, "")]
            per = {label: dict(model.shares(fs)) for fs, label in cols}
            text.append("\nfactor prioritization: share of the d-span variance\n", style="bold")
            if several:
                text.append(" " * 18 + "".join(f"{label:>18s}" for _, label in cols) + "\n", style="dim")
            for name, _ in shares:
                text.append(f"  {name:16s}")
                for _, label in cols:
                    share = per[label].get(name)
                    text.append(" ")
                    text.append_text(bar(share, 10 if several else 20, "bold"))
                    text.append(" too few " if share is None else f" {share * 100:5.1f}%")
                text.append("\n")
        parts: list[str | None] = [None, *fss] if several else [None]
        for part in parts:
            levels = model.tail_levels(part)
            if not levels:
                continue
            where = ", pooled" if part is None and several else f" on {part}" if part else ""
            text.append(f"\ntail share per level{where} (tail = d-span ≥ "
                        f"P{model.quantile * 100:.0f}; {SHADES[1:]} = more; * significant)\n", style="bold")
            for name, cells in levels:
                text.append(f"  {name:16s} ")
                for _level, share, sig in cells[:32]:
                    text.append(shade(share), style="bold red" if sig else "")
                hot = [level_text(lv) for lv, _, sig in cells if sig]
                text.append(f"  {'* ' + ', '.join(hot[:4]) if hot else ''}\n")
        changed = [(part, model.changed_share(part)) for part in parts]
        if any(c is not None for _, c in changed):
            text.append("\nrepeats that landed differently: ", style="bold")
            text.append(", ".join(f"{fs or ('pooled' if several else 'all')} {c[0] * 100:.0f}% of {c[1]}"
                                  for fs, c in changed if c is not None) + "\n")
        pair = model.pair_heatmap()
        if pair is not None:
            a, b, la, lb, grid = pair
            text.append(f"\ntail share: {a} (rows) × {b} (columns)", style="bold")
            text.append("   p: next factor pair\n", style="dim")
            for i, level in enumerate(la[:16]):
                text.append(f"  {level_text(level):>10s} ")
                text.append("".join(shade(v) for v in grid[i][:48]) + "\n")
        if model.notes:
            text.append("\n")
            for note in model.notes:
                text.append("▲ ", style="bold yellow")
                text.append(note + "\n")
        return text
