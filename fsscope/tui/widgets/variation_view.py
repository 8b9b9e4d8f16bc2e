"""The variation study's view: the paper's figures (Cao et al., FAST'17) drawn as text plots,
one at a time (f / F cycle, 1 2 6 7 8 9 k jump), with the selected configuration's knobs and
notes beside it ([ and ] select). What is drawn comes from :class:`VariationModel`, filled
live as rows are recorded and from ``treatments.ndjson`` on replay.

Glyphs follow the paper: ■ ext4, ● XFS, ▲ btrfs; red = above the flag threshold."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, ScrollableContainer, VerticalScroll
from textual.widgets import Static

from fsscope.format import format_ns, format_pct, spark
from fsscope.tui.model import Flag, JobView
from fsscope.tui.variation_model import (
    FIGURE_TITLES,
    FIGURES,
    STRONG_PCC,
    Configuration,
    VariationModel,
    quantile_at,
)
from fsscope.tui.widgets.explore_view import level_text
from fsscope.tui.widgets.live_view import ModelView, SparkRow
from fsscope.tui.widgets.syncwrite_view import bar
from fsscope.tui.widgets.throughput_chart import compact_number, resample

FS_GLYPH = {"ext4": "■", "xfs": "●", "btrfs": "▲"}
SERIES_GLYPHS = "●○◆◇▲△■□★☆"  # enough for every op of a personality
PLOT_W, PLOT_H = 40, 9  # the body is ~60 columns beside the flags at 140 x 45
BAR_W = 24


def glyph(fs: str) -> str:
    return FS_GLYPH.get(fs, "+")


def fit(values: list[float], columns: int = PLOT_W) -> list[float]:
    """A long series averaged onto ``columns`` cells (a short one as it is)."""
    if len(values) <= columns:
        return values
    return [math.nan if v is None else v for v in resample(list(values), columns)]


def _axis_value(v: float, pct: bool) -> str:
    return f"{v:.0%}" if pct else f"{v:.2g}" if abs(v) < 10 else compact_number(v)


def short_level(level) -> str:
    """A knob level as the paper writes it: 4K, 128, ordered."""
    return level_text(level).replace("KiB", "K")


def scatter(points: list[tuple[float, float, str, str]], *, x_log: bool = False, x_pct: bool = False,
            y_pct: bool = True, width: int = PLOT_W, height: int = PLOT_H) -> Text:
    """A text scatter plot: (x, y, glyph, style) per point; y from 0, x over the data."""
    pts = [p for p in points if math.isfinite(p[0]) and math.isfinite(p[1]) and (p[0] > 0 or not x_log)]
    if not pts:
        return Text("  (no points yet)\n", style="dim")
    xs = [math.log10(p[0]) if x_log else p[0] for p in pts]
    x_lo, x_hi = min(xs), max(xs)
    if x_hi - x_lo < 1e-12:
        x_lo, x_hi = x_lo - 0.5, x_hi + 0.5
    y_hi = max(p[1] for p in pts) or 1.0
    grid: list[list[tuple[str, str]]] = [[(" ", "")] * width for _ in range(height)]
    for (_, y, g, style), x in zip(pts, xs):
        col = int(round((x - x_lo) / (x_hi - x_lo) * (width - 1)))
        row = height - 1 - int(round(y / y_hi * (height - 1)))
        grid[row][col] = (g, style)
    text = Text()
    for r, cells in enumerate(grid):
        label = _axis_value(y_hi, y_pct) if r == 0 else _axis_value(0, y_pct) if r == height - 1 else ""
        text.append(f"  {label:>6s} │")
        for g, style in cells:
            text.append(g, style=style)
        text.append("\n")
    lo_s = _axis_value(10 ** x_lo if x_log else x_lo, x_pct)
    hi_s = _axis_value(10 ** x_hi if x_log else x_hi, x_pct)
    text.append("         └" + "─" * width + "\n")
    text.append(f"          {lo_s}{hi_s:>{width - len(lo_s)}s}" + ("  (log)" if x_log else "") + "\n")
    return text


def usable(values: Sequence[float] | np.ndarray, log: bool = False) -> np.ndarray:
    """The finite values (positive ones on a log axis), sorted."""
    arr = np.asarray(values, dtype=np.float64)
    return np.sort(arr[np.isfinite(arr) & ((arr > 0) if log else True)])


def cdf_plot(given: Sequence[tuple[str, Sequence[float] | np.ndarray]], *, log: bool = False, pct: bool = True,
             width: int = PLOT_W, height: int = PLOT_H, fmt: Callable[[float], str] | None = None) -> Text:
    """Empirical CDFs on one text plot: per series (label, values), the fraction of values
    <= x drawn with its own glyph (x shared, y = F from 0 to 1)."""
    series = [(label, xs) for label, values in given if (xs := usable(values, log)).size]
    if not series:
        return Text("  (no values yet)\n", style="dim")
    lo = min(v[0] for _, v in series)
    hi = max(v[-1] for _, v in series)
    if not log:
        lo = min(lo, 0.0)
    tr = (lambda v: math.log10(v)) if log else (lambda v: v)
    a, b = tr(lo), tr(hi)
    if b - a < 1e-12:
        b = a + 1.0
    grid: list[list[tuple[str, str]]] = [[(" ", "")] * width for _ in range(height)]
    styles = ("bold cyan", "bold magenta", "bold yellow", "bold green", "bold blue", "bold red", "white", "dim",
              "cyan", "magenta")
    columns = a + (b - a) * np.arange(width) / (width - 1)
    for k, (_, values) in enumerate(series):
        arr = np.log10(values) if log else np.asarray(values)  # sorted above
        fractions = np.searchsorted(arr, columns + 1e-12, side="right") / arr.size
        for col, f in enumerate(fractions):
            row = height - 1 - int(round(f * (height - 1)))
            grid[row][col] = (SERIES_GLYPHS[k % len(SERIES_GLYPHS)], styles[k % len(styles)])
    fmt = fmt or ((lambda v: f"{v:.0%}") if pct else compact_number)
    text = Text()
    for r, cells in enumerate(grid):
        label = "1.0" if r == 0 else "0.0" if r == height - 1 else "F" if r == height // 2 else ""
        text.append(f"  {label:>4s} │")
        for g, style in cells:
            text.append(g, style=style)
        text.append("\n")
    lo_s, hi_s = fmt(lo), fmt(hi)
    text.append("       └" + "─" * width + "\n")
    text.append(f"        {lo_s}{hi_s:>{width - len(lo_s)}s}" + ("  (log)" if log else "") + "\n  ")
    for k, (label, values) in enumerate(series):
        text.append(f" {SERIES_GLYPHS[k % len(SERIES_GLYPHS)]} ", style=styles[k % len(styles)])
        text.append(f"{label} (n={len(values)})")
    text.append("\n")
    return text


def range_cells(values: list[float], lo: float, hi: float, width: int = BAR_W) -> str:
    """The runs of one configuration on a scale shared with others (lo..hi): ● each run,
    ─ from the slowest to the fastest, ┼ their mean (the paper's range bars and dots)."""
    span = (hi - lo) or 1.0
    cells = [" "] * width
    pos = [int(round((v - lo) / span * (width - 1))) for v in values]
    if not pos:
        return "".join(cells)
    for i in range(min(pos), max(pos) + 1):
        cells[i] = "─"
    cells[int(round((sum(values) / len(values) - lo) / span * (width - 1)))] = "┼"
    for i in pos:
        cells[i] = "●"
    return "".join(cells)


def knob_tuple(c: Configuration) -> str:
    """The paper's configuration label: the knob levels joined by '-' (1K-128-ordered-…)."""
    return "-".join(short_level(v) for v in c.knobs.values())


def rr_style(model: VariationModel, c: Configuration) -> str:
    return "bold red" if model.flagged(c) else ""


class VariationView(ModelView):
    VIEW_ID = "variation-view"
    MODEL = VariationModel

    DEFAULT_CSS = """
    VariationView #variation-main { height: 1fr; }
    VariationView #variation-body { width: 3fr; border: round $panel; padding: 0 1; }
    VariationView #variation-figure { width: auto; }
    VariationView #variation-side { width: 1fr; min-width: 30; border: round $panel; padding: 0 1; }
    """

    BINDINGS = [
        Binding("f", "figure(1)", "Next fig."),
        Binding("F", "figure(-1)", "Prev fig.", show=False),
        *[Binding(k, f"show_figure('{k}')", f"Fig. {k}", show=False) for k in FIGURES],
        Binding("right_square_bracket", "select(1)", "Next config"),
        Binding("left_square_bracket", "select(-1)", "Prev config", show=False),
        Binding("w", "next_window", "Window"),
        Binding("o", "next_op", "Op"),
    ]

    def compose(self) -> ComposeResult:
        with Horizontal(id="variation-main"):
            with ScrollableContainer(id="variation-body"):  # wide figures scroll, never wrap
                yield Static("", id="variation-figure")
            with VerticalScroll(id="variation-side"):
                yield Static("", id="variation-config")

    def on_mount(self) -> None:
        self.query_one("#variation-body").border_title = "Variation study"
        self.query_one("#variation-side").border_title = "Configuration"

    # -- keys ----------------------------------------------------------------------------------
    def _act(self, change: Callable[[VariationModel], object]) -> None:
        view = self._view
        model = self.model_of(view)
        if view is not None and model is not None:
            change(model)
            self.update_view(view)

    def action_figure(self, delta: int) -> None:
        self._act(lambda m: m.next_figure(delta))

    def action_show_figure(self, figure: str) -> None:
        self._act(lambda m: m.show_figure(figure))

    def action_select(self, delta: int) -> None:
        self._act(lambda m: m.select(delta))

    def action_next_window(self) -> None:
        self._act(lambda m: m.next_window())

    def action_next_op(self) -> None:
        self._act(lambda m: m.next_op())

    def select_flag(self, view: JobView, flag: Flag | None) -> None:
        """A flagged configuration picked in the flags panel: the figures show it."""
        model = self.model_of(view)
        if model is not None and flag is not None and flag.finding.id:
            model.select_id(flag.finding.id)
            self.update_view(view)

    def spark_rows(self, view: JobView, live: bool = True) -> list[SparkRow]:
        """Per configuration (in plan order): relative range, K-S range, mean ops/s."""
        model = self.model_of(view)
        if model is None:
            return []
        rr = [c.relative_range or 0.0 for c in model.configs]
        ks = [c.ks_range or 0.0 for c in model.configs]
        ops = [c.mean_ops_per_s for c in model.configs]
        return [("p50", "rel. range", rr, f"max {format_pct(max(rr))}" if rr else "–"),
                ("p99", "K-S range", ks, f"max {max(ks):.2f}" if ks else "–"),
                ("rate", "mean ops/s", ops, f"{compact_number(ops[-1])}/s" if ops else "–")]

    # -- drawing -------------------------------------------------------------------------------
    def draw(self, model: VariationModel) -> None:
        self.query_one("#variation-body").border_title = FIGURE_TITLES[model.figure]
        self.query_one("#variation-figure", Static).update(self.render_figure(model))
        self.query_one("#variation-config", Static).update(self.render_side(model))

    @classmethod
    def render_figure(cls, model: VariationModel) -> Text:
        text = Text()
        state = "final" if model.report is not None else "so far"
        planned = model.report.planned if model.report is not None else None
        text.append(f"{len(model.configs)} configurations {state}"
                    + (f" of {planned} planned" if planned else ""), style="bold")
        if model.failed:
            text.append(f", {len(model.failed)} failed", style="red")
        text.append(f"   threshold {model.threshold:.0%}\n", style="dim")
        text.append("f figure (1 2 6 7 8 9 k) · [ ] configuration\n\n", style="dim")
        draw = {"1": cls._fig1, "2": cls._fig2, "6": cls._fig6, "7": cls._fig7, "8": cls._fig8,
                "9": cls._fig9, "k": cls._knobs}[model.figure]
        text.append(FIGURE_TITLES[model.figure] + "\n", style="bold underline")
        if not model.configs:
            text.append("  waiting for the first configuration's runs\n", style="dim")
            return text
        draw(model, text)
        return text

    @staticmethod
    def _fig1(model: VariationModel, text: Text) -> None:
        cur = model.current
        for p in model.personalities():
            rows = model.by_range(p)
            ops = [v for c in rows for v in c.ops_per_s]
            lo, hi = min(ops), max(ops)
            text.append(f"\n{p}", style="bold")
            text.append(f"  ops/s {compact_number(lo)} … {compact_number(hi)}; ● a run, ┼ mean\n", style="dim")
            for c in rows:
                mark = "▶" if c is cur else " "
                text.append(f"{mark} {glyph(c.fs)} {c.label:8s} ")
                text.append(range_cells(c.ops_per_s, lo, hi), style=rr_style(model, c) or "cyan")
                text.append(f" {compact_number(c.mean_ops_per_s):>7s} ")
                text.append(f"{format_pct(c.relative_range, '-'):>6s}\n", style=rr_style(model, c))
            text.append("\n  x: mean ops/s (log), y: relative range; ◆ selected\n", style="dim")
            text.append_text(scatter([(c.mean_ops_per_s, c.relative_range or 0.0,
                                       "◆" if c is cur else glyph(c.fs),
                                       "bold yellow" if c is cur else rr_style(model, c))
                                      for c in rows], x_log=True))

    @staticmethod
    def _fig2(model: VariationModel, text: Text) -> None:
        top = max((c.relative_range or 0.0 for c in model.configs), default=0.0) or 1.0
        text.append(f"  bars: relative range of the runs (full = {format_pct(top)}); mean ops/s\n", style="dim")
        cur = model.current
        for label, by_p in model.across_workloads():
            any_c = next(iter(by_p.values()))
            mark = "▶" if cur is not None and cur.label == label else " "
            text.append(f"{mark} {glyph(any_c.fs)} {label:8s} ", style="bold")
            text.append(f"{knob_tuple(any_c)}\n", style="dim")
            for p in model.personalities():
                c = by_p.get(p)
                text.append(f"     {p:11s}")
                if c is None:
                    text.append("·\n", style="dim")
                    continue
                text.append_text(bar((c.relative_range or 0.0) / top, BAR_W, rr_style(model, c) or "cyan"))
                text.append(f" {format_pct(c.relative_range, '-'):>6s}", style=rr_style(model, c))
                text.append(f" {compact_number(c.mean_ops_per_s):>7s}\n")

    @staticmethod
    def _fig6(model: VariationModel, text: Text) -> None:
        if not model.windows_s():
            text.append("  runs shorter than the smallest window\n", style="dim")
            return
        for p, fs, n, cdf in model.window_cdfs():
            text.append(f"\n{p} · {fs}", style="bold")
            text.append(f"  {n} configurations; every window's relative range\n", style="dim")
            series: list[tuple[str, Sequence[float] | np.ndarray]] = [(f"T-{w:g}", v) for w, v in cdf.items()]
            whole = [c.relative_range for c in model.configs
                     if c.personality == p and c.fs == fs and c.relative_range is not None]
            series.append(("whole run", whole))
            text.append_text(cdf_plot(series))
            for label, values in series:
                xs = usable(values)
                if not xs.size:
                    continue
                med, above = float(xs[(xs.size - 1) // 2]), float((xs > model.threshold).mean())
                text.append(f"    {label:9s} median {format_pct(med):>6s}  max {format_pct(float(xs[-1])):>6s}  "
                            f"> {model.threshold:.0%}: {above:.0%}\n")

    @staticmethod
    def _fig7(model: VariationModel, text: Text) -> None:
        c, w = model.current, model.window_s
        if c is None or w is None:
            text.append("  runs shorter than the smallest window\n", style="dim")
            return
        text.append(f"  {c.name}: Throughput-{w:g} / the run's max (▁ 0 … █ 1); w: window\n", style="dim")
        for r, series in enumerate(model.normalised_series(c, w)):
            low = min(series) if series else math.nan
            text.append(f"    run {r + 1:<3d} ")
            text.append(spark(fit(series), 0.0, 1.0), style="cyan")
            text.append(f"  low {format_pct(low if math.isfinite(low) else None)}, "
                        f"{compact_number(c.ops_per_s[r])} ops/s\n")
        ranges = model.window_ranges(c, w)
        if ranges:
            text.append("    range    ")
            text.append(spark(fit(ranges), 0.0, max(max(ranges), 1e-9)), style="magenta")
            text.append(f"  across runs, max {format_pct(max(ranges))}\n")
        band = model.band(c, w)
        if band.mean.size:
            lo, hi = float(band.min.min()), float(band.max.max())
            text.append(f"\n  Throughput-{w:g} across the runs, ops/s on one scale (the paper's Fig. 5)\n", style="bold")
            for name, values in (("max", band.max), ("mean", band.mean), ("min", band.min)):
                text.append(f"    {name:8s} ")
                text.append(spark(fit([float(v) for v in values]), lo, hi), style="cyan")
                text.append(f"  {compact_number(float(values.min()))} … {compact_number(float(values.max()))}\n")

    @staticmethod
    def _fig8(model: VariationModel, text: Text) -> None:
        c, op = model.current, model.op
        if c is None or op is None:
            return
        text.append(f"  {c.name}: K-S range per op\n", style="dim")
        text.append("  (the largest gap between two runs' latency CDFs)\n", style="dim")
        for name, ks in sorted(c.ks_range_per_op.items(), key=lambda p: -(p[1] or 0)):
            mark = "▶" if name == op else " "
            text.append(f"   {mark} {name:10s} ")
            text.append_text(bar(ks, 16, "bold red" if ks is not None and ks > 0.5 else "cyan"))
            text.append(f" {'-' if ks is None else f'{ks:.2f}'}\n")
        runs = c.latency_quantiles_ns.get(op) or []
        text.append(f"\n  {op}: latency CDF of each run (o: next op)\n", style="bold")
        text.append_text(cdf_plot([(f"run {r + 1}", q) for r, q in enumerate(runs)], log=True,
                                  fmt=format_ns))
        for r, q in enumerate(runs):
            text.append(f"    run {r + 1:<3d} P50 {format_ns(quantile_at(q, 0.5)):>9s}  "
                        f"P95 {format_ns(quantile_at(q, 0.95)):>9s}  max {format_ns(q[-1]):>9s}\n")
        text.append("\n  every op in run 1 (the paper's Fig. 8a)\n", style="bold")
        text.append_text(cdf_plot([(name, q[0]) for name, q in c.latency_quantiles_ns.items() if q], log=True,
                                  fmt=format_ns))

    @staticmethod
    def _fig9(model: VariationModel, text: Text) -> None:
        r, p, n = model.overall_pcc()
        text.append("  x: relative range, y: K-S range (largest over ops)\n", style="dim")
        cur = model.current
        text.append_text(scatter([(a, b, "◆" if c is cur else glyph(c.fs),
                                   "bold yellow" if c is cur else rr_style(model, c))
                                  for c, a, b in model.range_pairs()], x_pct=True, y_pct=False))
        if r is None:
            text.append(f"  PCC: needs 3 configurations with varying ranges ({n} so far)\n", style="dim")
        else:
            text.append(f"  PCC r = {r:.2f} (p = {p:.2g}, {n} configurations)\n", style="bold")
        text.append("\n  per op: PCC of its K-S range vs throughput range\n", style="bold")
        text.append(f"  │ = {STRONG_PCC}, above it a strong correlation\n", style="dim")
        section = None
        for pers, fs, op, count, rv, pv in model.pcc_table():
            if (pers, fs) != section:
                section = (pers, fs)
                text.append(f"   {glyph(fs)} {fs} · {pers}\n")
            text.append(f"     {op:10s} ")
            cells, k = bar(max(rv or 0.0, 0.0), 15).plain, int(round(STRONG_PCC * 15))
            text.append(cells[:k], style="bold red" if (rv or 0) > STRONG_PCC else "cyan")
            text.append("│", style="red")  # the paper's dashed line at 0.7
            text.append(cells[k + 1:], style="bold red")
            text.append(f" r {'-' if rv is None else f'{rv:+.2f}':>5s}  p {'-' if pv is None else f'{pv:.2g}':>6s}"
                        f"  n {count}\n")

    @staticmethod
    def _knobs(model: VariationModel, text: Text) -> None:
        hot = [c for c in model.configs if model.flagged(c)]
        text.append(f"  {len(hot)} of {len(model.configs)} above the {model.threshold:.0%} threshold\n", style="dim")
        for c in sorted(hot, key=lambda c: -(c.relative_range or 0)):
            text.append(f"   {glyph(c.fs)} {c.label:8s} {c.personality:11s}")
            text.append(f"{format_pct(c.relative_range):>6s}", style="bold red")
            text.append(f"  {knob_tuple(c)}\n", style="dim")
        effects = model.level_effects()
        if effects:
            text.append("\n  per knob level: mean relative range, flagged / all\n", style="bold")
            text.append("  ★ a level every flagged configuration of that fs has\n", style="dim")
        top = max((rr or 0.0 for _, _, cells in effects for _, rr, *_ in cells), default=0.0) or 1.0
        for fs, knob, cells in effects:
            text.append(f"    {glyph(fs)} {fs} {knob.removeprefix(fs + '_')}\n")
            for level, rr, n, n_hot, shared in cells:
                text.append(f"      {short_level(level):>12s} ")
                text.append_text(bar((rr or 0.0) / top, 12, "bold red" if shared else "cyan"))
                text.append(f" {format_pct(rr, '-'):>6s}  {n_hot}/{n}" + (" ★" if shared else "") + "\n")

    @staticmethod
    def render_side(model: VariationModel) -> Text:
        c = model.current
        text = Text()
        if c is None:
            text.append("no configuration yet", style="dim")
            return text
        text.append(f"{c.name}\n", style="bold")
        text.append(f"code name {c.id}\n", style="dim")
        text.append(f"{model.selected + 1} of {len(model.configs)} ([ ] other)\n\n",
                    style="dim")
        text.append(f"{glyph(c.fs)} {c.fs} · {c.personality}\n")
        for k, v in c.knobs.items():
            text.append(f"  {k.removeprefix(c.fs + '_'):11s} {short_level(v)}\n")
        if c.mkfs_opts:
            text.append(f"mkfs {' '.join(c.mkfs_opts)}\n", style="dim")
        if c.mount_opts:
            text.append(f"mount -o {','.join(c.mount_opts)}\n", style="dim")
        text.append("\nruns (ops/s): " + ", ".join(compact_number(v) for v in c.ops_per_s) + "\n")
        text.append(f"mean {compact_number(c.mean_ops_per_s)} ops/s\n")
        text.append("relative range ")
        text.append(format_pct(c.relative_range, "-"), style=rr_style(model, c))
        text.append(f"\nK-S range {'-' if c.ks_range is None else f'{c.ks_range:.2f}'}\n\n")
        for note in model.config_notes(c):
            text.append("▲ ", style="bold yellow")
            text.append(note + "\n")
        return text
