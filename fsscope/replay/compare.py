"""Recipes compared on one replayed log, per call type, with Welch's t-test (as ``bench
--recipes`` compares throughput): a winner only where the difference is significant.

The samples are the runs' mean latencies of the call type (a run is the independent unit:
calls within one run share its file system's state). With fewer than two runs a side there
is no test, and the verdict says how many runs would let one be made.
"""

from __future__ import annotations

import math
from typing import Any

from fsscope.analysis.variation.stats import welch
from fsscope.records import Record


class OpPair(Record, frozen=True, kw_only=True):
    op: str
    a: str
    b: str
    mean_a_us: float | None = None
    mean_b_us: float | None = None
    t: float | None = None
    p: float | None = None
    winner: str | None = None      # the recipe whose calls were faster, only when p < alpha
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

    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ops_a = {o["op"] for o in reports[a].get("ops", [])}
            for op in [o["op"] for o in reports[b].get("ops", []) if o["op"] in ops_a]:
                res = welch(means(a, op), means(b, op), alpha=alpha, higher_is_better=False, labels=(a, b))
                note = res.note
                if res.winner is None and len(means(a, op)) < 2:
                    note += " (--runs 2 or more gives a test)"
                pairs.append(OpPair(op=op, a=a, b=b, mean_a_us=_finite(res.mean_a), mean_b_us=_finite(res.mean_b),
                                    t=_finite(res.t), p=_finite(res.p), winner=res.winner, note=note))
    return ReplayComparison(alpha=alpha, recipes=names, pairs=pairs)
