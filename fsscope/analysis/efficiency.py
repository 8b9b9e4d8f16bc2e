"""Throughput, latency and their ratio per buffer size; the knees; a recommendation (pure numpy).

Mingardi & Vieira's reading of a synchronous-write sweep: as the application buffer grows,

  phase 1  throughput grows while latency stays at the device's minimum sync cost;
  phase 2  both grow;
  phase 3  throughput has saturated and latency grows with the buffer.

The two knees sit at different sizes and are found from the data:

- *latency rise*: the last buffer before mean latency first leaves ``LATENCY_RISE`` (25 %)
  of its floor (the lowest mean latency of any size), counted from the smallest size within
  that band; the note also says where latency comes back into the band later, if it does;
- *throughput saturation*: the smallest buffer whose mean throughput is within
  ``THROUGHPUT_SATURATION`` (10 %) of the best mean throughput.

The throughput/latency *ratio* (bytes/s per second of mean write latency) is the paper's
efficiency curve; its maximum is the default recommendation. Confidence comes from a seeded
bootstrap over repetitions: every size's repetitions are resampled with replacement, the knees
and the maximum found again, and the statement says how often they land on the same size and
the range that holds 95 % of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from fsscope.analysis.variation.stats import welch
from fsscope.format import format_bytes

LATENCY_RISE = 0.25
THROUGHPUT_SATURATION = 0.10
BOOTSTRAP = 1000
ALPHA = 0.001                        # the paper's significance threshold


def t_ci95(values: np.ndarray) -> float:
    """Half-width of the 95 % confidence interval of the mean (Student t); nan below 2 values."""
    from scipy import stats

    x = np.asarray(values, dtype=np.float64)
    if x.size < 2:
        return math.nan
    return float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))


@dataclass(frozen=True)
class SizeStats:
    """One buffer size across its repetitions. Throughput: one value per repetition (bytes/s).
    Latency: mean, sd, P50, P99 over every write; its CI is over the repetitions' mean
    latencies (writes within one file are not independent)."""

    buffer_bytes: int
    repeats: int
    writes: int
    throughput_mean: float
    throughput_sd: float
    throughput_ci95: float
    latency_mean_ns: float
    latency_sd_ns: float
    latency_ci95_ns: float
    latency_p50_ns: float
    latency_p99_ns: float
    throughput_runs: tuple[float, ...]
    latency_mean_runs_ns: tuple[float, ...]

    @property
    def ratio(self) -> float:
        """Throughput per second of mean write latency, (bytes/s)/s."""
        if not (self.latency_mean_ns > 0) or math.isnan(self.throughput_mean):
            return math.nan
        return self.throughput_mean / (self.latency_mean_ns / 1e9)

    def to_dict(self) -> dict[str, Any]:
        return {"buffer_bytes": self.buffer_bytes, "repeats": self.repeats, "writes": self.writes,
                "throughput_mean": self.throughput_mean, "throughput_sd": self.throughput_sd,
                "throughput_ci95": self.throughput_ci95, "latency_mean_ns": self.latency_mean_ns,
                "latency_sd_ns": self.latency_sd_ns, "latency_ci95_ns": self.latency_ci95_ns,
                "latency_p50_ns": self.latency_p50_ns, "latency_p99_ns": self.latency_p99_ns,
                "ratio": self.ratio, "throughput_runs": list(self.throughput_runs),
                "latency_mean_runs_ns": list(self.latency_mean_runs_ns)}


def size_stats(buffer_bytes: int, throughput_bps: Sequence[float], latency_ns: Sequence[np.ndarray]) -> SizeStats:
    """Statistics of one size from its repetitions' throughputs and per-write latency arrays."""
    tput = np.asarray(throughput_bps, dtype=np.float64)
    runs = [np.asarray(a, dtype=np.float64) for a in latency_ns if len(a)]
    lat = np.concatenate(runs) if runs else np.empty(0)
    run_means = np.array([r.mean() for r in runs])
    nan = math.nan
    return SizeStats(
        buffer_bytes=int(buffer_bytes), repeats=int(tput.size), writes=int(lat.size),
        throughput_mean=float(tput.mean()) if tput.size else nan,
        throughput_sd=float(tput.std(ddof=1)) if tput.size > 1 else nan,
        throughput_ci95=t_ci95(tput),
        latency_mean_ns=float(lat.mean()) if lat.size else nan,
        latency_sd_ns=float(lat.std(ddof=1)) if lat.size > 1 else nan,
        latency_ci95_ns=t_ci95(run_means),
        latency_p50_ns=float(np.percentile(lat, 50)) if lat.size else nan,
        latency_p99_ns=float(np.percentile(lat, 99)) if lat.size else nan,
        throughput_runs=tuple(float(v) for v in tput), latency_mean_runs_ns=tuple(float(v) for v in run_means))


