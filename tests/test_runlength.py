"""--duration auto's stopping rule on synthetic series with a known plateau."""

import numpy as np

from fsscope.analysis import runlength


def _warmup_then_plateau(plateau_ops=1000.0, warmup_s=20, total_s=120, noise=0.0, seed=1):
    rng = np.random.default_rng(seed)
    ramp = np.linspace(100, plateau_ops, warmup_s)  # throughput climbs, then holds
    per_s = np.concatenate([ramp, np.full(total_s - warmup_s, plateau_ops)])
    return per_s * (1 + noise * rng.standard_normal(per_s.size))


def _first_stop(series):
    for n in range(1, series.size + 1):
        t = runlength.settled_at_s(series[:n], 1.0)
        if t is not None:
            return n, t
    return None, None


def test_stops_after_the_plateau_is_reached_not_before():
    series = _warmup_then_plateau()
    n, t = _first_stop(series)
    assert n is not None and t == n
    cum = np.cumsum(series[:n]) / np.arange(1, n + 1)
    # stopped only once the cumulative mean is within the band of the plateau's running value ...
    assert abs(cum[-1] - cum[-5]) <= runlength.BAND * cum[-1]
    # ... and well after the warm-up (the cumulative mean still climbs right after it)
    assert n > 20


def test_a_longer_warmup_needs_a_longer_run():
    short, _ = _first_stop(_warmup_then_plateau(warmup_s=10))
    long, _ = _first_stop(_warmup_then_plateau(warmup_s=40, total_s=300))
    assert short < long


def test_noisy_plateau_still_settles_and_a_drift_never_does():
    n, _ = _first_stop(_warmup_then_plateau(noise=0.05, total_s=300))
    assert n is not None
    drift = 100 * 2 ** (np.arange(120) / 30)  # throughput doubling every 30 s never settles
    assert _first_stop(drift) == (None, None)


def test_never_shorter_than_the_minimum():
    flat = np.full(60, 500.0)
    n, t = _first_stop(flat)
    assert t == runlength.MIN_S and n == runlength.MIN_S
    assert "±2.0%" in runlength.criterion()
