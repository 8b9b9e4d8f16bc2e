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


def test_every_job_reads_the_spec_the_previous_release_wrote_and_writes_the_same_keys():
    old = json.loads((OLD / "default_specs.json").read_text())
    assert set(old) == set(registry.JOBS)
    for job, data in old.items():
        spec = registry.spec_from_data(job, data)
        assert type(spec) is registry.spec_type(job)
        assert json.loads(records.dumps(spec)) == data, job


@pytest.mark.parametrize("job", ["probe", "bench", "smoke"])
def test_old_run_directories_still_decode(job):
    job_file = json.loads((OLD / job / "job.json").read_text())
    spec = registry.spec_from_data(job_file["job"], job_file["spec"])
    assert json.loads(records.dumps(spec)) == job_file["spec"]
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
    """What a wire form says: null and empty fields left out, at any depth."""
    if isinstance(wire, dict):
        return {k: said(v) for k, v in wire.items() if v not in (None, "", [], {})}
    return [said(v) for v in wire] if isinstance(wire, list) else wire


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
