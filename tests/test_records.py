"""The typed contract (fsscope.records, engine.registry): specs checked into records with one
clear line, and what the previous release wrote (tests/fixtures/old_runs, made by running the
code before the records existed) still reads."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from fsscope import records
from fsscope.engine import events, registry, runner
from fsscope.errors import FsscopeError
from fsscope.targets import TargetSpec
from fsscope.workloads.probe import ProbeSpec

OLD = Path(__file__).parent / "fixtures" / "old_runs"


def assert_writes_back(spec, old: dict) -> None:
    """A spec read from what an earlier release wrote writes every key it read back unchanged;
    a key it adds is a field added since, written at its default (an earlier job.json never
    chose it)."""
    new = json.loads(records.dumps(spec))
    assert {key: new.get(key, "<missing>") for key in old} == old
    defaults = {f.encode_name: f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
                for f in msgspec.structs.fields(type(spec))
                if f.default is not msgspec.NODEFAULT or f.default_factory is not msgspec.NODEFAULT}
    added = {key: value for key, value in new.items() if key not in old}
    assert added == {key: json.loads(records.dumps(defaults[key])) for key in added}, added



def test_every_job_reads_the_spec_the_previous_release_wrote_and_writes_the_same_keys():
    old = json.loads((OLD / "default_specs.json").read_text())
    assert set(old) <= set(registry.JOBS)  # a job added since has no earlier spec to read
    for job, data in old.items():
        spec = registry.spec_from_data(job, data)
        assert type(spec) is registry.spec_type(job)
        assert_writes_back(spec, data)


@pytest.mark.parametrize("job", ["probe", "bench", "smoke"])
def test_old_run_directories_still_decode(job):
    job_file = json.loads((OLD / job / "job.json").read_text())
    spec = registry.spec_from_data(job_file["job"], job_file["spec"])
    assert_writes_back(spec, job_file["spec"])
    target = records.convert(job_file["target"], TargetSpec)
    assert target.kind == "dir" and json.loads(records.dumps(target)) == job_file["target"]
    lines = (OLD / job / "events.ndjson").read_text().splitlines()
    decoded = [registry.decode_event(job, line) for line in lines]
    assert len(decoded) == len(lines) and not any(isinstance(e, events.Data) and e.kind in events.KINDS
                                                  for e in decoded)
    # extra keys beside a phase or progress (the target, the ager's numbers) are kept, not lost
    setup = decoded[0]
    assert isinstance(setup, events.Phase) and setup.name == "setup" and setup.detail["target"].startswith("dir ")
    assert isinstance(decoded[-1], events.Result) and decoded[-1].report
    # and the wire form written back says what the line said (an empty or null field may be left out)
    for line, event in zip(lines, decoded):
        assert said(json.loads(events.encode(event))) == said(json.loads(line))


def said(wire):
    """What a line says: null or empty fields left out, at any depth (a typed report names
    every field an older one may have left out)."""
    if isinstance(wire, dict):
        return {k: said(v) for k, v in wire.items() if v not in (None, "", [], {})}
    if isinstance(wire, list):
        return [said(v) for v in wire]
    return wire


def without(wire, keys: set[str]):
    """``wire`` with ``keys`` left out at any depth."""
    if isinstance(wire, dict):
        return {k: without(v, keys) for k, v in wire.items() if k not in keys}
    if isinstance(wire, list):
        return [without(v, keys) for v in wire]
    return wire


def test_specs_refuse_bad_input_in_one_line():
    cases = {
        (("files", 0),): "probe files must be at least 1, not 0",
        (("files", "10"),): "probe spec field 'files' must be a whole number, not '10'",
        (("files", True),): "probe spec field 'files' must be a whole number, not True",
        (("op", "chmod"),): "probe op 'chmod' is unknown: choose one of creat, mkdir",
        (("file", 10),): "probe spec field 'file' is unknown: known fields are op, files",
        (("cpu", "x"),): "probe spec field 'cpu' must be a whole number, not 'x'",
        (("files", 1001), ("name_length", 3)): "names 0..1000 need 4 digits",
    }
    for fields, message in cases.items():
        with pytest.raises(FsscopeError) as caught:
            registry.spec_from_data("probe", dict(fields))
        assert message in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(FsscopeError, match="probe spec must be a JSON object, not list"):
        records.convert([1, 2], ProbeSpec)


def test_text_from_a_form_or_the_command_line_becomes_the_list_a_spec_holds():
    bench = registry.spec_from_data("bench", {"window_sizes_s": "1,2", "duration_s": 5})
    assert bench.window_sizes_s == (1, 2)
    sweep = registry.spec_from_data("syncwrite", {"buffer_sizes_bytes": "4K,64K"})
    assert sweep.buffer_sizes_bytes == (4096, 65536)
    explore = registry.spec_from_data("explore", {"recipes": "ext4-default,xfs-default"})
    assert explore.recipes == ("ext4-default", "xfs-default")
    assert registry.spec_from_data("smoke", {"seconds": 1.5}).duration_s == 1.5  # its earlier name


def test_a_spec_is_frozen_and_the_runner_takes_only_the_jobs_spec(scratch):
    spec = ProbeSpec(files=10)
    with pytest.raises(AttributeError):
        spec.files = 3  # type: ignore[misc]
    with pytest.raises(TypeError, match="probe needs a ProbeSpec record, not dict"):
        runner.start("probe", {"files": 10}, TargetSpec("dir", str(scratch)), None)  # type: ignore[arg-type]
    assert msgspec.structs.replace(spec, runs=2).runs == 2


def test_a_bench_window_is_one_record_from_the_aggregator_to_the_view():
    from fsscope.workloads.bench_job import WindowSample
    from fsscope.workloads.personalities import LiveSample
    from fsscope.workloads.personalities.aggregate import OpWindow

    # what the previous release streamed decodes to the bench's own record
    lines = [line for line in (OLD / "bench" / "wire.ndjson").read_text().splitlines() if '"kind": "samples"' in line]
    windows = [registry.decode_event("bench", line) for line in lines]
    assert windows and all(isinstance(w, WindowSample) and isinstance(w.window, LiveSample) for w in windows)
    assert [w.window.bin_index for w in windows] == list(range(len(windows)))
    assert all(op.ops_per_s >= 0 for w in windows for op in w.window.ops.values())
    # the record the job emits comes back as the same record, field for field
    sample = LiveSample(bin_index=3, t_s=4.0, ops_per_s=10.0, complete=True,
                        ops={"create": OpWindow(ops_per_s=10.0, p50_ns=900.0, p99_ns=None)})
    event = WindowSample(t=1.5, run=2, window=sample)
    assert registry.decode_event("bench", events.encode(event)) == event
    assert json.loads(events.encode(event))["window"]["bin"] == 3  # the wire keeps its names
    # without the job, the line is still read (as Data)
    assert isinstance(events.decode(events.encode(event)), events.Data)


def _kept(old, new) -> bool:
    """Every key ``old`` has is in ``new`` with the same value (``new`` may add keys)."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(k in new and _kept(v, new[k]) for k, v in old.items())
    if isinstance(old, list):
        return isinstance(new, list) and len(old) == len(new) and all(map(_kept, old, new))
    return old == new


