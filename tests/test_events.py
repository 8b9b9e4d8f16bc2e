"""The event contract (fsscope.engine.events): typed records, one JSON encoding, decoding of
what the jobs write, findings from reports; and the one registry of each job's TUI parts."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest

from fsscope import records
from fsscope.engine import events, registry, runner, smoke
from fsscope.engine.events import Data, Error, Finding, KernelEvidence, Log, Phase, Progress, Result
from fsscope.targets import TargetSpec


def roundtrip(event: events.Event) -> events.Event:
    return events.decode(events.encode(event))


@pytest.mark.parametrize("event", [
    Phase(t=1.5, name="run 1 of 3", run=0, runs=3, detail={"target": "dir /tmp/x"}),
    Progress(t=2.0, done=10.0, total=100.0, unit="s", info="run 1/3", detail={"phase": "rapid"}),
    Progress(t=2.0, done=3.0),
    Finding(t=3.0, flag="series", title="every 64 files", note="chunk allocation", index=64, start=64, stride=64,
            count=8, structure="xfs-inode-chunk-alloc", fields={"chance": 1e-6}),
    Finding(t=3.0, flag="outlier", title="file 12", index=12, kernel=KernelEvidence(events={"xfs_dir2_sf_to_block": 1},
                                                                                 runs_traced=1)),
    Log(t=0.1, line="$ mkfs.xfs -f /dev/loop7", stderr="meta-data=..."),
    Result(t=9.0, report={"files": 3, "flags": []}),
    Error(t=9.0, message="ENOSPC at file 812"),
    Data(t=4.0, kind="telemetry", fields={"run": 0, "sample": {"t_s": 1.0}}),
])
def test_every_record_survives_its_encoding(event):
    assert roundtrip(event) == event


def test_the_wire_form_is_what_older_readers_and_records_expect():
    wire = json.loads(events.encode(Finding(t=3.1, flag="outlier", title="file 12 slow", note="why", index=12,
                                            fields={"ratio": 2.5})))
    assert wire == {"t": 3.1, "kind": "finding", "flag": "outlier", "title": "file 12 slow", "note": "why",
                    "index": 12, "ratio": 2.5}
    # where a finding is reads back into its typed fields, whatever line wrote it
    old = events.decode('{"t": 1, "kind": "finding", "flag": "series", "title": "every 64", "note": "", '
                        '"index": 64, "start": 64, "stride": 64, "count": 3, "structure": null, "missing": 0}')
    assert isinstance(old, Finding) and (old.start, old.stride, old.count, old.structure) == (64, 64, 3, None)
    assert old.file_indices() == (64, 128, 192) and old.fields == {"missing": 0}
    odd = events.decode('{"kind": "finding", "flag": "x", "index": "somewhere"}')  # a value of another type
    assert isinstance(odd, Finding) and odd.index is None and odd.fields == {"index": "somewhere"}
    assert json.loads(events.encode(Phase(name="setup"))) == {"t": 0.0, "kind": "phase", "name": "setup"}
    # a hand-written line of an older run decodes to the same record
    assert events.decode('{"t": 2.5, "kind": "phase", "name": "run 3 of 3", "run": 2}') == \
        Phase(t=2.5, name="run 3 of 3", run=2)


def test_kinds_a_job_invents_are_data_and_keep_their_fields():
    window = events.decode({"t": 1.0, "kind": "samples", "run": 0, "window": {"ops_per_s": 5.0}})
    assert isinstance(window, Data) and window.kind == "samples" and window.fields["window"] == {"ops_per_s": 5.0}
    point = events.make("point", buffer_bytes=4096)
    assert isinstance(point, Data) and json.loads(events.encode(point)) == {"t": 0.0, "kind": "point", "buffer_bytes": 4096}
    assert isinstance(events.make("finding", flag="outlier", index=3), Finding)


def test_one_sanitizer_for_numpy_and_non_finite_numbers():
    @dataclass
    class Point:
        x: float

    value = {"i": np.int64(7), "f": np.float32(0.5), "nan": float("nan"), "inf": np.float64("inf"),
             "arr": np.array([1.0, np.nan]), "ok": np.bool_(True), "dc": Point(np.nan), 3: {1, 2}}
    out = json.loads(records.dumps(value))
    assert out == {"i": 7, "f": 0.5, "nan": None, "inf": None, "arr": [1.0, None], "ok": True,
                   "dc": {"x": None}, "3": [1, 2]}
    assert records.plain(value) == out
    assert json.loads(records.dumps({"a": [1, 2, 3]})) == {"a": [1, 2, 3]}
    assert not math.isnan(json.loads(records.dumps([np.float64(1.0)]))[0])
    # files people read stay readable: job.json and reports are indented
    assert records.dumps({"a": [1]}, indent=2) == '{\n  "a": [\n    1\n  ]\n}'


def test_findings_from_a_probe_report_take_their_numbers_from_the_analysis_lists():
    report = registry.report_from_data("probe", {
        "outliers": [{"index": 253, "runs_flagged": 5, "runs": 5}],
        "series": [{"start": 64, "stride": 64, "count": 3}],
        "flags": [{"flag": "outlier", "index": 253, "structure": None, "note": "n1", "title": "t1"},
                  {"flag": "series", "index": 64, "structure": "xfs-inode-chunk-alloc", "note": "n2"},
                  {"flag": "stopped", "index": 300, "run": 2, "errno": 28, "note": "ENOSPC", "title": "stopped"}]})
    outlier, series, stopped = events.findings_from_report(report)
    assert (outlier.flag, outlier.index, outlier.fields["runs_flagged"], outlier.title) == ("outlier", 253, 5, "t1")
    assert (series.flag, series.start, series.stride, series.count, series.title) == ("series", 64, 64, 3, "series")
    assert series.file_indices() == (64, 128, 192) and series.structure == "xfs-inode-chunk-alloc"
    assert (stopped.flag, stopped.index, stopped.fields["errno"]) == ("stopped", 300, 28)
    variation = events.findings_from_report({"flags": [{"kind": "variation", "rsd": 0.2, "note": "n"}]})
    assert variation == [Finding(flag="variation", title="variation", note="n", fields={"rsd": 0.2})]
    assert events.findings_from_report({"op": "creat"}) is None and events.findings_from_report(None) is None
    # a probe report that lists no flags says nothing of them: the live ones stand
    assert events.findings_from_report(registry.report_from_data("probe", {"op": "creat"})) is None


def test_the_probes_samples_are_its_own_kind():
    from fsscope.workloads.probe_records import Samples

    batch = Samples(t=0.5, run=1, start=4096, latency_ns=[1200, 1300, -1])
    assert registry.decode_event("probe", events.encode(batch)) == batch
    assert isinstance(events.decode(events.encode(batch)), Data)  # without the job: read, as Data


def test_a_real_job_speaks_the_contract_on_the_pipe_and_in_its_record(scratch):
    handle = runner.start("smoke", smoke.Spec(duration_s=0.3), TargetSpec("dir", str(scratch)), None)
    streamed = list(handle.records())
    assert handle.returncode == 0
    assert isinstance(streamed[0], Phase) and Phase(name="write+fsync") in [
        Phase(name=e.name) for e in streamed if isinstance(e, Phase)]
    (result,) = [e for e in streamed if isinstance(e, Result)]
    assert result.report["files"] > 0 and result.t > 0
    assert handle.run_dir.manifest()["events_version"] == events.VERSION
    assert events.read_run(handle.run_dir) == [e for e in streamed if e.kind not in events.UNLOGGED_KINDS]
