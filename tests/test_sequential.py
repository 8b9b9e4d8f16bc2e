"""The sequential decisions of the probe on made-up latency matrices with a known truth."""

from __future__ import annotations

import numpy as np

from fsscope.analysis.outliers import analyze
from fsscope.analysis.sequential import Candidate, Settling, binom_cdf, decide, decide_shifts


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


def _shifted(runs: int, files: int, at: int, *, seed: int) -> np.ndarray:
    """10 µs, 1.7x from file ``at`` on (btrfs' first leaf split at 4 KiB nodes), and load as
    measured on a busy 2-core machine: whole runs ~2.5x slower, and in two runs a burst
    slowing a stretch of files across the step (which flattens it in those runs)."""
    latency, _ = _matrix(runs, files, noise=0.05, seed=seed)
    latency[:, at:] *= 1.7
    latency[0, :at] *= 1.8  # bursts just before the step: no step in these runs
    latency[1, at - 6: at + 3] *= 2.0
    latency[2] *= 2.5  # a whole run on a slower CPU share: its step is still there
    return latency


def test_a_predicted_shift_flattened_in_some_runs_is_decided_and_reported_at_its_index():
    latency = _shifted(15, 200, 9, seed=4)
    (shift,) = decide_shifts(latency, [Candidate(9, "split", 0, "shift", 2)], min_ratio=1.2)
    assert shift.verdict == "slow" and shift.slow_votes < shift.votes, shift  # outvoted the bursts
    settling = Settling(runs_min=5, cap=15)
    settling.predict([{"kind": "level_shift", "index": 9, "tolerance_files": 2, "structure": "split"}], files=200)
    for run in range(1, 15):
        analysis = analyze(latency[: run + 1], wait_ns=np.zeros_like(latency[: run + 1]))
        settling.after_run(run, analysis, latency[: run + 1], np.zeros_like(latency[: run + 1]))
        if settling.done:
            break
    (found,) = [s for s in settling.settled(analysis).level_shifts if abs(s.index - 9) <= 2]
    assert found.after_ns > 1.4 * found.before_ns


def test_no_step_at_a_predicted_shift_is_decided_typical():
    latency, _ = _matrix(15, 200, noise=0.05, seed=5)
    latency[2, :14] *= 1.8  # a burst is not a shift
    (shift,) = decide_shifts(latency, [Candidate(9, "split", 0, "shift", 2)], min_ratio=1.2)
    assert shift.verdict == "typical", shift
