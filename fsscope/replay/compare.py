"""Recipes compared on one replayed log, per call type, with Welch's t-test (as ``bench
--recipes`` compares throughput): a winner only where the difference is significant.

The samples are the runs' mean latencies of the call type (a run is the independent unit:
calls within one run share its file system's state). With fewer than two runs a side there
is no test, and the verdict says how many runs would let one be made.
"""

from __future__ import annotations

import math
from typing import Any

from fsscope.analysis.compare import Row, Section, compare_replay, row
from fsscope.analysis.variation.stats import welch
from fsscope.records import Record, plain


class OpPair(Record, frozen=True, kw_only=True):
    op: str
    a: str
    b: str
    mean_a_us: float | None = None     # the mean of the runs' means (the tested samples)
    mean_b_us: float | None = None
    median_a_us: float | None = None   # every run's calls pooled
    median_b_us: float | None = None
    t: float | None = None
    p: float | None = None
    winner: str | None = None      # the recipe whose calls were faster, only when p < alpha
    verdict: str = ""              # "a faster" / "b faster" / "not significant" / "inconclusive (...)"
    note: str = ""


class ReplayComparison(Record, frozen=True, kw_only=True):
    alpha: float = 0.05
    recipes: list[str] = []
    pairs: list[OpPair] = []


def _finite(x: float) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), 4)


def compare_replays(reports: dict[str, dict[str, Any]], alpha: float = 0.05) -> ReplayComparison:
    """Every pair of recipes, every call type both replayed: Welch on the runs' mean latency."""
    names = list(reports)

    def means(name: str, op: str) -> list[float]:
        return [r["mean_us"][op] for r in reports[name].get("runs", []) if op in (r.get("mean_us") or {})]

    def median(name: str, op: str) -> float | None:
        return next((_finite(o.get("p50_us")) for o in reports[name].get("ops", []) if o["op"] == op), None)

    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ops_a = {o["op"] for o in reports[a].get("ops", [])}
            for op in [o["op"] for o in reports[b].get("ops", []) if o["op"] in ops_a]:
                sa, sb = means(a, op), means(b, op)
                res = welch(sa, sb, alpha=alpha, higher_is_better=False, labels=(a, b))
                note = res.note
                if min(len(sa), len(sb)) < 2:
                    # no test: neither "the same" nor a winner
                    verdict = f"inconclusive (n too small: {len(sa)} and {len(sb)} run(s); --runs 2 or more gives a test)"
                    note += " (--runs 2 or more gives a test)"
                elif res.winner is not None:
                    verdict = f"{res.winner} faster (p < {alpha:g})"
                else:
                    verdict = f"not significant (p >= {alpha:g})"
                pairs.append(OpPair(op=op, a=a, b=b, mean_a_us=_finite(res.mean_a), mean_b_us=_finite(res.mean_b),
                                    median_a_us=median(a, op), median_b_us=median(b, op), t=_finite(res.t),
                                    p=_finite(res.p), winner=res.winner, verdict=verdict, note=note))
    return ReplayComparison(alpha=alpha, recipes=names, pairs=pairs)


def welch_section(a: Any, b: Any, alpha: float = 0.05) -> Section:
    """Two replay reports (A, B) compared per call type as ``replay --recipes`` compares its
    recipes (:func:`compare_replays`), as rows for ``fsscope compare`` and the TUI's Compare."""
    comparison = compare_replays({"A": plain(a), "B": plain(b)}, alpha)
    rows: list[Row] = []
    for p in comparison.pairs:
        rows += [row(f"{p.op} mean of runs' means µs", p.mean_a_us, p.mean_b_us),
                 row(f"{p.op} median µs", p.median_a_us, p.median_b_us),
                 Row(metric=f"{p.op} Welch t", a=p.t, b=p.t, kind="num"),
                 Row(metric=f"{p.op} Welch p", a=p.p, b=p.p, kind="p"),
                 row(f"{p.op} verdict", p.verdict, p.verdict, "text")]
    return Section(title=f"per call type, Welch's t-test on the runs' mean latency (a winner only when p < {alpha:g})",
                   rows=rows)


def sections(a: Any, b: Any) -> list[Section]:
    """The replay job's comparer: the figures both reports hold (p50, p99, calls/s per call
    type) and the Welch table per call type that ``replay --recipes`` makes."""
    return [*compare_replay(a, b), welch_section(a, b)]