@pytest.mark.parametrize("job", ["age", "frag", "scan"])
def test_old_age_frag_and_scan_runs_read_as_their_reports_and_show(job):
    """Run directories the release before the Report records wrote: the report decodes to the
    job's record and is written back with every key it had; the CLI renderer prints it and
    the TUI model rebuilds the run from it and its events."""
    import io

    from rich.console import Console

    from fsscope.cli.render.age import render_age
    from fsscope.cli.render.frag import render_frag
    from fsscope.cli.render.scan import render_scan
    from fsscope.store import RunDir
    from fsscope.tui.job_ui import model_from_run

    data = json.loads((OLD / job / "report.json").read_text())
    report = registry.report_from_data(job, data)
    assert type(report) is registry.report_type(job)
    assert _kept(data, json.loads(records.dumps(report)))
    spec = json.loads((OLD / job / "job.json").read_text())["spec"]
    assert json.loads(records.dumps(registry.spec_from_data(job, spec))) == spec
    out = io.StringIO()
    {"age": render_age, "frag": render_frag, "scan": render_scan}[job](report, Console(file=out, width=160))
    text = out.getvalue()
    model = model_from_run(job, RunDir(OLD / job), spec, report)
    assert model is not None and model.report == report
    if job == "age":
        assert report.op_log_sha256 in text and "fragmentation: fresh vs aged" in text
        assert model.events > 0 and model.phase.startswith("done") and model.frag_rows()
        assert model.fits().keys() == {"size", "depth", "age"} and model.snapshot is not None
    elif job == "frag":
        assert "free extents" in text and model.histogram() and dict(model.rows())["free extents"] != "–"
        assert report.restores and report.restores[0].snapshot  # measured on an aged snapshot
    else:
        assert report.path in text and report.path in model.summary() and model.rows()


