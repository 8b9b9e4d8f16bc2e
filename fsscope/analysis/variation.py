"""Run-to-run and temporal performance variation (Cao et al., FAST'17), pure numpy.

Everything here is a pure function of arrays (and of plain numbers passed in, such as the
kernel's dirty-page intervals), so it can be tested with synthetic data of known answer and
re-run on stored arrays without the machine that produced them.

Vocabulary (the paper's):

- *Throughput-N*: ops/s in consecutive N-second windows of one run; *cumulative throughput*
  is Throughput-(whole run).
- *relative range* = (max - min) / mean across runs: the paper's main metric because it does
  not hide outliers the way the RSD's square root does; *RSD* = sample std (ddof=1) / mean.
- The *K-S distance* between two latency distributions is the largest vertical gap between
  their CDFs; the *K-S range* of one op across runs is the largest pairwise distance.

Latency histograms use one fixed log-bucketed grid (:data:`N_BUCKETS` buckets, HDR style with
128 sub-buckets per power of two), so histograms from different runs, windows and workers add
up exactly and a percentile read from one is within 0.4 % of the true value. Workloads record
into this grid so that memory stays bounded for long runs (see ``fsscope.workloads.personalities``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Protocol

import numpy as np

from fsscope.records import plain

# ---------------------------------------------------------------------------------------------
# Log-bucketed latency histogram grid
# ---------------------------------------------------------------------------------------------

SUB_BITS = 7                   # 128 sub-buckets per power of two: bucket width <= 1/128 of value
_SUB = 1 << SUB_BITS
MAX_EXP = 41                   # values >= 2**41 ns (~36.6 min) land in the last bucket
N_BUCKETS = (MAX_EXP - SUB_BITS - 1) * _SUB + 2 * _SUB   # 4480
_MAX_VALUE_NS = (1 << MAX_EXP) - 1


def bucket_index_one(latency_ns: int) -> int:
    """Bucket of one latency (pure Python, for per-call use in worker loops)."""
    if latency_ns < 0:
        latency_ns = 0
    elif latency_ns > _MAX_VALUE_NS:
        latency_ns = _MAX_VALUE_NS
    exp = latency_ns.bit_length() - (SUB_BITS + 1)
    if exp <= 0:
        return latency_ns
    return (exp << SUB_BITS) + (latency_ns >> exp)


def bucket_index(latency_ns: np.ndarray) -> np.ndarray:
    """Bucket of every latency (int64 ns array) on the shared grid: values < 256 ns are exact."""
    values = np.clip(np.asarray(latency_ns, dtype=np.int64), 0, _MAX_VALUE_NS)
    # frexp is exact for integers < 2**53: its exponent is the bit length.
    _, bit_length = np.frexp(values.astype(np.float64))
    exp = np.maximum(bit_length.astype(np.int64) - (SUB_BITS + 1), 0)
    return (exp << SUB_BITS) + (values >> exp)


def bucket_lower_ns(index: np.ndarray | int) -> np.ndarray:
    """Smallest latency that falls into each bucket."""
    idx = np.asarray(index, dtype=np.int64)
    exp = np.maximum((idx >> SUB_BITS) - 1, 0)
    return (idx - (exp << SUB_BITS)) << exp


def bucket_width_ns(index: np.ndarray | int) -> np.ndarray:
    idx = np.asarray(index, dtype=np.int64)
    return np.int64(1) << np.maximum((idx >> SUB_BITS) - 1, 0)


def bucket_mid_ns(index: np.ndarray | int) -> np.ndarray:
    """Representative value of each bucket (its midpoint): within 0.4 % of any member."""
    return bucket_lower_ns(index) + (bucket_width_ns(index) - 1) / 2.0


def latency_histogram(latency_ns: np.ndarray) -> np.ndarray:
    """Counts per bucket (int64, length :data:`N_BUCKETS`) of raw latencies."""
    idx = bucket_index(latency_ns)
    return np.bincount(idx, minlength=N_BUCKETS).astype(np.int64)


def hist_percentile_ns(hist: np.ndarray, q: float) -> float:
    """The q-th percentile (0..100, nearest rank) of a bucket histogram; nan when empty."""
    hist = np.asarray(hist)
    total = int(hist.sum())
    if total == 0:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * total))
    idx = int(np.searchsorted(np.cumsum(hist), rank))
    return float(bucket_mid_ns(idx))


# ---------------------------------------------------------------------------------------------
# Throughput and its variation
# ---------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------
# Latency distributions across runs
# ---------------------------------------------------------------------------------------------

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


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation coefficient; nan when either side is constant or too short."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size < 3 or a.std() == 0 or b.std() == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def latency_throughput_pcc(throughput_ranges: Sequence[float],
                           op_ks_ranges: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """The paper's Fig. 9: across recipes, PCC between the throughput relative range and each
    op's latency K-S range (> 0.7 is conventionally a strong correlation)."""
    return {op: pearson(throughput_ranges, ranges) for op, ranges in op_ks_ranges.items()}


