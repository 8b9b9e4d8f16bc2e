"""The run manifest as a record (fsscope.store.manifest): what the previous release wrote
(tests/fixtures/snapshot_runs), what the runner writes at each step of a real run, and a
field of the wrong type as one line naming it."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from fsscope.engine import events, runner
from fsscope.engine.registry import spec_from_data
from fsscope.errors import FsscopeError
from fsscope.records import Record
from fsscope.store import Manifest, RunDir
from fsscope.store.manifest import ManifestTarget, decode_manifest
from fsscope.targets import TargetSpec

RECORDED = sorted((Path(__file__).parent / "fixtures" / "snapshot_runs").iterdir())


def _fields(record: type[Record]) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(record)}


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_manifests_the_previous_release_wrote_read_as_records_with_every_key(path):
    run = RunDir(path)
    data = json.loads((path / "manifest.json").read_text())
    assert set(data) <= _fields(Manifest)  # no key of the record left undeclared
    assert set(data["target"]) <= _fields(ManifestTarget)
    m = run.info()
    assert run.problem() is None and path.name.endswith(f"-{m.job}") and m.status == "ok"
    assert m.target is not None and m.target_spec == data["target"]["spec"]
    assert m.target_spec["kind"] in ("dir", "ram", "image", "device")
    assert m.machine == data["machine"] and m.environment == data["environment"] and m.pid == data["pid"]
    assert m.spec == data["spec"] and spec_from_data(m.job, m.spec) is not None
    assert [c.argv for c in m.target.commands] == [c["argv"] for c in data["target"]["commands"]]


def test_a_real_run_reads_at_every_step_of_its_manifest(scratch):
    """Starting (the target recorded as its spec), then its end (what went into the target)."""
    handle = runner.start("smoke", spec_from_data("smoke", {"duration_s": 0.3}), TargetSpec("dir", str(scratch)), None)
    handle.drain()
    m = handle.run_dir.info()
    assert set(handle.run_dir.manifest()) <= _fields(Manifest)
    assert m.job == "smoke" and m.status == "ok" and m.error is None and m.events_version == events.VERSION
    assert m.target_spec["path"] == str(scratch) and m.recipe is None and m.recipe_name is None
    assert m.environment and m.environment["kernel"] and m.pid_start_ticks and m.started and m.ended

    run = RunDir.create("smoke", scratch / "runs")  # as the runner writes it before the child starts
    run.update_manifest(status="starting", events_version=events.VERSION, job="smoke",
                        spec=spec_from_data("smoke", {}), target=TargetSpec("ram", size_bytes=1 << 20), recipe=None)
    m = run.info()
    assert m.status == "starting" and m.target_spec == {"kind": "ram", "path": "", "size_bytes": 1 << 20,
                                                         "mountpoint": "", "yes_destroy": None, "snapshot": ""}
    assert m.spec is not None and m.spec["duration_s"] == spec_from_data("smoke", {}).duration_s


@pytest.mark.parametrize("change, says", [
    ({"pid": "me"}, "manifest.json: pid is str 'me', not a whole number"),
    ({"pid": True}, "manifest.json: pid is bool 'True', not a whole number"),
    ({"job": 5}, "manifest.json: job is int '5', not text"),
    ({"spec": ["files", 200]}, "manifest.json: spec is list"),
    ({"target": {"spec": "ram"}}, "manifest.json: target.spec is str 'ram', not an object"),
    ({"recipe": {"name": 3}}, "manifest.json: recipe.name is int '3', not text"),
    ({"target": {"spec": {}, "commands": [{"rc": 0}]}}, "target.commands holds an entry that is not a command"),
])
def test_a_field_of_the_wrong_type_is_one_line_naming_it(tmp_path, change, says):
    good = {"job": "probe", "status": "ok", "target": {"spec": {"kind": "ram", "path": ""}}, "recipe": {"name": "x"}}
    assert decode_manifest(good).recipe_name == "x"
    with pytest.raises(FsscopeError) as exc:
        decode_manifest(good | change)
    assert says in str(exc.value) and "\n" not in str(exc.value)
    (tmp_path / "manifest.json").write_text(json.dumps(good | change))
    run = RunDir(tmp_path)
    assert run.status() == "unreadable" and says in (run.problem() or "")


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_a_replayed_job_holds_its_spec_record(path):
    """The replay's JobState: the job's Spec record (as the live screen holds the one it
    started), and the recorded data beside it for the view models."""
    from fsscope.engine import registry
    from fsscope.tui.replay import load_run

    run = RunDir(path)
    job = load_run(run).job
    assert type(job.spec) is registry.spec_type(job.job) and job.spec_data == run.info().spec
    assert job.spec == spec_from_data(job.job, job.spec_data)
