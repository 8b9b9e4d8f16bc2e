"""The heatmap's bucketing from block summaries against the reference that reads every value:
the same numbers for every aggregate and zoom, on random data with unmeasured files, values
beyond int32, ragged last buckets, and after live batches patched in."""

from __future__ import annotations

import numpy as np
import pytest

from fsscope.analysis.heatbuckets import AGGREGATES, SUMMARY_MIN_ZOOM, BlockSummary, Bucketings, bucket


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


def test_summaries_patched_by_live_batches_equal_a_fresh_bucketing():
    rng = np.random.default_rng(7)
    runs, files = 3, 9_000
    final = random_values(rng, runs, files, 0)
    values = np.full((runs, files), -1, dtype=np.int64)
    held = Bucketings(limit=len(AGGREGATES) * 2)
    version = 1
    for zoom in (SUMMARY_MIN_ZOOM, 1_000):
        for aggregate in AGGREGATES:
            held.get(version, values, zoom, aggregate)
    for start in range(0, files, 1_337):  # batches across block and bucket edges
        for run in range(runs):
            stop = min(files, start + 1_337)
            values[run, start:stop] = final[run, start:stop]
            version += 1
            assert held.patch(version, values, run, start, stop)
    for zoom in (SUMMARY_MIN_ZOOM, 1_000, 3_000):  # held (patched) and new ones from the patched summary
        for aggregate in AGGREGATES:
            assert np.array_equal(held.get(version, values, zoom, aggregate), bucket(values, zoom, aggregate))
