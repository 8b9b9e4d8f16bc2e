"""A job is one descriptor (fsscope/engine/jobs.py, issue 33): every part it names resolves to
what its front end expects, and `fsscope report` prints every job kind through the renderer
its descriptor names (a scan recorded by the TUI once printed as raw JSON: a renderer missing
from one of five tables)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from rich.console import Console

from fsscope import records
from fsscope.engine import jobs, registry
from fsscope.engine.events import decode
from fsscope.records import ReportRecord, SpecRecord

FIXTURES = Path(__file__).parent / "fixtures" / "old_runs"
# a recorded report of each job kind the release before the records wrote (see test_records)
RECORDED = {"age": "age", "bench": "bench_ram", "check": "check", "explore": "explore", "frag": "frag",
            "ladder": "ladder", "probe": "probe_findings", "scan": "scan", "syncwrite": "syncwrite",
            "variation": "variation"}
WIDTH = 160


@pytest.mark.parametrize("name", list(jobs.JOBS))
def test_every_part_a_job_names_resolves(name):
    from fsscope.cli import COMMANDS, build_parser
    from fsscope.tui import job_ui, job_widgets
    from fsscope.tui.widgets.job_params import JobParams
    from fsscope.tui.widgets.live_view import LiveView

    job = jobs.job(name)
    module = registry.load(name)
    assert callable(module.run)
    spec = registry.spec_type(name)
    assert issubclass(spec, SpecRecord) and spec is module.Spec  # the light module's is the job's
    report = registry.report_type(name)
    assert report is getattr(module, "Report", None)
    assert (report is None) == (name == "smoke") or issubclass(report, ReportRecord)
    for kind in registry.data_kinds(name).values():
        assert kind.kind_name()
    if job.command:  # `fsscope NAME` is built by the module its descriptor names, with its help line
        assert COMMANDS[name] == (job.command, job.command_help)
        assert name in build_parser(name)._subparsers._group_actions[0].choices  # noqa: SLF001
    if job.renderer:
        assert callable(jobs.resolve(job.renderer))
    model = job_ui.model_class(name)
    assert (model is None) == (not job.model)
    if model is not None:
        assert callable(model.from_run) and callable(model.feed) and callable(model.finish)
    view = job_widgets.view_class(name)
    assert issubclass(view, LiveView) and view in job_widgets.view_classes()
    if job.setup:
        assert issubclass(job_widgets.panel_class(name), JobParams)
    if job.extra is not None:
        assert job.extra[1], "an extra names the modules it brings"
    assert len(f"{name}  {job.label}") <= jobs.LABEL_CELLS and (job.label or not job.setup), job.label
    assert callable(jobs.resolve(job.comparer or jobs.GENERIC_COMPARER))
    if job.compare_verdict:
        assert callable(jobs.resolve(job.compare_verdict))
    if job.compare_charts:
        from textual.widget import Widget
        assert issubclass(jobs.resolve(job.compare_charts), Widget)
    if not job.view:  # its runs compare as two heatmaps: a verdict or charts would never show
        assert not job.compare_verdict and not job.compare_charts


@pytest.mark.parametrize("name", list(jobs.JOBS))
def test_every_job_kind_compares_through_its_descriptor(name):
    """A recorded report compared with itself: the comparer its descriptor names (the numbers
    both hold without one) gives rows, each number's B / A 1; the compare screen's verdict too."""
    from fsscope.tui import compare_model

    report = registry.report_from_data(name, _report_data(name))
    sections = registry.compare_reports(name, report, report)
    rows = [r for section in sections for r in section.rows]
    if jobs.job(name).comparer or name in RECORDED:
        assert rows, f"{name}: nothing compared"
    assert all(r.ratio == pytest.approx(1.0) for r in rows if r.ratio is not None)
    side = compare_model.Side(id="run", job=name, status="ok", report=report)
    comparison = compare_model.compare(side, side)
    assert all(section in comparison.sections for section in sections) and comparison.message
    if jobs.job(name).compare_verdict == "fsscope.tui.compare_model:syncwrite_verdict":
        assert comparison.message.startswith("Throughput per buffer size")


def test_no_job_name_is_a_case_in_the_compare_code():
    """Which job compares how is its descriptor's: the compare modules name no job."""
    import re

    root = Path(__file__).parent.parent / "fsscope"
    for module in ("analysis/compare.py", "tui/compare_model.py", "tui/screens/compare.py", "cli/compare_cmd.py"):
        text = (root / module).read_text()
        # a case on a job's name: job == "syncwrite", a table {"bench": _bench, …}
        named = [n for n in jobs.JOBS if re.search(rf"""(==|!=)\s*["']{n}["']|["']{n}["']\s*:\s*[_a-z]""", text)]
        assert not named, f"{module} names {named}"


def test_the_job_lists_are_the_descriptors():
    """Setup offers the jobs whose descriptor says so, `fsscope run` takes every job."""
    from fsscope.cli import build_parser
    from fsscope.tui import job_ui

    run = build_parser("run")._subparsers._group_actions[0].choices["run"]  # noqa: SLF001
    (job_arg,) = [a for a in run._actions if a.dest == "job"]  # noqa: SLF001
    assert list(job_arg.choices) == list(jobs.JOBS)
    assert job_ui.model_for("probe") is None  # shown through the latency matrix
    assert job_ui.model_for("unknown") is None
    assert job_ui.model_for("bench", {}).feed(decode({"kind": "log"})) is False
    assert jobs.missing_extra("probe") is None
    with pytest.raises(registry.FsscopeError, match="unknown job 'nope'"):
        jobs.job("nope")


def _report_data(name: str) -> dict:
    """A report of job ``name`` as its run directory holds one: recorded, else the record's defaults."""
    if name in RECORDED:
        return json.loads((FIXTURES / RECORDED[name] / "report.json").read_text())
    kind = registry.report_type(name)
    if kind is None:
        return {"files": 3, "seconds": 0.5}  # smoke's report is plain data
    return json.loads(records.dumps(kind()))


@pytest.mark.parametrize("name", list(jobs.JOBS))
def test_report_prints_every_job_kind_with_its_renderer(name, cli, tmp_path):
    report = _report_data(name)
    run = tmp_path / f"20261128-000000-{name}"
    run.mkdir()
    spec = json.loads((FIXTURES / RECORDED[name] / "job.json").read_text())["spec"] if name in RECORDED else {}
    (run / "manifest.json").write_text(json.dumps({"status": "ok", "events_version": 1, "job": name, "spec": spec}))
    (run / "report.json").write_text(json.dumps(report))
    env = {**os.environ, "COLUMNS": str(WIDTH), "FSSCOPE_HOME": str(tmp_path / "home")}
    out = cli("report", str(run), env=env)
    assert out.returncode == 0, out.stderr
    job = jobs.job(name)
    if not job.renderer:
        assert json.loads(out.stdout.split("\n", 1)[1]) == report  # no renderer: the report as JSON
        return
    expected = io.StringIO()
    jobs.resolve(job.renderer)(registry.report_from_data(name, report),
                               Console(file=expected, width=WIDTH, color_system=None))
    assert expected.getvalue().strip()
    assert " ".join(expected.getvalue().split()) in " ".join(out.stdout.split())
