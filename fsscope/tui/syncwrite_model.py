"""What the sync-write view shows, as plain data (no Textual): per buffer size, throughput and
per-write latency over the repetitions finished so far (mean and 95 % CI), both knees and
the best-ratio size. Live points fill it — each repetition tightens the bands; the report's
statistics (every write's latency, the bootstrap confidence) replace them when the sweep
ends. :func:`curves_of` gives the chart's log–log curves, also for the compare screen."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from fsscope.analysis import efficiency
from fsscope.engine.events import Event
from fsscope.records import Record
from fsscope.tui.model import SPARK_POINTS
from fsscope.tui.report_model import spec_of
from fsscope.workloads.syncwrite_records import Knees, Point, PointSample, Report, Spec


def size_label(n: int) -> str:
    """4096 -> '4K', 1048576 -> '1M'."""
    for unit, factor in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


@dataclass(frozen=True)
class SizeRow:
    """One buffer size over its repetitions (throughput in bytes/s, latency in ns)."""

    buffer_bytes: int
    repeats: int
    bytes_per_s: float | None
    bytes_per_s_ci95: float | None
    latency_mean_ns: float | None
    latency_ci95_ns: float | None
    latency_p50_ns: float | None
    latency_p99_ns: float | None
    exact: bool

    @property
    def ratio(self) -> float | None:
        """MB/s per ms of mean write latency (higher: more throughput for the latency paid)."""
        if self.bytes_per_s is None or not self.latency_mean_ns:
            return None
        return (self.bytes_per_s / 1e6) / (self.latency_mean_ns / 1e6)


@dataclass(frozen=True)
class Curves:
    """One recipe's log–log curves for the chart."""

    label: str
    sizes: list[int]
    throughput: list[tuple[float, float, float] | None]      # (mean, low, high) bytes/s
    latency: list[tuple[float, float, float] | None]         # (mean, low, high) ns
    rise_bytes: int | None
    saturation_bytes: int | None
    best_bytes: int | None


def _band(mean: float | None, ci: float | None) -> tuple[float, float, float] | None:
    if mean is None:
        return None
    half = ci or 0.0
    return (mean, max(mean - half, mean * 0.01), mean + half)


def rows_of_report(report: Report) -> list[SizeRow]:
    return [SizeRow(r.buffer_bytes, r.repeats, r.throughput_mean, r.throughput_ci95, r.latency_mean_ns,
                    r.latency_ci95_ns, r.latency_p50_ns, r.latency_p99_ns, True)
            for r in report.sizes if r.buffer_bytes]


def curves_of(label: str, rows: list[SizeRow], knees: Knees, best: int | None) -> Curves:
    return Curves(label, [r.buffer_bytes for r in rows],
                  [_band(r.bytes_per_s, r.bytes_per_s_ci95) for r in rows],
                  [_band(r.latency_mean_ns, r.latency_ci95_ns) for r in rows],
                  knees.latency_rise_bytes, knees.throughput_saturation_bytes, best)


class Asked(Record, frozen=True, kw_only=True):
    """What the view needs of a syncwrite spec, read without the spec's checks: a recorded
    spec that no longer validates still shows its own mode and repetitions."""

    mode: str = "osync"
    repeats: int | None = None


