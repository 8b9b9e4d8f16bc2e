"""Two recorded runs side by side. Probe runs: heatmaps on one colour scale, their flags, and
how far apart their latency distributions are (K-S distance, median ratio). Bench, age, frag
and syncwrite runs: the main figures of both reports with B / A ratios (as ``fsscope compare``
prints them), for bench the Welch verdict on ops/s (a winner only when significant), for
syncwrite both recipes' log–log curves on one chart and a Welch verdict per buffer size -- each
job's comparer, verdict and charts named by its descriptor (``fsscope.engine.jobs``)."""

from __future__ import annotations

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static

from fsscope.analysis.compare import Section
from fsscope.analysis.variation.metrics import ks_distance
from fsscope.engine import jobs
from fsscope.format import format_cell, format_ns, format_ratio, ratio_cell, visible
from fsscope.tui import compare_model, exports
from fsscope.tui import messages as msg
from fsscope.tui.model import Summary, spec_words
from fsscope.tui.replay import RunRecord
from fsscope.tui.widgets.fit_footer import FitFooter
from fsscope.tui.widgets.flags_panel import FlagsPanel
from fsscope.tui.widgets.heat_legend import HeatLegend
from fsscope.tui.widgets.heatmap import Heatmap, flag_marks
from fsscope.workloads.bench_records import Report as BenchReport


