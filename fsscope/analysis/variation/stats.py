"""Statistical tests on run-to-run variation: Pearson, Welch, whether a spread changed
(range_change), and a ladder of configurations against the paper's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from fsscope.analysis.variation.metrics import relative_range, rsd


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


def welch(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, alpha: float = 0.05,
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
class PaperLadder(NamedTuple):
    """Cao et al.'s ladder (Fig. 3): the first and last step with their relative range, over
    how many runs."""

    first: tuple[str, float]
    last: tuple[str, float]
    runs: int


PAPER_LADDER = PaperLadder(first=("baseline", 0.47), last=("alloc", 0.02), runs=10)
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
    parts = _paper_parts(kept, bool(rose), alpha)
    verdict, paper, because = _paper_verdict(parts)
    text = (f"relative range {path}: {_steps_text(changes, rose)}. Against the paper ({paper['paper']}): "
            f"{verdict} — {because}")
    paper_direction = {"agree": True, "disagree": False}.get(parts["direction"]["verdict"])
    return LadderVerdict(ranges, monotone, paper_direction, changes, text, paper)


def _steps_text(changes: list[tuple[str, str, RangeChange]], rose: list[str]) -> str:
    """What the steps did, one after the other: a decided rise first, else where it fell."""
    if rose:
        return "it rose beyond its runs' noise at " + "; ".join(rose)
    fell = [b for _, b, c in changes if c.verdict == "fell"]
    undecided = [b for _, b, c in changes if c.verdict == "inconclusive"]
    if not fell:
        return "no step's change is decided by its runs"
    return f"fell at {', '.join(fell)}" + (f", undecided at {', '.join(undecided)}" if undecided else "")


def _paper_parts(kept: list[tuple[str, list[float]]], rose: bool, alpha: float) -> dict[str, dict]:
    """The ladder against the paper, part by part: its direction (first step to last, no
    decided rise) and, when the last step is the paper's last, its level."""
    (first, ops_first), (last, ops_last) = kept[0], kept[-1]
    whole = range_change(ops_first, ops_last, alpha)
    direction = {"verdict": "agree" if whole.verdict == "fell" and not rose else
                 "disagree" if whole.verdict == "rose" or rose else "inconclusive",
                 "why": f"{first} -> {last}: {whole.note}", "runs_to_decide": whole.runs_to_decide}
    parts = {"direction": direction}
    paper_last, paper_level = PAPER_LADDER.last
    if last == paper_last:
        parts["level"] = level_vs_paper(ops_last, paper_level, PAPER_LADDER.runs, alpha)
    return parts


def _paper_verdict(parts: dict[str, dict]) -> tuple[str, dict[str, Any], str]:
    """(verdict, the report's ``paper`` record, why in words) from the parts' verdicts."""
    paper_last, paper_level = PAPER_LADDER.last
    verdicts = [p["verdict"] for p in parts.values()]
    verdict = ("disagree" if "disagree" in verdicts else "agree" if set(verdicts) == {"agree"}
               else "inconclusive")
    needed = [p["runs_to_decide"] for p in parts.values() if p["verdict"] == "inconclusive" and p["runs_to_decide"]]
    why = "; ".join(f"{name} {p['verdict']}: {p['why']}" for name, p in parts.items())
    paper = {"verdict": verdict, "why": why, "runs_to_decide": max(needed) if needed else None, **parts,
             "paper": f"{PAPER_LADDER.first[0]} {PAPER_LADDER.first[1]:.0%} → {paper_last} "
                      f"~{paper_level:.0%} over {PAPER_LADDER.runs} runs (Cao et al., Fig. 3)"}
    if verdict == "inconclusive":
        because = ", ".join(f"about {p['runs_to_decide']} runs a step would decide the {name}"
                            if p["runs_to_decide"] else f"no practical number of runs would decide the {name}"
                            for name, p in parts.items() if p["verdict"] == "inconclusive")
    else:
        because = "; ".join(f"{name}: {p['why']}" for name, p in parts.items() if p["verdict"] == verdict)
    return verdict, paper, because
