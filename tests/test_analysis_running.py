"""The probe analysis carried from run to run (``outliers.RunningAnalysis``, ``analysis.running``)
against the whole-matrix computations it replaced: the median curve against numpy's nanmedian
(values over 4 s included, which the compact sorted store cannot hold), the statistics against
``summarize``/``split_low_high`` of every value, and the analysis made run by run over a
memory-mapped run array against a fresh one of the same runs."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from fsscope.analysis import latency, outliers, sequential
from fsscope.analysis.running import RunningSummary

FIXTURES = Path(__file__).parent / "fixtures" / "probe_matrices"


def _matrix(seed: int, runs: int = 6, files: int = 3000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    matrix = rng.lognormal(np.log(40_000), 0.3, size=(runs, files)).astype(np.int64)
    matrix[rng.random(matrix.shape) < 0.02] = -1  # not measured
    matrix[:, rng.integers(0, files, 10)] = rng.integers(5_000_000_000, 9_000_000_000, size=(runs, 10))
    return matrix


@pytest.mark.parametrize("seed", range(4))
def test_the_median_curve_is_numpys_nanmedian_even_above_four_seconds(seed):
    matrix = _matrix(seed)
    as_float = np.where(matrix < 0, np.nan, matrix.astype(np.float64))
    for runs in (1, 2, 5, 6):
        curve = outliers.analyze(matrix[:runs]).median_curve_ns
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a file no run measured: NaN
            expected = np.nanmedian(as_float[:runs], axis=0)
        np.testing.assert_array_equal(curve, expected)


@pytest.mark.parametrize("seed", range(4))
def test_the_running_statistics_are_those_of_every_value(seed):
    rng = np.random.default_rng(seed)
    matrix = _matrix(seed, runs=4, files=int(rng.integers(1, 5000)))
    if seed == 3:
        matrix[:, : matrix.shape[1] // 2] = 0  # a median of 0 ns: the zero threshold
    summary = RunningSummary()
    for row in matrix:
        summary.add(row)
    overall, low_high = summary.summaries(2.0, lambda: iter(matrix))
    expected_low_high = latency.split_low_high(matrix, factor=2.0)
    for got, want in ((overall, latency.summarize(matrix)), (low_high["low"], expected_low_high["low"]),
                      (low_high["high"], expected_low_high["high"])):
        assert got.keys() == want.keys()
        for key in ("count", "min_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns"):
            assert got[key] == want[key], key  # order statistics: exactly
        for key in ("mean_ns", "sd_ns", "rsd"):
            assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-9), key
    assert low_high["threshold_ns"] == expected_low_high["threshold_ns"]


def test_a_constant_matrix_has_no_spread():
    summary = RunningSummary()
    matrix = np.full((3, 100), 80_000, dtype=np.int64)
    for row in matrix:
        summary.add(row)
    overall, _ = summary.summaries(2.0, lambda: iter(matrix))
    assert overall["sd_ns"] == 0.0 and overall["mean_ns"] == 80_000.0


@pytest.mark.parametrize("name", ["xfs-ram", "tmpfs-dir"])
def test_the_analysis_run_by_run_on_a_mapped_run_array_is_a_fresh_analysis_of_those_runs(name, tmp_path):
    """As the probe job makes it: the run arrays memory-mapped, growing a run at a time, the
    sequential decisions after each; every run's analysis and decisions equal those made from
    scratch of the same runs (the old way), the statistics' mean and sd to 1e-9."""
    with np.load(FIXTURES / f"{name}.npz") as data:
        recorded_latency, recorded_wait = data["latency_ns"].astype(np.int64), data["wait_ns"].astype(np.int64)
    runs, files = recorded_latency.shape
    latency_ns = np.lib.format.open_memmap(tmp_path / "latency_ns.npy", "w+", np.int64, (runs, files))
    wait_ns = np.lib.format.open_memmap(tmp_path / "wait_ns.npy", "w+", np.int64, (runs, files))
    latency_ns[:], wait_ns[:] = -1, 0
    running, fresh = sequential.Settling(3, runs), sequential.Settling(3, runs)
    for r in range(runs):
        latency_ns[r], wait_ns[r] = recorded_latency[r], recorded_wait[r]
        if r == 0:
            continue  # the job analyses from the second run on
        made = running.analyze(latency_ns[: r + 1], wait_ns[: r + 1])
        running.after_run(r, made, latency_ns[: r + 1], wait_ns[: r + 1])
        anew = outliers.analyze(recorded_latency[: r + 1].copy(), wait_ns=recorded_wait[: r + 1].copy(),
                                null_worlds=0)  # the live analyses are not held to the null worlds
        fresh.after_run(r, anew, recorded_latency[: r + 1].copy(), recorded_wait[: r + 1].copy())
        got, want = running.settled(made).to_json(include_curve=True), fresh.settled(anew).to_json(include_curve=True)
        assert _rounded(got) == _rounded(want)
        assert running.to_json() == fresh.to_json()
    assert running.running is not None and running.running.runs == runs  # each run folded in once
    # the report's analysis, held to the null worlds, from the state: as a fresh one
    final = running.final_analysis(latency_ns, wait_ns, list(range(runs)))
    assert final.null_gate and running.running.runs == runs
    assert _rounded(final.to_json()) == _rounded(
        outliers.analyze(recorded_latency, wait_ns=recorded_wait, gate_levels=True).to_json())


def _rounded(value):
    """Floats to 9 significant digits (a mean or sd summed in another order)."""
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return float(f"{value:.9g}") if isinstance(value, float) else value