class SyncWriteModel:
    """A syncwrite job's points; ``version`` changes on every change."""

    kind = "syncwrite"

    def __init__(self, spec: Spec | dict[str, Any] | None = None):
        asked = spec_of(Asked, spec)
        self.mode = asked.mode
        self.repeats_requested = asked.repeats if asked.repeats and asked.repeats > 0 else None
        self.label = "this run"
        self.points: list[Point] = []
        self.report: Report | None = None
        self.notes: list[str] = []
        self.version = 0
        self.p50_ns: deque[float] = deque(maxlen=SPARK_POINTS)
        self.p99_ns: deque[float] = deque(maxlen=SPARK_POINTS)
        self.mb_per_s: deque[float] = deque(maxlen=SPARK_POINTS)
        self.telemetry: list[tuple[float, float, float]] = []
        self._live: tuple[int, list[SizeRow], Knees, int | None] | None = None

    def feed(self, event: Event) -> bool:
        if isinstance(event, PointSample):
            self.add_point(event.point)
            return True
        return False

    def add_point(self, point: Point) -> None:
        self.points.append(point)
        for series, value, scale in ((self.p50_ns, point.p50_ns, 1.0), (self.p99_ns, point.p99_ns, 1.0),
                                     (self.mb_per_s, point.bytes_per_s, 1e-6)):
            if value is not None:
                series.append(value * scale)
        self.version += 1

    def finish(self, report: Report | None) -> None:
        if report is not None:
            self.report = report
            self.notes = list(report.notes) + [f"{f.title}: {f.note}" for f in report.flags]
            self.mode = report.mode or self.mode
            self.label = report.recipe or report.fs or self.label
            if not self.points:
                for point in report.raw_points:
                    self.add_point(point)
        self.version += 1

    @classmethod
    def from_run(cls, run_dir: Any, spec: dict[str, Any], report: Report | None) -> SyncWriteModel:
        model = cls(spec)
        if report is None and run_dir is not None:  # a killed run: rebuilt from its kept arrays
            from fsscope.workloads.syncwrite_job import partial_report

            report = partial_report(run_dir)
        model.finish(report)
        return model

    # -- live statistics from the points so far ------------------------------------------------
    def _live_rows(self) -> tuple[list[SizeRow], Knees, int | None]:
        if self._live is not None and self._live[0] == self.version:
            return self._live[1], self._live[2], self._live[3]
        by_size: dict[int, dict[str, list]] = {}
        for p in self.points:
            entry = by_size.setdefault(p.buffer_bytes, {"t": [], "lat": [], "p99": [], "p50": []})
            if p.ended and p.bytes_per_s is not None:
                entry["t"].append(p.bytes_per_s)
            if p.mean_ns is not None:
                entry["lat"].append(np.array([p.mean_ns]))
            if p.p99_ns is not None:
                entry["p99"].append(p.p99_ns)
            if p.p50_ns is not None:
                entry["p50"].append(p.p50_ns)
        rows, stats = [], []
        for size in sorted(by_size):
            e = by_size[size]
            s = efficiency.size_stats(size, e["t"], e["lat"])
            stats.append(s)
            rows.append(SizeRow(size, s.repeats, _finite(s.throughput_mean), _finite(s.throughput_ci95),
                                _finite(s.latency_mean_ns), _finite(s.latency_ci95_ns),
                                float(np.median(e["p50"])) if e["p50"] else None,
                                max(e["p99"]) if e["p99"] else None, False))
        analysis = efficiency.analyze(stats, resamples=0)
        knees = Knees(latency_rise_bytes=analysis.size_at(analysis.latency_rise),
                      throughput_saturation_bytes=analysis.size_at(analysis.saturation))
        best = analysis.size_at(analysis.best_ratio)
        self._live = (self.version, rows, knees, best)
        return rows, knees, best

    def rows(self) -> list[SizeRow]:
        """Per buffer size, smallest first: the report's numbers, else the points so far."""
        if self.report is not None and self.report.sizes:
            return rows_of_report(self.report)
        return self._live_rows()[0]

    @property
    def knees(self) -> Knees:
        if self.report is not None:
            return self.report.knees
        return self._live_rows()[1]

    @property
    def best_buffer_bytes(self) -> int | None:
        if self.report is not None:
            return self.report.recommended_bytes
        return self._live_rows()[2]

    def curves(self) -> Curves:
        return curves_of(self.label, self.rows(), self.knees, self.best_buffer_bytes)

    def repetitions_done(self) -> int:
        """Repetitions with every size measured."""
        sizes = {p.buffer_bytes for p in self.points}
        per_rep: dict[int, set[int]] = {}
        for p in self.points:
            per_rep.setdefault(p.repeat, set()).add(p.buffer_bytes)
        return sum(1 for got in per_rep.values() if got == sizes)


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None
