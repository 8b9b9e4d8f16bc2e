"""A series, level shift or ramp stands only when the matrix's own noise, its files shuffled
within each run, does not give one as strong (a permutation test of each finding).

The series search's ``chance`` is an expected count under candidates placed at random with
one density, and a shift's z under one noise level; a loaded run, heavy tails or unmeasured
calls can make either too kind. So each finding is held to :data:`NULL_WORLDS` null worlds
made from the matrix itself: every run's latencies permuted over its files (each run its own
permutation), which keeps each run's level, spread and share of slow calls and removes every
place-bound structure -- what a finding claims. The same analysis runs on each null world;
a finding is kept only when no null world's strongest finding of its kind is as strong
(a series' chance at least as small, a shift's or a ramp's rise at least as large), so the
chance of keeping one from noise is at most 1 / (NULL_WORLDS + 1) = :data:`FALSE_FLAG_BOUND`
(the max statistic over the world: one bound for every finding of a kind at once).

Cheap on purpose: a series whose chance is below :data:`SURE_CHANCE` is not searched for
(no permuted world would give one, see there); the null worlds' series search is asked only
for chains as unlikely as the weakest series still standing; the segmentation runs only while
a shift or a ramp stands, and the worlds stop once every finding fell. Circular
shifts of the runs were the other null tried: they keep each run's own periodic structure,
and with 3-5 runs two runs' phases often meet, so a real XFS chunk series met itself in a
null world and fell; the permutation null holds a finding to the noise, and repetition
(the runs) to alignment.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from fsscope.analysis.findings import LevelShift, LinearGrowth, Series

#: Null worlds per analysis: with none as strong, p = 1 / 20.
NULL_WORLDS = 19
FALSE_FLAG_BOUND = 1 / (NULL_WORLDS + 1)
#: A series at most this likely by chance is not searched for in the null worlds: a permuted
#: world places its candidates at random at one density -- the chance's own assumption, which
#: holds there -- so a chain that unlikely turns up in one of them about that often, and the
#: worlds would take such a series back some 19 x 1e-6 = 2e-5 of the time. Searching for it
#: would cost a whole series search per world for no decision.
SURE_CHANCE = 1e-6


@dataclass(frozen=True)
class Found:
    """What one analysis of a matrix found (the per-file median curve for the ramps' level)."""

    series: list[Series]
    level_shifts: list[LevelShift]
    linear_growth: list[LinearGrowth]
    curve_ns: NDArray[np.float64] = field(repr=False)


#: (matrix as given: runs x files, < 0 unmeasured; the least series chance wanted, or None for
#: no series search; search shifts and ramps?) -> what the analysis finds on it
Search = Callable[[NDArray, float | None, bool], Found]


@dataclass(frozen=True)
class Gated:
    series: list[Series]
    level_shifts: list[LevelShift]
    linear_growth: list[LinearGrowth]
    rejected: list[dict]  # each finding a null world matched: kind, where, its score and the null's
    worlds: int           # null worlds drawn (fewer than NULL_WORLDS once every finding fell)
    levels: bool          # were shifts and ramps held to them too?

    def to_json(self) -> dict:
        return {"worlds": self.worlds, "bound": round(FALSE_FLAG_BOUND, 3), "null": "files permuted within runs",
                "gated": ["series", "level_shifts", "linear_growth"] if self.levels else ["series"],
                "sure_chance": SURE_CHANCE,
                "rejected": self.rejected}


def series_score(series: Series) -> float:
    """-log of its chance (larger: less likely from noise)."""
    return -math.log(max(series.chance if series.chance is not None else 1.0, 1e-300))


def shift_score(shift: LevelShift) -> float:
    """|log| of the step."""
    return abs(math.log(max(shift.after_ns, 1) / max(shift.before_ns, 1)))


def growth_score(growth: LinearGrowth, curve_ns: NDArray[np.float64]) -> float:
    """|log| of the rise (or fall) over the ramp, from its level at the start to its level at the end."""
    level = curve_ns[growth.start:growth.end]
    middle = float(np.nanmedian(level)) if level.size and not np.isnan(level).all() else 0.0
    half = growth.slope_ns_per_file * (growth.end - growth.start) / 2
    low, high = middle - half, middle + half
    return abs(math.log(high / low)) if low > 0 and high > 0 else math.inf


def _seed(matrix: NDArray) -> np.random.Generator:
    """The same matrix draws the same null worlds: an analysis is reproducible."""
    return np.random.default_rng([int(matrix.shape[0]), int(matrix.shape[1]), 34])


def gate(matrix: NDArray, found: Found, search: Search, *, worlds: int = NULL_WORLDS, levels: bool = True) -> Gated:
    """``found`` less what a null world of ``matrix`` matches (see the module doc); its shifts
    and ramps only when ``levels`` (each null world then costs a segmentation: ~0.2-0.5 s
    here, bounded by the segmentation's 2,048 bins whatever the file count)."""
    standing: dict[str, dict[int, float]] = {
        "series": {n: series_score(s) for n, s in enumerate(found.series) if series_score(s) < -math.log(SURE_CHANCE)},
        "level_shifts": {n: shift_score(s) for n, s in enumerate(found.level_shifts)} if levels else {},
        "linear_growth": {n: growth_score(g, found.curve_ns) for n, g in enumerate(found.linear_growth)}
        if levels else {}}
    rejected: list[dict] = []
    drawn = 0
    if matrix.shape[0] >= 2 and any(standing.values()):  # one run: nothing aligns across runs to shuffle away
        rng = _seed(matrix)
        # One world at a time in one buffer, filled run by run: a list of permuted rows stacked
        # held the world twice over (and the last world a third time), 240 MB at 10 x 1,000,000.
        # int32 while every value fits (calls under 2.1 s, and the -1 marks): half of that
        # buffer; the same values, so the same worlds. A row that does not fit widens it.
        wide = np.dtype(getattr(matrix, "dtype", np.int64))
        null_matrix = np.empty(matrix.shape, dtype=np.int32)
        while drawn < worlds and any(standing.values()):
            drawn += 1
            # each run its own permutation (Generator.permuted along an axis took 0.2 s at 10 x 100,000)
            for r, row in enumerate(matrix):
                if null_matrix.dtype != wide and not _fits_int32(row):
                    null_matrix = null_matrix.astype(wide)  # the rows so far were exact
                np.take(row, rng.permutation(row.size), out=null_matrix[r])
            weakest = min(standing["series"].values(), default=None)
            null = search(null_matrix, None if weakest is None else math.exp(-weakest),
                          bool(standing["level_shifts"] or standing["linear_growth"]))
            best = {"series": max((series_score(s) for s in null.series), default=-math.inf),
                    "level_shifts": max((shift_score(s) for s in null.level_shifts), default=-math.inf),
                    "linear_growth": max((growth_score(g, null.curve_ns) for g in null.linear_growth),
                                         default=-math.inf)}
            for kind, scores in standing.items():
                for n, score in list(scores.items()):
                    if best[kind] >= score:
                        del scores[n]
                        rejected.append({"kind": kind, "index": n, "finding": _where(getattr(found, kind)[n]),
                                         "score": round(score, 3), "null_score": round(best[kind], 3),
                                         "world": drawn})

    fell = {(r["kind"], r["index"]) for r in rejected}

    def kept(kind: str) -> list:
        return [f for n, f in enumerate(getattr(found, kind)) if (kind, n) not in fell]

    return Gated(series=kept("series"), level_shifts=kept("level_shifts"), linear_growth=kept("linear_growth"),
                 rejected=rejected, worlds=drawn, levels=levels)


def _fits_int32(row: NDArray) -> bool:
    """Integers, every one representable as an int32."""
    limits = np.iinfo(np.int32)
    return row.dtype.kind in "iu" and (row.size == 0 or (int(row.min()) >= limits.min and int(row.max()) <= limits.max))


def _where(finding: Series | LevelShift | LinearGrowth) -> dict:
    if isinstance(finding, Series):
        return {"start": finding.start, "stride": finding.stride, "count": finding.count, "chance": finding.chance}
    if isinstance(finding, LevelShift):
        return {"index": finding.index, "before_ns": finding.before_ns, "after_ns": finding.after_ns}
    return {"start": finding.start, "end": finding.end, "slope_ns_per_file": finding.slope_ns_per_file}
