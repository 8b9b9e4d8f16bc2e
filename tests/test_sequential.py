"""The sequential decisions of the probe on made-up latency matrices with a known truth."""

from __future__ import annotations

import numpy as np

from fsscope.analysis.sequential import Candidate, Settling, binom_cdf, decide


def _matrix(runs: int, files: int, *, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Lognormal latencies around 10 µs and a flat baseline; ``noise``: share of 3x spikes."""
    rng = np.random.default_rng(seed)
    latency = 10_000 * rng.lognormal(0, 0.1, (runs, files))
    latency[rng.random((runs, files)) < noise] *= 3
    return latency, np.full((runs, files), 10_000.0)


def test_a_file_slow_in_every_run_is_decided_slow_in_two_quiet_runs_and_more_when_noisy():
    for noise, most_votes in ((0.01, 2), (0.15, 4)):
        latency, baseline = _matrix(12, 400, noise=noise, seed=1)
        latency[:, 61] = 40_000
        (decision,) = decide(latency, baseline, [Candidate(61, "predicted", 0)], factor=2.0)
        assert decision.verdict == "slow" and decision.votes <= most_votes, decision


def test_a_typical_file_is_typical_and_an_in_between_one_intermittent():
    latency, baseline = _matrix(15, 400, noise=0.05, seed=2)
    latency[:, 10] = 10_000
    latency[::3, 20] = 40_000  # slow in every third run
    typical, in_between = decide(latency, baseline, [Candidate(10, "p", 0), Candidate(20, "p", 0)], factor=2.0)
    assert typical.verdict == "typical" and typical.slow_votes == 0
    assert in_between.verdict == "intermittent" and 0 < in_between.slow_votes < in_between.votes


def test_disturbed_calls_do_not_vote_and_a_noticed_outlier_needs_runs_after_it():
    latency, baseline = _matrix(6, 400, noise=0.01, seed=3)
    latency[:, 99] = 40_000
    latency[:3, 99] = np.nan  # disturbed in the first three runs
    (early,) = decide(latency, baseline, [Candidate(99, "outlier", 0)], factor=2.0)
    assert early.votes == 2 and early.decided_at_run == 4
    (late,) = decide(latency, baseline, [Candidate(99, "outlier", 5)], factor=2.0)
    assert late.verdict == "undecided" and late.votes == 1  # one run after it cannot confirm it


def test_settling_stops_when_decided_and_says_why():
    settling = Settling(runs_min=3, cap=9)
    settling.predict([{"kind": "outlier", "index": 61, "structure": "ext4-dir-htree-conversion"},
                      {"kind": "series", "index": 60, "stride": 64, "structure": "s"},
                      {"kind": "outlier", "index": None, "index_low": 300, "structure": "w"}], files=400)
    assert list(settling.candidates) == [61]
    assert 0.999 < binom_cdf(5, 5, 0.3) <= 1.0 + 1e-12 and binom_cdf(0, 3, 0.5) == 0.125
    assert not settling.done and settling.to_json()["candidates"] == []