# --- the studies: explore (Chopper) and variation (Cao): rows, events, reports ----------------

@pytest.mark.parametrize("job", ["explore", "variation"])
def test_old_study_runs_decode_to_their_records_and_render(job, tmp_path):
    """An explore and a variation run recorded before their reports and rows were records:
    job.json, events.ndjson, report.json and treatments.ndjson decode to the job's records, say
    what they said when written back, and render in the CLI and in the TUI's models."""
    import shutil

    import msgspec
    from rich.console import Console

    from fsscope.cli.render import render_report
    from fsscope.store import RunDir
    from fsscope.study import explore, variation
    from fsscope.study.execute import load_rows, order_rows
    from fsscope.study.plan import Failed, Plan
    from fsscope.tui.job_ui import model_from_run
    from fsscope.tui.replay import load_run

    module = {"explore": explore, "variation": variation}[job]
    run = tmp_path / job
    shutil.copytree(OLD / job, run)
    job_file = json.loads((run / "job.json").read_text())
    spec = registry.spec_from_data(job, job_file["spec"])
    assert_writes_back(spec, job_file["spec"])
    # the events: each treatment is the job's own record, the result its Report
    lines = (run / "events.ndjson").read_text().splitlines()
    decoded = [registry.decode_event(job, line) for line in lines]
    done = [e for e in decoded if isinstance(e, module.TreatmentDone)]
    assert len(done) == sum('"kind":"treatment"' in line for line in lines) > 0
    assert not any(isinstance(e, events.Data) for e in decoded)
    for line, event in zip(lines, decoded):
        if not isinstance(event, events.Result):
            assert said(json.loads(events.encode(event))) == said(json.loads(line))
    result = decoded[-1]
    assert isinstance(result, events.Result) and isinstance(result.report, module.Report)
    # the report: every key it had, each value as it was (the engine adds `existing` to every report)
    data = json.loads((run / "report.json").read_text())
    report = registry.report_from_data(job, data)
    assert isinstance(report, module.Report) and report.completed == data["completed"] > 0
    # (a field added since, e.g. a factor's chance share, reads as null: said() leaves it out)
    assert said({k: v for k, v in json.loads(records.dumps(report)).items() if k != "existing"}) == said(data)
    # the rows, read with the one decoder; a failed treatment's as Failed
    rows = load_rows(run, module.ExploreRow if job == "explore" else module.VariationRow)
    assert rows and all(isinstance(r, (Failed, module.ExploreRow if job == "explore" else module.VariationRow))
                        for r in rows)
    if job == "explore":  # the report recomputed from the rows alone is the one recorded
        again = explore.report(Plan.load(run), order_rows(Plan.load(run), rows), elapsed_s=data["elapsed_s"],
                               study_dir=data["study_dir"])
        # but for what this release's analysis adds: a factor's chance share and the notes that quote it
        since = {"chance", "permutation_p", "notes"}
        assert without(json.loads(records.dumps(msgspec.structs.replace(again, machine=report.machine))), since) == \
            without(json.loads(records.dumps(report)), since)
        assert [r.id for r in rows if isinstance(r, Failed)] == [f.id for f in report.failed]
    # the CLI's renderer and the TUI's model (a replay) take the record
    console = Console(record=True, width=160)
    render_report(job, report, console)
    text = console.export_text()
    assert f"{report.completed} of {report.planned} treatments" in text and "machine: load" in text
    replayed = load_run(RunDir(run))  # the TUI's replay: from the events' result, as recorded
    assert isinstance(replayed.job.report, module.Report) and replayed.data is not None
    assert replayed.data.report == replayed.job.report
    report = msgspec.structs.replace(report, study_dir=str(run))  # the rows where the copy is
    model = model_from_run(job, RunDir(run), job_file["spec"], report)
    assert model is not None and model.report is report and model.notes
    if job == "variation":  # the two rows the fixture kept
        assert sorted(c.id for c in model.configs) == sorted(r.id for r in rows)
    else:
        assert len(model.rows) == report.completed


