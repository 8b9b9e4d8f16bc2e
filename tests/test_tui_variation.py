"""The variation study in the TUI (#15): the paper's figures recomputed from the study's rows
(a pure model with known answers), and a tiny real study (2 configurations x 2 runs x 1 s)
started from the setup screen, its figures on the live screen, and the same figures again
when the run is replayed from treatments.ndjson."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pilot_wait import setup_ready, until
from test_tui import SIZE, assert_clean, job_done, job_view, live_of, open_replay, plan_over

from fsscope import records
from fsscope.engine.registry import decode_event
from fsscope.format import format_pct
from fsscope.study.variation import Report, RowDone, VariationRow
from fsscope.targets import TargetSpec
from fsscope.tui import AppConfig, make_app
from fsscope.tui import messages as msg
from fsscope.tui.variation_model import FIGURE_TITLES, FIGURES, VariationModel, quantile_at
from fsscope.tui.widgets.variation_view import VariationView, short_level


def _row(id_, row, ops, hists, knobs, personality="varmail", fs="ext4", bins=4) -> VariationRow:
    """A study row as treatments.ndjson holds it: per run ops/s, ops per 1-s bin (flat at the
    run's rate), one op's sparse latency histogram [[bucket, count], ...]."""
    return records.convert(_wire(id_, row, ops, hists, knobs, personality, fs, bins), VariationRow)


def _wire(id_, row, ops, hists, knobs, personality="varmail", fs="ext4", bins=4) -> dict:
    return {"id": id_, "recipe": f"{fs}:{personality}", "row": row, "repeat": 0, "factors": knobs, "fs": fs,
            "personality": personality, "knobs": knobs, "mkfs_opts": ["-b", "4096"], "mount_opts": [],
            "runs": [{"ops_per_s": o, "elapsed_s": float(bins), "counts_per_bin": [o] * bins, "op_names": ["read"],
                      "latency_hist": [h]} for o, h in zip(ops, hists)]}


SAME = [[10, 5]]
ROWS = [
    # relative range 0, 0.2, 0.4; K-S range 0, 0.5, 1.0 -> PCC exactly 1
    _row("ext4:varmail-0-r0", 0, [100, 100], [SAME, SAME], {"ext4_journal": "ordered", "atime": "noatime"}),
    _row("ext4:varmail-1-r0", 1, [90, 110], [SAME, [[10, 5], [20, 5]]], {"ext4_journal": "writeback", "atime": "noatime"}),
    _row("ext4:varmail-2-r0", 2, [80, 120], [SAME, [[20, 5]]], {"ext4_journal": "writeback", "atime": "relatime"}),
    _row("ext4:fileserver-0-r0", 0, [1000, 1050], [SAME, SAME], {"ext4_journal": "ordered", "atime": "noatime"},
         personality="fileserver"),
]


def test_variation_model_known_answers():
    model = VariationModel({"threshold": 0.1})
    for row in ROWS:
        assert model.feed(decode_event("variation", {"kind": "variation_row", "row": records.plain(row)}))
    assert not model.feed(RowDone(row=ROWS[0]))  # the same row again: once
    model.feed(decode_event("variation", {"kind": "treatment", "id": "ext4:varmail-3-r0", "error": "mkfs failed"}))
    assert len(model.configs) == 4 and model.failed == [("ext4:varmail-3-r0", "mkfs failed")]
    by_id = {c.id: c for c in model.configs}
    assert [by_id[f"ext4:varmail-{i}-r0"].relative_range for i in range(3)] == pytest.approx([0, 0.2, 0.4])
    assert [by_id[f"ext4:varmail-{i}-r0"].ks_range for i in range(3)] == pytest.approx([0, 0.5, 1.0])
    assert by_id["ext4:fileserver-0-r0"].relative_range == pytest.approx(50 / 1025)
    # Fig. 1: most variable first; Fig. 2: varmail and fileserver side by side for ext4-0
    assert [c.id for c in model.by_range("varmail")] == [f"ext4:varmail-{i}-r0" for i in (2, 1, 0)]
    assert set(dict(model.across_workloads())["ext4-0"]) == {"varmail", "fileserver"}
    # Fig. 6: flat runs -> every Throughput-N window has the run's relative range
    assert model.windows_s() == (1, 2)
    cdfs = {(p, fs): cdf for p, fs, _, cdf in model.window_cdfs()}
    assert list(cdfs[("varmail", "ext4")][1]) == pytest.approx([0] * 4 + [0.2] * 4 + [0.4] * 4)
    assert list(cdfs[("varmail", "ext4")][2]) == pytest.approx([0] * 2 + [0.2] * 2 + [0.4] * 2)
    # a workload with longer runs gets the larger windows that fit them
    longer = VariationModel({})
    for row in (ROWS[0], _row("ext4:fileserver-0-r0", 0, [5, 5], [SAME, SAME], {}, personality="fileserver", bins=10)):
        longer.add_row(row)
    assert longer.windows_s("varmail") == (1, 2) and longer.windows_s("fileserver") == (1, 2, 5, 10)
    assert {p: list(cdf) for p, _, _, cdf in longer.window_cdfs()} == {"fileserver": [1, 2, 5, 10], "varmail": [1, 2]}
    # Fig. 7: flat runs normalise to 1 everywhere
    assert model.normalised_series(by_id["ext4:varmail-1-r0"], 2) == [[1.0, 1.0], [1.0, 1.0]]
    band = model.band(by_id["ext4:varmail-1-r0"], 2)  # Fig. 5: runs at 90 and 110 ops/s
    assert list(band.min) == [90, 90] and list(band.mean) == [100, 100] and list(band.max) == [110, 110]
    # Fig. 8: the run with latencies in bucket 20 only has its median there
    q = by_id["ext4:varmail-2-r0"].latency_quantiles_ns["read"]
    assert quantile_at(q[0], 0.5) == pytest.approx(10.0) and quantile_at(q[1], 0.5) == pytest.approx(20.0)
    # Fig. 9: K-S range rises linearly with the relative range -> r = 1 (varmail); 1 fileserver point: none
    table = {(p, op): (n, r) for p, _, op, n, r, _ in model.pcc_table()}
    assert table[("varmail", "read")][0] == 3 and table[("varmail", "read")][1] == pytest.approx(1.0)
    assert table[("fileserver", "read")] == (1, None)
    r, p, n = model.overall_pcc()
    expected = np.corrcoef([0, 0.2, 0.4, 50 / 1025], [0, 0.5, 1.0, 0])[0, 1]  # all four, largest K-S over ops
    assert n == 4 and r == pytest.approx(expected) and 0 < p < 0.05
    # flagged (> 10 %): varmail-1 and -2, both writeback -> that level is shared, atime is not
    effects = {(fs, knob): cells for fs, knob, cells in model.level_effects()}
    journal = {level: (rr, n, hot, shared) for level, rr, n, hot, shared in effects[("ext4", "ext4_journal")]}
    assert journal["writeback"][1:] == (2, 2, True) and journal["writeback"][0] == pytest.approx(0.3)
    assert journal["ordered"][2:] == (0, False)
    assert not any(shared for *_, shared in effects[("ext4", "atime")])
    assert any("ext4_journal = writeback" in n for n in model.notes)
    # the keys: figures cycle, the selection moves, the text says what it shows
    version = model.version
    model.next_figure()
    assert model.figure == "2" and model.version > version
    model.select(1)
    assert model.current.id == "ext4:varmail-0-r0"
    for figure in FIGURES:
        model.show_figure(figure)
        text = VariationView.render_figure(model).plain
        assert FIGURE_TITLES[figure] in text and "4 configurations so far" in text and "1 failed" in text
    model.show_figure("9")
    assert f"PCC r = {expected:.2f}" in VariationView.render_figure(model).plain
    side = VariationView.render_side(model).plain
    assert "ext4:varmail-0-r0" in side and "writeback" not in side and "ordered" in side
    # named in words first, the id only as its code name (issue 27)
    assert side.startswith("ext4 configuration 1 under varmail\ncode name ext4:varmail-0-r0")
    assert model.window_s == 1 and (model.next_window() or model.window_s) == 2
    # the end: the flags panel lists the flagged configurations, most variable first, then the notes;
    # picking one shows it in the figures
    assert model.final_flags() is None  # until the report; live_flags meanwhile
    live_titles = [f.title for f in model.live_flags()]
    model.finish(Report(planned=5, completed=4))
    flags = model.final_flags()
    assert [f.title for f in flags] == live_titles
    assert [f.title for f in flags[:2]] == ["ext4-2 varmail varies 40.0%", "ext4-1 varmail varies 20.0%"]
    assert [f.note for f in flags[2:]] == model.notes
    model.select_id(flags[0].finding.id)
    assert model.current.id == "ext4:varmail-2-r0"
    assert "4 configurations final of 5 planned" in VariationView.render_figure(model).plain


def test_selection_stays_on_its_configuration_as_rows_arrive():
    model = VariationModel({})
    model.add_row(ROWS[1])
    assert model.current.id == "ext4:varmail-1-r0"
    model.add_row(ROWS[0])  # before it in id order
    assert model.current.id == "ext4:varmail-0-r0"  # nothing chosen yet: the first
    model.select(1)
    model.add_row(ROWS[3])  # "ext4:fileserver-..." sorts first
    assert model.current.id == "ext4:varmail-1-r0" and model.selected == 2
    model.select(1)
    assert model.current.id == "ext4:fileserver-0-r0"  # wraps around


def test_resumed_study_reads_the_earlier_rows(tmp_path):
    """A resumed study streams only the rows it ran; at its end the model reads the ones the
    interrupted run recorded from the study directory, as the replay does."""
    (tmp_path / "treatments.ndjson").write_text("".join(records.dumps(r) + "\n" for r in ROWS))
    model = VariationModel({})
    model.feed(RowDone(row=ROWS[2]))
    model.finish(Report(completed=4, planned=4, study_dir=str(tmp_path)))
    assert sorted(c.id for c in model.configs) == sorted(r.id for r in ROWS)


def figure_text(view: VariationView) -> str:
    return str(view.query_one("#variation-figure").content)


def side_text(view: VariationView) -> str:
    return str(view.query_one("#variation-config").content)


@pytest.mark.privileged
async def test_variation_study_live_and_replayed(tmp_path):
    tiny = {"configurations": 2, "runs": 2, "duration_s": 1.0, "nfiles": 40, "file_systems": ["ext4"],
            "personalities": ["varmail"], "workers": 1, "threshold": 0.001}  # flag (nearly) every configuration
    app = make_app(AppConfig(target=TargetSpec("dir", str(tmp_path)), jobs=("variation",),
                             job_defaults={"variation": tiny}))
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await setup_ready(pilot, app)
        setup = app.screen
        assert setup.query_one("#job-picker").selected == ["variation"]
        # the setup panel: the study's parameters, with the given values
        assert setup.query_one("#param-variation-runs").value == "2"
        assert setup.query_one("#param-variation-personalities").value == "varmail"
        assert setup.query_one("#param-variation-space").value == "cao-small"
        await pilot.press("ctrl+r")
        live = live_of(app)
        flagged_while_running = []

        def over() -> bool:  # and note whether flagged configurations were listed before the end
            if live.jobs and live.jobs[0].status == "running" and live.flags_panel.flags:
                flagged_while_running.append(len(live.flags_panel.flags))
            return plan_over(live)

        job = await job_done(pilot, live, "the study", 300, over=over)
        report = job.report
        assert isinstance(report, Report) and report.completed == 2
        assert flagged_while_running, "the flags panel stayed empty until the study ended"
        # live: each row reached the view as it was recorded, before the job's end
        seen = list({id(m): m for m in messages}.values())  # the hook sees a message at each node it reaches
        order = [m.kind if isinstance(m, msg.JobEvent) else "end" for m in seen
                 if isinstance(m, msg.JobEvent) and m.kind == "variation_row" or isinstance(m, msg.JobFinished)]
        assert order == ["variation_row", "variation_row", "end"]
        view = job_view(live, VariationView)
        await until(pilot, lambda: "2 configurations final of 2 planned" in figure_text(view), "the final view", 10)
        # Fig. 1: both configurations with the report's relative range
        text = figure_text(view)
        for c in report.configurations:
            assert f"{c.fs}-{c.row}" in text and format_pct(c.relative_range) in text
        first = min(report.configurations, key=lambda c: c.id)
        assert first.id in side_text(view)
        assert f"block_size  {short_level(first.knobs['ext4_block_size'])}\n" in side_text(view)
        # the flags: every configuration above the threshold, the most variable first, then the notes
        titles = [f.title for f in live.flags_panel.flags]
        flagged = sorted(report.flagged, key=lambda c: -(c.relative_range or 0.0))
        assert titles[:len(flagged)] == [f"{c.fs}-{c.id.split('-')[-2]} varmail varies "
                                         f"{format_pct(c.relative_range)}" for c in flagged]
        assert len(titles) > len(flagged)  # the notes follow
        # the keys switch the figure and the configuration
        assert view in app.focused.ancestors_with_self  # the keys work without tabbing into the view first
        screens = {}
        for key, figure in (("2", "2"), ("6", "6"), ("7", "7"), ("8", "8"), ("9", "9"), ("k", "k"), ("f", "1")):
            await pilot.press(key)
            await until(pilot, lambda f=figure: FIGURE_TITLES[f] in figure_text(view), f"figure {figure}", 10)
            screens[figure] = figure_text(view)
        assert "T-1" in screens["6"] and "whole run" in screens["6"]
        assert "run 1" in screens["7"] and "run 2" in screens["7"]
        ks = first.ks_range_per_op
        assert all(op in screens["8"] for op in ks) and "K-S range" in screens["8"]
        assert "PCC: needs 3 configurations" in screens["9"]  # two points give no correlation
        assert f"{len(report.flagged)} of 2 above the 0% threshold" in screens["k"]
        await pilot.press("right_square_bracket")
        second = max(report.configurations, key=lambda c: c.id)
        await until(pilot, lambda: second.id in side_text(view), "the next configuration", 10)
        live_model = view.model_of(live.views[0])
        if flagged:  # picking a flagged configuration in the flags panel shows it beside the figures
            live.flags_panel.focus()
            live.flags_panel.highlighted = None
            await pilot.press("down")
            await until(pilot, lambda: flagged[0].id in side_text(view), "the flagged configuration", 10)

        replay = await open_replay(pilot, app, job.run_id)
        again = job_view(replay, VariationView)
        await until(pilot, lambda: "2 configurations final of 2 planned" in figure_text(again), "the replay", 10)
        replay_model = again.model_of(replay.views[0])
        assert replay_model is not live_model
        # replay equals live: every figure drawn from the recorded rows is the one shown live
        for figure in FIGURES:
            for model in (live_model, replay_model):
                model.show_figure(figure)
                model.selected_id = None
            assert VariationView.render_figure(replay_model).plain == VariationView.render_figure(live_model).plain
        assert replay_model.notes == live_model.notes and replay_model.notes
        assert not math.isnan(replay_model.configs[0].mean_ops_per_s)
    assert_clean()
    assert not app.worker_errors
