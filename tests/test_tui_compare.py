"""The compare screen on two real bench runs (dir target, no root): both runs' ops/s side by
side, B / A ratios per op, and a Welch verdict line — driven from the runs screen by keys."""

from __future__ import annotations

import re

from pilot_wait import until
from test_tui import compare_runs

from fsscope.tui import AppConfig, make_app
from fsscope.tui.screens.compare import CompareScreen

SIZE = (140, 45)


async def test_compare_two_bench_runs(scratch, recorded_run):
    ids = [recorded_run("bench", {"personality": "varmail", "runs": 2, "duration_s": 2}, scratch) for _ in range(2)]
    app = make_app(AppConfig(start_screen="runs"))
    async with app.run_test(size=SIZE) as pilot:
        screen, verdict = await compare_runs(pilot, app, *ids)
        assert verdict.startswith(("Winner: ", "No winner: ")) and "Welch" in verdict, verdict
        heads = [str(w.content) for w in screen.query(".compare-summary")]
        assert len(heads) == 2
        for head, side in zip(heads, screen.sides):
            ops = side.report.variation.mean_ops_per_s
            assert f"mean {ops:,.0f} ops/s" in head and "varmail" in head, head
            assert re.search(r"RSD \d", head)
        titles = [s.title for s in screen.comparison.sections]
        assert any(t.startswith("throughput") for t in titles) and any("bands" in t for t in titles)
        per_op = next(s for s in screen.comparison.sections if s.title.startswith("per op"))
        assert any(r.metric.endswith("p99") and r.ratio for r in per_op.rows)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CompareScreen), "the compare screen closed")
