"""What the bench view shows, as plain data (no Textual): per run, ops/s per 1-s bin and the
latest per-op latency percentiles; the band (min..max) of the runs before the one shown;
the variation across finished runs. Live events fill it; a replay fills it from the run
directory's arrays and report; the report's exact numbers replace the live estimates.

Live, a run counts as finished when the next one starts (its phase event carries ``run``)
or the job ends; its ops/s is then estimated as the mean of its 1-s bins (``exact`` False)
until the report gives the cumulative throughput (total ops / elapsed seconds).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fsscope.analysis.variation.metrics import variation_summary
from fsscope.engine.events import Event, Phase
from fsscope.errors import FsscopeError
from fsscope.records import convert
from fsscope.telemetry.columns import TELEMETRY_COLUMNS, cpu_busy_pct, device_rates, named_columns
from fsscope.tui.model import SPARK_POINTS, number
from fsscope.workloads.bench_records import BenchRun as ReportRun
from fsscope.workloads.bench_records import KernelCounts, KernelWindows, Report, WindowSample
from fsscope.workloads.bench_spec import Spec
from fsscope.workloads.personalities import LiveSample

BIN_S = 1.0


def _spec_of(spec: Spec | dict | None) -> Spec:
    """The bench's spec from a form or a recorded job.json (the defaults where it does not read)."""
    if isinstance(spec, Spec):
        return spec
    try:
        return convert(spec or {}, Spec)
    except FsscopeError:
        return Spec()


@dataclass
class BenchRun:
    """One run of the personality as far as it has been seen."""

    index: int
    bins: list[float | None] = field(default_factory=list)  # ops/s per 1-s bin
    op_ops_per_s: dict[str, float] = field(default_factory=dict)  # latest bin
    op_p50_ns: dict[str, float | None] = field(default_factory=dict)
    op_p99_ns: dict[str, float | None] = field(default_factory=dict)
    finished: bool = False
    ops_per_s_exact: float | None = None  # the report's cumulative throughput
    kernel: KernelWindows | None = None  # traced: per-window journal commits, writeback starts, bytes written

    @property
    def ops_per_s(self) -> float | None:
        """Cumulative throughput: the report's, else the mean of the 1-s bins so far."""
        if self.ops_per_s_exact is not None:
            return self.ops_per_s_exact
        measured = [b for b in self.bins if b is not None]
        return sum(measured) / len(measured) if measured else None

    @property
    def exact(self) -> bool:
        return self.ops_per_s_exact is not None


@dataclass(frozen=True)
class ChartData:
    """One run's series over the band of others, per second of the run (None: no value)."""

    current: list[float | None]
    band_low: list[float | None]
    band_mean: list[float | None]
    band_high: list[float | None]
    span_s: float
    window_s: int
    run: int | None
    band_runs: tuple[int, ...]

    @property
    def y_max(self) -> float:
        values = [v for v in (*self.current, *self.band_high) if v is not None]
        return max(values) if values else 0.0

    @property
    def y_min(self) -> float:
        values = [v for v in (*self.current, *self.band_low) if v is not None]
        return min(values) if values else 0.0

    @property
    def empty(self) -> bool:
        return not any(v is not None for v in (*self.current, *self.band_high))


@dataclass(frozen=True)
class OpRow:
    op: str
    ops_per_s: float | None
    p50_ns: float | None
    p99_ns: float | None


@dataclass(frozen=True)
class VariationRow:
    run: int
    ops_per_s: float | None
    exact: bool
    finished: bool
    window_min: float | None  # Throughput-N of the view's window: slowest and fastest window
    window_max: float | None


