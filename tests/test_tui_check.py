"""The Check job in the investigator, driven with Pilot on a real RAM image: the traffic-light
table, the evidence/fix of the selected row, the calibration strip and runs-needed curve, the
verdict as the first flag; the same view when the run is replayed."""

from __future__ import annotations

import pytest
from pilot_wait import setup_ready, until
from test_tui import SIZE, assert_clean, job_view, live_of, open_replay, plan_over, run_plan, runs_listed, set_param

from fsscope.check.job import MIN_RUN_S
from fsscope.engine import registry
from fsscope.format import spark
from fsscope.targets import TargetSpec
from fsscope.tui import AppConfig, make_app
from fsscope.tui.check_model import CheckModel
from fsscope.tui.screens.confirm import ConfirmScreen
from fsscope.tui.widgets.check_view import CheckView


def test_strip_scales_bars():
    assert spark([1.0, 2.0, 4.0], 0.0) == "▂▄█"        # scaled from 0 to the largest
    assert spark([]) == "" and spark([None, 3.0], 0.0) == " █"
    assert spark([1.0, 10.0, 100.0, 1000.0], log=True) == "▁▃▆█" and spark([2.0, 2.0]) == "▁▁"


def decode_check(wire: dict):
    return registry.decode_event("check", wire)


def test_model_fills_in_live_then_takes_the_report():
    model = CheckModel({"precision": 0.05})
    assert model.feed(decode_check({"kind": "check", "finding": {"id": "thp", "severity": "ok", "title": "t"}}))
    assert model.feed(decode_check({"kind": "check", "finding": {"id": "load", "severity": "bad", "title": "busy"}}))
    assert [f.id for f in model.rows()] == ["load", "thp"]          # worst first while live
    for r, ops in enumerate((100.0, 110.0, 90.0)):
        model.feed(decode_check({"kind": "check", "calibration_run": {"run": r, "ops_per_s": ops, "series": [ops]},
                           "estimate": {"cv": 0.1, "runs_needed": 20 - r}}))
    assert model.run_ops_per_s == [100.0, 110.0, 90.0] and model.runs_needed == [19, 18]
    assert not model.feed(decode_check({"kind": "telemetry"}))
    model.finish(registry.report_from_data("check", {
        "verdict": "caution", "headline": "caution: x", "findings": [{"id": "swap", "severity": "ok"}],
        "calibration": {"precision": 0.02, "runs": [], "runs_needed_history": [{"runs_needed": 7}]}}))
    assert model.verdict == "caution" and [f.id for f in model.rows()] == ["swap"] and model.runs_needed == [7]