@dataclass(frozen=True)
class WelchResult:
    t: float
    p: float
    df: float
    mean_a: float
    mean_b: float
    winner: str | None          # label of the better side, only when p < alpha
    note: str


def welch(a: Sequence[float], b: Sequence[float], alpha: float = 0.05,
          higher_is_better: bool = True, labels: tuple[str, str] = ("a", "b")) -> WelchResult:
    """Welch's unequal-variance t-test; names a winner only when the difference is significant."""
    from scipy import stats  # local: scipy import is slow and only needed here

    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    mean_a = float(x.mean()) if x.size else math.nan
    mean_b = float(y.mean()) if y.size else math.nan
    if x.size < 2 or y.size < 2:
        return WelchResult(math.nan, math.nan, math.nan, mean_a, mean_b, None,
                           "need at least 2 runs per side for a t-test")
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    if va + vb == 0:
        if mean_a == mean_b:
            return WelchResult(math.nan, 1.0, math.nan, mean_a, mean_b, None, "identical results")
        t, p, df = math.copysign(math.inf, mean_a - mean_b), 0.0, float(x.size + y.size - 2)
    else:
        res = stats.ttest_ind(x, y, equal_var=False)
        t, p = float(res.statistic), float(res.pvalue)
        df = float((va + vb) ** 2 / (va ** 2 / (x.size - 1) + vb ** 2 / (y.size - 1)))
    winner = None
    if p < alpha:
        a_better = (mean_a > mean_b) == higher_is_better
        winner = labels[0] if a_better else labels[1]
        note = (f"{winner} is better (Welch t({df:.1f}) = {t:.2f}, p = {p:.3g} < {alpha})")
    else:
        note = (f"no significant difference (Welch t({df:.1f}) = {t:.2f}, p = {p:.3g} >= {alpha})")
    return WelchResult(t, p, df, mean_a, mean_b, winner, note)


@dataclass(frozen=True)
class RangeChange:
    """Did the relative range change from one set of runs (``a``) to the next (``b``)?"""

    range_a: float
    range_b: float
    p: float                    # one-sided: the chance of a growth this large if both were alike
    grew: bool                  # the test decides it rose (verdict "rose")
    note: str
    p_fell: float = math.nan    # one-sided: the chance of a fall this large if both were alike
    verdict: str = "inconclusive"   # "rose" | "fell" | "inconclusive"
    runs_to_decide: int | None = None  # runs a side that would likely decide it (undecided only)


#: Power a "runs to decide" estimate aims at.
POWER = 0.8


def runs_to_decide_spread(cv_a: float, cv_b: float, alpha: float = 0.05, power: float = POWER,
                          most: int = 1000) -> int | None:
    """Runs a side with which a change of spread from ``cv_a`` to ``cv_b`` (relative standard
    deviations) would be detected with probability ``power``: the variance-ratio F test's
    power, two-sided at ``alpha``, solved for n. An estimate (the observed spreads of a few runs
    are themselves noisy, and the permutation test on ranges is a little less powerful than
    F); None where nothing changed or more than ``most`` runs would be needed."""
    from scipy import stats

    if not (np.isfinite(cv_a) and np.isfinite(cv_b)) or min(cv_a, cv_b) <= 0 or cv_a == cv_b:
        return None
    ratio = (max(cv_a, cv_b) / min(cv_a, cv_b)) ** 2
    for n in range(2, most + 1):
        df = n - 1
        if stats.f.sf(stats.f.isf(alpha / 2, df, df) / ratio, df, df) >= power:
            return n
    return None


