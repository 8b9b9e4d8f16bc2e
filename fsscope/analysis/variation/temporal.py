"""Flags with explanatory notes, most of them over time: cumulative variation, warm-up,
periodic dips (writeback), windows that disagree with the whole run, and a recipe
comparison whose verdict flips with the time window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fsscope.analysis.variation.metrics import relative_range, run_matrix, throughput_bands, variation_summary
from fsscope.analysis.variation.stats import WelchResult, welch
from fsscope.records import plain


@dataclass(frozen=True)
class Flag:
    """Something worth a user's attention, with a note saying what and why."""

    kind: str
    note: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "note": self.note, **plain(self.details)}


#: the expected range of 10 normal draws in their sds (the paper's 10 runs): a threshold on the
#: relative range stands for a run-to-run sd of ``threshold / RANGE_SDS_10`` (3.25 % at 10 %)
RANGE_SDS_10 = 3.078
#: the variation flag's chance of saying "above" when the runs' spread is exactly the threshold's
VARIATION_ALPHA = 0.025
#: the most runs a variation verdict names as deciding it
VARIATION_RUNS_CAP = 100


def spread_above_p(ops_per_s_runs: Sequence[float], threshold: float) -> tuple[float, float, float]:
    """(p, sd measured, sd of the threshold): is the runs' spread above the threshold's? The sd of
    log throughput (relative, as the range is) against ``threshold / RANGE_SDS_10`` by the
    chi-square test of one variance: p = P(chi2(n-1) >= (n-1) s^2 / sd0^2). nan below 2 runs."""
    from fsscope.analysis import scipy_stats

    x = np.asarray(ops_per_s_runs, dtype=np.float64)
    x = np.log(x[np.isfinite(x) & (x > 0)])
    sd0 = threshold / RANGE_SDS_10
    if x.size < 2 or not sd0 > 0:
        return math.nan, math.nan, sd0
    s = float(x.std(ddof=1))
    return float(scipy_stats().chi2.sf((x.size - 1) * s * s / (sd0 * sd0), x.size - 1)), s, sd0


def runs_to_decide_spread(sd: float, sd0: float, runs: int, alpha: float = VARIATION_ALPHA) -> int | None:
    """The fewest runs (more than ``runs``) at which a spread of ``sd`` measured again would be
    above ``sd0`` beyond chance; None when it is not above it or needs more than the cap."""
    from fsscope.analysis import scipy_stats

    if not (sd > sd0 > 0):
        return None
    n = np.arange(runs + 1, VARIATION_RUNS_CAP + 1)
    ok = (n - 1) * (sd / sd0) ** 2 > scipy_stats().chi2.isf(alpha, n - 1)
    return int(n[ok][0]) if ok.any() else None


