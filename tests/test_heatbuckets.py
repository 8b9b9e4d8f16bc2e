"""The heatmap's bucketing from block summaries against the reference that reads every value:
the same numbers for every aggregate and zoom, on random data with unmeasured files, values
beyond int32, ragged last buckets, and after live batches patched in."""

from __future__ import annotations

import numpy as np
import pytest

from fsscope.analysis.heatbuckets import (
    AGGREGATES,
    SKETCH_MIN_VALUES,
    SUMMARY_MIN_ZOOM,
    BlockSummary,
    Bucketings,
    bucket,
)


def random_values(rng: np.random.Generator, runs: int, files: int, kind: int) -> np.ndarray:
    values = rng.lognormal(np.log(20_000), 1.0, (runs, files)).astype(np.int64)
    if kind == 1:  # unmeasured files scattered
        values[rng.random(values.shape) < 0.3] = -1
    elif kind == 2:  # a run in progress: the second half not measured yet
        values[:, files // 2:] = -1
    elif kind == 3:  # latencies beyond int32 nanoseconds (2.1 s) in one run
        values[0, : files // 3] *= 10**6
    elif kind == 4:  # ties: few distinct values
        values = rng.integers(-1, 4, (runs, files)).astype(np.int64)
    return values


@pytest.mark.parametrize("kind", range(5))
def test_summarised_bucketing_equals_the_reference(kind):
    rng = np.random.default_rng(kind)
    for _ in range(12):
        runs, files = int(rng.integers(1, 4)), int(rng.integers(1, 12_000))
        values = random_values(rng, runs, files, kind)
        summary = BlockSummary()
        zooms = {SUMMARY_MIN_ZOOM, SUMMARY_MIN_ZOOM + 7, 1000, 2000, 5000, int(rng.integers(2, 7000)),
                 max(1, -(-files // 193))}  # the fit of 200 columns
        for zoom in sorted(zooms):
            for aggregate in AGGREGATES:
                expected = bucket(values, zoom, aggregate)
                got = bucket(values, zoom, aggregate, summary=summary)
                assert got.dtype == expected.dtype and np.array_equal(got, expected), (runs, files, zoom, aggregate)
        assert summary.kinds  # the summarised way was taken


@pytest.mark.parametrize("kind", range(5))
def test_a_window_of_columns_equals_those_columns_of_the_whole(kind):
    """What a frame buckets (the columns on screen, ``columns=``) is exactly those columns of
    the whole bucketing, summarised or not, at the window's edges and the ragged last bucket."""
    rng = np.random.default_rng(100 + kind)
    for _ in range(6):
        runs, files = int(rng.integers(1, 4)), int(rng.integers(1, 12_000))
        values = random_values(rng, runs, files, kind)
        summary = BlockSummary()
        for zoom in sorted({2, 7, SUMMARY_MIN_ZOOM, 1000, max(1, -(-files // 193))}):
            total = -(-files // zoom)
            cut = int(rng.integers(0, total))
            for aggregate in AGGREGATES:
                whole = bucket(values, zoom, aggregate)
                for c0, c1 in {(0, total), (0, 1), (total - 1, total), (cut, min(total, cut + 193)), (cut, total + 5)}:
                    for held in (None, summary):
                        got = bucket(values, zoom, aggregate, summary=held, columns=(c0, c1))
                        assert np.array_equal(got, whole[:, c0:c1]), (runs, files, zoom, aggregate, c0, c1)


def test_summaries_patched_by_live_batches_equal_a_fresh_bucketing():
    rng = np.random.default_rng(7)
    runs, files = 3, 9_000
    final = random_values(rng, runs, files, 0)
    values = np.full((runs, files), -1, dtype=np.int64)
    held = Bucketings(limit=len(AGGREGATES) * 2)
    version = 1
    for zoom in (SUMMARY_MIN_ZOOM, 1_000):
        for aggregate in AGGREGATES:  # a screen's columns of one, all of the other
            held.get(version, values, zoom, aggregate, (2, 7) if zoom == 1_000 else None)
    for start in range(0, files, 1_337):  # batches across block and bucket edges
        for run in range(runs):
            stop = min(files, start + 1_337)
            values[run, start:stop] = final[run, start:stop]
            version += 1
            assert held.patch(version, values, run, start, stop)
    for zoom in (SUMMARY_MIN_ZOOM, 1_000, 3_000):  # held (patched) and new ones from the patched summary
        for aggregate in AGGREGATES:
            assert np.array_equal(held.get(version, values, zoom, aggregate), bucket(values, zoom, aggregate))


def test_big_data_percentiles_from_histograms_are_within_half_a_bin_and_follow_live_batches():
    """At 1M values and more a percentile of a zoom from 500 files up comes from log histograms
    (fsscope.analysis.heatbuckets._sketched_percentiles): each bucket within half a bin (3.1 %)
    of the exact value, at the zoom steps and at an odd (fit) zoom with
    a ragged last bucket; after live batches (one beyond the bins' range) the same holds."""
    rng = np.random.default_rng(11)
    runs, files = 2, 600_001  # 1.2M values: above SKETCH_MIN_VALUES
    assert runs * files >= SKETCH_MIN_VALUES
    values = rng.lognormal(np.log(20_000), 1.0, (runs, files)).astype(np.int64)
    values[rng.random(values.shape) < 0.1] = -1
    values[1, 400_000:] = -1  # a run in progress
    held = Bucketings(limit=16)
    windowed = Bucketings(limit=16)  # asked only for a screen's columns

    def check(version: int) -> None:
        for zoom in (500, 5_000, 3_109):  # steps (blocks of 500) and a fit of ~193 columns
            for aggregate in ("p99", "p90", "p50"):
                got = held.get(version, values, zoom, aggregate)
                for c0 in (0, 700, got.shape[1] - 50):
                    window = (max(0, c0), max(0, c0) + 193)
                    part = windowed.get(version, values, zoom, aggregate, window)
                    assert np.array_equal(part[:, window[0]:window[1]], got[:, window[0]:window[1]]), (zoom, c0)
                exact = bucket(values, zoom, aggregate)
                assert np.array_equal(got < 0, exact < 0), (zoom, aggregate)
                shown = exact >= 0
                error = np.abs(np.log2(got[shown] / exact[shown]))
                assert error.max() <= np.log2(1 + 1 / 32), (zoom, aggregate, error.max())  # half the widest bin

    check(1)
    values[1, 400_000:450_000] = rng.lognormal(np.log(20_000), 1.0, 50_000).astype(np.int64)
    assert held.patch(2, values, 1, 400_000, 450_000) and windowed.patch(2, values, 1, 400_000, 450_000)
    values[0, 1_000:1_700] = 10**11  # far beyond the bins made for the data: made anew
    assert held.patch(3, values, 0, 1_000, 1_700) and windowed.patch(3, values, 0, 1_000, 1_700)
    check(3)
