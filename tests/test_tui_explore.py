"""The explore job in the TUI: a tiny study started from the setup screen streams its
treatments into the explore view (progress, d-span CDF per file system, factor bars, tail
heatmaps), and the same view comes back when the run is replayed."""

from __future__ import annotations

import pytest
from pilot_wait import until
from test_tui import SIZE, assert_clean, job_view, open_replay, run_plan

from fsscope import records
from fsscope.engine.registry import decode_event
from fsscope.study.explore import Report
from fsscope.targets import TargetSpec
from fsscope.tui import AppConfig, make_app
from fsscope.tui.explore_model import ExploreModel
from fsscope.tui.widgets.explore_view import ExploreView

TINY = ["DiskSize=64M", "UsedRatio=0", "FreeSpaceLayout=6", "CPUCount=1", "FileCount=1", "FileSize=16K,128K"]


def test_explore_model_from_report_rows():
    """Rows in, shares/tail/heatmap out, without Textual (pure model)."""
    model = ExploreModel({"tail_quantile": 0.9})
    for i in range(20):
        model.feed(decode_event("explore", {"kind": "treatment", "fs": "ext4", "factors": {"A": i % 2, "B": (i // 2) % 4},
                           "d_span_bytes": 4096 * (1 + 100 * (i % 2))}))
    model.feed(decode_event("explore", {"kind": "treatment", "fs": "ext4", "factors": {"A": 0, "B": 0}, "error": "boom"}))
    assert len(model.rows) == 20 and model.failed == 1
    shares = dict(model.shares())
    assert shares["A"] == pytest.approx(1.0, abs=0.01) and abs(shares["B"]) < 0.1
    tail = dict(model.tail_levels())
    assert [share for _, share, _ in tail["A"]] == [0.0, 1.0]
    a, b, la, lb, grid = model.pair_heatmap()
    assert (a, la) == ("A", [0, 1]) and grid.shape == (2, 4)
    version = model.version
    model.next_pair()  # the view's p key: the next pair (two factors: back to the same one)
    assert model.version > version and model.pair_heatmap()[:2] == ("A", "B")
    text = ExploreView.render_model(model).plain
    assert "20 treatments so far" in text and "1 failed" in text and "ext4" in text


def test_explore_model_ranks_each_file_system():
    """Two file systems whose d-span depends on different factors: the view ranks each on
    its own beside the pooled ranking, and says per file system how often repeats differed."""
    model = ExploreModel({"tail_quantile": 0.9})
    for i in range(32):
        a, b = i % 2, (i // 2) % 2
        model.feed(decode_event("explore", {"kind": "treatment", "fs": "ext4", "factors": {"A": a, "B": b},
                           "d_span_bytes": 4096 * (1 + 100 * a)}))
        model.feed(decode_event("explore", {"kind": "treatment", "fs": "xfs", "factors": {"A": a, "B": b},
                           "d_span_bytes": 4096 * (1 + 100 * b)}))
    assert dict(model.shares("ext4"))["A"] == pytest.approx(1.0, abs=0.01)
    assert dict(model.shares("xfs"))["B"] == pytest.approx(1.0, abs=0.01)
    assert dict(model.shares("xfs"))["A"] < 0.05
    assert [s for _, s, _ in dict(model.tail_levels("xfs"))["B"]] == [0.0, 1.0]
    model.finish(records.convert({"notes": [], "by_fs": {"ext4": {"nondeterminism": {"pairs": 10, "changed_share": 0.2}},
                                                         "xfs": {"nondeterminism": {"pairs": 10, "changed_share": 0.0}}},
                                  "nondeterminism": {"pairs": 20, "changed_share": 0.1}}, Report))
    text = ExploreView.render_model(model).plain
    header = next(line for line in text.splitlines() if "pooled" in line and "ext4" in line)
    assert header.split() == ["pooled", "ext4", "xfs"]
    assert "tail share per level on xfs" in text and "tail share per level on ext4" in text
    assert "pooled 10% of 20, ext4 20% of 10, xfs 0% of 10" in text


@pytest.mark.privileged
async def test_explore_job_live_and_replayed(tmp_path):
    app = make_app(AppConfig(target=TargetSpec("dir", str(tmp_path)), jobs=("explore",),
                             job_defaults={"explore": {"treatments": 2, "workers": 1, "factors": TINY}}))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#job-picker").selected == ["explore"]
        live, job = await run_plan(pilot, app, "the study", 180)
        assert job.fraction == 1.0
        # how busy the machine was, in the log as the CLI prints it
        assert any(line.startswith("machine: load") for line in live.log_panel.lines_written)

        async def check(screen) -> None:
            view = job_view(screen, ExploreView)

            def text() -> str:
                return str(view.query_one("#explore-text").content)

            await until(pilot, lambda: "2 treatments final" in text(), "the final view", 10)
            text = text()
            assert "ext4" in text
            assert isinstance(job.report, Report)
            assert "factor prioritization" in text and job.report.prioritization[0].factor in text
            assert job.report.notes[0][:30] in text

        await check(live)
        await check(await open_replay(pilot, app, job.run_id))
    assert_clean()
    assert not app.worker_errors