class CompareScreen(Screen):
    BINDINGS = [Binding("escape", "back", "Back"), Binding("m", "export_flags", "Flags→MD")]
    DEFAULT_CSS = """
    #compare-report { height: 1fr; }
    #compare-heads { height: auto; }
    #compare-tables { height: auto; padding: 0 1; }
    """

    def __init__(self, left: RunRecord, right: RunRecord):
        super().__init__()
        self.records = (left, right)
        self.sides: tuple[compare_model.Side, compare_model.Side] | None = None
        self.comparison: compare_model.Comparison | None = None
        names = [r.job.job for r in self.records]
        # two runs of a job whose live view is the heatmap compare as heatmaps (their matrices)
        heatmaps = names[0] in jobs.JOBS and not jobs.JOBS[names[0]].view
        if not (names[0] == names[1] and (heatmaps or (left.matrix is not None and right.matrix is not None))):
            self.sides = (compare_model.side_of(left.run, left.job.job, left.job.status),
                          compare_model.side_of(right.run, right.job.job, right.job.status))
            self.comparison = compare_model.compare(*self.sides)

    def action_export_flags(self) -> None:
        """Both runs' flags, one Markdown file each."""
        written = [exports.write_record_flags(record) for record in self.records]
        self.notify("Flags written to " + " and ".join(str(p) for p in written), title="Exported", timeout=6)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        if self.sides is not None and self.comparison is not None:
            yield from self._compose_reports(self.sides, self.comparison)
            yield FitFooter()
            return
        yield Static(self._verdict(), id="compare-verdict")
        with Horizontal(id="compare-columns"):
            for side, record in zip(("left", "right"), self.records):
                with Vertical(classes="compare-column"):
                    yield Static(self._summary(record), classes="compare-summary")
                    heatmap = Heatmap(id=f"heatmap-{side}")
                    yield heatmap
                    yield HeatLegend(heatmap, id=f"legend-{side}")
                    yield FlagsPanel(id=f"flags-{side}")
        yield FitFooter()

    def _compose_reports(self, sides: tuple[compare_model.Side, compare_model.Side],
                         c: compare_model.Comparison) -> ComposeResult:
        verdict = Text(c.message, style="bold green" if c.winner else "bold")
        for note in c.notes:
            verdict.append(f"\n{note}", style="yellow")
        yield Static(verdict, id="compare-verdict")
        with VerticalScroll(id="compare-report"):
            with Horizontal(id="compare-heads"):
                for label, side in zip("AB", sides):
                    yield Static(self._side_text(label, side), classes="compare-summary compare-column")
            charts = jobs.JOBS[sides[0].job].compare_charts if sides[0].job in jobs.JOBS else ""
            if charts:
                yield jobs.resolve(charts)(*sides)
            yield Static(self._tables(sides, c.sections), id="compare-tables")

    @staticmethod
    def _side_text(label: str, side: compare_model.Side) -> Text:
        text = Text()
        text.append(f"{label}  {side.id}\n", style="bold")
        what = f"{side.job} · recipe {visible(side.recipe)} · fs {side.fs}"
        if side.personality:
            what += f" · {side.personality}"
        text.append(what + "\n", style="dim")
        text.append(f"{visible(side.target)} · {side.status}", style="dim")
        if isinstance(side.report, BenchReport) and side.report.variation.runs:
            variation = side.report.variation
            ops = variation.mean_ops_per_s
            text.append(f"\nmean {ops:,.0f} ops/s" if ops is not None else "\nmean - ops/s")
            if variation.relative_range is not None:
                text.append(f"  range {variation.relative_range * 100:.1f}%")
            if variation.rsd is not None:
                text.append(f"  RSD {variation.rsd * 100:.1f}%")
            text.append(f"  over {variation.runs} runs")
        return text

    @staticmethod
    def _tables(sides: tuple[compare_model.Side, compare_model.Side], sections: list[Section]) -> Group | Text:
        a, b = sides
        tables = []
        for section in sections:
            if not section.rows:
                continue
            table = Table(title=section.title, title_justify="left", expand=True)
            table.add_column("", no_wrap=True)
            table.add_column(f"A {a.id}", justify="right", overflow="fold")
            table.add_column(f"B {b.id}", justify="right", overflow="fold")
            table.add_column("B / A", justify="right", no_wrap=True)
            for row in section.rows:
                table.add_row(row.metric, format_cell(row.a, row.kind), format_cell(row.b, row.kind),
                              ratio_cell(row))
            tables.append(table)
        return Group(*tables) if tables else Text("Nothing both reports hold.", style="dim")

    def on_mount(self) -> None:
        self.sub_title = "compare two runs"
        if self.sides is not None:
            return
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
            flagged, dense = flag_marks(record.flags)
            heatmap.set_flags(flagged, dense=dense)

    def _summary(self, record: RunRecord) -> Text:
        m = record.run.manifest()
        s = Summary.of(record.matrix.all_measured() if record.matrix is not None else np.zeros(0, dtype=np.int64))
        text = Text()
        text.append(f"{record.run.id}\n", style="bold")
        # the figures first: a short screen shows the summary's first lines only
        text.append(f"{s.measured:,} calls  median {format_ns(s.median_ns)}  p99 {format_ns(s.p99_ns)}  "
                    f"max {format_ns(s.max_ns)}  flags {len(record.flags)}\n")
        spec = m.get("spec") or {}
        # the runs made (the heatmap's rows), not only those asked: a probe's sequential test adds some
        made = int((record.matrix.values >= 0).any(axis=1).sum()) if record.matrix is not None else None
        settings = spec_words(spec, runs_made=made, sep=" · ")
        text.append(f"{m.get('job', '?')}: {settings or 'defaults'}\n", style="dim")
        text.append(f"{visible(record.target)} · {visible(record.recipe)} · {record.job.status}", style="dim")
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
        text.append(f"median right/left {format_ratio(ratio)}", style="bold")
        return text

    def on_heat_cursor_moved(self, message: msg.HeatCursorMoved) -> None:
        """The cursor of the heatmap being moved (the focused one) reads out under it."""
        for side in ("left", "right"):
            if self.query_one(f"#heatmap-{side}", Heatmap).has_focus:
                self.query_one(f"#legend-{side}", HeatLegend).set_cursor(
                    message.run, message.first, message.last, message.latency_ns, message.aggregate)

    def action_back(self) -> None:
        self.dismiss()
