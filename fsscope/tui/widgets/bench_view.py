"""The bench's live view: the current run's throughput over the band of the earlier runs,
per-op latency percentiles, and the variation table filling in as runs finish.

Keys (chart focused): **w** cycles 1-s bins and the Throughput-N windows of the spec,
**r** cycles which run is drawn over the band of the others (default: the newest), **z**
zooms the y axis to the data (and back to an axis from 0).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static
from textual.widgets.data_table import ColumnKey

from fsscope.format import format_ns, format_pct
from fsscope.tui.bench_model import BenchModel
from fsscope.tui.model import JobView, WindowStats
from fsscope.tui.widgets.kernel_strip import KernelStrip
from fsscope.tui.widgets.live_view import LiveView, SparkRow
from fsscope.tui.widgets.table_export import Table
from fsscope.tui.widgets.throughput_chart import ThroughputChart

COMPACT_BELOW = 70  # view columns under which the tables keep their key columns only
# (key, label, kept when narrow)
OPS_COLUMNS = (("op", "op", True), ("ops", "ops/s", False), ("p50", "p50", True), ("p99", "p99", True))
VARIATION_COLUMNS = (("run", "run", True), ("ops", "ops/s", True), ("windows", "window min..max", False),
                     ("status", "", False))  # narrow: ≈ before the ops/s marks a live estimate


def _add_row(table: DataTable, **cells: object) -> None:
    """A row of the cells of the columns the table has now (narrow drops some)."""
    table.add_row(*(cells[str(key.value)] for key in table.columns))


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


class BenchView(LiveView):
    VIEW_ID = "bench-view"

    DEFAULT_CSS = """
    BenchView #throughput { border: round $panel; }
    BenchView #throughput:focus { border: round $primary; }
    BenchView #bench-tables { height: 13; }
    BenchView #bench-ops { width: 1fr; height: 100%; border: round $panel; }
    BenchView #bench-variation-box { width: 1fr; height: 100%; border: round $panel; }
    BenchView #bench-variation { height: 1fr; }
    BenchView #bench-summary { height: auto; padding: 0 1; }
    """

    BINDINGS = [
        Binding("w", "cycle_window", "window"),
        Binding("r", "cycle_run", "run"),
        Binding("z", "zoom", "zoom y"),  # "z y zoom" read as two keys, y being copy CSV
    ]

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self.view: JobView | None = None
        self.window_s: int | None = None  # None: the model's default
        self.run_choice: int | None = None  # None: follow the newest run
        self._drawn: tuple | None = None
        self._columns_compact = False

    def compose(self) -> ComposeResult:
        yield ThroughputChart(id="throughput")
        yield KernelStrip(id="kernel-strip")
        with Horizontal(id="bench-tables"):
            yield Table(id="bench-ops", show_cursor=False, zebra_stripes=True)
            with Vertical(id="bench-variation-box"):
                yield Table(id="bench-variation", show_cursor=False, zebra_stripes=True)
                yield Static("", id="bench-summary")

    def on_mount(self) -> None:
        self.ops_table.can_focus = False
        self.ops_table.border_title = "Latency per op"
        self.variation_table.can_focus = False
        self._add_columns()

    def _add_columns(self) -> None:
        """The tables' columns for the width: narrow (80 columns, beside the flags) keeps what
        each table is for — an op's p50/p99, a run's ops/s — so no column is cut off the side
        (the chart draws the windows; the ops/s per op is in the report)."""
        compact = self.compact
        for table, columns in ((self.ops_table, OPS_COLUMNS), (self.variation_table, VARIATION_COLUMNS)):
            table.clear(columns=True)
            for key, label, narrow in columns:
                if narrow or not compact:
                    table.add_column(label, key=key)
        self._columns_compact = compact

    @property
    def compact(self) -> bool:
        return 0 < self.size.width < COMPACT_BELOW

    def on_resize(self) -> None:
        if self.compact != self._columns_compact:
            self._add_columns()
            self._drawn = None
            if self.view is not None:
                self.update_view(self.view)

    @property
    def chart(self) -> ThroughputChart:
        return self.query_one("#throughput", ThroughputChart)

    @property
    def kernel_strip(self) -> KernelStrip:
        return self.query_one("#kernel-strip", KernelStrip)

    @property
    def ops_table(self) -> DataTable:
        return self.query_one("#bench-ops", DataTable)

    @property
    def variation_table(self) -> DataTable:
        return self.query_one("#bench-variation", DataTable)

    @property
    def summary_text(self) -> str:
        return str(self.query_one("#bench-summary", Static).content)

    @staticmethod
    def model_of(view: JobView | None) -> BenchModel | None:
        return view.data if view is not None and isinstance(view.data, BenchModel) else None

    # -- LiveView ------------------------------------------------------------------------------
    def show(self, view: JobView, live: bool = True) -> None:
        if view is not self.view:
            self.window_s = self.run_choice = None
        self.view = view
        self._drawn = None
        self.update_view(view)

    def update_view(self, view: JobView) -> None:
        self.view = view
        model = self.model_of(view)
        if model is None:
            self.chart.set_data(None)
            return
        key = (model.version, self.window_s, self.run_choice)
        if key == self._drawn:
            return
        self._drawn = key
        window = self.window_s or model.default_window()
        run = self.run_choice if self.run_choice in model.runs else None
        data = model.chart(run, window)
        self.chart.set_data(data)
        what = f"Throughput-{window} (ops/s per {window}-s window)" if window > 1 else "ops/s per 1-s bin"
        # at 80 columns (beside the flags) the long forms were cut: the short ones fit
        narrow = self.screen.has_class("-narrow")
        self.chart.border_subtitle = ("bar: this run · shade: the others · ─ mean" if narrow else
                                      "bar: this run · shade: band of the others · ─ their mean · "
                                      "w window · r run · z zoom")
        self.query_one("#bench-variation-box").border_title = "Variation" if narrow else "Variation across runs"
        if data.run is None:
            self.chart.border_title = f"{what} · waiting for the first run"
        else:
            runs = ", ".join(str(r + 1) for r in data.band_runs)
            if self.screen.has_class("-narrow"):  # the long form was cut at 80 columns
                band = f"vs {runs}" if data.band_runs else "first"
                short = f"Throughput-{window}" if window > 1 else "ops/s per 1-s bin"
                self.chart.border_title = f"{short} · run {data.run + 1}/{model.runs_requested} {band}"
            else:
                band = (f"over the band (min..max) of run{'s' if len(data.band_runs) > 1 else ''} "
                        + runs) if data.band_runs else "no earlier run yet"
                self.chart.border_title = f"{what} · run {data.run + 1} of {model.runs_requested} {band}"
        drawn = model.runs.get(data.run) if data.run is not None else None
        self.kernel_strip.show(drawn.kernel if drawn is not None else None)
        self._fill_ops(model)
        self._fill_variation(model, window)

    def _fill_ops(self, model: BenchModel) -> None:
        table = self.ops_table
        rows, covers = model.op_rows()
        table.clear()
        for row in rows:
            _add_row(table, op=row.op, ops=_rate(row.ops_per_s),
                     p50=format_ns(row.p50_ns) if row.p50_ns is not None else "–",
                     p99=format_ns(row.p99_ns) if row.p99_ns is not None else "–")
        table.border_subtitle = covers

    def _fill_variation(self, model: BenchModel, window: int) -> None:
        table = self.variation_table
        table.clear()
        for row in model.variation_rows(window):
            status = ("report" if row.exact else "≈ live" if row.finished else "running")
            span = (f"{_rate(row.window_min)}..{_rate(row.window_max)}"
                    if row.window_min is not None else "–")
            _add_row(table, run=f"{row.run + 1}", ops=("" if row.exact else "≈") + _rate(row.ops_per_s),
                     windows=span, status=Text(status, style="dim" if not row.exact else ""))
        if ColumnKey("windows") in table.columns:
            table.columns[ColumnKey("windows")].label = Text(f"T-{window} min..max" if window > 1 else "1 s min..max")
        v = model.variation()
        text = Text()
        if v["runs"] >= 2:
            approx = "" if v["exact"] else "≈ "
            if self.compact:  # the runs' ops/s are in the rows above: the two figures, one line
                text.append(f"rel. range {approx}{format_pct(v['relative_range'])}", style="bold")
                text.append(f" · RSD {approx}{format_pct(v['rsd'])}")
            else:
                text.append(f"relative range {approx}{format_pct(v['relative_range'])}", style="bold")
                text.append(f" · RSD {approx}{format_pct(v['rsd'])} · mean {_rate(v['mean'])} ops/s over {v['runs']} runs")
            if not v["exact"] and not self.compact:
                text.append("\n(live estimates from the 1-s bins; the report replaces them)", style="dim")
        else:
            text.append("range, RSD: after run 2" if self.compact else
                        "relative range and RSD: after the second run finishes", style="dim")
        self.query_one("#bench-summary", Static).update(text)

    def spark_rows(self, view: JobView, live: bool = True) -> list[SparkRow]:
        model = self.model_of(view)
        if model is None:
            return []
        p50, p99, rate = list(model.worst_p50_ns), list(model.worst_p99_ns), list(model.rate)
        rows: list[SparkRow] = []
        for key, values, op in (("p50", p50, model.worst_p50_op), ("p99", p99, model.worst_p99_op)):
            label = f"{key} worst op"
            if values:
                rows.append((key, label, WindowStats.log_series([v / 1e3 for v in values]),
                             f"{format_ns(values[-1])} {op}"[:14]))
            else:
                rows.append((key, label, [], "–" if live else "live only"))
        rows.append(("rate", "ops/s", rate, f"{rate[-1]:,.0f}/s" if rate else "–"))
        return rows

    # -- keys ----------------------------------------------------------------------------------
    def action_cycle_window(self) -> None:
        model = self.model_of(self.view)
        if model is None or self.view is None:
            return
        choices = [1, *sorted(set(model.window_sizes_s))]
        current = self.window_s or model.default_window()
        self.window_s = choices[(choices.index(current) + 1) % len(choices)] if current in choices else 1
        self.update_view(self.view)

    def action_zoom(self) -> None:
        self.chart.set_zero_based(not self.chart.zero_based)

    def action_cycle_run(self) -> None:
        model = self.model_of(self.view)
        if model is None or self.view is None or not model.runs:
            return
        runs = sorted(model.runs)
        current = self.run_choice if self.run_choice in runs else model.current
        nxt = runs[(runs.index(current) + 1) % len(runs)] if current in runs else runs[-1]
        self.run_choice = None if nxt == model.current else nxt
        self.update_view(self.view)
