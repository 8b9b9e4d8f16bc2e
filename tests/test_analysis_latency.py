"""Latency statistics (fsscope.analysis.latency) on inputs with answers known by construction."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from fsscope.analysis.latency import (
    median_curve_ns,
    nanmedian_last_axis,
    per_run,
    split_low_high,
    summarize,
)

SUMMARY_KEYS = {"count", "mean_ns", "sd_ns", "min_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns", "rsd"}


def test_summary_of_one_to_hundred_matches_textbook_values():
    values = np.arange(1, 101, dtype=np.int64)
    summary = summarize(values)
    assert set(summary) == SUMMARY_KEYS
    assert summary["count"] == 100
    assert summary["mean_ns"] == pytest.approx(statistics.fmean(range(1, 101)))
    assert summary["sd_ns"] == pytest.approx(statistics.stdev(range(1, 101)))  # sample sd
    assert summary["min_ns"] == 1 and summary["max_ns"] == 100
    # linear interpolation: the q-quantile of 1..100 sits at 1 + 99 q
    assert summary["p50_ns"] == pytest.approx(1 + 99 * 0.50)
    assert summary["p95_ns"] == pytest.approx(1 + 99 * 0.95)
    assert summary["p99_ns"] == pytest.approx(1 + 99 * 0.99)
    assert summary["rsd"] == pytest.approx(summary["sd_ns"] / summary["mean_ns"])


def test_unmeasured_entries_are_ignored():
    with_gaps = np.array([[-1, 500, 700], [900, -1, -1]], dtype=np.int64)
    assert summarize(with_gaps) == summarize(np.array([500, 700, 900]))


def test_summary_values_are_plain_python_numbers():
    summary = summarize(np.array([3, 1, 2], dtype=np.int64))
    for key, value in summary.items():
        assert type(value) in (int, float), key


def test_empty_and_all_missing_give_count_zero_and_none():
    for empty in (np.array([], dtype=np.int64), np.full((3, 4), -1, dtype=np.int64)):
        summary = summarize(empty)
        assert summary["count"] == 0
        assert all(summary[key] is None for key in SUMMARY_KEYS - {"count"})


def test_single_value_has_zero_spread():
    summary = summarize(np.array([42_000]))
    assert summary["count"] == 1
    assert summary["sd_ns"] == 0.0 and summary["rsd"] == 0.0
    assert summary["min_ns"] == summary["max_ns"] == 42_000
    assert summary["p50_ns"] == summary["p99_ns"] == 42_000


def test_all_equal_values_have_zero_sd_and_no_high_group():
    values = np.full((4, 50), 123_456, dtype=np.int64)
    summary = summarize(values)
    assert summary["sd_ns"] == 0.0 and summary["rsd"] == 0.0
    assert summary["p95_ns"] == summary["min_ns"] == 123_456
    split = split_low_high(values)
    assert split["low"]["count"] == 200
    assert split["high"]["count"] == 0


def test_per_run_summarizes_each_row_and_a_killed_run_counts_what_it_measured():
    rng = np.random.default_rng(7)
    matrix = (100_000 * rng.lognormal(0.0, 0.2, size=(3, 200))).astype(np.int64)
    matrix[2, 120:] = -1  # run 2 was killed after 120 files
    runs = per_run(matrix)
    assert len(runs) == 3
    assert [run["count"] for run in runs] == [200, 200, 120]
    for run_summary, row in zip(runs, matrix):
        measured = row[row >= 0]
        assert run_summary["mean_ns"] == pytest.approx(measured.mean())
        assert run_summary["max_ns"] == measured.max()


def test_per_run_of_a_single_run_vector():
    assert per_run(np.array([5, 6, 7])) == [summarize(np.array([5, 6, 7]))]


def _paper_like_run(seed: int):
    """~1,000 fast creat() calls plus a known set of slow ones (as in the paper's table 1)."""
    rng = np.random.default_rng(seed)
    latency_ns = 145_000 * rng.lognormal(0.0, 0.1, size=1024)
    slow = np.concatenate([[0, 22], np.arange(61, 1024, 64)])
    latency_ns[slow] *= rng.uniform(2.5, 50.0, size=slow.size)
    return latency_ns.astype(np.int64), slow


def test_split_puts_exactly_the_slow_files_in_the_high_group():
    latency_ns, slow = _paper_like_run(seed=1)
    split = split_low_high(latency_ns)
    median_ns = np.median(latency_ns)
    assert split["threshold_ns"] == pytest.approx(2.0 * median_ns)
    assert split["high"]["count"] == slow.size
    assert split["low"]["count"] == latency_ns.size - slow.size
    assert split["high"]["min_ns"] == latency_ns[slow].min()
    assert split["low"]["max_ns"] < split["threshold_ns"] <= split["high"]["min_ns"]
    # as in the paper: the low group is tight, the high group carries the spread
    assert split["low"]["rsd"] < 0.2 < split["high"]["rsd"]


def test_split_threshold_is_robust_to_the_tail_it_separates():
    rng = np.random.default_rng(3)
    fast_ns = (100_000 * rng.lognormal(0.0, 0.1, size=5000)).astype(np.int64)
    with_tail_ns = fast_ns.copy()
    with_tail_ns[::50] *= 100  # 2 % of calls 100x slower: the mean would move ~3x
    clean = split_low_high(fast_ns)["threshold_ns"]
    tailed = split_low_high(with_tail_ns)["threshold_ns"]
    assert tailed == pytest.approx(clean, rel=0.05)
    assert with_tail_ns.mean() > 2.5 * fast_ns.mean()


def test_split_accepts_an_explicit_threshold_and_ignores_missing():
    values = np.array([-1, 100, 200, 299_999, 300_000, 900_000, -1], dtype=np.int64)
    split = split_low_high(values, threshold_ns=300_000)
    assert split["threshold_ns"] == 300_000
    assert split["low"]["count"] == 3  # below the threshold, as in the paper
    assert split["high"]["count"] == 2  # at or above it
    assert split["high"]["min_ns"] == 300_000


def test_split_of_nothing_measured():
    split = split_low_high(np.full(5, -1))
    assert split["threshold_ns"] is None
    assert split["low"]["count"] == split["high"]["count"] == 0


def test_median_curve_skips_unmeasured_runs_per_file():
    matrix = np.array([
        [10, 100, -1, 7],
        [30, -1, -1, 9],
        [20, 300, -1, 8],
    ], dtype=np.int64)
    curve = median_curve_ns(matrix)
    assert curve[0] == 20
    assert curve[1] == 200  # median of 100 and 300
    assert math.isnan(curve[2])  # no run measured file 2
    assert curve[3] == 8


def test_nanmedian_last_axis_agrees_with_numpy():
    rng = np.random.default_rng(11)
    values = rng.normal(size=(40, 7))
    values[rng.random(values.shape) < 0.3] = np.nan
    values[5] = np.nan
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        expected = np.nanmedian(values, axis=-1)
    np.testing.assert_allclose(nanmedian_last_axis(values), expected, equal_nan=True)
