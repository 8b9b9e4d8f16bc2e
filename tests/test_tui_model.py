"""The TUI's data side without a screen: bucketing, the latency matrix, sparkline windows,
flags and their Markdown, themes from themes/*.tcss, and the heatmap's lines."""

from __future__ import annotations

import numpy as np
import pytest

from fsscope import paths
from fsscope.tui.model import (
    JobState,
    LatencyMatrix,
    WindowStats,
    flag_from_event,
    flag_indices,
    flags_markdown,
    format_ns,
    ks_distance,
)
from fsscope.tui.themes import FSSCOPE_THEMES, ThemeFileError, load_themes, parse_theme
from fsscope.tui.widgets.heatmap import bucket, bucket_mask


def test_bucket_max_percentile_mean_ignore_unmeasured():
    values = np.array([[1, 5, -1, 3, 100, -1, -1, -1, 7]], dtype=np.int64)
    assert bucket(values, 3, "max").tolist() == [[5, 100, 7]]
    assert bucket(values, 3, "mean").tolist() == [[3, 51, 7]]
    assert bucket(values, 3, "p50").tolist() == [[1, 3, 7]]
    assert bucket(np.full((2, 4), -1, dtype=np.int64), 2, "p99").tolist() == [[-1, -1], [-1, -1]]
    assert bucket(values, 1, "max").tolist() == values.tolist()
    assert bucket_mask(np.array([False, False, True, False, False]), 2).tolist() == [False, True, False]


def test_bucket_p99_matches_numpy_per_bucket():
    rng = np.random.default_rng(3)
    values = rng.integers(1, 10**6, size=(4, 1000)).astype(np.int64)
    values[rng.random(values.shape) < 0.1] = -1
    got = bucket(values, 50, "p90")
    for r in range(4):
        for c in range(20):
            block = values[r, c * 50:(c + 1) * 50]
            block = block[block >= 0]
            expected = np.sort(block)[int(np.floor(0.9 * (block.size - 1)))]
            assert got[r, c] == expected


def test_latency_matrix_grows_and_counts():
    m = LatencyMatrix(runs=2, files=10)
    assert m.values.shape == (2, 10) and (m.values == -1).all()
    m.put(0, 0, [5, 6, 7])
    m.put(2, 30, [1, 2])  # a run and files beyond what was announced
    assert m.values.shape == (3, 32) and m.value(2, 31) == 2 and m.value(0, 3) == -1
    assert m.measured == 5 and m.version == 2
    assert sorted(m.all_measured().tolist()) == [1, 2, 5, 6, 7]


def test_window_stats_percentiles_and_rate():
    w = WindowStats(window_calls=4)
    w.add(np.array([1000, 2000, 3000, 4000, 5000], dtype=np.int64), run=0, t_s=1.0)
    w.add(np.array([6000, 7000, 8000], dtype=np.int64), run=0, t_s=2.0)
    assert list(w.p50_us) == [2.5, 6.5]
    assert list(w.calls_per_s) == [3.0]
    assert all(isinstance(v, float) for v in WindowStats.log_series(w.p99_us))


def test_flags_from_probe_findings():
    outlier = flag_from_event({"t": 1, "kind": "finding", "flag": "outlier", "index": 22, "title": "file 22",
                               "note": "short-form limit", "structure": "xfs-dir-shortform-to-block"})
    assert outlier.kind == "outlier" and outlier.indices == (22,) and outlier.raw["structure"]
    series = flag_from_event({"kind": "finding", "flag": "series", "index": 64, "start": 64, "stride": 64,
                              "count": 3, "title": "every 64", "note": "inode chunks"})
    assert series.indices == (64, 128, 192)
    growth = flag_from_event({"kind": "finding", "flag": "lineargrowth", "index": 10, "start": 10, "end": 13,
                              "title": "growth", "note": ""})
    assert growth.indices == (10, 11, 12)
    assert flag_indices({"indices": [1, 2]}) == (1, 2) and flag_indices({"title": "x"}) == ()
    md = flags_markdown([outlier, series], heading="run X", context=["job: probe"])
    assert md.startswith("# run X") and "## 1. file 22" in md and "short-form limit" in md
    assert "| structure | xfs-dir-shortform-to-block |" in md
    assert "No flags were raised." in flags_markdown([])


def test_job_state_times_and_formatting():
    job = JobState(0, "probe")
    job.start(now_s=100.0)
    job.done, job.total = 25, 100
    assert job.elapsed_s(now_s=110.0) == 10.0 and job.remaining_s(now_s=110.0) == pytest.approx(30.0)
    job.finish("ok", now_s=120.0)
    assert job.remaining_s() == 0.0 and job.elapsed_s() == 20.0
    assert format_ns(850) == "850 ns" and format_ns(12_300) == "12.3 µs" and format_ns(-1) == "not measured"


def test_ks_distance():
    a = np.arange(1000, dtype=np.int64)
    assert ks_distance(a, a) == 0.0
    assert ks_distance(a, a + 10_000) == 1.0


def test_theme_files_parse_into_textual_themes():
    themes = {t.name: t for t in load_themes(paths.themes_dir())}
    assert set(FSSCOPE_THEMES) <= set(themes)
    light = themes["fsscope-light"]
    assert light.dark is False and light.primary == "#005fd7"
    assert {f"heat-{n}" for n in range(5)} <= set(light.variables)
    with pytest.raises(ThemeFileError):
        parse_theme("/* name: broken */\n$background: #000;", source="broken.tcss")
