"""The Replay job in the investigator, driven with Pilot: an op log picked on the Setup screen
(a truncated one refused there in one line, nothing started), replayed for real on a RAM image
(real mkfs, mount, the log's calls as real system calls), its per-call-type table on the live
screen, the run recorded and reopened from the Runs screen, two replays compared."""

from __future__ import annotations

import io

import pytest
from pilot_wait import setup_ready, until, until_screen
from rich.console import Console
from test_replay import _creating_log
from test_tui import SIZE, assert_clean, job_view, open_replay, run_plan, runs_listed, set_param

from fsscope import recipes
from fsscope.engine import registry, runner
from fsscope.engine.registry import spec_from_data
from fsscope.targets import TargetSpec
from fsscope.tui import AppConfig, make_app
from fsscope.tui.replay_model import ReplayModel
from fsscope.tui.screens.compare import CompareScreen
from fsscope.tui.widgets.replay_view import ReplayView

RAM = TargetSpec("ram", size_bytes=320 * 2**20)  # mkfs.xfs wants more than 300 MB
FILES = 300


def table_rows(view: ReplayView) -> list[list[str]]:
    table = view.query_one("#replay-ops")
    return [[str(cell) for cell in table.get_row_at(r)] for r in range(table.row_count)]


def test_the_model_shows_each_run_as_it_ends_then_the_report():
    model = ReplayModel({"log": "/x", "runs": 2})
    assert model.rows() == [] and "replaying" in model.summary()
    op = {"op": "open", "calls": 10, "p50_us": 12.5, "p99_us": 40.0, "mean_us": 15.0, "max_us": 41.0,
          "calls_per_s": 900.0}
    assert model.feed(registry.decode_event("replay", {"kind": "replay-run", "run": 1, "runs": 2, "elapsed_s": 0.5,
                                                       "played": 10, "ops": [op]}))
    assert not model.feed(registry.decode_event("replay", {"kind": "log", "line": "x"}))
    assert model.rows() == [("open", "10", "12.5", "40.0", "900", "-", "…", "-", "-")]  # not judged yet
    assert model.series() == ("open", [12.5], [40.0], [20.0])
    assert model.summary().startswith("run 1 of 2 played: 10 calls in 0.50 s")
    model.finish(registry.report_from_data("replay", {"fs": "xfs", "runs": [{"run": 1, "elapsed_s": 0.5, "played": 10,
                                                                              "skipped": 0}],
                                                      "ops": [{**op, "slow": 2, "captured_p50_us": 11.0}]}))
    assert model.rows() == [("open", "10", "12.5", "40.0", "900", "-", "2", "11.0", "-")]
    assert "replayed on xfs" in model.summary()


