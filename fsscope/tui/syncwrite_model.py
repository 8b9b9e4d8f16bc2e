"""What the sync-write view shows, as plain data (no Textual): per buffer size, throughput and
per-write latency over the repetitions finished so far (mean and 95 % CI), both knees and
the best-ratio size. Live points fill it — each repetition tightens the bands; the report's
statistics (every write's latency, the bootstrap confidence) replace them when the sweep
ends. :func:`curves_of` gives the chart's log–log curves, also for the compare screen."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from fsscope.analysis import efficiency
from fsscope.engine.events import Data, Event
from fsscope.tui.model import SPARK_POINTS, number


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


def rows_of_report(report: dict) -> list[SizeRow]:
    return [SizeRow(int(r["buffer_bytes"]), int(r.get("repeats") or 0), number(r.get("throughput_mean")),
                    number(r.get("throughput_ci95")), number(r.get("latency_mean_ns")),
                    number(r.get("latency_ci95_ns")), number(r.get("latency_p50_ns")),
                    number(r.get("latency_p99_ns")), True)
            for r in report.get("sizes") or [] if isinstance(r, dict) and r.get("buffer_bytes")]


def curves_of(label: str, rows: list[SizeRow], knees: dict | None, best: int | None) -> Curves:
    knees = knees or {}
    return Curves(label, [r.buffer_bytes for r in rows],
                  [_band(r.bytes_per_s, r.bytes_per_s_ci95) for r in rows],
                  [_band(r.latency_mean_ns, r.latency_ci95_ns) for r in rows],
                  knees.get("latency_rise_bytes"), knees.get("throughput_saturation_bytes"), best)


class SyncWriteModel:
    """A syncwrite job's points; ``version`` changes on every change."""

    kind = "syncwrite"

    def __init__(self, spec: dict | None = None):
        spec = spec or {}
        self.mode = str(spec.get("mode") or "osync")
        repeats = number(spec.get("repeats"))
        self.repeats_requested = int(repeats) if repeats else None
        self.label = "this run"
        self.points: list[dict] = []
        self.report: dict | None = None
        self.notes: list[str] = []
        self.version = 0
        self.p50_ns: deque[float] = deque(maxlen=SPARK_POINTS)
        self.p99_ns: deque[float] = deque(maxlen=SPARK_POINTS)
        self.mb_per_s: deque[float] = deque(maxlen=SPARK_POINTS)
        self.telemetry: list[tuple[float, float, float]] = []
        self._live: tuple[int, list[SizeRow], dict] | None = None

    def feed(self, event: Event) -> bool:
        if isinstance(event, Data) and event.kind == "samples" and isinstance(event.fields.get("point"), dict):
            self.add_point(event.fields["point"])
            return True
        return False

    def add_point(self, point: dict) -> None:
        self.points.append(dict(point))
        for series, key, scale in ((self.p50_ns, "p50_ns", 1.0), (self.p99_ns, "p99_ns", 1.0),
                                   (self.mb_per_s, "bytes_per_s", 1e-6)):
            value = number(point.get(key))
            if value is not None:
                series.append(value * scale)
        self.version += 1

    def finish(self, report: dict | None) -> None:
        if isinstance(report, dict) and isinstance(report.get("sizes"), list):
            self.report = report
            self.notes = [str(n) for n in report.get("notes") or []]
            self.notes += [f"{f.get('title')}: {f.get('note')}" for f in report.get("flags") or [] if isinstance(f, dict)]
            self.mode = str(report.get("mode") or self.mode)
            self.label = str(report.get("recipe") or report.get("fs") or self.label)
            if not self.points:
                for point in report.get("raw_points") or []:
                    if isinstance(point, dict):
                        self.add_point(point)
        self.version += 1

    @classmethod
    def from_run(cls, run_dir, spec: dict, report: dict | None) -> SyncWriteModel:
        model = cls(spec)
        if report is None and run_dir is not None:  # a killed run: rebuilt from its kept arrays
            # here, not at the top: the job module brings scipy (via bench_job), and the TUI
            # imports this model at start (the compare screen)
            from fsscope.workloads.syncwrite_job import partial_report

            report = partial_report(run_dir)
        model.finish(report)
        return model

    # -- live statistics from the points so far ------------------------------------------------
    def _live_rows(self) -> tuple[list[SizeRow], dict]:
        if self._live is not None and self._live[0] == self.version:
            return self._live[1], self._live[2]
        by_size: dict[int, dict[str, list]] = {}
        for p in self.points:
            size = int(p.get("buffer_bytes") or 0)
            entry = by_size.setdefault(size, {"t": [], "lat": [], "p99": [], "p50": []})
            if p.get("ended", True) and number(p.get("bytes_per_s")) is not None:
                entry["t"].append(float(p["bytes_per_s"]))
            if number(p.get("mean_ns")) is not None:
                entry["lat"].append(np.array([float(p["mean_ns"])]))
            for key in ("p99", "p50"):
                if number(p.get(f"{key}_ns")) is not None:
                    entry[key].append(float(p[f"{key}_ns"]))
        rows, stats = [], []
        for size in sorted(by_size):
            e = by_size[size]
            s = efficiency.size_stats(size, e["t"], e["lat"])
            stats.append(s)
            rows.append(SizeRow(size, s.repeats, number(s.throughput_mean), number(s.throughput_ci95),
                                number(s.latency_mean_ns), number(s.latency_ci95_ns),
                                float(np.median(e["p50"])) if e["p50"] else None,
                                max(e["p99"]) if e["p99"] else None, False))
        analysis = efficiency.analyze(stats, resamples=0)
        knees = efficiency.knees_dict(analysis) | {"best": analysis.size_at(analysis.best_ratio)}
        self._live = (self.version, rows, knees)
        return rows, knees

    def rows(self) -> list[SizeRow]:
        """Per buffer size, smallest first: the report's numbers, else the points so far."""
        if self.report is not None and self.report.get("sizes"):
            return rows_of_report(self.report)
        return self._live_rows()[0]

    @property
    def knees(self) -> dict:
        if self.report is not None:
            return self.report.get("knees") or {}
        return self._live_rows()[1]

    @property
    def best_buffer_bytes(self) -> int | None:
        if self.report is not None:
            best = self.report.get("recommended_bytes")
            return int(best) if best is not None else None
        return self._live_rows()[1].get("best")

    def curves(self) -> Curves:
        return curves_of(self.label, self.rows(), self.knees, self.best_buffer_bytes)

    def repetitions_done(self) -> int:
        """Repetitions with every size measured."""
        sizes = {int(p.get("buffer_bytes") or 0) for p in self.points}
        per_rep: dict[int, set] = {}
        for p in self.points:
            per_rep.setdefault(int(p.get("repeat") or 0), set()).add(int(p.get("buffer_bytes") or 0))
        return sum(1 for got in per_rep.values() if got == sizes)
