"""``--duration auto``: how long a run must be, decided while it runs (Cao et al. ran each
workload until its cumulative throughput stabilised).

The criterion is :func:`fsscope.analysis.calibration.stable_after_s`'s (stated by
:func:`criterion_text`): the cumulative throughput's last ``points`` samples lie within
±``band`` of their mean and their trend moves less than ``band`` across them. A calibration
run stops at the first bin where that holds (and at least ``min_s`` have passed); the runs
that follow are that long.
"""

from __future__ import annotations

import math

import numpy as np

from fsscope.analysis.calibration import STABLE_POINTS, criterion_text, stable_after_s

BAND = 0.02      # ±2 % of the cumulative throughput
MIN_S = 5.0      # never shorter: the first seconds are start-up


def settled_at_s(counts_per_bin: np.ndarray, bin_s: float, band: float = BAND, min_s: float = MIN_S,
                 points: int = STABLE_POINTS) -> float | None:
    """The run length to use if the series so far has settled (its cumulative throughput
    meets the band test now), else None. Rounded up to a whole bin, at least ``min_s``."""
    counts = np.asarray(counts_per_bin, dtype=np.float64)
    if counts.ndim == 2:
        counts = counts.sum(axis=0)
    if counts.size * bin_s < min_s or counts.size < points:
        return None
    t = stable_after_s(counts, bin_s, band, points=points)
    if t is None:
        return None
    return float(max(min_s, math.ceil(t / bin_s) * bin_s))


def criterion(band: float = BAND, bin_s: float = 1.0, min_s: float = MIN_S) -> str:
    return criterion_text(band, bin_s) + f"; at least {min_s:g} s"
