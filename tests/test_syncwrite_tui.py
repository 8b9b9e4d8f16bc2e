"""Two real sync-write sweeps (dir target, no root) compared in the TUI: both runs' log–log
throughput and latency curves on one chart, B / A per size and a Welch verdict per buffer size
at the paper's p < 0.001 — driven from the runs screen by keys."""

from __future__ import annotations

from pilot_wait import until
from test_tui import compare_runs

from fsscope.tui import AppConfig, make_app
from fsscope.tui.screens.compare import CompareScreen
from fsscope.tui.widgets.syncwrite_chart import SyncWriteChart

SIZE = (150, 60)


async def test_compare_two_syncwrite_runs(scratch, recorded_run):
    spec = {"buffer_sizes_bytes": [4096, 65536], "file_size_bytes": 256 << 10, "mode": "fdatasync", "repeats": 3}
    ids = [recorded_run("syncwrite", spec, scratch) for _ in range(2)]
    app = make_app(AppConfig(start_screen="runs"))
    async with app.run_test(size=SIZE) as pilot:
        screen, verdict = await compare_runs(pilot, app, *ids)
        assert verdict.startswith("Throughput per buffer size (Welch, p < 0.001)") and "of 2 sizes" in verdict
        rows = [r for sec in screen.comparison.sections for r in sec.rows]
        verdicts = [r.a for r in rows if r.metric.endswith("verdict (p < 0.001)")]
        assert len(verdicts) == 2 and all(v in ("A faster", "B faster", "no significant difference") for v in verdicts)
        assert any(r.metric == "recommended buffer" for r in rows)
        charts = {c.metric: str(c.content) for c in screen.query(SyncWriteChart)}
        assert set(charts) == {"throughput", "latency"}
        for text in charts.values():
            assert "● A" in text and "● B" in text and "4K" in text and "64K" in text
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CompareScreen), "back from compare")