@pytest.mark.parametrize("run", ["check", "check_audit"])
def test_old_check_runs_read_as_the_checks_records_and_render(run):
    import io

    from rich.console import Console

    from fsscope.check.findings import Finding
    from fsscope.check.job import CheckEvent, Report
    from fsscope.cli.render import render_report
    from fsscope.tui.check_model import CheckModel

    old = json.loads((OLD / run / "report.json").read_text())
    report = registry.report_from_data("check", old)
    assert isinstance(report, Report) and report.verdict == old["verdict"] and report.headline == old["headline"]
    assert all(isinstance(f, Finding) for f in report.findings) and len(report.findings) == len(old["findings"])
    assert (report.calibration is None) == (old["calibration"] is None)
    assert report.target.described == old["target"]["describe"] and report.machine == old["machine"]
    # every key the release before wrote is written back, with the same values
    assert json.loads(records.dumps(report)) == old
    lines = (OLD / run / "events.ndjson").read_text().splitlines()
    decoded = [registry.decode_event("check", line) for line in lines]
    checks = [e for e in decoded if isinstance(e, CheckEvent)]
    assert len(checks) == sum('"kind":"check"' in line for line in lines) > 0
    model = CheckModel(json.loads((OLD / run / "job.json").read_text())["spec"])
    for event in decoded:
        model.feed(event)
    assert len(model.findings) == len(old["findings"])
    assert len(model.run_ops_per_s) == len((old["calibration"] or {}).get("runs") or [])
    model = CheckModel.from_run(None, {}, report)
    assert model.verdict == old["verdict"] and [f.id for f in model.rows()] == [f["id"] for f in old["findings"]]
    out = io.StringIO()
    render_report("check", report, Console(file=out, width=200))
    assert old["headline"] in out.getvalue() and "machine: load" in out.getvalue()


