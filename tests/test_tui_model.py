"""The TUI's data side without a screen: bucketing, the latency matrix, sparkline windows,
flags and their Markdown (and the report's final flags), the bench and sync-write view
models, themes from themes/*.tcss, and the heatmap's and throughput chart's lines."""

from __future__ import annotations

import numpy as np
import pytest

from fsscope import paths
from fsscope.analysis.heatbuckets import bucket, bucket_mask
from fsscope.engine import registry
from fsscope.engine.events import decode
from fsscope.engine.registry import decode_event, report_from_data
from fsscope.engine.registry import report_from_data as decode_report
from fsscope.format import format_ns
from fsscope.tui.bench_model import BenchModel
from fsscope.tui.model import (
    JobState,
    LatencyMatrix,
    WindowStats,
    flag_from_event,
    flag_key,
    flags_from_report,
    flags_markdown,
)
from fsscope.tui.syncwrite_model import SyncWriteModel
from fsscope.tui.themes import FSSCOPE_THEMES, ThemeFileError, load_themes, parse_theme
from fsscope.tui.widgets.throughput_chart import nice_ceiling, nice_floor, resample
from fsscope.workloads.bench_job import WindowSample
from fsscope.workloads.probe_records import Report


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
    assert outlier.kind == "outlier" and outlier.indices == (22,) and outlier.finding.structure
    series = flag_from_event({"kind": "finding", "flag": "series", "index": 64, "start": 64, "stride": 64,
                              "count": 3, "title": "every 64", "note": "inode chunks"})
    assert series.indices == (64, 128, 192)
    growth = flag_from_event({"kind": "finding", "flag": "lineargrowth", "index": 10, "start": 10, "end": 13,
                              "title": "growth", "note": ""})
    assert growth.indices == (10, 11, 12)
    assert flag_from_event({"flag": "x", "indices": [1, 2]}).indices == (1, 2)
    assert flag_from_event({"title": "x"}).indices == ()
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



def test_theme_files_parse_into_textual_themes():
    themes = {t.name: t for t in load_themes(paths.themes_dir())}
    assert set(FSSCOPE_THEMES) <= set(themes)
    light = themes["fsscope-light"]
    assert light.dark is False and light.primary == "#005fd7"
    assert {f"heat-{n}" for n in range(5)} <= set(light.variables)
    with pytest.raises(ThemeFileError):
        parse_theme("/* name: broken */\n$background: #000;", source="broken.tcss")


def probe_report() -> Report:
    """A probe report as probe_job writes it: flags follow outliers, series, level shifts."""
    return registry.report_from_data("probe", {
        "outliers": [{"kind": "outlier", "index": 253, "runs_flagged": 5, "runs": 5, "median_ns": 90_000,
                      "typical_ns": 9_000, "ratio": 10.0}],
        "series": [{"kind": "series", "start": 64, "stride": 64, "count": 3, "missing": 0}],
        "level_shifts": [{"kind": "levelshift", "index": 27, "before_ns": 9_000, "after_ns": 18_000}],
        "linear_growth": [],
        "flags": [
            {"index": 253, "predicted_index": None, "structure": None, "note": "repeatable, unexplained",
             "flag": "outlier", "title": "file 253 slow in 5/5 runs (10.0× typical) — repeatable, unexplained"},
            {"index": 64, "predicted_index": 64, "structure": "xfs-inode-chunk-alloc", "note": "chunks of 64",
             "flag": "series", "title": "every 64 files from 64 (3×) — xfs-inode-chunk-alloc"},
            {"index": 27, "predicted_index": None, "structure": None, "note": "steps up",
             "flag": "levelshift", "title": "level shift at file 27: 9.0 → 18.0 µs — repeatable, unexplained"},
        ],
    })


def test_final_flags_from_a_probe_report_carry_their_findings():
    report = probe_report()
    flags = flags_from_report(report)
    assert [f.title for f in flags] == [f.title for f in report.flags]
    assert [f.kind for f in flags] == ["outlier", "series", "levelshift"]
    assert flags[1].indices == (64, 128, 192)  # stride and count come from the series list
    assert flags[0].finding.fields["runs_flagged"] == 5 and flags[2].finding.fields["after_ns"] == 18_000
    # the same finding streamed from fewer runs has another title but the same key
    interim = flag_from_event({"kind": "finding", "flag": "outlier", "index": 253, "structure": None,
                               "title": "file 253 slow in 2/2 runs", "note": "", "runs_flagged": 2})
    assert flag_key(interim) == flag_key(flags[0]) and interim.title != flags[0].title
    assert flags_from_report({"op": "creat"}) is None and flags_from_report(None) is None


