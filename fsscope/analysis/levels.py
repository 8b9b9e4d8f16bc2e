"""Which knob levels the flagged configurations of a study share, and Pearson's r with its
p-value: the study's report and the TUI's variation view compute both from the same code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Level:
    fs: str
    knob: str
    level: object
    configurations: int             # configurations of this fs at this level
    flagged: int                    # of them flagged
    mean_relative_range: float | None
    varied: bool                    # the knob takes more than one level on this fs
    shared: bool                    # every flagged configuration of this fs has this level (knob varied)


def _level_order(value: object) -> tuple[str, object]:
    return str(type(value)), value


def knob_levels(configs: Sequence[tuple[str, Mapping[str, object], float | None, bool]]) -> list[Level]:
    """Per file system, knob and level of ``configs`` = (fs, knobs, relative range, flagged)."""
    out = []
    for fs in sorted({c[0] for c in configs}):
        mine = [c for c in configs if c[0] == fs]
        hot = [c for c in mine if c[3]]
        for knob in sorted({k for c in mine for k in c[1]}):
            levels = sorted({c[1].get(knob) for c in mine}, key=_level_order)
            for level in levels:
                at = [c for c in mine if c[1].get(knob) == level]
                ranges = [c[2] for c in at if c[2] is not None]
                n_hot = sum(1 for c in at if c[3])
                out.append(Level(fs, knob, level, len(at), n_hot, float(np.mean(ranges)) if ranges else None,
                                 varied=len(levels) > 1,
                                 shared=len(levels) > 1 and bool(hot) and all(c[1].get(knob) == level for c in hot)))
    return out


def pearson_with_p(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, float | None]:
    """Pearson r and its two-sided p-value; (None, None) below 3 points or for a constant side."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.size < 3 or a.std() == 0 or b.std() == 0:
        return None, None
    from scipy import stats  # scipy takes ~0.3 s to import: only when a correlation is asked for

    res = stats.pearsonr(a, b)
    return float(res.statistic), float(res.pvalue)
