"""What the sync-write view shows, as plain data (no Textual): per buffer size, throughput
and per-write latency over the repeats measured so far, and the size with the best
throughput per unit of latency. Live points fill it (their p99 is the worst repeat's, an
estimate); the report's per-size numbers replace them when the sweep ends."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

from fsscope.tui.model import SPARK_POINTS


def _number(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def size_label(n: int) -> str:
    """4096 -> '4K', 1048576 -> '1M'."""
    for unit, factor in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


@dataclass(frozen=True)
class SizeRow:
    """One buffer size: means over its repeats."""

    buffer_bytes: int
    repeats: int
    bytes_per_s: float | None
    bytes_per_s_std: float | None
    latency_mean_ns: float | None
    latency_p99_ns: float | None
    exact: bool

    @property
    def ratio(self) -> float | None:
        """MB/s per ms of mean write latency (higher: more throughput for the latency paid)."""
        if self.bytes_per_s is None or not self.latency_mean_ns:
            return None
        return (self.bytes_per_s / 1e6) / (self.latency_mean_ns / 1e6)


class SyncWriteModel:
    """A syncwrite job's points; ``version`` changes on every change."""

    kind = "syncwrite"

    def __init__(self, spec: dict | None = None):
        spec = spec or {}
        self.mode = str(spec.get("mode") or "osync")
        repeats = _number(spec.get("repeats"))
        self.repeats_requested = int(repeats) if repeats else None
        self.points: list[dict] = []
        self.report: dict | None = None
        self.notes: list[str] = []
        self.version = 0
        self.p50_ns: deque[float] = deque(maxlen=SPARK_POINTS)
        self.p99_ns: deque[float] = deque(maxlen=SPARK_POINTS)
        self.mb_per_s: deque[float] = deque(maxlen=SPARK_POINTS)
        self.telemetry: list[tuple[float, float, float]] = []

    def feed(self, event: dict) -> bool:
        if event.get("kind") == "samples" and isinstance(event.get("point"), dict):
            self.add_point(event["point"])
            return True
        return False

    def add_point(self, point: dict) -> None:
        self.points.append(dict(point))
        for series, key, scale in ((self.p50_ns, "p50_ns", 1.0), (self.p99_ns, "p99_ns", 1.0),
                                   (self.mb_per_s, "bytes_per_s", 1e-6)):
            value = _number(point.get(key))
            if value is not None:
                series.append(value * scale)
        self.version += 1

    def finish(self, report: dict | None) -> None:
        if isinstance(report, dict) and isinstance(report.get("points"), list):
            self.report = report
            self.notes = [str(n) for n in report.get("notes") or []]
            if self.mode != report.get("mode") and report.get("mode"):
                self.mode = str(report["mode"])
            if not self.points:
                for point in report.get("raw_points") or []:
                    if isinstance(point, dict):
                        self.add_point(point)
        self.version += 1

    @classmethod
    def from_run(cls, run_dir, spec: dict, report: dict | None) -> SyncWriteModel:
        model = cls(spec)
        model.finish(report)
        return model

    @property
    def best_buffer_bytes(self) -> int | None:
        if self.report is not None:
            best = self.report.get("best_ratio_buffer_bytes")
            return int(best) if best is not None else None
        rows = [r for r in self.rows() if r.ratio is not None]
        return max(rows, key=lambda r: r.ratio).buffer_bytes if rows else None  # type: ignore[arg-type, return-value]

    def rows(self) -> list[SizeRow]:
        """Per buffer size, smallest first: the report's numbers, else the points so far."""
        repeats: dict[int, int] = {}
        for p in self.points:
            size = int(p.get("buffer_bytes") or 0)
            repeats[size] = repeats.get(size, 0) + 1
        if self.report is not None and self.report.get("points"):
            return [SizeRow(int(r["buffer_bytes"]), repeats.get(int(r["buffer_bytes"]), 0),
                            _number(r.get("bytes_per_s")), _number(r.get("bytes_per_s_std")),
                            _number(r.get("latency_mean_ns")), _number(r.get("latency_p99_ns")), True)
                    for r in self.report["points"] if isinstance(r, dict) and r.get("buffer_bytes")]
        out = []
        for size in sorted(repeats):
            mine = [p for p in self.points if int(p.get("buffer_bytes") or 0) == size]
            tput = [v for v in (_number(p.get("bytes_per_s")) for p in mine) if v is not None]
            writes = [max(1, int(p.get("writes") or 1)) for p in mine]
            means = [(_number(p.get("mean_ns")), w) for p, w in zip(mine, writes)]
            weighted = [(m, w) for m, w in means if m is not None]
            mean_ns = (sum(m * w for m, w in weighted) / sum(w for _, w in weighted)) if weighted else None
            p99s = [v for v in (_number(p.get("p99_ns")) for p in mine) if v is not None]
            mean_tput = sum(tput) / len(tput) if tput else None
            std = (math.sqrt(sum((t - mean_tput) ** 2 for t in tput) / (len(tput) - 1))
                   if mean_tput is not None and len(tput) > 1 else None)
            out.append(SizeRow(size, len(mine), mean_tput, std, mean_ns, max(p99s) if p99s else None, False))
        return out