@pytest.mark.privileged
async def test_replay_job_from_setup_to_runs_screen_and_compare(scratch):
    log = _creating_log(scratch / "spool.oplog.gz", FILES)
    cut = scratch / "cut.oplog.gz"
    cut.write_bytes(log.read_bytes()[:-40])
    app = make_app(AppConfig(target=RAM, jobs=("replay",)))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await setup_ready(pilot, app)
        assert app.screen.query_one("#job-picker").selected == ["replay"]
        # a log that is not whole: one line at Setup, as the CLI says it, and nothing starts
        await set_param(pilot, app, "param-replay-log", str(cut))
        await pilot.press("ctrl+r")
        await until(pilot, lambda: app._notifications, "the refusal")
        messages = [n.message for n in app._notifications]
        assert len(messages) == 1 and len(messages[0].splitlines()) == 1, messages
        assert str(cut) in messages[0] and "truncated" in messages[0], messages
        assert app.current_mode == "setup" and app.live.control is None
        app.clear_notifications()
        await set_param(pilot, app, "param-replay-log", str(log))
        await set_param(pilot, app, "param-replay-runs", "2")
        live, job = await run_plan(pilot, app, "the replay", 300)
        report = job.report
        assert report.fs == "ext4" and len(report.runs) == 2 and report.log == str(log)
        assert all(r.played == 4 * FILES + 2 for r in report.runs)   # every call replayed, every run
        by_op = {o.op: o for o in report.ops}
        assert by_op["open"].calls == by_op["fsync"].calls == 2 * FILES and by_op["write"].bytes == 2 * FILES * 700

        async def check(screen) -> None:
            view = job_view(screen, ReplayView)
            rows = table_rows(view)
            assert [r[0] for r in rows] == [o.op for o in report.ops]
            assert [r[1] for r in rows] == [f"{o.calls:,}" for o in report.ops]
            assert [r[2] for r in rows] == [f"{o.p50_us:,.1f}" for o in report.ops]
            summary = str(view.query_one("#replay-summary").render())
            assert "replayed on ext4" in summary and "run 2:" in summary
            flags = screen.views[0].flags
            assert len(flags) == len(report.repeats) + len(report.format_changes), [f.title for f in flags]
            if report.traced:  # root with tracefs: the directory's format changes, with watch's arithmetic
                assert report.format_changes
                assert [f.note for f in flags if f.kind == "format-change"] == \
                    [c.arithmetic for c in report.format_changes]
            sparks = {key: (label, values) for key, label, values, _text in view.spark_rows(screen.views[0])}
            assert sparks["p50"][0] == "open p50/run" and len(sparks["rate"][1]) == len(report.runs)  # per run
            assert str(screen.query_one("#spark-row-p50 .spark-label").render()) == "open p50/run"

        def runs_played(model: ReplayModel) -> list[tuple[int, int, int]]:
            return [(p.run, p.played, {o.op: o.calls for o in p.ops}["open"]) for p in model.played]

        await check(live)
        model = live.views[0].data
        assert isinstance(model, ReplayModel)
        assert runs_played(model) == [(1, 4 * FILES + 2, FILES), (2, 4 * FILES + 2, FILES)]  # as each run ended
        reopened = await open_replay(pilot, app, job.run_id)
        await check(reopened)
        assert runs_played(reopened.views[0].data) == runs_played(model)
        # the same log on xfs (a run started as the CLI starts it), then Compare on the two
        other = runner.start("replay", spec_from_data("replay", {"log": str(log), "runs": 2}), RAM,
                             recipes.load("xfs-default"))
        other.drain()
        assert other.run_dir.status() == "ok", other.run_dir.info().error
        await pilot.press("escape")
        await until(pilot, lambda: runs_listed(app, job.run_id, other.run_dir.id), "both replays listed")
        table = app.screen.query_one("#runs-table")
        for run_id in (job.run_id, other.run_dir.id):
            table.move_cursor(row=table.get_row_index(run_id))
            await pilot.press("space")
        await pilot.press("c")
        screen = await until_screen(pilot, app, CompareScreen)
        assert {s.id for s in screen.sides} == {job.run_id, other.run_dir.id}
        text = str(screen.query_one("#compare-verdict").content)
        assert text
        sections = [s.title for s in screen.comparison.sections]
        assert "replay" in sections, sections
        # the Welch table per call type, from the code replay --recipes uses: two runs a side, a test each
        welch = next(s for s in screen.comparison.sections if "Welch" in s.title)
        verdicts = {r.metric.removesuffix(" verdict"): r.a for r in welch.rows if r.metric.endswith(" verdict")}
        assert set(verdicts) == {o.op for o in report.ops}, verdicts
        assert all(v.startswith(("A faster", "B faster", "not significant")) for v in verdicts.values()), verdicts
        ps = [r.a for r in welch.rows if r.metric.endswith("Welch p")]
        assert len(ps) == len(verdicts) and all(0 <= p <= 1 for p in ps)
        medians = {r.metric.removesuffix(" median µs"): r.a for r in welch.rows if r.metric.endswith(" median µs")}
        assert medians == {o.op: round(o.p50_us, 4) for o in report.ops}
        assert f"of {len(verdicts)}." in text and "Welch" in text
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(screen.query_one("#compare-tables").content)
        drawn = console.export_text()
        assert "Welch's t-test" in drawn and f"{next(iter(verdicts))} Welch p" in drawn
    assert_clean()
    assert not app.worker_errors