class BenchModel:
    """A bench job's runs; ``version`` changes on every change (views cache on it)."""

    kind = "bench"

    def __init__(self, spec: Spec | dict | None = None):
        bench = _spec_of(spec)
        self.duration_s = bench.duration_s
        self.runs_requested = bench.runs
        self.window_sizes_s = tuple(max(1, int(round(w))) for w in bench.window_sizes_s)
        self.bin_s = BIN_S
        self.runs: dict[int, BenchRun] = {}
        self.current: int | None = None
        self.op_names: list[str] = []
        self.report: Report | None = None
        self.notes: list[str] = []
        self.version = 0
        # the worst op's latency and the ops/s of every bin, in arrival order (spark panel)
        self.worst_p50_ns: deque[float] = deque(maxlen=SPARK_POINTS)
        self.worst_p99_ns: deque[float] = deque(maxlen=SPARK_POINTS)
        self.worst_p99_op = ""
        self.worst_p50_op = ""
        self.rate: deque[float] = deque(maxlen=SPARK_POINTS)
        # a replay's device counters (live, telemetry events feed the screen directly)
        self.telemetry: list[tuple[float, float, float]] = []  # (iops, bytes/s, cpu %)

    # -- live ---------------------------------------------------------------------------------
    def feed(self, event: Event) -> bool:
        """Take one job event; True if something the view shows changed."""
        if isinstance(event, Phase):
            return event.run is not None and self.start_run(event.run)
        if isinstance(event, WindowSample):
            self.add_window(event.run, event.window)
            return True
        if isinstance(event, KernelCounts):
            self._run(event.run).kernel = event.windows
            self.version += 1
            return True
        return False

    def _run(self, index: int) -> BenchRun:
        run = self.runs.get(index)
        if run is None:
            run = self.runs[index] = BenchRun(index)
        return run

    def start_run(self, index: int) -> bool:
        """Run ``index`` begins: every earlier run is finished."""
        changed = False
        for run in self.runs.values():
            if run.index < index and not run.finished:
                run.finished = changed = True
        if self.current != index:
            self._run(index)
            self.current = index
            changed = True
        if changed:
            self.version += 1
        return changed

    def add_window(self, index: int, window: LiveSample) -> None:
        """One 1-s bin of run ``index``, as the aggregator made it."""
        if self.current is None or index > self.current:
            self.start_run(index)
        run = self._run(index)
        b = window.bin_index
        while len(run.bins) <= b:
            run.bins.append(None)
        run.bins[b] = window.ops_per_s
        self.rate.append(window.ops_per_s)
        worst50: tuple[float, str] | None = None
        worst99: tuple[float, str] | None = None
        for op, entry in window.ops.items():
            if op not in self.op_names:
                self.op_names.append(op)
            run.op_ops_per_s[op] = entry.ops_per_s
            p50, p99 = entry.p50_ns, entry.p99_ns
            run.op_p50_ns[op], run.op_p99_ns[op] = p50, p99
            if p50 is not None and (worst50 is None or p50 > worst50[0]):
                worst50 = (p50, op)
            if p99 is not None and (worst99 is None or p99 > worst99[0]):
                worst99 = (p99, op)
        if worst50 is not None:
            self.worst_p50_ns.append(worst50[0])
            self.worst_p50_op = worst50[1]
        if worst99 is not None:
            self.worst_p99_ns.append(worst99[0])
            self.worst_p99_op = worst99[1]
        self.version += 1

    def finish(self, report: Report | None) -> None:
        """The job ended: its runs are finished; the report (if any) has the exact numbers."""
        for run in self.runs.values():
            run.finished = True
        if report is not None:
            self.report = report
            self.notes = list(report.notes)
            for r, entry in enumerate(report.runs):
                run = self._run(r)
                run.finished = True
                run.ops_per_s_exact = entry.ops_per_s
                if entry.kernel_windows is not None:
                    run.kernel = entry.kernel_windows
                self.op_names += [op for op in entry.ops if op not in self.op_names]
            self.bin_s = report.bin_s or self.bin_s
            if self.runs and self.current is None:
                self.current = max(self.runs)
        self.version += 1

    # -- replay -------------------------------------------------------------------------------
    @classmethod
    def from_run(cls, run_dir, spec: Spec | dict | None, report: Report | None) -> BenchModel:
        """A recorded bench run: 1-s bins from ``run{r}_counts.npy``, device counters from
        ``run{r}_telemetry.npy``, everything else from the report."""
        model = cls(spec)
        if report is not None and report.bin_s:
            model.bin_s = report.bin_s
        arrays = run_dir.arrays()
        r = 0
        while f"run{r}_counts" in arrays:
            try:
                counts = np.asarray(run_dir.load_array(f"run{r}_counts", mmap=False))
            except (OSError, ValueError):
                break
            per_bin = counts.sum(axis=0) if counts.ndim == 2 else counts
            run = model._run(r)
            rates: list[float] = (per_bin / model.bin_s).astype(float).tolist()
            run.bins = list(rates)
            model.rate.extend(rates)
            run.finished = True
            model._load_telemetry(run_dir, r, arrays)
            r += 1
        model.current = r - 1 if r else None
        model.finish(report)
        return model

    def _load_telemetry(self, run_dir, r: int, arrays: dict) -> None:
        if f"run{r}_telemetry" not in arrays:
            return
        try:
            m = np.asarray(run_dir.load_array(f"run{r}_telemetry", mmap=False), dtype=np.float64)
        except (OSError, ValueError):
            return
        if m.ndim != 2 or m.shape[1] < TELEMETRY_COLUMNS.index("cpu_idle_pct") + 1 or not m.shape[0]:
            return
        col = named_columns(m)
        dt = np.diff(np.concatenate([[0.0], col["t_s"]]))
        dt[dt <= 0] = 1.0
        iops, bps = device_rates(dt, col["disk_read_ops"] + col["disk_write_ops"],
                                 col["disk_read_bytes"] + col["disk_write_bytes"])
        cpu = cpu_busy_pct(col["cpu_idle_pct"])
        self.telemetry += list(zip(iops.tolist(), bps.tolist(), cpu.tolist()))

    # -- what the views read -------------------------------------------------------------------
    def aggregate(self, run: BenchRun, window_s: int) -> list[float | None]:
        """Per second of the run: the 1-s bin, or the mean of the complete window it is in."""
        if window_s <= 1:
            return list(run.bins)
        out: list[float | None] = [None] * len(run.bins)
        per = max(1, int(round(window_s / self.bin_s)))
        for start in range(0, len(run.bins) - per + 1, per):
            chunk = run.bins[start:start + per]
            if any(v is None for v in chunk):
                continue
            mean = sum(chunk) / per  # type: ignore[arg-type]
            out[start:start + per] = [mean] * per
        return out

    def chart(self, run_index: int | None = None, window_s: int = 1) -> ChartData:
        """Run ``run_index`` (default: the current one) over the band of the other finished
        runs (live: the runs before it)."""
        index = self.current if run_index is None else run_index
        span = max(self.duration_s, max((len(r.bins) for r in self.runs.values()), default=0) * self.bin_s)
        n = int(math.ceil(span / self.bin_s))
        run = self.runs.get(index) if index is not None else None
        current = self.aggregate(run, window_s) if run is not None else []
        current = (current + [None] * n)[:n]
        others = [r for r in self.runs.values() if r.finished and r.index != index]
        series = [(self.aggregate(r, window_s) + [None] * n)[:n] for r in others]
        low: list[float | None] = []
        mean: list[float | None] = []
        high: list[float | None] = []
        for s in range(n):
            values = [x for x in (v[s] for v in series) if x is not None]
            low.append(min(values) if values else None)
            high.append(max(values) if values else None)
            mean.append(sum(values) / len(values) if values else None)
        return ChartData(current, low, mean, high, span, window_s, index, tuple(r.index for r in others))

    def op_rows(self) -> tuple[list[OpRow], str]:
        """Per-op ops/s and p50/p99, and what they cover: the latest 1-s bin while running,
        the whole runs (median across runs) once the report is in."""
        if self.report is not None and self.report.runs:
            runs = self.report.runs
            rows = [OpRow(op, _median(runs, op, "ops_per_s"), _median(runs, op, "p50_ns"), _median(runs, op, "p99_ns"))
                    for op in self.op_names]
            return rows, f"whole run, median of {len(runs)} run{'s' if len(runs) != 1 else ''}"
        run = self.runs.get(self.current) if self.current is not None else None
        if run is None:
            return [], "waiting for the first second"
        rows = [OpRow(op, run.op_ops_per_s.get(op), run.op_p50_ns.get(op), run.op_p99_ns.get(op))
                for op in self.op_names]
        measured = sum(b is not None for b in run.bins)
        return rows, f"run {run.index + 1}, last 1-s bin ({measured} s measured)"

    def variation_rows(self, window_s: int) -> list[VariationRow]:
        rows = []
        for index in sorted(self.runs):
            run = self.runs[index]
            windows = [v for v in self._windows(run, window_s) if v is not None]
            rows.append(VariationRow(index, run.ops_per_s, run.exact, run.finished,
                                     min(windows) if windows else None, max(windows) if windows else None))
        return rows

    def _windows(self, run: BenchRun, window_s: int) -> list[float | None]:
        if window_s <= 1:
            return list(run.bins)
        return self.aggregate(run, window_s)[::max(1, window_s)]

    def variation(self) -> dict[str, Any]:
        """Relative range and RSD of the finished runs' cumulative throughput (the report's
        when it is in), and whether they are estimates."""
        if self.report is not None:
            v = self.report.variation
            return {"runs": v.runs, "relative_range": number(v.relative_range),
                    "rsd": number(v.rsd), "mean": number(v.mean_ops_per_s), "exact": True}
        done = [r.ops_per_s for r in self.runs.values() if r.finished and r.ops_per_s is not None]
        s = variation_summary(done)
        return {"runs": s.runs, "relative_range": number(s.relative_range) if s.runs > 1 else None,
                "rsd": number(s.rsd) if s.runs > 1 else None, "mean": number(s.mean), "exact": False}

    def default_window(self) -> int:
        """The Throughput-N window to draw first: the spec's smallest window if a run holds
        at least three of them, else 1-s bins."""
        w = min(self.window_sizes_s)
        return w if self.duration_s >= 3 * w else 1


def _median(runs: list[ReportRun], op: str, field_name: str) -> float | None:
    """The median of one op's figure across the report's runs (None: no run has it)."""
    values = [v for v in (number(getattr(run.ops[op], field_name)) for run in runs if op in run.ops) if v is not None]
    return float(np.median(values)) if values else None
