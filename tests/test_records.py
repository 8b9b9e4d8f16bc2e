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


def said(wire: dict) -> dict:
    return {k: v for k, v in wire.items() if v not in (None, "")}


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