def range_change(a: Sequence[float], b: Sequence[float], alpha: float = 0.05) -> RangeChange:
    """Permutation tests of ``relative_range(b)`` against ``relative_range(a)``, each way
    (two-sided at ``alpha``: ``alpha / 2`` a side). Each side is divided by its own mean
    first, so only the spread is compared (a step may change the level: a cold cache is
    slower). Exact over every split up to 7 runs a side (3,432 splits), else 20,000 random
    ones; below 4 runs a side no split is rare enough to decide anything. The verdict is
    "rose" or "fell" only when its test decides it, else "inconclusive" with the runs a side
    that would likely decide a change as large as the one observed."""
    from scipy import stats  # local: scipy import is slow and only needed here

    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    ra, rb = relative_range(x), relative_range(y)
    if x.size < 2 or y.size < 2 or not (np.isfinite(ra) and np.isfinite(rb)):
        return RangeChange(ra, rb, math.nan, False, "need at least 2 runs a side", math.nan)
    xn, yn = x / x.mean(), y / y.mean()

    def growth(u, v, axis=-1):
        return np.ptp(v, axis=axis) - np.ptp(u, axis=axis)

    p_rose, p_fell = (float(stats.permutation_test((xn, yn), growth, permutation_type="independent",
                                                   alternative=side, vectorized=True, n_resamples=20_000,
                                                   random_state=0).pvalue)
                      for side in ("greater", "less"))
    runs = f"{x.size}+{y.size} runs"
    if p_rose < alpha / 2:
        verdict, needed = "rose", None
        note = f"{ra:.1%} -> {rb:.1%}: rose, grew beyond the noise of {runs} (permutation p = {p_rose:.3g})"
    elif p_fell < alpha / 2:
        verdict, needed = "fell", None
        note = f"{ra:.1%} -> {rb:.1%}: fell beyond the noise of {runs} (permutation p = {p_fell:.3g})"
    else:
        verdict = "inconclusive"
        needed = runs_to_decide_spread(rsd(x), rsd(y), alpha)
        if needed is not None:  # and no fewer than the permutation test needs to decide anything
            fewest = next(n for n in range(2, 64) if math.comb(2 * n, n) * alpha / 2 >= 1)
            needed = max(needed, fewest, max(x.size, y.size) + 1)
        way = "rise" if rb > ra else "fall" if rb < ra else "change"
        decide = (f"about {needed} runs a side would decide a {way} this large" if needed
                  else "no change large enough to decide with any practical number of runs")
        note = (f"{ra:.1%} -> {rb:.1%}: inconclusive, kept within the noise of {runs} "
                f"(permutation p = {min(p_rose, p_fell):.3g}); {decide}")
    return RangeChange(ra, rb, p_rose, verdict == "rose", note, p_fell, verdict, needed)


def ladder_steps(steps: Sequence[tuple[str, Sequence[float]]], alpha: float = 0.05
                 ) -> list[tuple[str, str, RangeChange]]:
    """(previous step, step, change) for each adjacent pair of steps with 2+ runs each."""
    kept = [(name, ops) for name, ops in steps if len(ops) > 1]
    return [(a, b, range_change(ops_a, ops_b, alpha)) for (a, ops_a), (b, ops_b) in zip(kept, kept[1:])]


#: Cao et al., Fig. 3 (Fileserver, Ext4-HDD): the relative range of 10 runs fell from 47 % at
#: baseline to about 2 % with +alloc.
PAPER_LADDER = {"first": ("baseline", 0.47), "last": ("alloc", 0.02), "runs": 10}
#: "About 2 %": agree when the last step's expected relative range over the paper's 10 runs is
#: surely below this multiple of it, disagree when surely above.
PAPER_LEVEL_TOLERANCE = 2.0


def expected_range_sd(n: int) -> float:
    """E[range] of n standard normal values (d2 of control charts: 1.128 for 2, 3.078 for 10)."""
    from scipy import integrate, stats

    if n < 2:
        return 0.0
    value, _ = integrate.quad(lambda t: 1 - stats.norm.cdf(t) ** n - stats.norm.sf(t) ** n, -np.inf, np.inf)
    return float(value)


