"""The parent's side of the measurements: per-bin arrays merged from the workers' summaries,
live samples for the UI, and the run's result."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from fsscope.analysis.variation.grid import N_BUCKETS, hist_percentile_ns
from fsscope.analysis.variation.metrics import throughput_n
from fsscope.records import Record
from fsscope.workloads.personalities.spec import PersonalitySpec


class OpWindow(Record, frozen=True, kw_only=True):
    """One op type in one bin: its rate and latency percentiles (None: no call ended in it)."""

    ops_per_s: float
    p50_ns: float | None = None
    p99_ns: float | None = None


class LiveSample(Record, frozen=True, kw_only=True):
    """One bin of live numbers for the UI (ops/s and latency percentiles per op type). The
    same record goes from the aggregator through the bench job's ``samples`` event
    (:class:`fsscope.workloads.bench_job.WindowSample`) to the bench view's sparklines."""

    bin_index: int = msgspec.field(name="bin")
    t_s: float                              # end of the bin, seconds since the run started
    ops_per_s: float
    ops: dict[str, OpWindow]
    complete: bool                          # False: emitted before every worker reported


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


@dataclass(frozen=True)
class RunResult:
    """Arrays of one run. Counts are per op type (rows, in ``op_names`` order) per bin."""

    personality: str
    op_names: tuple[str, ...]
    bin_s: float
    elapsed_s: float
    counts: np.ndarray                # int64 [n_ops, n_bins] completions
    io_bytes: np.ndarray              # int64 [n_ops, n_bins] bytes moved by read/write/append
    latency_sum_ns: np.ndarray        # int64 [n_ops, n_bins]
    latency_hist: np.ndarray          # int64 [n_ops, N_BUCKETS] whole run
    latency_window_s: float
    window_hist: np.ndarray           # int64 [rows, 4]: window, op, bucket, count (sparse)
    errors: np.ndarray                # int64 [n_ops]
    worker_pids: tuple[int, ...]      # the workers' processes (C loops: several workers' threads each)
    worker_exitcodes: tuple[int | None, ...]
    cancelled: bool
    start_unix_s: float
    spec: PersonalitySpec
    cgroup: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()
    start_ns: int = 0                 # CLOCK_MONOTONIC ns of bin 0 (kernel trace events align on it)
    stopped_by: str | None = None         # why the run ended before its duration (ENOSPC)
    worker_cpu_user_s: float = 0.0        # CPU the workers spent in their loop (all workers summed):
    worker_cpu_system_s: float = 0.0      # user = the generator itself, system = the kernel for it
    worker_runqueue_s: float = 0.0        # time they were runnable but waited for a CPU
    worker_loop: str = "python"           # "native": the personality's C loop ran (native/)

    @property
    def total_ops(self) -> int:
        return int(self.counts.sum())

    @property
    def ops_per_s(self) -> float:
        """Cumulative throughput (Throughput-whole-run)."""
        return self.total_ops / self.elapsed_s if self.elapsed_s > 0 else math.nan

    def op_count(self, op: str) -> int:
        return int(self.counts[self.op_names.index(op)].sum())

    def throughput(self, window_s: float) -> np.ndarray:
        """Throughput-N over all op types (ops/s per complete window)."""
        return throughput_n(self.counts, self.bin_s, window_s)

    def percentile_ns(self, op: str, q: float) -> float:
        return hist_percentile_ns(self.latency_hist[self.op_names.index(op)], q)

    def window_histograms(self, op: str) -> np.ndarray:
        """Dense [n_windows, N_BUCKETS] latency histograms of one op per latency window."""
        n_windows = max(1, math.ceil(self.elapsed_s / self.latency_window_s))
        rows = self.window_hist[self.window_hist[:, 1] == self.op_names.index(op)]
        out = np.zeros((n_windows, N_BUCKETS), dtype=np.int64)
        np.add.at(out, (np.minimum(rows[:, 0], n_windows - 1), rows[:, 2]), rows[:, 3])
        return out

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Arrays for the run directory (``np.savez`` or one ``.npy`` each)."""
        return {"counts": self.counts, "io_bytes": self.io_bytes,
                "latency_sum_ns": self.latency_sum_ns, "latency_hist": self.latency_hist,
                "window_hist": self.window_hist, "errors": self.errors}

    def summary(self) -> dict[str, Any]:
        """Plain-JSON facts of the run (no arrays)."""
        return {"personality": self.personality, "ops_per_s": self.ops_per_s,
                "elapsed_s": self.elapsed_s, "total_ops": self.total_ops,
                "ops": {op: {"count": self.op_count(op),
                             "p50_ns": _finite(self.percentile_ns(op, 50)),
                             "p99_ns": _finite(self.percentile_ns(op, 99)),
                             "errors": int(self.errors[i])} for i, op in enumerate(self.op_names)},
                "workers": self.spec.workers, "worker_processes": len(self.worker_pids), "cancelled": self.cancelled, "stopped_by": self.stopped_by,
                "worker_cpu_user_s": self.worker_cpu_user_s, "worker_cpu_system_s": self.worker_cpu_system_s,
                "worker_runqueue_s": self.worker_runqueue_s, "worker_loop": self.worker_loop,
                "cgroup": self.cgroup, "notes": list(self.notes)}


class Aggregator:
    """Merges per-worker bin summaries into run arrays and decides when a bin is final."""

    def __init__(self, spec: PersonalitySpec, nworkers: int, alloc: Callable[[str, tuple[int, int]], np.ndarray]):
        self.spec = spec
        self.n_ops = len(spec.op_names)
        cap = int(math.ceil(spec.duration_s / spec.bin_s)) + 2
        self.counts = alloc("counts", (self.n_ops, cap))
        self.io_bytes = alloc("io_bytes", (self.n_ops, cap))
        self.lat_sum = alloc("latency_sum_ns", (self.n_ops, cap))
        self.hist = alloc("latency_hist", (self.n_ops, N_BUCKETS))
        self.bins_per_window = int(round(spec.latency_window_s / spec.bin_s))
        self.window_rows: dict[int, list[np.ndarray]] = {}
        self.compacted: list[np.ndarray] = []
        self.live: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}
        self.progress = [0] * nworkers       # worker w has finished all bins < progress[w]
        self.emitted = 0                     # bins < emitted were handed to on_window

    def _grow(self, b: int) -> None:
        if b < self.counts.shape[1]:
            return
        extra = max(b + 1 - self.counts.shape[1], self.counts.shape[1])
        pad = np.zeros((self.n_ops, extra), dtype=np.int64)
        self.counts = np.hstack([self.counts, pad])
        self.io_bytes = np.hstack([self.io_bytes, pad])
        self.lat_sum = np.hstack([self.lat_sum, pad])

    def add(self, wid: int, b: int, next_bin: int, payload: list) -> None:
        if payload:
            self._grow(b)
        window = b // self.bins_per_window
        for op, count, nbytes, lat_sum, buckets, counts in payload:
            buckets = buckets.astype(np.int64)
            self.counts[op, b] += count
            self.io_bytes[op, b] += nbytes
            self.lat_sum[op, b] += lat_sum
            np.add.at(self.hist[op], buckets, counts)
            rows = np.empty((buckets.size, 4), dtype=np.int64)
            rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3] = window, op, buckets, counts
            self.window_rows.setdefault(window, []).append(rows)
            if b >= self.emitted:
                self.live.setdefault(b, []).append((op, buckets, counts))
        self.progress[wid] = max(self.progress[wid], next_bin)

    def finish_worker(self, wid: int) -> None:
        self.progress[wid] = 1 << 62

    def compact(self, before_window: int) -> None:
        """Merge duplicate (op, bucket) rows of windows that no worker will add to."""
        for window in [w for w in self.window_rows if w < before_window]:
            self.compacted.append(_dedupe(np.vstack(self.window_rows.pop(window))))

    def ready_bins(self, now_bin: int, grace_bins: int) -> list[tuple[int, bool]]:
        """Bins to emit now: complete ones, and ones older than the grace period."""
        done = min(self.progress)
        out = []
        while self.emitted < min(done, now_bin) or self.emitted < now_bin - grace_bins:
            out.append((self.emitted, self.emitted < done))
            self.emitted += 1
        return out

    def live_sample(self, b: int, complete: bool) -> LiveSample:
        spec = self.spec
        hists = np.zeros((self.n_ops, N_BUCKETS), dtype=np.int64)
        for op, buckets, counts in self.live.pop(b, []):
            np.add.at(hists[op], buckets, counts)
        counts = self.counts[:, b] if b < self.counts.shape[1] else np.zeros(self.n_ops, np.int64)
        names = spec.op_names
        return LiveSample(
            bin_index=b, t_s=(b + 1) * spec.bin_s, ops_per_s=float(counts.sum() / spec.bin_s),
            ops={n: OpWindow(ops_per_s=float(counts[i] / spec.bin_s),
                             p50_ns=_finite(hist_percentile_ns(hists[i], 50)),
                             p99_ns=_finite(hist_percentile_ns(hists[i], 99)))
                 for i, n in enumerate(names)},
            complete=complete)

    def window_hist(self) -> np.ndarray:
        self.compact(1 << 62)
        if not self.compacted:
            return np.zeros((0, 4), dtype=np.int64)
        return _dedupe(np.vstack(self.compacted))


def _dedupe(rows: np.ndarray) -> np.ndarray:
    """Sum the counts of identical (window, op, bucket) rows."""
    keys, inverse = np.unique(rows[:, :3], axis=0, return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=rows[:, 3], minlength=len(keys)).astype(np.int64)
    return np.column_stack([keys, counts])


