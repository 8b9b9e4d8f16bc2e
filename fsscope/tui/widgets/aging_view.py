"""The aging job's live view: phase, fullness against the target (a bar), ops/s, overwrites
and the convergence bound; each distribution's target-vs-actual histogram (size, depth, age:
target and actual bars side by side per bucket, with the fit's p-value); after the run, the
fresh-vs-aged fragmentation table and why it stopped. The p-value series are the first rows
of the sparkline panel. :class:`FragView` shows a ``frag`` report (free-space histogram and
the test file)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import DataTable, Static

from fsscope.format import format_bytes, visible
from fsscope.tui.aging_model import DISTRIBUTIONS, AgingModel, FitHistogram, FragModel
from fsscope.tui.model import JobView
from fsscope.tui.widgets.live_view import LiveView, SparkRow
from fsscope.tui.widgets.syncwrite_view import bar
from fsscope.tui.widgets.table_export import Table

FULL_BAR = 30
SHORT_BAR = 10  # at 80×24: the fullness line fits the status box's 44 columns
HIST_BAR = 10


def p_text(p: float | None) -> str:
    return "–" if p is None else f"{p:.3f}"


FULLNESS_OFF_TARGET = 0.05  # more than 5 points from the target is called out


def fullness_text(fullness: float | None, target: float | None, width: int = FULL_BAR) -> Text:
    """Fullness as the share of the file system's capacity in use (statvfs: what df says),
    a bar of the capacity with the target marked ┃, and how far from the target it is."""
    drawn = bar(fullness, width, style="bold")
    if target is not None and 0 < target < 1:
        at = min(width - 1, int(round(target * width)))
        drawn = drawn[:at] + Text("┃", style="bold yellow") + drawn[at + 1:]
    text = Text()
    text.append_text(drawn)
    used = "used" if width < FULL_BAR else "of capacity used"  # a short bar: a short line
    text.append(f" {'–' if fullness is None else f'{fullness:.1%}'} {used}")
    if target is not None:
        text.append(f" · target {target:.0%}")
        if fullness is not None and abs(fullness - target) > FULLNESS_OFF_TARGET:
            side = "over" if fullness > target else "under"
            text.append(f" · {abs(fullness - target) * 100:.1f} points {side}", style="bold yellow")
    return text


def histogram_text(hist: FitHistogram | None, name: str) -> Text:
    """Per bucket: label, target bar (dim) over actual bar (bold), both as % of files."""
    text = Text()
    if hist is None:
        text.append(f"{name}: waiting for the fit…", style="dim")
        return text
    top = max([*hist.target, *(a for a in hist.actual if a is not None)], default=0.0) or 1.0
    width = max((len(label) for label in hist.labels), default=4)
    for label, target, actual in zip(hist.labels, hist.target, hist.actual):
        text.append(label.rjust(width) + " ", style="bold")
        text.append("T ", style="dim")
        text.append_text(bar(target / top, HIST_BAR, style="dim"))
        text.append(f" {target:5.1%}\n", style="dim")
        text.append(" " * width + " A ")
        text.append_text(bar(None if actual is None else actual / top, HIST_BAR, style="bold"))
        text.append(" –\n" if actual is None else f" {actual:5.1%}\n")
    return text


class AgingView(LiveView):
    VIEW_ID = "aging-view"

    DEFAULT_CSS = """
    AgingView #age-status { height: auto; padding: 0 1; border: round $panel; }
    AgingView #age-fits { height: auto; max-height: 50%; }
    AgingView .age-fit { width: 1fr; height: auto; padding: 0 1; border: round $panel; }
    AgingView #age-frag { height: 1fr; border: round $panel; }
    """

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self._drawn: tuple | None = None
        self._view: JobView | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="age-status")
        with Horizontal(id="age-fits"):
            for name in DISTRIBUTIONS:
                yield Static("", id=f"age-fit-{name}", classes="age-fit")
        yield Table(id="age-frag", show_cursor=False, zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.frag_table
        table.can_focus = False
        table.border_title = "Fresh vs aged fragmentation"
        self.query_one("#age-status").border_title = "Aging"

    @property
    def frag_table(self) -> DataTable:
        return self.query_one("#age-frag", DataTable)

    @property
    def status_text(self) -> str:
        return str(self.query_one("#age-status", Static).content)

    def fit_text(self, name: str) -> str:
        return str(self.query_one(f"#age-fit-{name}", Static).content)

    @staticmethod
    def model_of(view: JobView | None) -> AgingModel | None:
        return view.data if view is not None and isinstance(view.data, AgingModel) else None

    def show(self, view: JobView, live: bool = True) -> None:
        self._drawn = None
        self.update_view(view)

    def on_resize(self) -> None:
        # the status is drawn for the screen's size (its headline lines alone at 80×24)
        if self._view is not None:
            self.show(self._view)

    def update_view(self, view: JobView) -> None:
        self._view = view
        model = self.model_of(view)
        if model is None:
            return
        if self._drawn == (id(model), model.version):
            return
        self._drawn = (id(model), model.version)
        self.set_class(model.report is not None, "-ended")
        self.query_one("#age-status", Static).update(self._status(model, short=self.screen.has_class("-short")))
        fits = model.fits()
        for name in DISTRIBUTIONS:
            hist = fits.get(name)
            widget = self.query_one(f"#age-fit-{name}", Static)
            widget.update(histogram_text(hist, name))
            state = "final" if hist is not None and hist.final else "live"
            # the p of the histogram below: none while it waits for the fit (the live p is the
            # Live panel's series)
            widget.border_title = f"{name}: p {p_text(model.p_value(name))}" if hist is not None else name
            widget.border_subtitle = f"target vs actual · {state}" if hist is not None else ""
        table = self.frag_table
        # at 80 columns (beside the flags) the table scrolled sideways: one space between its
        # columns instead of two, and the ratio's short name
        narrow = self.screen.has_class("-narrow")
        gap = " " if narrow else ""
        table.clear(columns=True)
        table.cell_padding = 0 if narrow else 1
        for key, label in (("what", "fragmentation"), ("fresh", "fresh"), ("aged", "aged"),
                           ("ratio", "ratio" if narrow else "aged/fresh")):
            table.add_column(gap + label, key=key)
        for row in model.frag_rows():
            table.add_row(*(gap + cell for cell in row))
        if model.report is None:
            table.border_subtitle = "measured before and after aging: shown when the run ends"
        else:
            errors = model.frag_errors()
            table.border_subtitle = "; ".join(errors)[:120] if errors else f"fs {model.report.fs or '-'}"

    def _status(self, model: AgingModel, short: bool = False) -> Text:
        """At 80×24 (``short``) its headline lines alone: the phase and why it stopped, the
        fullness and the ops (the stop note is the Note panel's, the fits the Live panel's)."""
        text = Text()
        text.append(f"{model.phase}", style="bold")
        if short and model.stop_reason:
            text.append(f" · stopped: {model.stop_reason}", style="bold yellow")
        elif model.profile:
            # a captured profile is named after someone's directory: its escapes shown, not sent
            text.append(f" · profile {visible(model.profile)}", style="dim")
        text.append("\nfullness ")
        text.append_text(fullness_text(model.fullness, model.target_fullness, SHORT_BAR if short else FULL_BAR))
        text.append("\n")
        ops, rate, over = model.ops, model.rate, model.turnover
        if short:
            text.append(f"ops {'–' if ops is None else f'{ops:,}'} · "
                        f"{'–' if rate is None else f'{rate:,.0f}'} ops/s · "
                        f"{'–' if over is None else f'{over:.2f}'}× capacity")
            return text
        bound, horizon = model.convergence_ops, model.horizon_ops
        text.append(f"ops {'–' if ops is None else f'{ops:,}'} · "
                    f"{'–' if rate is None else f'{rate:,.0f}'} ops/s · "
                    + (f"{'–' if over is None else f'{over:.2f}'}× capacity "
                       + ("allocated (fallocate)" if model.fallocate else "written")) + "\n")
        text.append(f"convergence bound T {'–' if bound is None else f'{bound:,}'} ops"
                    + (f" · fit planned at op {horizon:,}" if horizon else ""))
        if model.live_files is not None:
            text.append(f" · {model.live_files:,} files")
        if model.stop_reason:
            text.append(f"\nstopped: {model.stop_reason}", style="bold yellow")
            if model.stop_note:
                text.append(f" — {model.stop_note}", style="yellow")
        snapshot = model.snapshot
        if snapshot is not None and snapshot.path:
            text.append(f"\nsnapshot {snapshot.path}" + (f" ({snapshot.method})" if snapshot.method else "")
                        + (f" — {snapshot.skipped}" if snapshot.skipped else ""), style="dim")
        return text

    def spark_rows(self, view: JobView, live: bool = True) -> list[SparkRow]:
        model = self.model_of(view)
        if model is None:
            return []
        rows: list[SparkRow] = []
        for key, name in zip(("p50", "p99", "rate"), DISTRIBUTIONS):
            rows.append((key, f"p {name}", list(model.p_series[name]), p_text(model.p_value(name))))
        return rows


class FragView(LiveView):
    VIEW_ID = "frag-view"

    DEFAULT_CSS = """
    FragView #frag-hist { height: 1fr; border: round $panel; }
    FragView #frag-summary { height: auto; border: round $panel; }
    """

    def compose(self) -> ComposeResult:
        yield Table(id="frag-hist", show_cursor=False, zebra_stripes=True)
        yield Table(id="frag-summary", show_cursor=False, show_header=False)  # its title says what

    def on_mount(self) -> None:
        hist = self.query_one("#frag-hist", DataTable)
        hist.can_focus = False
        for key, label in (("from", "extent ≥"), ("n", "extents"), ("nbar", ""), ("bytes", "free"), ("bbar", "")):
            hist.add_column(label, key=key)
        hist.border_title = "Free-space extents (power-of-two buckets)"
        summary = self.query_one("#frag-summary", DataTable)
        summary.can_focus = False
        summary.add_column("measurement", key="what")
        summary.add_column("value", key="value")
        summary.border_title = "Free space and test file"

    @staticmethod
    def model_of(view: JobView | None) -> FragModel | None:
        return view.data if view is not None and isinstance(view.data, FragModel) else None

    def show(self, view: JobView, live: bool = True) -> None:
        model = self.model_of(view)
        hist = self.query_one("#frag-hist", DataTable)
        summary = self.query_one("#frag-summary", DataTable)
        hist.clear()
        summary.clear()
        if model is None or model.report is None:
            hist.border_subtitle = "measuring… (shown when the job ends)"
            return
        buckets = model.histogram()
        # from the smallest bucket holding free space to the largest: the empty buckets below
        # it (1 KiB, 2 KiB… on a fresh file system) pushed the occupied ones off a short screen
        held = [i for i, (_, n, _) in enumerate(buckets) if n]
        if held:
            buckets = buckets[held[0]: held[-1] + 1]
        top_n = max((n for _, n, _ in buckets), default=0) or 1
        top_b = max((b for _, _, b in buckets), default=0) or 1
        for label, n, free in buckets:
            hist.add_row(label, f"{n:,}", bar(n / top_n, 12), format_bytes(free), bar(free / top_b, 12, style="bold"))
        report = model.report
        hist.border_subtitle = ((report.free_space.source if report.free_space else "")
                                or report.free_space_error or "")[:100]
        for label, value in model.rows():
            summary.add_row(label, value)
        if report.test_file_error:
            summary.add_row("test file error", report.test_file_error[:80])

    def update_view(self, view: JobView) -> None:
        self.show(view)
