"""Variation metrics (Cao et al., FAST'17): Throughput-N, relative range, RSD, bands across
runs, and the K-S distance and range of latency distributions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np


def relative_range(values: Sequence[float] | np.ndarray) -> float:
    """(max - min) / mean: the paper's variation metric; nan for no values or zero mean."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0 or x.mean() == 0:
        return math.nan
    return float((x.max() - x.min()) / x.mean())


def rsd(values: Sequence[float] | np.ndarray) -> float:
    """Relative standard deviation with the sample (N-1) std, as in the paper's Eq. 1."""
    x = np.asarray(values, dtype=np.float64)
    if x.size < 2 or x.mean() == 0:
        return math.nan
    return float(x.std(ddof=1) / x.mean())


def throughput_n(counts_per_bin: np.ndarray, bin_s: float, window_s: float) -> np.ndarray:
    """Throughput-N: ops/s in each complete ``window_s`` window (a trailing partial window is
    dropped so every value covers the same time). ``counts_per_bin`` is 1-D (ops per bin) or
    2-D (op types x bins, summed over op types)."""
    counts = np.asarray(counts_per_bin)
    if counts.ndim == 2:
        counts = counts.sum(axis=0)
    per_window = int(round(window_s / bin_s))
    if per_window < 1 or abs(per_window * bin_s - window_s) > 1e-9 * max(window_s, 1):
        raise ValueError(f"window_s={window_s} is not a multiple of bin_s={bin_s}")
    n_windows = counts.size // per_window
    if n_windows == 0:
        return np.empty(0)
    windows = counts[: n_windows * per_window].reshape(n_windows, per_window).sum(axis=1)
    return windows / float(window_s)


def run_matrix(series: Sequence[np.ndarray]) -> np.ndarray:
    """Stack per-run series into runs x windows, cut to the shortest run."""
    if not series:
        return np.empty((0, 0))
    n = min(len(s) for s in series)
    return np.vstack([np.asarray(s, dtype=np.float64)[:n] for s in series])


@dataclass(frozen=True)
class Bands:
    """Throughput-N across runs per window (the paper's Fig. 5 bands)."""

    window_s: float
    min: np.ndarray
    mean: np.ndarray
    max: np.ndarray
    relative_range: np.ndarray      # per window, across runs


def throughput_bands(per_run_tn: Sequence[np.ndarray], window_s: float) -> Bands:
    """Min / mean / max of Throughput-N across runs for each window."""
    m = run_matrix(per_run_tn)
    if m.size == 0:
        empty = np.empty(0)
        return Bands(window_s, empty, empty, empty, empty)
    mean = m.mean(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rr = np.where(mean > 0, (m.max(axis=0) - m.min(axis=0)) / mean, np.nan)
    return Bands(window_s, m.min(axis=0), mean, m.max(axis=0), rr)


def window_relative_ranges(per_run_counts: Sequence[np.ndarray], bin_s: float,
                           window_s: float) -> np.ndarray:
    """Relative range across runs of each Throughput-N window."""
    series = [throughput_n(c, bin_s, window_s) for c in per_run_counts]
    return throughput_bands(series, window_s).relative_range


def relative_range_cdf(configs: Sequence[Sequence[np.ndarray]], bin_s: float,
                       window_sizes_s: Iterable[float]) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """The paper's Fig. 6: for each window size, the CDF (sorted values, fraction <= value) of
    the relative range of Throughput-N over all windows of all configurations. ``configs`` is
    one entry per configuration, each the per-run counts-per-bin arrays."""
    out: dict[float, tuple[np.ndarray, np.ndarray]] = {}
    for window_s in window_sizes_s:
        values = [window_relative_ranges(runs, bin_s, window_s) for runs in configs]
        flat = np.concatenate(values) if values else np.empty(0)
        flat = np.sort(flat[np.isfinite(flat)])
        out[window_s] = (flat, np.arange(1, flat.size + 1) / max(flat.size, 1))
    return out


@dataclass(frozen=True)
class VariationSummary:
    runs: int
    mean: float
    min: float
    max: float
    relative_range: float
    rsd: float


def variation_summary(ops_per_s_runs: Sequence[float]) -> VariationSummary:
    x = np.asarray(ops_per_s_runs, dtype=np.float64)
    if x.size == 0:
        return VariationSummary(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    return VariationSummary(int(x.size), float(x.mean()), float(x.min()), float(x.max()),
                            relative_range(x), rsd(x))


def ks_distance(a_ns: np.ndarray, b_ns: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov statistic of raw samples (max |F_a - F_b|)."""
    a = np.sort(np.asarray(a_ns))
    b = np.sort(np.asarray(b_ns))
    if a.size == 0 or b.size == 0:
        return math.nan
    grid = np.concatenate([a, b])
    fa = np.searchsorted(a, grid, side="right") / a.size
    fb = np.searchsorted(b, grid, side="right") / b.size
    return float(np.abs(fa - fb).max())


def ks_distance_hist(hist_a: np.ndarray, hist_b: np.ndarray) -> float:
    """K-S statistic of two histograms on the shared grid (exact at bucket resolution)."""
    a = np.asarray(hist_a, dtype=np.float64)
    b = np.asarray(hist_b, dtype=np.float64)
    if a.sum() == 0 or b.sum() == 0:
        return math.nan
    return float(np.abs(np.cumsum(a) / a.sum() - np.cumsum(b) / b.sum()).max())


def ks_range(distributions: Sequence[np.ndarray], histograms: bool = True) -> float:
    """The paper's latency range of one op: the largest K-S distance between any two runs."""
    dist = ks_distance_hist if histograms else ks_distance
    values = [dist(x, y) for x, y in combinations(distributions, 2)]
    values = [v for v in values if not math.isnan(v)]
    return max(values) if values else math.nan
