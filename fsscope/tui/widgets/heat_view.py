"""The probe's live view: the per-file latency heatmap (files × runs) and its legend. Also
the view of any job that records per-file latencies (smoke) and of jobs without their own."""

from __future__ import annotations

from textual.app import ComposeResult

from fsscope.format import format_ns
from fsscope.tui.model import Flag, JobView, WindowStats
from fsscope.tui.widgets.heat_legend import HeatLegend
from fsscope.tui.widgets.heatmap import Heatmap, flag_marks
from fsscope.tui.widgets.live_view import LiveView, SparkRow


class HeatView(LiveView):
    VIEW_ID = "heat-col"

    def compose(self) -> ComposeResult:
        heatmap = Heatmap(id="heatmap")
        yield heatmap
        yield HeatLegend(heatmap, id="legend")

    def on_mount(self) -> None:
        heatmap = self.heatmap
        heatmap.border_title = "Latency per file (columns) and run (rows)"
        # short enough for the heatmap at 80 columns (beside the flags: 46 cells of border)
        heatmap.border_subtitle = "←→↑↓ · +/- zoom · 0 fit · a bucket agg"

    @property
    def heatmap(self) -> Heatmap:
        return self.query_one("#heatmap", Heatmap)

    def show(self, view: JobView, live: bool = True) -> None:
        if view.matrix is not self.heatmap.matrix:
            self.query_one("#legend", HeatLegend).clear_cursor()
        self.heatmap.set_matrix(view.matrix)
        self.mark_flags(view)

    def update_view(self, view: JobView) -> None:
        pass  # the heatmap follows samples_added

    def samples_added(self, view: JobView, run: int, start: int, stop: int) -> None:
        self.heatmap.samples_added(run, start, stop)

    def mark_flags(self, view: JobView) -> None:
        """'!' above the files of point-like flags (outliers, series members, thresholds,
        level shifts); ranges (linear growth) are marked only when selected. Zoomed out, a
        series is marked at its first member (its members, when selected)."""
        flagged, dense = flag_marks(view.flags)
        self.heatmap.set_flags(flagged, dense=dense)

    def select_flag(self, view: JobView, flag: Flag | None) -> None:
        self.heatmap.select_files(flag.indices if flag is not None else ())

    def spark_rows(self, view: JobView, live: bool = True) -> list[SparkRow]:
        windows = view.windows
        p50, p99 = list(windows.p50_us), list(windows.p99_us)
        rows: list[SparkRow] = [
            ("p50", "p50 latency", WindowStats.log_series(p50), format_ns(p50[-1] * 1e3) if p50 else "–"),
            ("p99", "p99 latency", WindowStats.log_series(p99), format_ns(p99[-1] * 1e3) if p99 else "–"),
        ]
        rate = list(windows.calls_per_s)
        rows.append(("rate", "calls/s", rate, f"{rate[-1]:,.0f}/s" if rate else "–" if live else "live only"))
        return rows