def test_an_old_syncwrite_run_reads_as_the_sweeps_records_and_renders():
    import io

    from rich.console import Console

    from fsscope.cli.render import render_report
    from fsscope.tui.syncwrite_model import SyncWriteModel
    from fsscope.workloads.syncwrite_job import Report
    from fsscope.workloads.syncwrite_records import Point, PointSample

    old = json.loads((OLD / "syncwrite" / "report.json").read_text())
    report = registry.report_from_data("syncwrite", old)
    assert isinstance(report, Report) and report.recommended_bytes == old["recommended_bytes"]
    assert [s.buffer_bytes for s in report.sizes] == [s["buffer_bytes"] for s in old["sizes"]]
    assert all(isinstance(p, Point) for p in report.raw_points) and report.knees.latency_rise is not None
    # every key the release before wrote is written back, with the same values (new ones have defaults)
    again = json.loads(records.dumps(report))
    assert {k: again[k] for k in old} == old
    assert {k: again[k] for k in set(again) - set(old)} == {"kernel_by_size": [], "partial": False, "choices": []}
    # the live points: "samples" with a point, from the wire the previous release wrote
    lines = (OLD / "syncwrite" / "wire.ndjson").read_text().splitlines()
    samples = [e for e in (registry.decode_event("syncwrite", line) for line in lines) if isinstance(e, PointSample)]
    assert len(samples) == sum('"kind": "samples"' in line for line in lines) == 4
    assert json.loads(events.encode(samples[0])) == json.loads(lines[[i for i, ln in enumerate(lines)
                                                                      if '"samples"' in ln][0]])
    live = SyncWriteModel(json.loads((OLD / "syncwrite" / "job.json").read_text())["spec"])
    for event in samples:
        assert live.feed(event)
    assert live.repetitions_done() == 2 and {r.buffer_bytes for r in live.rows()} == {4096, 65536}
    model = SyncWriteModel.from_run(None, {}, report)
    assert model.best_buffer_bytes == old["recommended_bytes"] and len(model.points) == len(old["raw_points"])
    assert [r.buffer_bytes for r in model.rows()] == [s["buffer_bytes"] for s in old["sizes"]]
    out = io.StringIO()
    render_report("syncwrite", report, Console(file=out, width=200))
    assert old["recommendation"][:60] in out.getvalue() and "machine: load" in out.getvalue()


@pytest.mark.parametrize("job,directory", [("bench", "bench_ram"), ("ladder", "ladder")])
def test_an_old_report_reads_as_the_jobs_record_renders_and_replays(job, directory, tmp_path):
    """report.json and events of the release before the reports were records (a traced bench
    of 2 runs on a RAM image, a ladder of 4 steps) read as the job's Report, write back every
    key they had, and the CLI renderer and the TUI model take them."""
    import io
    import shutil

    from rich.console import Console

    from fsscope.cli.render import render_report
    from fsscope.store import RunDir
    from fsscope.tui.job_ui import model_from_run

    old = json.loads((OLD / directory / "report.json").read_text())
    report = registry.report_from_data(job, old)
    assert type(report) is registry.report_type(job)
    assert said(json.loads(records.dumps(report))) == said(old)  # every key kept, none renamed
    lines = (OLD / directory / "events.ndjson").read_text().splitlines()
    decoded = [registry.decode_event(job, line) for line in lines]
    assert not any(isinstance(e, events.Data) for e in decoded)  # every kind the job emits has its record
    (result,) = [e for e in decoded if isinstance(e, events.Result)]
    assert result.report == report
    out = io.StringIO()
    render_report(job, report, Console(file=out, width=160), None)
    text = out.getvalue()
    assert f"{report.personality} on" in text
    run_dir = tmp_path / directory
    shutil.copytree(OLD / directory, run_dir)
    model = model_from_run(job, RunDir(run_dir), json.loads((OLD / directory / "job.json").read_text())["spec"], report)
    assert model is not None and model.report is report
    if job == "bench":
        assert [round(r.ops_per_s) for r in model.runs.values()] == [round(r.ops_per_s) for r in report.runs]
        assert all(r.kernel is not None for r in model.runs.values())  # traced: the kernel strip has its counts
        assert "kernel, run 1" in text and "dip" in text
    else:
        assert [s for s, _ in model.relative_ranges()] == [s.step for s in report.ladder]
        assert "hygiene ladder" in text


def keys_and_values(data, path=""):
    """Every leaf of a JSON document by its path (what a reader of report.json can look up)."""
    if isinstance(data, dict):
        return {k: v for key, value in data.items() for k, v in keys_and_values(value, f"{path}.{key}").items()}
    if isinstance(data, list):
        return {k: v for n, value in enumerate(data) for k, v in keys_and_values(value, f"{path}[{n}]").items()}
    return {path: data}