def level_vs_paper(ops: Sequence[float], paper_range: float, paper_runs: int, alpha: float = 0.05,
                   tolerance: float = PAPER_LEVEL_TOLERANCE, most: int = 1000) -> dict[str, Any]:
    """Is the spread of ``ops`` about the paper's relative range ``paper_range`` over
    ``paper_runs`` runs? Compared as the relative range expected over the paper's number of
    runs (normal runs: d2(n) x RSD), with the chi-square interval of the RSD (1 - alpha):
    "agree" when the interval lies below ``tolerance`` x the paper's, "disagree" when above,
    else "inconclusive" with the runs that would narrow the interval enough."""
    from scipy import stats

    x = np.asarray(ops, dtype=np.float64)
    d = expected_range_sd(paper_runs)
    bound = tolerance * paper_range
    if x.size < 2 or not x.mean() > 0:
        return {"verdict": "inconclusive", "why": "need at least 2 runs", "runs_to_decide": 2}
    cv = rsd(x)

    def interval(n: int) -> tuple[float, float]:
        df = n - 1
        return (d * cv * math.sqrt(df / stats.chi2.isf(alpha / 2, df)),
                d * cv * math.sqrt(df / stats.chi2.ppf(alpha / 2, df)))

    lo, hi = interval(x.size)
    verdict = "agree" if hi <= bound else "disagree" if lo > bound else "inconclusive"
    needed = None
    if verdict == "inconclusive" and d * cv != bound:
        needed = next((n for n in range(x.size + 1, most + 1)
                       if (interval(n)[1] <= bound if d * cv < bound else interval(n)[0] > bound)), None)
    shown = f"{lo:.1%}–{hi:.1%}"
    why = (f"relative range expected over {paper_runs} runs {d * cv:.1%} (from RSD {cv:.2%} of {x.size} runs; "
           f"95 % interval {shown}) against the paper's ~{paper_range:.0%} (x{tolerance:g}: {bound:.0%})")
    return {"verdict": verdict, "why": why, "expected_range": d * cv, "interval": [lo, hi],
            "paper_range": paper_range, "bound": bound, "runs_to_decide": needed}


@dataclass(frozen=True)
class LadderVerdict:
    ranges: list                # (step, relative range) of the steps with 2+ runs
    monotone: bool              # every step's relative range <= the one before (descriptive)
    paper_direction: bool | None  # the fall from first to last step: True decided, False contradicted, None undecided
    changes: list               # (previous step, step, RangeChange) per adjacent pair
    text: str                   # "relative range baseline 40.0% -> ...: <verdict>"
    paper: dict = field(default_factory=dict)  # {"verdict": agree|disagree|inconclusive, "why", ...}


def ladder_verdict(steps: Sequence[tuple[str, Sequence[float]]], alpha: float = 0.05) -> LadderVerdict:
    """The hygiene ladder's verdict from each step's runs (ops/s), steps in ladder order; the
    job's report, the CLI and the TUI all say this one. Each step against the one before is
    "rose", "fell" or "inconclusive" (:func:`range_change`); the comparison with the paper
    (47 % at baseline to ~2 % with +alloc) is "agree" only when the data decide it: the first
    step to the last fell (decided), no step rose (decided), and the last step's spread is
    about the paper's (:func:`level_vs_paper`, when the last step is alloc); "disagree" when a
    rise is decided or the level is surely far from the paper's; else "inconclusive" with the
    runs that would decide it."""
    kept = [(name, list(ops)) for name, ops in steps if len(ops) > 1]
    ranges = [(name, relative_range(ops)) for name, ops in kept]
    changes = ladder_steps(steps, alpha)
    monotone = all(b <= a for (_, a), (_, b) in zip(ranges, ranges[1:]))
    path = " → ".join(f"{name} {rr:.1%}" for name, rr in ranges)
    if len(kept) < 2:
        return LadderVerdict(ranges, monotone, None, changes, f"relative range {path}",
                             {"verdict": "inconclusive", "why": "need 2+ runs in at least two steps",
                              "runs_to_decide": 2})
    rose = [f"{b} ({c.note})" for _, b, c in changes if c.verdict == "rose"]
    fell = [b for _, b, c in changes if c.verdict == "fell"]
    undecided = [b for _, b, c in changes if c.verdict == "inconclusive"]
    steps_text = ("it rose beyond its runs' noise at " + "; ".join(rose) if rose else
                  f"fell at {', '.join(fell)}" + (f", undecided at {', '.join(undecided)}" if undecided else "")
                  if fell else "no step's change is decided by its runs")
    (first, ops_first), (last, ops_last) = kept[0], kept[-1]
    whole = range_change(ops_first, ops_last, alpha)
    direction = {"verdict": "agree" if whole.verdict == "fell" and not rose else
                 "disagree" if whole.verdict == "rose" or rose else "inconclusive",
                 "why": f"{first} -> {last}: {whole.note}", "runs_to_decide": whole.runs_to_decide}
    parts = {"direction": direction}
    paper_last, paper_level = PAPER_LADDER["last"]
    if last == paper_last:
        parts["level"] = level_vs_paper(ops_last, paper_level, PAPER_LADDER["runs"], alpha)
    verdicts = [p["verdict"] for p in parts.values()]
    verdict = ("disagree" if "disagree" in verdicts else "agree" if set(verdicts) == {"agree"}
               else "inconclusive")
    needed = [p["runs_to_decide"] for p in parts.values() if p["verdict"] == "inconclusive" and p["runs_to_decide"]]
    why = "; ".join(f"{name} {p['verdict']}: {p['why']}" for name, p in parts.items())
    paper = {"verdict": verdict, "why": why, "runs_to_decide": max(needed) if needed else None, **parts,
             "paper": f"{PAPER_LADDER['first'][0]} {PAPER_LADDER['first'][1]:.0%} → {paper_last} "
                      f"~{paper_level:.0%} over {PAPER_LADDER['runs']} runs (Cao et al., Fig. 3)"}
    if verdict == "inconclusive":
        because = ", ".join(f"about {p['runs_to_decide']} runs a step would decide the {name}"
                            if p["runs_to_decide"] else f"no practical number of runs would decide the {name}"
                            for name, p in parts.items() if p["verdict"] == "inconclusive")
    else:
        because = "; ".join(f"{name}: {p['why']}" for name, p in parts.items() if p["verdict"] == verdict)
    text = f"relative range {path}: {steps_text}. Against the paper ({paper['paper']}): {verdict} — {because}"
    paper_direction = {"agree": True, "disagree": False}.get(direction["verdict"])
    return LadderVerdict(ranges, monotone, paper_direction, changes, text, paper)


