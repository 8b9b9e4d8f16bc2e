"""The compare screen on two real bench runs (dir target, no root): both runs' ops/s side by
side, B / A ratios per op, and a Welch verdict line — driven from the runs screen by keys."""

from __future__ import annotations

import re

import pytest
from pilot_wait import until
from test_tui import compare_runs, open_compare

from fsscope import recipes
from fsscope.engine import runner
from fsscope.engine.registry import spec_from_data
from fsscope.targets import TargetSpec
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


@pytest.mark.privileged
async def test_compare_names_a_ram_target_as_the_runs_table_does():
    """Each side names its target as the live screen and the runs table do ("RAM image (256 MiB
    in /dev/shm)"), not by the recorded kind ("ram · ok": the walk at 80x24, issue 33 item 10)."""
    ids = []
    for _ in range(2):  # bench: its compare names each side in a head of its own (a heatmap job's too)
        handle = runner.start("bench", spec_from_data("bench", {"personality": "varmail", "runs": 2, "duration_s": 1}),
                              TargetSpec("ram", size_bytes=256 * 2**20), recipes.load("ext4-default"))
        handle.drain()
        assert handle.returncode == 0, (handle.run_dir.path / "child.log").read_text()[-2000:]
        ids.append(handle.run_dir.id)
    app = make_app(AppConfig(start_screen="runs"))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_compare(pilot, app, *ids)
        heads = [str(w.content) for w in screen.query(".compare-summary")]
        assert len(heads) == 2, heads
        for head in heads:
            assert "RAM image (256 MiB in " in head, head
            assert not re.search(r"^ram\b", head, re.MULTILINE), head
