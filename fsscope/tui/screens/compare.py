"""Two recorded runs side by side: heatmaps on one colour scale, their flags, and how far
apart their latency distributions are (K-S distance, median ratio)."""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from fsscope.tui.model import Summary, format_ns, ks_distance
from fsscope.tui.replay import RunRecord
from fsscope.tui.widgets.flags_panel import FlagsPanel
from fsscope.tui.widgets.heatmap import Heatmap


class CompareScreen(Screen):
    BINDINGS = [Binding("escape", "back", "Back")]

    def __init__(self, left: RunRecord, right: RunRecord):
        super().__init__()
        self.records = (left, right)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(self._verdict(), id="compare-verdict")
        with Horizontal(id="compare-columns"):
            for side, record in zip(("left", "right"), self.records):
                with Vertical(classes="compare-column"):
                    yield Static(self._summary(record), classes="compare-summary")
                    yield Heatmap(id=f"heatmap-{side}")
                    yield FlagsPanel(id=f"flags-{side}")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "compare two runs"
        values = [r.matrix.all_measured() for r in self.records if r.matrix is not None]
        values = [v for v in values if v.size]
        low = min(float(v.min()) for v in values) if values else None
        high = max(float(v.max()) for v in values) if values else None
        for side, record in zip(("left", "right"), self.records):
            heatmap = self.query_one(f"#heatmap-{side}", Heatmap)
            heatmap.border_title = record.run.id
            heatmap.set_scale(max(1.0, low) if low else None, high)
            heatmap.set_matrix(record.matrix)
            flags = self.query_one(f"#flags-{side}", FlagsPanel)
            flags.set_flags(record.flags)
            heatmap.set_flags(sorted({i for f in record.flags for i in f.indices}))

    def _summary(self, record: RunRecord) -> Text:
        m = record.run.manifest()
        s = Summary.of(record.matrix.all_measured() if record.matrix is not None else np.zeros(0, dtype=np.int64))
        text = Text()
        text.append(f"{record.run.id}\n", style="bold")
        text.append(f"{m.get('job', '?')} {m.get('spec', {})}\n", style="dim")
        text.append(f"{record.target} · {record.recipe} · {record.job.status}\n", style="dim")
        text.append(f"{s.measured:,} calls  median {format_ns(s.median_ns)}  p99 {format_ns(s.p99_ns)}  "
                    f"max {format_ns(s.max_ns)}  flags {len(record.flags)}")
        return text

    def _verdict(self) -> Text:
        left, right = self.records
        if left.matrix is None or right.matrix is None:
            return Text("One of the runs recorded no latencies: nothing to compare.", style="dim")
        a, b = left.matrix.all_measured(), right.matrix.all_measured()
        ks = ks_distance(a, b)
        sa, sb = Summary.of(a), Summary.of(b)
        ratio = sb.median_ns / sa.median_ns if sa.median_ns and sa.median_ns == sa.median_ns else float("nan")
        text = Text()
        text.append(f"K-S distance {ks:.3f}", style="bold")
        text.append("  (0 = same distribution, 1 = no overlap)   ", style="dim")
        text.append(f"median right/left {ratio:.2f}×", style="bold")
        return text

    def action_back(self) -> None:
        self.dismiss()
