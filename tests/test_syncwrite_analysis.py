"""Knees, phases, recommendation and per-size Welch verdicts on synthetic sweeps whose answers
are known by construction (fsscope.analysis.efficiency; no file system involved)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fsscope.analysis import efficiency as E

SIZES = [4096 << k for k in range(13)]            # 4 KiB .. 16 MiB


def sweep_stats(latency_curve_ns, reps: int = 30, noise: float = 0.03, seed: int = 0) -> list[E.SizeStats]:
    """Repetitions of a noiseless latency curve with multiplicative noise; each repetition
    writes 16 MiB, so its throughput is size / latency (one thread, back-to-back writes)."""
    rng = np.random.default_rng(seed)
    out = []
    for size, lat in zip(SIZES, latency_curve_ns):
        writes = max(1, (16 << 20) // size)
        runs = [lat * rng.lognormal(0, noise, writes) for _ in range(reps)]
        tput = [size * writes / (r.sum() / 1e9) for r in runs]
        out.append(E.size_stats(size, tput, runs))
    return out


def three_phase_curve(rise_at: int, saturate_at: int, floor_ns: float = 200e3) -> np.ndarray:
    """log-log latency slope 0 up to ``rise_at``, 0.5 up to ``saturate_at``, 1 after: so
    throughput has slope 1, 0.5, 0 — the paper's three phases with known knees."""
    i1, i2 = SIZES.index(rise_at), SIZES.index(saturate_at)
    log2_lat = [0.0 if i <= i1 else 0.5 * (min(i, i2) - i1) + max(0, i - i2) for i in range(len(SIZES))]
    return floor_ns * 2.0 ** np.array(log2_lat)


@pytest.mark.parametrize("rise_at, saturate_at", [(64 << 10, 2 << 20), (16 << 10, 256 << 10), (256 << 10, 8 << 20)])
def test_both_knees_of_a_three_phase_curve(rise_at, saturate_at):
    stats = sweep_stats(three_phase_curve(rise_at, saturate_at))
    a = E.analyze(stats, seed=3)
    assert a.size_at(a.latency_rise) == rise_at
    assert a.size_at(a.saturation) == saturate_at
    # 3 % noise cannot move a knee whose neighbours differ by 41 %: the bootstrap agrees
    assert a.latency_rise.agreement > 0.95 and a.saturation.agreement > 0.95
    assert a.phases["1"] == [s for s in SIZES if s <= rise_at]
    assert a.phases["2"] == [s for s in SIZES if rise_at < s < saturate_at]
    assert a.phases["3"] == [s for s in SIZES if s >= saturate_at]
    knees = E.knees_dict(a)
    assert knees["latency_rise_bytes"] == rise_at and knees["throughput_saturation_bytes"] == saturate_at
    assert "bootstrap resamples" in knees["latency_rise"]["note"]


def test_knees_of_the_papers_cost_model():
    """latency = fixed sync cost + size / bandwidth: the latency knee is the last size whose
    transfer adds at most 25 % to the fixed cost, saturation the first at >= 90 % of the
    bandwidth — both known in closed form."""
    l0_ns, bw = 500e3, 400e6                      # 0.5 ms per sync, 400 MB/s
    lat = np.array([l0_ns + s / bw * 1e9 for s in SIZES])
    a = E.analyze(sweep_stats(lat, noise=0.01))
    expected_rise = max(s for s in SIZES if s / bw * 1e9 <= 0.25 * l0_ns)
    tput = np.array(SIZES) / (lat / 1e9)
    expected_sat = min(s for s, t in zip(SIZES, tput) if t >= 0.9 * tput.max())
    assert a.size_at(a.latency_rise) == expected_rise == 32 << 10
    assert a.size_at(a.saturation) == expected_sat
    assert a.size_at(a.latency_rise) < a.size_at(a.best_ratio) < a.size_at(a.saturation)
    assert "Use " in E.recommendation(a) and "buffers" in E.recommendation(a)


def test_flat_latency_has_no_rise_and_unsaturated_throughput_says_so():
    a = E.analyze(sweep_stats(np.full(len(SIZES), 300e3)))
    knees = E.knees_dict(a)
    assert knees["latency_rise_bytes"] is None and "no rise" in knees["latency_rise"]["note"]
    assert knees["throughput_saturation_bytes"] == SIZES[-1]
    assert "may not have saturated" in knees["throughput_saturation"]["note"]


