"""The variation document (a record) for R runs of one personality."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np

from fsscope.analysis.variation.grid import hist_percentile_ns
from fsscope.analysis.variation.metrics import (
    ks_range,
    throughput_bands,
    throughput_n,
    variation_summary,
)
from fsscope.analysis.variation.temporal import (
    Flag,
    detect_periodic,
    detect_warmup,
    flag_variation,
    flag_window_disagreement,
)
from fsscope.records import Record, convert, plain


class OpStats(Record, frozen=True, kw_only=True):
    """One op's numbers over one run (None: the run had no such number)."""

    count: int = 0
    p50_ns: float | None = None
    p99_ns: float | None = None
    ops_per_s: float | None = None
    mean_ns: float | None = None
    bytes: int | None = None
    bytes_per_s: float | None = None
    mean_bytes: float | None = None
    errors: int | None = None


class RunVariation(Record, frozen=True, kw_only=True):
    """One run: cumulative ops/s, its Throughput-N series per window size ("10"), per op."""

    ops_per_s: float | None = None
    elapsed_s: float = 0.0
    windows: dict[str, list[float | None]] = {}
    ops: dict[str, OpStats] = {}


class Band(Record, frozen=True, kw_only=True):
    """Throughput-N across runs, per window: slowest, mean and fastest run, relative range."""

    min: list[float | None] = []
    mean: list[float | None] = []
    max: list[float | None] = []
    relative_range: list[float | None] = []


class Variation(Record, frozen=True, kw_only=True):
    """Cumulative throughput across runs, and the Throughput-N bands per window size."""

    relative_range: float | None = None
    rsd: float | None = None
    mean_ops_per_s: float | None = None
    min_ops_per_s: float | None = None
    max_ops_per_s: float | None = None
    runs: int = 0
    windows: dict[str, Band] = {}


class OpLatency(Record, frozen=True, kw_only=True):
    ks_range: float | None = None  # K-S distance range of the runs' latency distributions


class VariationReport(Record, frozen=True, kw_only=True):
    """The variation document for R runs of one personality. A flag is its kind, note and
    its own numbers (they differ per kind), so flags stay plain mappings."""

    personality: str = ""
    runs: list[RunVariation] = []
    variation: Variation = Variation()
    latency: dict[str, OpLatency] = {}
    flags: list[dict[str, Any]] = []


class RunLike(Protocol):
    """What the report needs from a run (``fsscope.workloads.personalities.RunResult``)."""

    @property
    def op_names(self) -> tuple[str, ...]: ...

    @property
    def counts(self) -> np.ndarray: ...  # op types x bins, completions per bin

    @property
    def bin_s(self) -> float: ...

    @property
    def elapsed_s(self) -> float: ...

    @property
    def latency_hist(self) -> np.ndarray: ...  # op types x N_BUCKETS, whole run


def run_ops_per_s(run: RunLike) -> float:
    return float(np.asarray(run.counts).sum() / run.elapsed_s) if run.elapsed_s > 0 else math.nan


def variation_report(personality: str, runs: Sequence[RunLike],
                     window_sizes_s: Sequence[float] = (10,), threshold: float = 0.10,
                     dirty_expire_centisecs: int | None = None,
                     dirty_writeback_centisecs: int | None = None,
                     extra_flags: Iterable[Flag] = ()) -> VariationReport:
    """The ``--json`` document for R runs of one personality (keys beyond the contract are
    additions: per-op mean latency, ops/s and bytes moved (total, per second, per op),
    per-window bands, per-op K-S ranges)."""
    window_keys = [f"{w:g}" for w in window_sizes_s]
    ops_per_s = [run_ops_per_s(r) for r in runs]
    json_runs = []
    tn: dict[str, list[np.ndarray]] = {k: [] for k in window_keys}
    for run in runs:
        windows = {}
        for key, w in zip(window_keys, window_sizes_s):
            series = throughput_n(run.counts, run.bin_s, w)
            tn[key].append(series)
            windows[key] = series
        ops = {}
        lat_sum = getattr(run, "latency_sum_ns", None)
        io_bytes = getattr(run, "io_bytes", None)
        errors = getattr(run, "errors", None)
        for i, op in enumerate(run.op_names):
            count = int(np.asarray(run.counts[i]).sum())
            entry = {"count": count,
                     "p50_ns": hist_percentile_ns(run.latency_hist[i], 50),
                     "p99_ns": hist_percentile_ns(run.latency_hist[i], 99),
                     "ops_per_s": count / run.elapsed_s if run.elapsed_s > 0 else math.nan}
            if lat_sum is not None and count:
                entry["mean_ns"] = float(np.asarray(lat_sum[i]).sum() / count)
            if io_bytes is not None:
                moved = int(np.asarray(io_bytes[i]).sum())
                entry["bytes"] = moved
                entry["bytes_per_s"] = moved / run.elapsed_s if run.elapsed_s > 0 else math.nan
                if count:
                    entry["mean_bytes"] = moved / count
            if errors is not None:
                entry["errors"] = int(errors[i])
            ops[op] = entry
        json_runs.append({"ops_per_s": run_ops_per_s(run), "elapsed_s": run.elapsed_s,
                          "windows": windows, "ops": ops})

    summary = variation_summary(ops_per_s)
    bands = {key: throughput_bands(tn[key], w) for key, w in zip(window_keys, window_sizes_s)}
    variation = {"relative_range": summary.relative_range, "rsd": summary.rsd,
                 "mean_ops_per_s": summary.mean, "min_ops_per_s": summary.min,
                 "max_ops_per_s": summary.max, "runs": summary.runs,
                 "windows": {key: {"min": b.min, "mean": b.mean, "max": b.max,
                                   "relative_range": b.relative_range} for key, b in bands.items()}}

    latency: dict[str, Any] = {}
    if runs:
        for i, op in enumerate(runs[0].op_names):
            hists = [np.asarray(r.latency_hist[i]) for r in runs]
            latency[op] = {"ks_range": ks_range(hists) if len(runs) > 1 else None}

    flags: list[Flag] = list(extra_flags)
    f = flag_variation(ops_per_s, threshold)
    if f:
        flags.append(f)
    for key, w in zip(window_keys, window_sizes_s):
        mean_series = bands[key].mean
        for flag in (detect_warmup(mean_series, w),
                     detect_periodic(mean_series, w, dirty_expire_centisecs, dirty_writeback_centisecs),
                     flag_window_disagreement(tn[key], w, ops_per_s, threshold)):
            if flag:
                flags.append(flag)
    return convert(plain({"personality": personality, "runs": json_runs, "variation": variation,
                          "latency": latency, "flags": [fl.to_dict() for fl in flags]}), VariationReport)
