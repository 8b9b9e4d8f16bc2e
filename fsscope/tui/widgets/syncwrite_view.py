"""The sync-write sweep's live view: log–log throughput and latency curves with their 95 %
confidence bands and both knees, filling in as repetitions finish; below them a table per
buffer size and the size with the best throughput per unit of latency (★): past it, more
batching costs more latency than it gains."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import DataTable, Static

from fsscope.format import format_ns
from fsscope.tui.model import JobView, WindowStats
from fsscope.tui.syncwrite_model import SyncWriteModel, size_label
from fsscope.tui.widgets.live_view import ModelView, SparkRow
from fsscope.tui.widgets.syncwrite_chart import SyncWriteChart
from fsscope.tui.widgets.table_export import Table

BAR = 12
EIGHTHS = " ▏▎▍▌▋▊▉█"


def bar(fraction: float | None, width: int = BAR, style: str = "") -> Text:
    """A horizontal bar of ``fraction`` (0..1) of ``width`` cells, in eighths."""
    if fraction is None or math.isnan(fraction):
        return Text("·" * width, style="dim")
    units = int(round(max(0.0, min(1.0, fraction)) * width * 8))
    full, part = divmod(units, 8)
    text = "█" * full + (EIGHTHS[part] if part else "")
    return Text(text.ljust(width), style=style)


class SyncWriteView(ModelView):
    VIEW_ID = "syncwrite-view"
    MODEL = SyncWriteModel

    DEFAULT_CSS = """
    SyncWriteView #sync-charts { height: 2fr; }
    SyncWriteView #sync-table { height: 1fr; border: round $panel; }
    SyncWriteView #sync-summary { height: auto; padding: 0 1; border: round $panel; }
    """

    def compose(self) -> ComposeResult:
        with Horizontal(id="sync-charts"):
            yield SyncWriteChart("throughput", id="sync-chart-throughput")
            yield SyncWriteChart("latency", id="sync-chart-latency")
        yield Table(id="sync-table", show_cursor=False, zebra_stripes=True)
        yield Static("", id="sync-summary")

    def on_mount(self) -> None:
        table = self.table
        table.can_focus = False
        for key, label in (("size", "buffer"), ("n", "n"), ("mbps", "MB/s ±95%"), ("tbar", "throughput"),
                           ("lat", "latency ±95%"), ("lbar", "latency (log)"), ("p99", "p99"), ("ratio", "ratio")):
            table.add_column(label, key=key)
        table.border_title = "Sync-write sweep: throughput vs latency per buffer size"

    @property
    def table(self) -> DataTable:
        return self.query_one("#sync-table", DataTable)

    def draw_empty(self) -> None:
        self.table.clear()

    def draw(self, model: SyncWriteModel) -> None:
        table = self.table
        rows = model.rows()
        best = model.best_buffer_bytes
        curves = [model.curves()]
        for chart in self.query(SyncWriteChart):
            chart.set_curves(curves)
        top = max((r.bytes_per_s for r in rows if r.bytes_per_s), default=None)
        lats = [r.latency_mean_ns for r in rows if r.latency_mean_ns]
        lo, hi = (math.log10(min(lats)), math.log10(max(lats))) if lats else (0.0, 1.0)
        table.clear()
        for row in rows:
            tfrac = row.bytes_per_s / top if row.bytes_per_s is not None and top else None
            lfrac = None
            if row.latency_mean_ns:
                lfrac = 1.0 if hi - lo < 1e-9 else 0.08 + 0.92 * (math.log10(row.latency_mean_ns) - lo) / (hi - lo)
            mbps = "–" if row.bytes_per_s is None else f"{row.bytes_per_s / 1e6:,.1f}"
            if row.bytes_per_s_ci95:
                mbps += f" ±{row.bytes_per_s_ci95 / 1e6:.1f}"
            lat = format_ns(row.latency_mean_ns) if row.latency_mean_ns else "–"
            if row.latency_ci95_ns:
                lat += f" ±{format_ns(row.latency_ci95_ns)}"
            label = Text(size_label(row.buffer_bytes))
            if row.buffer_bytes == best:
                label.append(" ★", style="bold")
            table.add_row(label, str(row.repeats), mbps,
                          bar(tfrac, style="bold"),
                          lat,
                          bar(lfrac, style="dim"),
                          ("" if row.exact else "≤") + format_ns(row.latency_p99_ns) if row.latency_p99_ns else "–",
                          "–" if row.ratio is None else f"{row.ratio:,.1f}")
        n = len(model.points)
        reps = model.repetitions_done()
        state = ("final (report)" if model.report is not None else
                 f"{n} point{'s' if n != 1 else ''}, {reps} of {model.repeats_requested or '?'} repetitions so far")
        table.border_subtitle = f"{model.mode} · {state}"
        summary = Text()
        if best is not None:
            summary.append(f"★ best throughput per unit of latency: {size_label(best)} buffers", style="bold")
            summary.append(" — beyond it larger writes cost more latency than they gain in MB/s. "
                           "ratio = MB/s per ms of mean write latency; latency is per write", style="dim")
        else:
            summary.append("waiting for the first point…", style="dim")
        knees = model.knees
        for key, knee in (("latency rise", knees.latency_rise), ("throughput saturation", knees.throughput_saturation)):
            if knee is not None and knee.note:
                summary.append(f"\n{key}: {knee.note}")
        if model.report is None and rows:
            summary.append("\nlive: CIs over the repetitions so far, p99 the worst repetition's (≤); "
                           "the report has every write's", style="dim")
        kernel = model.report.kernel_by_size if model.report is not None else []
        if kernel:  # traced: what reached the device per write
            summary.append("\nper write on the device: " + " · ".join(
                f"{size_label(k.buffer_bytes)} {k.requests_per_write or 0:.1f} requests, "
                f"{(k.bytes_per_write or 0) / 1024:,.0f} KiB, {k.commits_per_write or 0:.2f} commits" for k in kernel))
        for note in model.notes:
            summary.append(f"\n{note}", style="yellow")
        self.query_one("#sync-summary", Static).update(summary)

    def spark_rows(self, view: JobView, live: bool = True) -> list[SparkRow]:
        model = self.model_of(view)
        if model is None:
            return []
        p50, p99, mbps = list(model.p50_ns), list(model.p99_ns), list(model.mb_per_s)
        return [
            ("p50", "p50 / point", WindowStats.log_series([v / 1e3 for v in p50]),
             format_ns(p50[-1]) if p50 else "–"),
            ("p99", "p99 / point", WindowStats.log_series([v / 1e3 for v in p99]),
             format_ns(p99[-1]) if p99 else "–"),
            ("rate", "MB/s", mbps, f"{mbps[-1]:,.1f} MB/s" if mbps else "–"),
        ]