@pytest.mark.privileged
async def test_check_job_view_lights_detail_calibration_and_verdict_flag(scratch):
    app = make_app(AppConfig(target=TargetSpec("ram", size_bytes=256 * 2**20), jobs=("check",)))
    async with app.run_test(size=SIZE) as pilot:
        await setup_ready(pilot, app)
        assert app.screen.query_one("#job-picker").selected == ["check"]
        # 45 s hold the audit and two runs (a shorter budget stops before them: issue 27); at
        # 30, a loaded machine's first run (mkfs, populate, the workers' cold start: 4-6 s at
        # load 6) can leave the second too little of the budget, and it is left out
        for field, text in (("budget_s", "45"), ("sample_s", "0.5"), ("runs", "2"), ("dataset_bytes", "1M")):
            await set_param(pilot, app, f"param-check-{field}", text)
        live, job = await run_plan(pilot, app, "the check", 180)
        report = job.report
        cache = next(f for f in report.findings if f.id == "page-cache-fit")
        assert cache.severity == "bad" and "1 MiB" in cache.title   # typed as a size in the panel

        async def check(screen) -> None:
            view = job_view(screen, CheckView)
            table = view.table
            assert table.row_count == len(report.findings) >= 22
            # items in words, marks that read without colour (issue 27)
            assert [str(table.get_row_at(r)[1]) for r in range(table.row_count)] == \
                [f.id.replace("-", " ").replace("_", " ") for f in report.findings]
            marks = {"ok": "✓", "warn": "!", "bad": "✗", "unknown": "?"}
            assert [str(table.get_row_at(r)[0]) for r in range(table.row_count)] == \
                [marks[f.severity] for f in report.findings]
            flags = screen.views[0].flags
            assert flags[0].kind == "verdict" and flags[0].title == report.headline
            table.focus()
            table.move_cursor(row=0)
            detail = view.query_one("#check-detail")
            await until(pilot, lambda: report.findings[0].evidence[:40] in str(detail.render()).replace("\n", ""),
                        "the first row's evidence")
            await pilot.press("down")
            second = report.findings[1].id.replace("-", " ").replace("_", " ")  # in words, no code name (issue 33)
            await until(pilot, lambda: second in str(detail.render()), "the second row's detail")
            cal = str(view.query_one("#check-cal").render())
            assert report.headline in cal and "throughput per run" in cal and "runs needed after each run" in cal

        await check(live)
        model = live.views[0].data
        assert len(model.run_ops_per_s) == len(report.calibration.runs) == 2
        assert len(model.run_series) == 2 and all(model.run_series)   # only the live events carry these
        await check(await open_replay(pilot, app, job.run_id))
    assert_clean()
    assert not app.worker_errors


async def test_a_budget_shorter_than_the_check_says_so_before_it_starts(scratch):
    """Issue 27: a 6-s budget ran 21 s. Start refuses to go quietly: it says how long the check
    takes at least and why, and nothing starts unless the user says yes."""
    app = make_app(AppConfig(is_root=False, target=TargetSpec("dir", str(scratch)), jobs=("check",),
                             discover_devices=lambda: []))
    async with app.run_test(size=SIZE) as pilot:
        await setup_ready(pilot, app)
        await set_param(pilot, app, "param-check-budget_s", "6")
        await until(pilot, lambda: app.screen.query_one("#param-check-budget_s").value == "6", "budget 6")
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question before starting")
        body = app.screen.body
        assert "6-s budget is shorter than the least it takes, about 20 s" in body, body
        assert "2 calibration runs of at least 5 s" in body, body
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "back on setup")
        assert app.current_mode == "setup" and app.live.control is None  # nothing started


async def test_a_short_budget_bounds_the_whole_check(scratch):
    """Issue 27: told yes, a check whose budget cannot hold it stops at the budget with what it
    has (the audit; no calibration run that would not fit) and says why in its notes, in the
    log and in the verdict; it used to run two calibration runs past a 6-s budget (21 s)."""
    app = make_app(AppConfig(is_root=False, target=TargetSpec("dir", str(scratch)), jobs=("check",),
                             discover_devices=lambda: []))
    async with app.run_test(size=SIZE) as pilot:
        await setup_ready(pilot, app)
        for field, text in (("budget_s", "6"), ("sample_s", "1")):
            await set_param(pilot, app, f"param-check-{field}", text)
            await until(pilot, lambda f=field, t=text: app.screen.query_one(f"#param-check-{f}").value == t, field)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question before starting")
        assert "it stops at the budget with what it has" in app.screen.body
        await pilot.press("y")
        live = live_of(app)
        await until(pilot, lambda: plan_over(live), "the check", timeout_s=120)
        job = live.jobs[0]
        assert job.status == "ok", job.error
        report = job.report
        assert report.spec.budget_s == 6.0
        # the job's own clock, start-up apart. An audit step begun inside the budget cannot be
        # cut short (a syncfs of / behind other tests' dirty images can take seconds), so the
        # bound is the budget plus less than a calibration run's least (MIN_RUN_S), which no run
        # could fit in; that none ran is the line after
        assert report.elapsed_s < 6.0 + MIN_RUN_S, report.elapsed_s
        assert report.calibration.runs == []
        assert any("budget is shorter than the least it takes" in n for n in report.notes), report.notes
        assert any("budget reached after 0 calibration run(s)" in n for n in report.notes), report.notes
        assert any("raise --budget" in line for line in report.fix_first), report.fix_first
        assert any("stops at the budget" in line for line in live.log_panel.lines_written)
    assert not app.worker_errors