def flag_variation(ops_per_s_runs: Sequence[float], threshold: float = 0.10,
                   alpha: float = VARIATION_ALPHA) -> Flag | None:
    """The runs' spread is above the ``threshold``'s (a relative range of ``threshold`` over 10
    runs), beyond chance (:func:`spread_above_p` < ``alpha``): ``verdict`` "above". A relative
    range over the threshold that the test cannot tell from the threshold's own spread is
    ``verdict`` "inconclusive" and says how many runs would decide (a range grows with the runs,
    so 10 runs at exactly the threshold's spread pass it half the time). The spread is the one
    measured here, the machine's own included: only a same-configuration baseline beside it (the
    one 'fsscope replicate cao' measures, Cao et al.'s) can tell the file system's part from the machine's."""
    s = variation_summary(ops_per_s_runs)
    if s.runs < 2:
        return None
    p, sd, sd0 = spread_above_p(ops_per_s_runs, threshold)
    x = np.asarray(ops_per_s_runs, dtype=np.float64)
    # a run that measured no throughput is a spread no log-sd can hold (its log is -inf): the
    # test above leaves it out, so it is named here and decides "above" on its own
    stalled = [int(k) + 1 for k in np.flatnonzero(~(np.isfinite(x) & (x > 0)))]
    if stalled:
        p = 0.0
    above = p < alpha
    if not (above or s.relative_range > threshold):
        return None
    measured = (f"cumulative throughput varies {s.relative_range:.0%} across {s.runs} runs "
                f"(relative range; RSD {s.rsd:.1%}; {s.min:.0f}..{s.max:.0f} ops/s)")
    whose = ("This is the spread measured here, the machine's own included: whether it is the file "
             "system's needs a same-configuration baseline measured beside it on this machine (as "
             "'fsscope replicate cao' does, after Cao et al.).")
    details = {"relative_range": s.relative_range, "rsd": s.rsd, "threshold": threshold,
               "verdict": "above" if above else "inconclusive", "p": p, "alpha": alpha,
               "sd": sd, "threshold_sd": sd0}
    if stalled:
        return Flag("variation",
                    f"{measured}: run{'s' if len(stalled) > 1 else ''} {', '.join(map(str, stalled))} "
                    f"had no throughput (0 ops/s or none recorded), a spread above any threshold: one run is not a reliable "
                    f"result for this setup. {whose}", details | {"stalled_runs": stalled})
    if above:
        return Flag("variation",
                    f"{measured}: its sd {sd:.1%} is above {sd0:.1%}, the sd a {threshold:.0%} range over 10 runs "
                    f"stands for "
                    f"(chi-square p = {p:.2g} < {alpha:g}): one run is not a reliable result for this "
                    f"setup. {whose}", details)
    more = runs_to_decide_spread(sd, sd0, s.runs, alpha)
    decide = (f"about {more} runs would decide" if more is not None else
              f"its sd {sd:.1%} is not above the threshold's, so more runs would likely show it within"
              if not sd > sd0 else f"more than {VARIATION_RUNS_CAP} runs would decide")
    return Flag("variation",
                f"{measured}, above the {threshold:.0%} threshold, but inconclusive: {s.runs} runs cannot "
                f"tell it from the threshold's own spread (sd {sd0:.1%}; chi-square p = {p:.2g} >= {alpha:g}); "
                f"{decide}. {whose}", details | {"runs_to_decide": more})


