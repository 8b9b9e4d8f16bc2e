"""Variation analysis on synthetic data whose answers are known in advance."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy import stats

from fsscope.analysis.variation.grid import (
    N_BUCKETS,
    bucket_index,
    bucket_index_one,
    bucket_lower_ns,
    bucket_mid_ns,
    bucket_width_ns,
    hist_percentile_ns,
    latency_histogram,
)
from fsscope.analysis.variation.metrics import (
    ks_distance,
    ks_distance_hist,
    ks_range,
    relative_range,
    relative_range_cdf,
    rsd,
    throughput_bands,
    throughput_n,
    variation_summary,
)
from fsscope.analysis.variation.report import variation_report
from fsscope.analysis.variation.stats import (
    expected_range_sd,
    ladder_steps,
    ladder_verdict,
    latency_throughput_pcc,
    pearson,
    range_change,
    runs_to_decide_spread,
    welch,
)
from fsscope.analysis.variation.temporal import (
    compare_recipes,
    detect_periodic,
    detect_warmup,
    flag_variation,
    flag_window_disagreement,
)
from fsscope.records import dumps

# -- histogram grid ------------------------------------------------------------------------------

def test_bucket_grid_is_contiguous_and_within_half_a_percent():
    rng = np.random.default_rng(3)
    values = np.unique(np.concatenate([np.arange(0, 4096), rng.integers(0, 2**41, 200_000),
                                       np.logspace(0, 12.3, 50_000).astype(np.int64)]))
    idx = bucket_index(values)
    assert idx.max() == N_BUCKETS - 1 and idx.min() == 0
    assert np.array_equal(np.unique(idx), np.arange(N_BUCKETS))           # no holes
    assert np.all(np.diff(idx) >= 0)                                         # monotone
    lower, width = bucket_lower_ns(idx), bucket_width_ns(idx)
    assert np.all((lower <= values) & (values < lower + width))
    assert np.all(np.abs(bucket_mid_ns(idx) - values) <= 0.004 * np.maximum(values, 1))
    assert values[:256].tolist() == idx[:256].tolist()                       # exact below 256 ns
    for x in values[::997]:
        assert bucket_index_one(int(x)) == bucket_index(np.array([x]))[0]


def test_histogram_percentiles_match_exact_percentiles_to_one_percent():
    latency_ns = np.random.default_rng(7).lognormal(mean=11, sigma=1.5, size=100_000).astype(np.int64)
    hist = latency_histogram(latency_ns)
    assert hist.sum() == latency_ns.size
    for q in (1, 50, 90, 99, 99.9):
        exact = np.percentile(latency_ns, q, method="inverted_cdf")
        assert hist_percentile_ns(hist, q) == pytest.approx(exact, rel=0.01)
    assert math.isnan(hist_percentile_ns(np.zeros(N_BUCKETS), 50))


# -- throughput and its variation ----------------------------------------------------------------

def test_relative_range_and_rsd_exact():
    assert relative_range([90, 100, 110]) == pytest.approx(0.2)
    assert rsd([90, 100, 110]) == pytest.approx(0.1)          # sample std 10 / mean 100
    assert relative_range([5, 5, 5]) == 0.0
    assert math.isnan(rsd([100]))
    s = variation_summary([900, 1000, 1100])
    assert (s.runs, s.mean, s.min, s.max) == (3, 1000, 900, 1100)
    assert s.relative_range == pytest.approx(0.2) and s.rsd == pytest.approx(0.1)


def test_throughput_n_windows_and_bands():
    counts = np.arange(25, dtype=np.int64)                   # 25 one-second bins
    assert throughput_n(counts, 1.0, 10).tolist() == [4.5, 14.5]          # partial window dropped
    per_op = np.vstack([counts, counts])
    assert throughput_n(per_op, 1.0, 5).tolist() == [4.0, 14.0, 24.0, 34.0, 44.0]
    assert throughput_n(np.ones(20), 0.5, 2.0).tolist() == [2.0] * 5      # 4 half-second bins
    with pytest.raises(ValueError):
        throughput_n(counts, 1.0, 2.5)
    bands = throughput_bands([np.array([90.0, 100]), np.array([110.0, 100, 7])], 10)
    assert bands.min.tolist() == [90, 100] and bands.max.tolist() == [110, 100]
    assert bands.mean.tolist() == [100, 100]
    assert bands.relative_range.tolist() == pytest.approx([0.2, 0.0])


def test_relative_range_cdf_over_configs_and_windows():
    # config A: two runs identical -> 0 range everywhere; config B: runs differ by 20 % in the
    # first 10 s only.
    a = [np.full(20, 100), np.full(20, 100)]
    b = [np.full(20, 100), np.concatenate([np.full(10, 120), np.full(10, 100)])]
    cdf = relative_range_cdf([a, b], 1.0, [10, 20])
    values, frac = cdf[10]
    assert values.tolist() == pytest.approx([0, 0, 0, 0.2 / 1.1])
    assert frac.tolist() == [0.25, 0.5, 0.75, 1.0]
    values20, _ = cdf[20]
    assert values20.tolist() == pytest.approx([0, 0.1 / 1.05])           # wider window, smaller range


# -- latency distributions -----------------------------------------------------------------------

def test_ks_distance_known_values_and_scipy_agreement():
    assert ks_distance(np.array([1, 2, 3, 4]), np.array([3, 4, 5, 6])) == 0.5
    assert ks_distance(np.array([1, 2]), np.array([1, 2])) == 0.0
    assert ks_distance(np.array([1, 2]), np.array([10, 20])) == 1.0
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 250, 3000), rng.integers(20, 256, 2000)       # < 256 ns: exact buckets
    expected = stats.ks_2samp(a, b).statistic
    assert ks_distance(a, b) == pytest.approx(expected)
    assert ks_distance_hist(latency_histogram(a), latency_histogram(b)) == pytest.approx(expected)


def test_ks_range_is_the_largest_pairwise_distance():
    runs = [np.array([1, 2, 3, 4]), np.array([3, 4, 5, 6]), np.array([1, 2, 3, 4])]
    assert ks_range(runs, histograms=False) == 0.5
    hists = [latency_histogram(r) for r in runs]
    assert ks_range(hists) == 0.5
    assert math.isnan(ks_range(hists[:1]))


def test_pearson_and_latency_throughput_pcc():
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert pearson([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    assert math.isnan(pearson([1, 2, 3], [5, 5, 5]))
    pcc = latency_throughput_pcc([0.05, 0.1, 0.2, 0.4],
                                   {"open": [0.1, 0.2, 0.4, 0.8], "write": [0.3, 0.1, 0.3, 0.1]})
    assert pcc["open"] == pytest.approx(1.0)
    assert abs(pcc["write"]) < 0.7


def test_welch_names_a_winner_only_when_significant():
    fast = [1000, 1010, 990, 1005, 995]
    slow = [900, 910, 890, 905, 895]
    res = welch(fast, slow, labels=("ext4", "xfs"))
    ref = stats.ttest_ind(fast, slow, equal_var=False)
    assert res.t == pytest.approx(ref.statistic) and res.p == pytest.approx(ref.pvalue)
    assert res.winner == "ext4" and "ext4 is better" in res.note
    assert welch(slow, fast, labels=("ext4", "xfs")).winner == "xfs"
    # latency: lower is better
    assert welch(fast, slow, higher_is_better=False, labels=("a", "b")).winner == "b"
    noisy = welch([1000, 1200, 800], [1010, 1190, 820])
    assert noisy.winner is None and "no significant difference" in noisy.note
    assert welch([1], [2]).winner is None


# -- flags ---------------------------------------------------------------------------------------

def test_variation_flag_threshold():
    assert flag_variation([100, 105, 102]) is None                     # 4.9 % < 10 %
    flag = flag_variation([100, 120, 110])
    assert flag.kind == "variation" and flag.details["relative_range"] == pytest.approx(20 / 110)
    assert "18%" in flag.note
    assert flag_variation([100, 120], threshold=0.25) is None
    assert flag.details["verdict"] == "above" and flag.details["p"] < flag.details["alpha"]
    assert "machine's own included" in flag.note and "baseline" in flag.note


def test_variation_flag_says_inconclusive_and_what_decides():
    """A range just over the threshold in 3 runs is what a spread at the threshold gives by
    chance: the flag says inconclusive and how many runs would decide, never "above"."""
    flag = flag_variation([100, 111, 105])
    assert flag is not None and flag.details["verdict"] == "inconclusive"
    assert flag.details["p"] >= flag.details["alpha"] and flag.details["runs_to_decide"] > 3
    assert f"about {flag.details['runs_to_decide']} runs would decide" in flag.note
    # the same spread measured over that many runs is above beyond chance
    sd = flag.details["sd"]
    runs = flag.details["runs_to_decide"]
    steady = 100.0 * np.exp(sd * np.linspace(-1.0, 1.0, runs) / np.linspace(-1.0, 1.0, runs).std(ddof=1))
    assert flag_variation(steady.tolist()).details["verdict"] == "above"


def test_a_run_with_no_throughput_is_named_and_is_above():
    """A stalled run (0 ops/s) has no log, so the sd test cannot see it: it must not be dropped
    into an "inconclusive ... within" note; the flag names it and says above."""
    for runs, stalled in (([1000, 1000, 0], [3]), ([1000, 0], [2]), ([0, 990, 1000, 0], [1, 4])):
        flag = flag_variation(runs)
        assert flag is not None and flag.details["verdict"] == "above", runs
        assert flag.details["stalled_runs"] == stalled and "within" not in flag.note
        assert f"{', '.join(map(str, stalled))} had no throughput" in flag.note


def _periodic_counts(seconds: int = 600, period_s: int = 30, dip_s: int = 5, level: int = 1000,
                     dip_level: int = 500, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    counts = rng.normal(level, 10, seconds)
    for start in range(period_s, seconds, period_s):
        counts[start:start + dip_s] = dip_level
    return counts.round().astype(np.int64)


def test_planted_30s_dip_is_periodic_and_named_after_dirty_expiry():
    tn10 = throughput_n(_periodic_counts(), 1.0, 10)
    flag = detect_periodic(tn10, 10, dirty_expire_centisecs=3000, dirty_writeback_centisecs=500)
    assert flag is not None and flag.kind == "periodic"
    assert flag.details["period_s"] == 30 and flag.details["shape"] == "dips"
    assert flag.details["matches"] == "dirty_expire"
    assert "every 30 s" in flag.note and "dirty_expire_centisecs = 3000" in flag.note
    assert "dirty_writeback_centisecs = 500" in flag.note


def test_periodic_matches_flusher_interval_at_finer_windows():
    tn1 = throughput_n(_periodic_counts(seconds=300, period_s=5, dip_s=1), 1.0, 1)
    flag = detect_periodic(tn1, 1, dirty_expire_centisecs=3000, dirty_writeback_centisecs=500)
    assert flag is not None and flag.details["period_s"] == 5
    assert flag.details["matches"] == "dirty_writeback"


def test_no_periodic_flag_for_noise_or_short_series():
    noise = np.random.default_rng(5).normal(1000, 30, 120)
    assert detect_periodic(noise, 10, 3000, 500) is None
    assert detect_periodic(np.array([1.0, 2, 1, 2]), 10) is None
    flag = detect_periodic(throughput_n(_periodic_counts(period_s=60), 1.0, 10), 10, 3000, 500)
    assert flag is not None and flag.details["matches"] is None and "neither" in flag.note


def test_ramp_is_a_warmup_and_steady_or_periodic_series_are_not():
    rng = np.random.default_rng(2)
    ramp = np.concatenate([np.linspace(200, 800, 6), rng.normal(1000, 15, 54)])
    flag = detect_warmup(ramp, 10)
    assert flag is not None and flag.kind == "warmup"
    assert flag.details["direction"] == "ramp-up" and flag.details["warmup_s"] == 60
    peak = np.concatenate([[1800, 1500, 1300], rng.normal(1000, 15, 40)])
    assert detect_warmup(peak, 10).details["direction"] == "initial-peak"
    assert detect_warmup(rng.normal(1000, 15, 60), 10) is None
    periodic = throughput_n(_periodic_counts(), 1.0, 10)                 # starts with a dip window? no warm-up
    assert detect_warmup(periodic, 10) is None


def test_windows_disagreeing_with_a_stable_cumulative_verdict():
    # same total in every run, but the runs take turns being fast: cumulative range 0,
    # every Throughput-10 window differs by about 40 %.
    fast_first = np.concatenate([np.full(60, 1200), np.full(60, 800)])
    slow_first = fast_first[::-1].copy()
    runs = [fast_first, slow_first, fast_first]
    tn = [throughput_n(c, 1.0, 10) for c in runs]
    ops = [c.sum() / c.size for c in runs]
    flag = flag_window_disagreement(tn, 10, ops)
    assert flag is not None and flag.kind == "window_disagrees"
    assert flag.details["fraction_windows_above"] == 1.0
    assert flag.details["cumulative_relative_range"] == 0.0
    same = [throughput_n(np.full(120, 1000), 1.0, 10)] * 3
    assert flag_window_disagreement(same, 10, [1000, 1000, 1000]) is None


def test_compare_recipes_flags_windows_where_the_loser_wins():
    rng = np.random.default_rng(4)
    a_runs = [np.concatenate([np.full(30, 800), np.full(90, 1300)]) + rng.integers(0, 5, 120) for _ in range(4)]
    b_runs = [np.full(120, 1000) + rng.integers(0, 5, 120) for _ in range(4)]
    verdict, flag = compare_recipes(
        [c.mean() for c in a_runs], [c.mean() for c in b_runs],
        [throughput_n(c, 1.0, 10) for c in a_runs], [throughput_n(c, 1.0, 10) for c in b_runs],
        10, labels=("xfs", "ext4"))
    assert verdict.winner == "xfs"
    assert flag is not None and flag.details["windows"] == [0, 1, 2]
    assert "ext4 is significantly faster in 3 of 12" in flag.note


# -- JSON report ---------------------------------------------------------------------------------

@dataclass
class FakeRun:
    op_names: tuple[str, ...]
    counts: np.ndarray
    bin_s: float
    elapsed_s: float
    latency_hist: np.ndarray
    latency_sum_ns: np.ndarray
    io_bytes: np.ndarray


def _fake_run(level: int, seed: int) -> FakeRun:
    rng = np.random.default_rng(seed)
    counts = np.vstack([np.full(60, level), np.full(60, level // 2)]).astype(np.int64)
    hists = np.vstack([latency_histogram(rng.lognormal(9, 1, 500).astype(np.int64)),
                       latency_histogram(rng.lognormal(12, 1, 500).astype(np.int64))])
    return FakeRun(("read", "write"), counts, 1.0, 60.0, hists, counts * 1000, counts * 4096)


def test_variation_report_follows_the_json_contract():
    runs = [_fake_run(1000, 1), _fake_run(1300, 2)]
    record = variation_report("fileserver", runs, window_sizes_s=(10, 30),
                              dirty_expire_centisecs=3000, dirty_writeback_centisecs=500)
    report = json.loads(dumps(record))  # the record's wire form: the keys the contract names
    json.dumps(report, allow_nan=False)
    assert record.runs[0].ops["read"].count == 60_000 and record.variation.runs == 2
    assert report["personality"] == "fileserver"
    first = report["runs"][0]
    assert first["ops_per_s"] == pytest.approx(1500.0)
    assert first["windows"]["10"] == pytest.approx([1500.0] * 6)
    assert len(first["windows"]["30"]) == 2
    assert set(first["ops"]) == {"read", "write"}
    assert first["ops"]["read"]["count"] == 60_000
    assert first["ops"]["read"]["p50_ns"] == pytest.approx(math.exp(9), rel=0.15)
    assert first["ops"]["read"]["mean_ns"] == 1000.0
    assert first["ops"]["read"]["bytes"] == 60_000 * 4096
    assert first["ops"]["read"]["mean_bytes"] == 4096.0
    assert first["ops"]["read"]["bytes_per_s"] == pytest.approx(1000 * 4096)
    var = report["variation"]
    assert var["relative_range"] == pytest.approx(450 / 1725)
    assert var["rsd"] == pytest.approx(rsd([1500, 1950]))
    assert report["flags"][0]["kind"] == "variation"
    assert all({"kind", "note"} <= set(f) for f in report["flags"])
    assert 0 <= report["latency"]["read"]["ks_range"] <= 1


def test_window_disagreement_needs_several_windows():
    """One 5-s window per run (a short bench): the cumulative figure and the single window
    differ only by the partial last window, which is no 'disagreement' to flag."""
    one_window = [np.array([9000.0]), np.array([9100.0]), np.array([9050.0])]
    assert flag_window_disagreement(one_window, 5, [9000.0, 9100.0, 10_500.0]) is None
    three = [np.array([9000.0, 9000.0, 9000.0]), np.array([9100.0, 9050.0, 9020.0]),
             np.array([9050.0, 9010.0, 9000.0])]
    flag = flag_window_disagreement(three, 5, [9000.0, 9100.0, 10_500.0])
    assert flag is not None and flag.details["fraction_windows_above"] == 0.0


def test_range_change_finds_a_real_growth_and_only_that():
    rng = np.random.default_rng(3)
    calm, wild = 1000 + rng.normal(0, 5, 6), 1000 + rng.normal(0, 80, 6)
    grew = range_change(calm, wild)
    assert grew.grew and grew.p < 0.01 and grew.range_b > 5 * grew.range_a and "grew" in grew.note
    fell = range_change(wild, calm)
    assert not fell.grew and fell.p > 0.9 and "fell" in fell.note
    # the level does not count, only the spread: the same runs at half the throughput
    same = range_change(calm, calm / 2)
    assert not same.grew and same.range_a == pytest.approx(same.range_b) and "kept" in same.note
    # 3 runs a side: 20 splits, so even the most extreme growth has p >= 1/20, never below 0.05
    # (here 4 of the 20 splits put 50 and 150 on one side: p = 4/20)
    tiny = range_change([100, 101, 102], [50, 100, 150])
    assert tiny.p == pytest.approx(4 / 20) and not tiny.grew
    assert math.isnan(range_change([1.0], [1.0, 2.0]).p)


def test_ladder_steps_pair_adjacent_steps_with_runs():
    rng = np.random.default_rng(4)
    steps = [("baseline", 100 + rng.normal(0, 20, 6)), ("no_lazy", [50.0]), ("umount", 100 + rng.normal(0, 1, 6)),
             ("alloc", 100 + rng.normal(0, 15, 6))]
    pairs = ladder_steps(steps)
    assert [(a, b) for a, b, _ in pairs] == [("baseline", "umount"), ("umount", "alloc")]  # 1 run: skipped
    assert [c.grew for _, _, c in pairs] == [False, True]


def test_range_change_says_fell_or_rose_only_when_decided():
    """A small fall or rise among a few runs is "inconclusive" (never "fell" at p = 0.87), with
    the runs a side that would likely decide a change that large."""
    small_fall = range_change([100, 104, 97, 101], [100, 103, 98, 101])
    assert small_fall.range_b < small_fall.range_a and small_fall.verdict == "inconclusive"
    assert "fell" not in small_fall.note and "inconclusive" in small_fall.note
    assert small_fall.runs_to_decide is not None and small_fall.runs_to_decide > 4
    rise = range_change([100, 104, 97, 101], [100, 62, 130, 90])
    assert rise.verdict == "inconclusive" and "rise" in rise.note  # 4+4 runs: strong, but not decided
    rng = np.random.default_rng(5)
    decided = range_change(1000 + rng.normal(0, 5, 10), 1000 + rng.normal(0, 150, 10))
    assert decided.verdict == "rose" and decided.grew and decided.runs_to_decide is None
    # more runs never hurt: the estimate falls as the observed change grows
    assert runs_to_decide_spread(0.02, 0.20) < runs_to_decide_spread(0.02, 0.04)
    assert runs_to_decide_spread(0.05, 0.05) is None


@pytest.mark.parametrize("steps", [
    # the paper's direction absent: every step about as noisy, alloc at 62 % (the paper: ~2 %)
    [("baseline", [100, 130, 90, 110]), ("no_lazy", [100, 120, 95, 105]), ("umount", [100, 104, 97, 101]),
     ("alloc", [100, 62, 130, 90])],
    # a fall that the runs cannot decide (2 a step) and no alloc level to speak of
    [("baseline", [80.0, 120.0]), ("alloc", [99.0, 101.0])],
    # the spread rose, decidedly
    [("baseline", list(1000 + np.random.default_rng(6).normal(0, 5, 10))),
     ("alloc", list(1000 + np.random.default_rng(7).normal(0, 150, 10)))],
])
def test_ladder_never_agrees_with_the_paper_by_default(steps):
    verdict = ladder_verdict(steps)
    assert verdict.paper["verdict"] in ("disagree", "inconclusive")
    assert verdict.paper_direction is not True and "as in the paper" not in verdict.text
    assert f": {verdict.paper['verdict']}" in verdict.text
    if verdict.paper["verdict"] == "inconclusive":
        assert verdict.paper["runs_to_decide"] and "would decide" in verdict.text


def test_ladder_agrees_only_when_the_runs_decide_it():
    rng = np.random.default_rng(8)
    steps = [("baseline", list(1000 + rng.normal(0, 150, 10))), ("alloc", list(1000 + rng.normal(0, 2, 10)))]
    verdict = ladder_verdict(steps)
    assert verdict.paper["verdict"] == "agree" and verdict.paper_direction is True
    assert verdict.paper["level"]["verdict"] == "agree" and verdict.changes[0][2].verdict == "fell"
    # the same fall ending far above the paper's ~2 %: the level disagrees
    high = [steps[0], ("alloc", list(1000 + rng.normal(0, 40, 10)))]
    assert ladder_verdict(high).paper["level"]["verdict"] == "disagree"
    assert ladder_verdict(high).paper["verdict"] == "disagree"


def test_expected_range_of_normals():
    assert expected_range_sd(2) == pytest.approx(1.128, abs=1e-3)
    assert expected_range_sd(10) == pytest.approx(3.078, abs=1e-3)