async def test_tables_copy_and_save_as_csv_and_check_items_filter(scratch):
    """Issue 27: any table copies (y) and saves (s) as CSV, the rows shown, into the exports
    folder; '/' filters the check items. A real audit-only check on a directory."""
    import csv
    import io

    from fsscope.tui import exports

    app = make_app(AppConfig(is_root=False, target=TargetSpec("dir", str(scratch)), jobs=("check",),
                             discover_devices=lambda: [],
                             job_defaults={"check": {"calibrate": False, "sample_s": 0.5}}))
    async with app.run_test(size=SIZE) as pilot:
        live, job = await run_plan(pilot, app, "the check", 120)
        findings = job.report.findings
        table = live.job_view.table
        table.focus()
        await pilot.press("y")
        await until(pilot, lambda: app.clipboard, "the clipboard")
        rows = list(csv.reader(io.StringIO(app.clipboard)))
        marks = {"ok": "✓", "warn": "!", "bad": "✗", "unknown": "?"}
        assert rows[0] == ["", "item", "finding"]
        assert rows[1:] == [[marks[f.severity], f.id.replace("-", " ").replace("_", " "), f.title] for f in findings]
        # / filters the items: only those with the words typed stay, and the copy follows
        await pilot.press("slash")
        await until(pilot, lambda: app.focused is not None and app.focused.id == "check-filter", "the filter")
        await pilot.press(*"page cache")
        await until(pilot, lambda: table.row_count == 1, "one item left")
        await pilot.press("enter")
        await until(pilot, lambda: app.focused is table, "back on the table")
        assert "page cache fit (" in str(live.query_one("#check-detail").render())  # in words (issue 33)
        await pilot.press("s")
        saved = exports.export_dir() / f"check-table-{job.run_id}.csv"
        await until(pilot, saved.exists, "the saved CSV")
        rows = list(csv.reader(io.StringIO(saved.read_text())))
        assert [r[1] for r in rows[1:]] == ["page cache fit"]
        live.query_one("#check-filter").action_clear()
        await until(pilot, lambda: table.row_count == len(findings), "every item back")
        # the flags list copies too
        live.flags_panel.focus()
        await pilot.press("y")
        await until(pilot, lambda: app.clipboard.startswith("kind,flag,note"), "the flags as CSV")
        assert job.report.headline in app.clipboard
        # and the runs table
        await pilot.press("f4")
        await until(pilot, lambda: runs_listed(app, job.run_id), "the run listed")
        app.screen.query_one("#runs-table").focus()
        await pilot.press("y")
        await until(pilot, lambda: job.run_id in app.clipboard, "the runs as CSV")
    assert not app.worker_errors


def test_the_cli_says_a_short_budget_first_and_keeps_to_it(scratch, cli):
    """Issue 27, in the CLI too: 'check --budget 6' says why 6 s cannot hold the check before
    it starts (stderr, first line), then stops at the budget with the audit: no calibration run."""
    import json

    out = scratch / "check.json"
    work = scratch / "work"
    work.mkdir()
    done = cli("check", "--dir", str(work), "--budget", "6", "--sample", "1", "--json", str(out))
    assert done.returncode in (0, 1, 2), done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("check: its 6-s budget is shorter than the least it takes"), done.stderr
    assert "it stops at the budget with what it has" in first
    report = json.loads(out.read_text())
    assert report["calibration"]["runs"] == [] and report["elapsed_s"] < 6.0 + MIN_RUN_S, report["elapsed_s"]