def test_final_flags_from_a_bench_report_name_their_kind():
    report = {"flags": [{"kind": "variation", "note": "varies 24%", "relative_range": 0.24, "rsd": 0.17,
                         "threshold": 0.1, "title": "throughput varies 24% across runs (relative range)"},
                        {"kind": "periodic", "note": "every 5 s", "window_s": 1, "period_s": 5,
                         "title": "Throughput-1 dips every 5 s"}]}
    flags = flags_from_report(report)
    assert [f.kind for f in flags] == ["variation", "periodic"]
    assert [f.title for f in flags] == [f["title"] for f in report["flags"]]
    assert flags[0].indices == () and flags[0].finding.fields["rsd"] == 0.17


def window(b: int, ops_per_s: float, p99_ns: float = 50_000.0) -> dict:
    return {"bin": b, "t_s": b + 1.0, "ops_per_s": ops_per_s, "complete": True,
            "ops": {"create": {"ops_per_s": ops_per_s / 2, "p50_ns": 10_000.0, "p99_ns": p99_ns},
                    "stat": {"ops_per_s": ops_per_s / 2, "p50_ns": 2_000.0, "p99_ns": None}}}


def bench_event(wire: dict):
    """A bench event as the TUI gets it: decoded by (job, kind), a window to its own record."""
    event = decode_event("bench", wire)
    assert isinstance(event, WindowSample) and event.window.ops["stat"].p99_ns is None
    return event


def test_bench_model_live_band_variation_and_report():
    model = BenchModel({"runs": 3, "duration_s": 4, "window_sizes_s": [2]})
    assert model.default_window() == 1  # 4 s holds fewer than three 2-s windows
    for b, rate in enumerate([100.0, 120.0, 110.0, 130.0]):
        assert model.feed(bench_event({"kind": "samples", "run": 0, "window": window(b, rate)}))
    assert model.variation()["runs"] == 0 and not model.runs[0].finished
    assert model.feed(decode({"kind": "phase", "name": "run 2 of 3", "run": 1}))
    assert model.runs[0].finished and model.runs[0].ops_per_s == pytest.approx(115.0)
    for b, rate in enumerate([80.0, 90.0]):
        model.feed(bench_event({"kind": "samples", "run": 1, "window": window(b, rate, p99_ns=70_000.0)}))
    chart = model.chart()
    assert chart.run == 1 and chart.band_runs == (0,)
    assert chart.current == [80.0, 90.0, None, None] and chart.band_high == [100.0, 120.0, 110.0, 130.0]
    two = model.chart(window_s=2)
    assert two.band_low == [110.0, 110.0, 120.0, 120.0] and two.current == [85.0, 85.0, None, None]
    rows, covers = model.op_rows()
    assert [r.op for r in rows] == ["create", "stat"] and rows[0].p99_ns == 70_000.0 and "run 2" in covers
    assert list(model.worst_p99_ns)[-1] == 70_000.0 and model.worst_p99_op == "create"
    model.feed(bench_event({"kind": "samples", "run": 1, "window": window(2, 100.0)}))
    model.feed(bench_event({"kind": "samples", "run": 1, "window": window(3, 90.0)}))
    model.feed(decode({"kind": "phase", "name": "run 3 of 3", "run": 2}))
    v = model.variation()  # live: estimates from the bins (115 and 90)
    assert v["runs"] == 2 and not v["exact"]
    assert v["relative_range"] == pytest.approx(25 / 102.5)
    rows = model.variation_rows(2)
    assert [(r.run, r.finished, r.exact) for r in rows] == [(0, True, False), (1, True, False), (2, False, False)]
    assert (rows[0].window_min, rows[0].window_max) == (110.0, 120.0)
    report = {"runs": [{"ops_per_s": 114.0, "ops": {"create": {"ops_per_s": 57, "p50_ns": 1e4, "p99_ns": 5e4}}},
                       {"ops_per_s": 91.0, "ops": {"create": {"ops_per_s": 45, "p50_ns": 1e4, "p99_ns": 7e4}}}],
              "variation": {"runs": 2, "relative_range": 0.224, "rsd": 0.16, "mean_ops_per_s": 102.5},
              "notes": ["with 2 runs the relative range and RSD are rough"], "bin_s": 1.0}
    model.finish(decode_report("bench", report))
    assert model.runs[0].exact and model.runs[0].ops_per_s == 114.0
    assert model.variation() == {"runs": 2, "relative_range": 0.224, "rsd": 0.16, "mean": 102.5, "exact": True}
    rows, covers = model.op_rows()
    assert rows[0].p99_ns == 6e4 and "median of 2 runs" in covers
    assert model.notes == report["notes"]