def test_statistics_of_one_size():
    runs = [np.array([100, 200, 300]), np.array([400, 500])]
    s = E.size_stats(4096, [10.0, 20.0, 30.0], runs)
    assert s.throughput_mean == 20.0 and s.throughput_sd == 10.0
    assert s.throughput_ci95 == pytest.approx(4.302653 * 10 / math.sqrt(3), rel=1e-5)  # t(0.975, 2)
    assert s.latency_mean_ns == 300.0 and s.latency_p50_ns == 300.0 and s.writes == 5
    assert s.latency_mean_runs_ns == (200.0, 450.0)
    assert s.ratio == pytest.approx(20.0 / 300e-9)


def test_choose_follows_the_papers_rules():
    a = E.analyze(sweep_stats(three_phase_curve(64 << 10, 2 << 20), noise=0.0), resamples=0)
    tput = {s.buffer_bytes: s.throughput_mean for s in a.sizes}
    lat = {s.buffer_bytes: s.latency_mean_ns for s in a.sizes}
    goal = tput[256 << 10] * 0.99
    assert E.choose(a, target_throughput=goal).buffer_bytes == 256 << 10        # smallest reaching it
    assert E.choose(a, max_latency_ns=lat[1 << 20] * 1.01).buffer_bytes == 1 << 20  # largest within it
    both = E.choose(a, target_throughput=goal, max_latency_ns=lat[1 << 20] * 1.01)
    assert both.buffer_bytes == 256 << 10
    never = E.choose(a, target_throughput=max(tput.values()) * 2)
    assert never.buffer_bytes is None and "not reachable on this stack" in never.note
    clash = E.choose(a, target_throughput=tput[4 << 20], max_latency_ns=lat[64 << 10])
    assert clash.buffer_bytes is None and "not reachable" in clash.note


def test_welch_verdicts_per_size_at_the_papers_threshold():
    rng = np.random.default_rng(7)
    same = rng.normal(100, 5, 30)
    runs = {"x": {4096: same, 65536: rng.normal(200, 5, 30), 1 << 20: rng.normal(300, 5, 30)},
            "y": {4096: same + rng.normal(0, 0.01, 30), 65536: rng.normal(230, 5, 30),
                  1 << 20: rng.normal(303, 5, 30)},
            "z": {4096: rng.normal(50, 5, 30)}}
    tests = E.compare_per_size(runs)
    by = {(t["a"], t["b"], t["buffer_bytes"]): t for t in tests}
    assert set(by) == {("x", "y", 4096), ("x", "y", 65536), ("x", "y", 1 << 20), ("x", "z", 4096), ("y", "z", 4096)}
    assert by[("x", "y", 4096)]["verdict"] == "no significant difference" and by[("x", "y", 4096)]["p"] > 0.5
    assert by[("x", "y", 65536)]["verdict"] == "y faster" and by[("x", "y", 65536)]["p"] < 1e-10
    assert by[("x", "z", 4096)]["verdict"] == "x faster"
    # a 1 % difference with sd 5 over 30 runs: p is well above the paper's 0.001
    assert by[("x", "y", 1 << 20)]["p"] > 0.001 and by[("x", "y", 1 << 20)]["verdict"] == "no significant difference"


def test_latency_rise_is_where_latency_first_leaves_its_band():
    """A sweep where 128 KiB is 2.3x the floor and 256 KiB comes back within 25 %: the knee is
    the last size before 128 KiB, and the note says that latency came back at 256 KiB (the old
    rule put the knee at 256 KiB -- "the last size where it comes back" -- and said latency
    stayed within 25 % up to there)."""
    curve = np.array([1.0, 1.0, 1.05, 1.1, 1.15, 2.3, 1.2, 3, 5, 9, 17, 33, 65]) * 200e3
    a = E.analyze(sweep_stats(curve, noise=0.01))
    assert a.size_at(a.latency_rise) == 64 << 10
    knees = E.knees_dict(a)
    note = knees["latency_rise"]["note"]
    assert knees["latency_rise_bytes"] == 64 << 10
    assert "up to 64 KiB and first leaves it at 128 KiB (2.3x the floor)" in note
    assert "comes back within 25% at 256 KiB" in note
    assert a.phases["1"] == SIZES[:5]
    # vectorised over rows, as the bootstrap uses it: a row that never leaves gives -1
    rows = np.vstack([curve, np.full(13, 1.0), curve[::-1]])
    # reversed: the band starts at the first size within it (1.2x) and is left at the next (2.3x)
    assert E.latency_rise_index(rows).tolist() == [4, -1, 6]