# ---------------------------------------------------------------------------------------------
# Flags with explanatory notes
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Flag:
    """Something worth a user's attention, with a note saying what and why."""

    kind: str
    note: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "note": self.note, **plain(self.details)}


def flag_variation(ops_per_s_runs: Sequence[float], threshold: float = 0.10) -> Flag | None:
    """Cumulative throughput varies across runs by more than ``threshold`` relative range."""
    s = variation_summary(ops_per_s_runs)
    if s.runs < 2 or not (s.relative_range > threshold):
        return None
    return Flag("variation",
                f"cumulative throughput varies {s.relative_range:.0%} across {s.runs} runs "
                f"(relative range; RSD {s.rsd:.1%}; {s.min:.0f}..{s.max:.0f} ops/s), above the "
                f"{threshold:.0%} threshold: one run is not a reliable result for this setup",
                {"relative_range": s.relative_range, "rsd": s.rsd, "threshold": threshold})


def warmup_windows(series: np.ndarray, tol: float = 0.10) -> int:
    """How many leading windows lie outside the steady band of the run's second half.

    The band is the 10th..90th percentile of the second half widened by ``tol`` x its median,
    so regular dips that recur all run long do not count as a warm-up."""
    x = np.asarray(series, dtype=np.float64)
    if x.size < 6:
        return 0
    steady = x[x.size // 2:]
    median = float(np.median(steady))
    lo = float(np.quantile(steady, 0.10)) - tol * median
    hi = float(np.quantile(steady, 0.90)) + tol * median
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


# ---------------------------------------------------------------------------------------------
# JSON report from run results
# ---------------------------------------------------------------------------------------------

class RunLike(Protocol):
    """What the report needs from a run (``fsscope.workloads.personalities.RunResult``)."""

    op_names: tuple[str, ...]
    counts: np.ndarray            # op types x bins, completions per bin
    bin_s: float
    elapsed_s: float
    latency_hist: np.ndarray      # op types x N_BUCKETS, whole run


def run_ops_per_s(run: RunLike) -> float:
    return float(np.asarray(run.counts).sum() / run.elapsed_s) if run.elapsed_s > 0 else math.nan


def variation_report(personality: str, runs: Sequence[RunLike],
                     window_sizes_s: Sequence[float] = (10,), threshold: float = 0.10,
                     dirty_expire_centisecs: int | None = None,
                     dirty_writeback_centisecs: int | None = None,
                     extra_flags: Iterable[Flag] = ()) -> dict[str, Any]:
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
    return plain({"personality": personality, "runs": json_runs, "variation": variation,
                      "latency": latency, "flags": [fl.to_dict() for fl in flags]})