def test_syncwrite_model_shows_a_recorded_spec_that_no_longer_validates():
    assert (SyncWriteModel({"mode": "fsync", "repeats": 3, "duration_s": -1}).mode,
            SyncWriteModel({"mode": "fsync", "repeats": 3, "duration_s": -1}).repeats_requested) == ("fsync", 3)
    assert SyncWriteModel(None).repeats_requested is None and SyncWriteModel(None).mode == "osync"
    assert SyncWriteModel({"repeats": "many"}).mode == "osync"  # a field of the wrong type: the defaults


def test_syncwrite_model_rows_live_then_report():
    model = SyncWriteModel({"mode": "fsync", "repeats": 2})
    for size, repeat, bps, mean in ((4096, 0, 4e6, 1e6), (65536, 0, 40e6, 1.6e6), (4096, 1, 6e6, 0.8e6)):
        assert model.feed(decode_event("syncwrite", {"kind": "samples", "point": {
                                                              "buffer_bytes": size, "repeat": repeat, "writes": 100,
                                                              "order": 0, "bytes_written": 400 << 10, "elapsed_s": 0.1,
                                                       "bytes_per_s": bps, "mean_ns": mean, "p50_ns": mean,
                                                              "p99_ns": mean * 3, "ended": True}}))
    rows = model.rows()
    assert [(r.buffer_bytes, r.repeats, r.exact) for r in rows] == [(4096, 2, False), (65536, 1, False)]
    assert rows[0].bytes_per_s == pytest.approx(5e6) and rows[0].latency_mean_ns == pytest.approx(0.9e6)
    assert rows[0].bytes_per_s_ci95 == pytest.approx(12.7062e6, rel=1e-4)  # t(0.975, 1) · sd(√2 MB/s) / √2
    assert rows[0].latency_p99_ns == pytest.approx(3e6)  # the worst repeat's
    assert model.best_buffer_bytes == 65536  # 40 MB/s per 1.6 ms beats 5 MB/s per 0.9 ms
    assert model.repetitions_done() == 1 and list(model.mb_per_s) == [4.0, 40.0, 6.0]
    curves = model.curves()
    assert curves.sizes == [4096, 65536] and curves.throughput[1] == (40e6, 40e6, 40e6)  # one repetition: no band
    model.finish(report_from_data("syncwrite", {
        "mode": "fsync", "recommended_bytes": 65536, "notes": ["cut short"], "recipe": "xfs-default",
        "knees": {"latency_rise_bytes": 4096, "throughput_saturation_bytes": 65536},
        "flags": [{"kind": "enospc", "title": "file system full", "note": "stopped"}],
        "sizes": [{"buffer_bytes": 4096, "repeats": 2, "throughput_mean": 5e6, "throughput_ci95": 1e6,
                   "latency_mean_ns": 0.9e6, "latency_ci95_ns": 1e5, "latency_p99_ns": 2.5e6}]}))
    rows = model.rows()
    assert [(r.buffer_bytes, r.exact, r.latency_p99_ns) for r in rows] == [(4096, True, 2.5e6)]
    assert model.best_buffer_bytes == 65536 and model.notes == ["cut short", "file system full: stopped"]
    curves = model.curves()
    assert curves.label == "xfs-default" and curves.latency == [(0.9e6, 0.8e6, 1.0e6)]
    assert (curves.rise_bytes, curves.saturation_bytes) == (4096, 65536)


def test_throughput_chart_scale_helpers():
    assert nice_ceiling(251_000) == 300_000 and nice_ceiling(99) == 100 and nice_ceiling(0) == 1.0
    assert nice_floor(123_456) == 120_000 and nice_floor(0) == 0.0
    assert resample([1.0, 2.0], 4) == [1.0, 1.0, 2.0, 2.0]
    assert resample([1.0, 3.0, None, 5.0], 2) == [2.0, 5.0]
    assert resample([], 3) == [None, None, None]