@pytest.mark.parametrize("run", ["probe", "probe_findings", "probe_stopped"])
def test_old_probe_runs_read_as_the_probes_records_and_render(run):
    from rich.console import Console

    from fsscope.cli.render.probe import render_probe
    from fsscope.tui.model import flags_from_report, flags_markdown
    from fsscope.tui.widgets.notes_panel import kernel_text
    from fsscope.workloads.probe_records import GeometryData, KernelData, Report

    lines = (OLD / run / "events.ndjson").read_text().splitlines()
    decoded = [registry.decode_event("probe", line) for line in lines]
    for line, event in zip(lines, decoded):  # the wire written back says all the line said
        said_then, said_now = keys_and_values(said(json.loads(line))), keys_and_values(json.loads(events.encode(event)))
        assert {k: said_now.get(k, "missing") for k in said_then} == said_then
    assert not any(isinstance(e, events.Data) for e in decoded)  # every kind the probe says is its record
    (result,) = [e for e in decoded if isinstance(e, events.Result)]
    path = OLD / run / "report.json"
    old = json.loads(path.read_text()) if path.exists() else json.loads(lines[-1])["report"]
    report = registry.report_from_data("probe", old)
    assert isinstance(report, Report) and report == result.report
    # every key and value the old report.json held is in the record's JSON (null fields may be added)
    written = keys_and_values(json.loads(records.dumps(report)))
    assert {k: written.get(k, "missing") for k in keys_and_values(old)} == keys_and_values(old)
    # the findings: each flag with where it is, from its analysis list
    findings = events.findings_from_report(report)
    assert [f.title for f in findings] == [f.title for f in report.flags]
    for finding, row in zip(findings, [*report.outliers, *report.series]):
        assert finding.file_indices()[0] == (row.index if finding.flag == "outlier" else row.start)
    # the CLI's report, the TUI's flags, their export and the kernel's side of a note
    console = Console(record=True, width=200)
    render_probe(report, console)
    text = console.export_text()
    assert f"{report.op} × {report.files} files" in text
    flags = flags_from_report(report) or []
    assert len(flags) == len(report.flags) and all(f.title in text for f in flags if f.finding.structure)
    assert flags_markdown(flags).count("## ") == len(flags)
    for flag in flags:
        if flag.finding.kernel is not None:
            assert "Kernel events inside" in kernel_text(flag.finding.kernel).plain
    if run == "probe_findings":
        assert {type(e) for e in decoded} >= {GeometryData, KernelData}
        assert report.series and findings[len(report.outliers)].stride == report.series[0].stride
        assert any(f.finding.kernel is not None for f in flags) and "structures: geometry vs kernel" in text
    if run == "probe_stopped":
        assert findings[-1].flag == "stopped" and findings[-1].fields["errno"] == 28
        assert "stopped early" in text


def test_a_job_building_its_report_cannot_drop_a_key_it_does_not_declare():
    from fsscope.layout.placement import Placement
    from fsscope.workloads.bench_records import BenchRun

    built = {"workers": 2, "ops_per_s": 10.0, "placement": {"available": False, "why": "tmpfs"}}
    assert records.typed(built, BenchRun).placement == Placement(available=False, why="tmpfs")
    assert records.typed(built | {"cgroup": None}, BenchRun).ops_per_s == 10.0  # a null says nothing
    # convert reads outside data leniently; what a job built must fit its record to the key
    lenient = records.convert(built | {"extra_finding": 1}, BenchRun)
    assert "extra_finding" not in records.plain(lenient)
    with pytest.raises(TypeError, match=r"declares no field for placement\.guess, extra_finding$"):
        records.typed(built | {"extra_finding": 1, "placement": {"available": False, "guess": 3}}, BenchRun)
