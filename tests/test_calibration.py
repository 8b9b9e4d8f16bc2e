"""Calibration statistics of ``fsscope check`` on worked examples and synthetic series with
known answers (pure functions: no file system needed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fsscope.analysis import calibration as C


@pytest.mark.parametrize("cv, precision, t_runs, z_runs", [
    (0.05, 0.02, 27, 25),     # reference/preflight.md §3.2 worked numbers
    (0.10, 0.05, 18, 16),
    (0.01, 0.005, 18, 16),    # pyperf's default target, by t
])
def test_runs_needed_is_student_t_not_normal(cv, precision, t_runs, z_runs):
    assert C.runs_needed(cv, precision, 0.95) == t_runs
    assert C.runs_needed_normal(cv, precision, 0.95) == z_runs
    # the answer is the fixed point: n runs suffice, n-1 do not
    n = t_runs
    assert n >= (C.t_quantile(0.95, n - 1) * cv / precision) ** 2
    assert n - 1 < (C.t_quantile(0.95, n - 2) * cv / precision) ** 2


def test_runs_needed_edges():
    assert C.runs_needed(0.0, 0.05) == 2              # no spread: the minimum a t interval needs
    assert C.runs_needed(float("nan"), 0.05) is None
    assert C.runs_needed(0.5, 0.01) > C.runs_needed(0.5, 0.02) > C.runs_needed(0.5, 0.05)
    assert C.runs_needed(0.10, 0.05, 0.90) < C.runs_needed(0.10, 0.05, 0.95)


def test_ci_halfwidth_matches_runs_needed():
    rng = np.random.default_rng(3)
    values = 1000 * (1 + 0.05 * rng.standard_normal(27))
    cv = C.coefficient_of_variation(values)
    half = C.ci_relative_halfwidth(values)
    assert half == pytest.approx(C.t_quantile(0.95, 26) * cv / math.sqrt(27))
    assert C.cv_upper(cv, 27) > cv


def test_stable_after_constant_series_is_the_first_full_band():
    counts = np.full(60, 500)
    assert C.stable_after_s(counts, 1.0, band=0.025) == C.STABLE_POINTS * 1.0


def test_stable_after_known_plateau():
    # 30 s at 100 ops/s, then a plateau at 200: cumulative throughput creeps up as 1/t
    counts = np.r_[np.full(30, 100), np.full(270, 200)].astype(float)
    band = 0.025
    t = C.stable_after_s(counts, 1.0, band=band)
    assert t is not None and t > 30
    cum = C.cumulative_throughput(counts, 1.0)
    k = C.STABLE_POINTS
    i = int(t) - 1
    assert C.is_stable(cum[i - k + 1: i + 1], band)          # holds at T ...
    assert not C.is_stable(cum[i - k: i], band)               # ... not one sample earlier
    assert all(C.is_stable(cum[j - k + 1: j + 1], band) for j in range(i, cum.size))  # and stays


def test_stable_after_never_settles():
    counts = np.arange(1, 121, dtype=float) ** 2          # throughput keeps growing
    assert C.stable_after_s(counts, 1.0, band=0.025) is None


def test_window_needed_on_known_period():
    # three runs with a 10-s throughput wave in different phases: windows that cover whole
    # periods agree exactly across runs, a half period does not
    t = np.arange(40)
    runs = [1000 + 200 * np.sin(2 * np.pi * (t + 0.5) / 10 + phase) for phase in (0, 2.1, 4.2)]
    curve = C.window_curve(runs, 1.0, candidates_s=(1, 2, 5, 10, 20))
    by_n = dict(curve)
    assert by_n[10] == pytest.approx(0, abs=1e-9) and by_n[20] == pytest.approx(0, abs=1e-9)
    assert by_n[5] > 0.05
    assert C.window_needed_s(curve, 0.05) == 10
    assert C.window_curve(runs[:1], 1.0) == []


def test_calibration_figures_from_synthetic_runs():
    from fsscope.check.job import Spec, calibration_figures, plan

    # three runs: a 10-s ramp, then a plateau; levels 1000, 1050, 950 ops/s
    counts = [np.r_[np.linspace(0.5, 1.0, 10), np.ones(50)] * level for level in (1000, 1050, 950)]
    figures = calibration_figures(Spec(precision=0.05), counts, [60.0] * 3, 60)
    assert [round(r.ops_per_s) for r in figures.runs] == [round(c.sum() / 60) for c in counts]
    assert figures.cv == pytest.approx(0.05, rel=1e-6)
    n = figures.runs_needed
    assert n == C.runs_needed(figures.cv, 0.05)
    # CV = precision: the smallest n with n >= t(n-1)^2
    assert n >= C.t_quantile(0.95, n - 1) ** 2 and n - 1 < C.t_quantile(0.95, n - 2) ** 2
    assert figures.duration_s_needed > 10 and figures.window_s_needed is None  # levels differ by 10 %
    assert [h.after_runs for h in figures.runs_needed_history] == [2, 3]
    runs, seconds = plan(Spec(budget_s=60), 50, 4)
    assert runs * (seconds + 4) <= 50 and seconds >= 5


@pytest.mark.parametrize("text, value", [("5", 0.05), ("5%", 0.05), ("0.5", 0.005)])
def test_precision_is_always_percent(text, value):
    from fsscope.cli.check_cmd import _confidence, _percent

    assert _percent(text) == pytest.approx(value)
    assert _confidence("95") == _confidence("0.95") == _confidence("95%") == pytest.approx(0.95)
