"""Live sparklines: the job's own rows (the probe's latency percentiles per window of calls
and calls/s; a bench's worst-op percentiles and ops/s per second…), device IOPS and
throughput, CPU. Each row is a label, a Sparkline and the latest value in words.

Sparklines scale from the series' min to its max, so the latency rows get log10 values
(a single spike must not flatten the rest) and every series is a plain list."""

from __future__ import annotations

from collections.abc import Collection

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.renderables.sparkline import Sparkline as SparklineRenderable
from textual.widgets import Label, Sparkline

ROWS = (
    ("p50", "p50 latency"),
    ("p99", "p99 latency"),
    ("rate", "calls/s"),
    ("iops", "device IOPS"),
    ("bw", "device MB/s"),
    ("cpu", "CPU %"),
)
JOB_ROWS = ("p50", "p99", "rate")  # the job's own rows; the others are the device's and CPU's


BOUNDS = {"cpu": (0.0, 100.0)}  # rows on a fixed scale: CPU at 100 % all along was drawn as a flat floor


class _BoundedRenderable(SparklineRenderable):
    """Textual's sparkline scaled to ``data[0]``..``data[1]`` (prepended bounds, not drawn)."""

    def _buckets(self, data, num_buckets):  # type: ignore[override]  # an instance's, not the class's
        return super()._buckets(data[2:], num_buckets)


class BoundedSparkline(Sparkline):
    """A Sparkline whose scale is ``bounds`` rather than its data's min..max."""

    def __init__(self, data, *, bounds: tuple[float, float], **kw):
        super().__init__(data, **kw)
        self.bounds = bounds

    def render(self):
        renderable = super().render()
        assert isinstance(renderable, SparklineRenderable)  # Sparkline.render's
        values = [min(max(v, self.bounds[0]), self.bounds[1]) for v in (self.data or []) if v is not None]
        if values:
            renderable = _BoundedRenderable([*self.bounds, *values], width=renderable.width,
                                            height=renderable.height, min_color=renderable.min_color.color,  # type: ignore[arg-type]
                                            max_color=renderable.max_color.color,  # type: ignore[arg-type]  # made from one
                                            summary_function=self.summary_function)
        return renderable


class SparkPanel(Vertical):
    # a cell of padding each side of the sparkline: the columns were exactly as wide as their
    # longest words ("p50 worst op", "12,345 all dis"), so a label or value filling its column
    # ran into the bars; a job's longer label ends in "…" within its 12 cells
    DEFAULT_CSS = """
    SparkPanel { height: auto; }
    SparkPanel > Horizontal { height: 1; }
    SparkPanel .spark-label { width: 13; padding-right: 1; color: $foreground 70%;
                              text-wrap: nowrap; text-overflow: ellipsis; }
    SparkPanel Sparkline { width: 1fr; height: 1; }
    SparkPanel .spark-value { width: 15; padding-left: 1; text-align: right; }
    """

    def compose(self) -> ComposeResult:
        for key, label in ROWS:
            with Horizontal(id=f"spark-row-{key}"):
                yield Label(label, classes="spark-label")
                if key in BOUNDS:
                    yield BoundedSparkline([], bounds=BOUNDS[key], id=f"spark-{key}", summary_function=max)
                else:
                    yield Sparkline([], id=f"spark-{key}", summary_function=max)
                yield Label("–", id=f"spark-value-{key}", classes="spark-value")

    def show(self, key: str, values: list[float], value_text: str, label: str | None = None) -> None:
        """Give a row a new series (a fresh plain list), its latest value in words and, for
        the job-specific rows, what it is (a bench's row is ops/s, a probe's calls/s)."""
        self.query_one(f"#spark-{key}", Sparkline).data = list(values)
        self.query_one(f"#spark-value-{key}", Label).update(value_text)
        if label is not None:
            self.query_one(f"#spark-row-{key} .spark-label", Label).update(label)

    def show_job_rows(self, keys: Collection[str]) -> None:
        """Show only those of the job's rows its view fills (a scan or a frag has none: no
        probe latency rows waiting for values that never come)."""
        for key in JOB_ROWS:
            self.query_one(f"#spark-row-{key}").display = key in keys

    def clear(self, *, exclude: Collection[str] = frozenset(), job_rows_only: bool = False) -> None:
        """Empty rows (default labels, no value): a new job shows nothing of the last one's."""
        for key, label in ROWS:
            if key in exclude or (job_rows_only and key not in JOB_ROWS):
                continue
            self.show(key, [], "–", label)