# ---------------------------------------------------------------------------------------------
# Knees on mean curves (vectorised over rows: one row per bootstrap resample)
# ---------------------------------------------------------------------------------------------

def latency_rise_index(latency: np.ndarray, rise: float = LATENCY_RISE) -> np.ndarray:
    """Per row of mean latencies (ordered by buffer size): the index of the last size before
    latency first leaves ``rise`` of its floor (searching from the first size within it); -1
    where it never leaves. A size past the knee that comes back into the band does not move
    the knee: latency has already left the band once."""
    lat = np.atleast_2d(np.asarray(latency, dtype=np.float64))
    floor = np.nanmin(lat, axis=1, keepdims=True)
    above = lat > (1 + rise) * floor
    start = np.argmax(~above, axis=1)[:, None]          # the first size within the band
    leaves = above & (np.arange(lat.shape[1]) > start)
    return np.where(leaves.any(axis=1), leaves.argmax(axis=1) - 1, -1)


def saturation_index(throughput: np.ndarray, within: float = THROUGHPUT_SATURATION) -> np.ndarray:
    """Per row of mean throughputs: the index of the first size within ``within`` of the row's
    maximum."""
    tput = np.atleast_2d(np.asarray(throughput, dtype=np.float64))
    top = np.nanmax(tput, axis=1, keepdims=True)
    return (tput >= (1 - within) * top).argmax(axis=1)


def ratio_max_index(throughput: np.ndarray, latency_ns: np.ndarray) -> np.ndarray:
    ratio = np.atleast_2d(throughput) / np.atleast_2d(latency_ns)
    return np.nanargmax(np.where(np.isfinite(ratio), ratio, -np.inf), axis=1)


@dataclass(frozen=True)
class Estimate:
    """A size found on the mean curve and how stable it is under resampling."""

    index: int | None                # into the sizes; None: not found in the swept range
    agreement: float | None          # fraction of resamples finding the same size
    low_index: int | None            # 2.5 % .. 97.5 % of the resamples' sizes
    high_index: int | None
    resamples: int


def _estimate(point: int, boot: np.ndarray | None, missing: int = -1) -> Estimate:
    index = None if point == missing else int(point)
    if boot is None or boot.size == 0:
        return Estimate(index, None, None, None, 0)
    found = boot[boot != missing]
    agreement = float(np.mean(boot == point))
    if found.size == 0:
        return Estimate(index, agreement, None, None, int(boot.size))
    lo, hi = np.percentile(found, [2.5, 97.5], method="nearest")
    return Estimate(index, agreement, int(lo), int(hi), int(boot.size))