def warmup_windows(series: np.ndarray, tol: float = 0.10) -> int:
    """How many leading windows lie outside the steady band of the run's second half.

    The band is the 10th..90th percentile of the second half widened by ``tol`` x its median,
    so regular dips that recur all run long do not count as a warm-up -- and by at least three of
    the steady half's own robust sds (MAD): the percentiles of six windows understate a busy
    run's spread, and a first window 10 % off by chance was a warm-up in 9 % of steady loaded
    runs (window sd 10 %, the self-test's ``variation`` worlds; 4 % with three sds)."""
    x = np.asarray(series, dtype=np.float64)
    if x.size < 6:
        return 0
    steady = x[x.size // 2:]
    median = float(np.median(steady))
    spread = 1.4826 * float(np.median(np.abs(steady - median)))
    widen = max(tol * median, 3.0 * spread)
    lo = float(np.quantile(steady, 0.10)) - widen
    hi = float(np.quantile(steady, 0.90)) + widen
    k = 0
    while k < x.size // 2 and not (lo <= x[k] <= hi):
        k += 1
    return k


def detect_warmup(series: np.ndarray, window_s: float, tol: float = 0.10) -> Flag | None:
    """A transient at the start (cold caches ramping up, or an early peak while dirty data is
    still only in memory) before throughput settles."""
    x = np.asarray(series, dtype=np.float64)
    k = warmup_windows(x, tol)
    if k == 0:
        return None
    steady = float(np.median(x[x.size // 2:]))
    first = float(x[0])
    if first < steady:
        how = (f"starts at {first / steady:.0%} of the steady {steady:.0f} ops/s and ramps up "
               "(cold caches being filled)")
        direction = "ramp-up"
    else:
        how = (f"starts at {first / steady:.0%} of the steady {steady:.0f} ops/s and declines "
               "(writes absorbed by the page cache until writeback catches up)")
        direction = "initial-peak"
    return Flag("warmup",
                f"warm-up phase: Throughput-{window_s:g} {how}; it settles after "
                f"{k * window_s:g} s. Exclude the first {k * window_s:g} s or run longer "
                "when comparing steady-state throughput.",
                {"warmup_s": k * window_s, "windows": k, "direction": direction,
                 "window_s": window_s})


def autocorrelation(series: np.ndarray) -> np.ndarray:
    """Sample autocorrelation r(lag) for lag = 0..n-1 (biased estimator, r(0) = 1)."""
    x = np.asarray(series, dtype=np.float64)
    x = x - x.mean()
    denom = float((x * x).sum())
    if x.size == 0 or denom == 0:
        return np.zeros(max(x.size, 1))
    full = np.correlate(x, x, mode="full")[x.size - 1:]
    return full / denom


def detect_periodic(series: np.ndarray, window_s: float,
                    dirty_expire_centisecs: int | None = None,
                    dirty_writeback_centisecs: int | None = None,
                    min_acf: float = 0.3, skip_warmup: bool = True) -> Flag | None:
    """Periodic dips or spikes in Throughput-N, found by autocorrelation.

    The note compares the period with the kernel's writeback timing, passed in (read by the
    caller from /proc/sys/vm/dirty_expire_centisecs and dirty_writeback_centisecs) so this
    stays pure: the flusher wakes every ``dirty_writeback`` and writes pages dirty for longer
    than ``dirty_expire``; a period equal to either points at writeback bursts."""
    x = np.asarray(series, dtype=np.float64)
    if skip_warmup:
        x = x[warmup_windows(x):]
    n = x.size
    if n < 6:
        return None
    acf = autocorrelation(x)
    max_lag = n // 3                        # at least three periods in the series
    if max_lag < 2:
        return None
    lags = np.arange(2, max_lag + 1)
    # local maxima of the ACF (a lag whose neighbours are lower)
    peaks = [lag for lag in lags if acf[lag] >= acf[lag - 1] and (lag + 1 >= n or acf[lag] >= acf[lag + 1])]
    if not peaks:
        return None
    best = max(acf[lag] for lag in peaks)
    threshold = max(min_acf, 2.0 / math.sqrt(n))
    if best < threshold:
        return None
    lag = min(lag for lag in peaks if acf[lag] >= 0.8 * best)   # the fundamental, not a harmonic
    period_s = lag * window_s
    phases = np.array([x[p::lag].mean() for p in range(lag)])
    mean = float(x.mean())
    dips = (mean - phases.min()) >= (phases.max() - mean)
    amplitude = float((phases.max() - phases.min()) / mean) if mean else math.nan
    what = "dips" if dips else "spikes"
    note = (f"Throughput-{window_s:g} {what} every {period_s:g} s "
            f"(autocorrelation {acf[lag]:.2f} at lag {lag}, amplitude {amplitude:.0%})")
    details: dict[str, Any] = {"period_s": period_s, "acf": float(acf[lag]), "lag_windows": int(lag),
                               "amplitude": amplitude, "shape": what, "window_s": window_s}
    tolerance_s = max(window_s, 0.15 * period_s)
    if dirty_expire_centisecs is None and dirty_writeback_centisecs is None:
        note += "; compare with the kernel's dirty-page writeback intervals (not provided)."
    else:
        expire_s = (dirty_expire_centisecs or 0) / 100.0
        writeback_s = (dirty_writeback_centisecs or 0) / 100.0
        details.update(dirty_expire_s=expire_s, dirty_writeback_s=writeback_s)
        intervals = (f"the flusher wakes every {writeback_s:g} s (vm.dirty_writeback_centisecs = "
                     f"{dirty_writeback_centisecs}) and writes back data dirty for longer than "
                     f"{expire_s:g} s (vm.dirty_expire_centisecs = {dirty_expire_centisecs})")
        if dirty_expire_centisecs and abs(period_s - expire_s) <= tolerance_s:
            details["matches"] = "dirty_expire"
            note += (f". The period matches the dirty expiry interval: {intervals}, so these are "
                     "likely bursts of expired dirty pages being written back.")
        elif dirty_writeback_centisecs and abs(period_s - writeback_s) <= tolerance_s:
            details["matches"] = "dirty_writeback"
            note += (f". The period matches the flusher wake-up interval: {intervals}, so these "
                     "are likely periodic writeback passes.")
        else:
            details["matches"] = None
            note += (f". It matches neither writeback interval ({intervals}); look for another "
                     "cyclic activity (journal commit interval, a timer, a background daemon).")
    return Flag("periodic", note, details)


MIN_WINDOWS_TO_DISAGREE = 3


def flag_window_disagreement(per_run_tn: Sequence[np.ndarray], window_s: float,
                             ops_per_s_runs: Sequence[float], threshold: float = 0.10,
                             min_fraction: float = 0.2, min_windows: int = MIN_WINDOWS_TO_DISAGREE
                             ) -> Flag | None:
    """Short windows that disagree with the cumulative stability verdict (the paper's XFS case:
    about 2 % variation cumulatively but over 30 % in most Throughput-120 windows), or the
    reverse: cumulatively unstable although most windows agree across runs. Needs at least
    ``min_windows`` complete windows per run: with one or two, "most windows" and "a few
    windows" mean nothing, and a run's partial last window (counted cumulatively, dropped from
    Throughput-N) alone can make the two verdicts differ."""
    bands = throughput_bands(per_run_tn, window_s)
    rr_windows = bands.relative_range[np.isfinite(bands.relative_range)]
    cumulative = relative_range(ops_per_s_runs)
    if rr_windows.size < max(1, min_windows) or math.isnan(cumulative) or len(per_run_tn) < 2:
        return None
    above = rr_windows > threshold
    fraction = float(above.mean())
    worst = int(np.nanargmax(bands.relative_range))
    details = {"window_s": window_s, "cumulative_relative_range": cumulative,
               "fraction_windows_above": fraction, "max_window_relative_range": float(rr_windows.max()),
               "max_at_s": worst * window_s, "threshold": threshold}
    if cumulative <= threshold and fraction >= min_fraction:
        return Flag("window_disagrees",
                    f"cumulative throughput is stable across runs ({cumulative:.1%} relative range) "
                    f"but Throughput-{window_s:g} varies more than {threshold:.0%} in {fraction:.0%} "
                    f"of the windows (up to {rr_windows.max():.0%} at {worst * window_s:g} s): "
                    "short-term performance is not reproducible even though the total is",
                    details)
    if cumulative > threshold and fraction < min_fraction:
        return Flag("window_disagrees",
                    f"cumulative throughput varies {cumulative:.1%} across runs, yet only "
                    f"{fraction:.0%} of the Throughput-{window_s:g} windows vary more than "
                    f"{threshold:.0%}: the difference comes from a few windows (look at the "
                    f"worst, at {worst * window_s:g} s) rather than from the whole run",
                    details)
    return None


def compare_recipes(a_ops_per_s: Sequence[float], b_ops_per_s: Sequence[float],
                    a_tn: Sequence[np.ndarray], b_tn: Sequence[np.ndarray], window_s: float,
                    labels: tuple[str, str] = ("a", "b"), alpha: float = 0.05
                    ) -> tuple[WelchResult, Flag | None]:
    """Welch verdict on cumulative throughput, plus a flag naming the windows in which the
    other recipe is significantly better (the verdict flips with the time window)."""
    verdict = welch(a_ops_per_s, b_ops_per_s, alpha=alpha, labels=labels)
    if verdict.winner is None:
        return verdict, None
    ma, mb = run_matrix(a_tn), run_matrix(b_tn)
    n = min(ma.shape[1], mb.shape[1]) if ma.size and mb.size else 0
    flipped = []
    for w in range(n):
        per_window = welch(ma[:, w], mb[:, w], alpha=alpha, labels=labels)
        if per_window.winner is not None and per_window.winner != verdict.winner:
            flipped.append(w)
    if not flipped:
        return verdict, None
    times = ", ".join(f"{w * window_s:g} s" for w in flipped[:8]) + (" ..." if len(flipped) > 8 else "")
    loser = labels[1] if verdict.winner == labels[0] else labels[0]
    flag = Flag("window_disagrees",
                f"{verdict.winner} wins on cumulative throughput, but {loser} is significantly "
                f"faster in {len(flipped)} of {n} Throughput-{window_s:g} windows (starting at {times}): "
                "the ranking depends on how long you measure",
                {"window_s": window_s, "windows": flipped, "winner": verdict.winner})
    return verdict, flag