def _bootstrap_means(stats: Sequence[SizeStats], resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(throughput, latency) mean curves of ``resamples`` resamples of each size's repetitions."""
    if resamples < 1 or any(s.repeats < 3 or len(s.latency_mean_runs_ns) < 3 for s in stats):
        return None
    rng = np.random.default_rng(seed)
    tput = np.empty((resamples, len(stats)))
    lat = np.empty((resamples, len(stats)))
    for j, s in enumerate(stats):
        t = np.asarray(s.throughput_runs)
        lm = np.asarray(s.latency_mean_runs_ns)
        tput[:, j] = t[rng.integers(0, t.size, (resamples, t.size))].mean(axis=1)
        lat[:, j] = lm[rng.integers(0, lm.size, (resamples, lm.size))].mean(axis=1)
    return tput, lat


@dataclass(frozen=True)
class Analysis:
    sizes: list[SizeStats]
    latency_rise: Estimate
    saturation: Estimate
    best_ratio: Estimate
    phases: dict[str, list[int]] = field(default_factory=dict)

    def size_at(self, est: Estimate) -> int | None:
        return None if est.index is None else self.sizes[est.index].buffer_bytes


def analyze(stats: Sequence[SizeStats], resamples: int = BOOTSTRAP, seed: int = 1,
            rise: float = LATENCY_RISE, within: float = THROUGHPUT_SATURATION) -> Analysis:
    """Knees, phases and the best ratio of sizes ordered by buffer size (sizes without a
    throughput or latency are left out)."""
    stats = sorted((s for s in stats if np.isfinite(s.throughput_mean) and s.latency_mean_ns > 0),
                   key=lambda s: s.buffer_bytes)
    if not stats:
        empty = Estimate(None, None, None, None, 0)
        return Analysis([], empty, empty, empty, {})
    tput = np.array([s.throughput_mean for s in stats])
    lat = np.array([s.latency_mean_ns for s in stats])
    boot = _bootstrap_means(stats, resamples, seed)
    rise_i = int(latency_rise_index(lat, rise)[0])
    sat_i = int(saturation_index(tput, within)[0])
    best_i = int(ratio_max_index(tput, lat)[0])
    rise_e = _estimate(rise_i, latency_rise_index(boot[1], rise) if boot else None)
    sat_e = _estimate(sat_i, saturation_index(boot[0], within) if boot else None)
    best_e = _estimate(best_i, ratio_max_index(*boot) if boot else None)
    sizes = [s.buffer_bytes for s in stats]
    end1 = rise_i if rise_i >= 0 else len(sizes) - 1
    phases = {"1": sizes[:end1 + 1], "2": [s for s in sizes[end1 + 1:sat_i]], "3": sizes[max(sat_i, end1 + 1):]}
    if rise_i < 0:
        phases = {"1": sizes, "2": [], "3": []}
    return Analysis(stats, rise_e, sat_e, best_e, phases)


# ---------------------------------------------------------------------------------------------
# Words
# ---------------------------------------------------------------------------------------------

def _confidence(a: Analysis, est: Estimate) -> str:
    if est.resamples == 0:
        return "too few repetitions (< 3 per size) for a confidence statement"
    if est.low_index is None or est.high_index is None:
        return f"{est.agreement:.0%} of {est.resamples} bootstrap resamples of the repetitions agree"
    lo, hi = format_bytes(a.sizes[est.low_index].buffer_bytes), format_bytes(a.sizes[est.high_index].buffer_bytes)
    span = lo if lo == hi else f"{lo}–{hi}"
    return (f"{est.agreement:.0%} of {est.resamples} bootstrap resamples of the repetitions put it at the "
            f"same size, 95 % of them within {span}")


def knees_dict(a: Analysis) -> dict[str, Any]:
    rise, sat = a.size_at(a.latency_rise), a.size_at(a.saturation)
    last = a.sizes[-1].buffer_bytes if a.sizes else None
    rise_note = _rise_note(a)
    if sat is None:
        sat_note = "no throughput measured"
    else:
        sat_note = f"throughput reaches 90 % of its maximum at {format_bytes(sat)}; {_confidence(a, a.saturation)}"
        if sat == last and len(a.sizes) > 1:
            sat_note += " (the largest size swept: it may not have saturated yet)"
    return {"latency_rise_bytes": rise, "throughput_saturation_bytes": sat,
            "latency_rise": _estimate_dict(a, a.latency_rise) | {"note": rise_note},
            "throughput_saturation": _estimate_dict(a, a.saturation) | {"note": sat_note}}


def _rise_note(a: Analysis, rise: float = LATENCY_RISE) -> str:
    """The latency-rise knee in words that agree with every size's mean latency."""
    if not a.sizes:
        return "no latency measured"
    lat = np.array([s.latency_mean_ns for s in a.sizes])
    floor = float(lat.min())
    floor_at = format_bytes(a.sizes[int(lat.argmin())].buffer_bytes)
    band = f"within {rise:.0%} of its floor ({floor / 1e6:,.3g} ms at {floor_at})"
    inside = lat <= (1 + rise) * floor
    first = int(np.argmax(inside))
    early = ("" if not first else "; the smallest size swept was slower" if first == 1 else
             f"; the {first} smallest sizes swept were slower")
    if a.latency_rise.index is None:
        return f"latency stays {band} across the swept sizes{early}: no rise"
    i = a.latency_rise.index
    left = a.sizes[i + 1]
    upto = format_bytes(a.sizes[i].buffer_bytes)
    where = (f"is {band} only at {upto}" if first == i else f"stays {band} up to {upto}" if first == 0 else
             f"stays {band} from {format_bytes(a.sizes[first].buffer_bytes)} up to {upto}")
    note = (f"latency {where} and first leaves it at {format_bytes(left.buffer_bytes)} "
            f"({left.latency_mean_ns / floor:.1f}x the floor){early}")
    back = [format_bytes(s.buffer_bytes) for s, ok in zip(a.sizes[i + 2:], inside[i + 2:]) if ok]
    if back:
        note += f"; it comes back within {rise:.0%} at {', '.join(back)}"
    return f"{note}; {_confidence(a, a.latency_rise)}"


def _estimate_dict(a: Analysis, est: Estimate) -> dict[str, Any]:
    def size(i):
        return None if i is None else a.sizes[i].buffer_bytes
    return {"buffer_bytes": size(est.index), "agreement": est.agreement, "low_bytes": size(est.low_index),
            "high_bytes": size(est.high_index), "resamples": est.resamples}


def recommendation(a: Analysis) -> str:
    index = a.best_ratio.index
    if index is None:
        return "nothing measured: no recommendation"
    s = a.sizes[index]
    best = s.buffer_bytes
    text = (f"Use {format_bytes(best)} buffers: the most throughput per unit of latency here "
            f"({s.throughput_mean / 1e6:,.1f} MB/s at {s.latency_mean_ns / 1e6:,.3g} ms per write). Larger "
            "buffers add more latency than throughput; smaller ones leave throughput unused.")
    if a.best_ratio.resamples:
        text += f" ({_confidence(a, a.best_ratio)}.)"
    return text


@dataclass(frozen=True)
class Choice:
    buffer_bytes: int | None
    note: str


def choose(a: Analysis, target_throughput: float | None = None, max_latency_ns: float | None = None) -> Choice:
    """The paper's rules: the smallest buffer reaching a throughput target, the largest one
    within a latency limit, or with both the smallest reaching the target within the limit."""
    fits = [s for s in a.sizes
            if (target_throughput is None or s.throughput_mean >= target_throughput)
            and (max_latency_ns is None or s.latency_mean_ns <= max_latency_ns)]
    want = []
    if target_throughput is not None:
        want.append(f"{target_throughput / 1e6:,.1f} MB/s")
    if max_latency_ns is not None:
        want.append(f"≤ {max_latency_ns / 1e6:,.3g} ms per write")
    goal = " and ".join(want)
    if not fits:
        best_t = max(a.sizes, key=lambda s: s.throughput_mean, default=None)
        best_l = min(a.sizes, key=lambda s: s.latency_mean_ns, default=None)
        seen = (f" (best here: {best_t.throughput_mean / 1e6:,.1f} MB/s at {format_bytes(best_t.buffer_bytes)}, "
                f"lowest latency {best_l.latency_mean_ns / 1e6:,.3g} ms at {format_bytes(best_l.buffer_bytes)})"
                if best_t and best_l else "")
        return Choice(None, f"{goal}: not reachable on this stack{seen}")
    pick = fits[0] if target_throughput is not None else fits[-1]
    return Choice(pick.buffer_bytes, f"{goal}: use {format_bytes(pick.buffer_bytes)} buffers "
                  f"({pick.throughput_mean / 1e6:,.1f} MB/s, {pick.latency_mean_ns / 1e6:,.3g} ms per write)")


# ---------------------------------------------------------------------------------------------
# Recipes compared per buffer size
# ---------------------------------------------------------------------------------------------

def compare_per_size(throughput_runs: Mapping[str, Mapping[int, Sequence[float]]], alpha: float = ALPHA
                     ) -> list[dict[str, Any]]:
    """Welch t-test on per-repetition throughput for every pair of names and every buffer size
    both measured; the verdict names the faster one only when p < ``alpha``."""

    tests = []
    for a, b in combinations(list(throughput_runs), 2):
        for size in sorted(set(throughput_runs[a]) & set(throughput_runs[b])):
            r = welch(throughput_runs[a][size], throughput_runs[b][size], alpha=alpha, labels=(a, b))
            verdict = f"{r.winner} faster" if r.winner else "no significant difference"
            tests.append({"a": a, "b": b, "buffer_bytes": int(size), "p": r.p, "t": r.t, "df": r.df,
                          "mean_a": r.mean_a, "mean_b": r.mean_b, "verdict": verdict, "alpha": alpha})
    return tests
