"""Command-line options read from a job's Spec (fsscope/cli/spec_options.py, issue 33): the
help, the bounds and the units are the Spec's, a bound broken is one line and exit 2, and what
was given reaches the job's spec (the others at the Spec's defaults)."""

from __future__ import annotations

import json

import pytest

from fsscope.layout.job import Spec as FragSpec
from fsscope.scan.job import Spec as ScanSpec


def _description(spec, name: str) -> str:
    import typing

    from fsscope.cli.spec_options import _unwrap

    _, (meta,) = _unwrap(typing.get_type_hints(spec, include_extras=True)[name])
    return meta.description


def test_help_is_the_specs(cli):
    out = cli("frag", "--help", env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    for flag, name in (("--test-file SIZE", "test_file_bytes"), ("--chunk SIZE", "chunk_bytes")):
        assert f"{flag}  " in out.stdout and _description(FragSpec, name).split("(")[0] in out.stdout, flag
    assert "(default 1 MiB)" in out.stdout  # the Spec's default, in its unit
    assert "--no-free-space" in out.stdout


@pytest.mark.parametrize(("argv", "line"), [
    (["scan", "--near", "0", "/tmp"], "argument --near: must be at least 1, not 0"),
    (["scan", "--largest", "-3", "/tmp"], "argument --largest: must be at least 1, not -3"),
    (["frag", "--test-file", "1K", "--dir", "/tmp"], "argument --test-file: must be at least 4 KiB, not 1 KiB"),
    (["frag", "--chunk", "lots", "--dir", "/tmp"], "argument --chunk: 'lots' is not a size"),
])
def test_a_bound_broken_is_one_line_before_anything_runs(cli, argv, line, tmp_path):
    out = cli(*argv, env={"FSSCOPE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"})
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and line in out.stderr, out.stderr
    assert not (tmp_path / "home" / "runs").exists()  # nothing was recorded


def test_the_options_given_reach_the_scan(cli, tmp_path):
    tree = tmp_path / "tree"
    for i in range(4):
        (tree / f"d{i}").mkdir(parents=True)
        for j in range(i + 5):  # more entries than the root (4)
            (tree / f"d{i}" / f"f{j}").write_bytes(b"")
    out_json = tmp_path / "scan.json"
    out = cli("scan", str(tree), "--largest", "2", "--no-aging", "--no-free-space", "--json", str(out_json))
    assert out.returncode == 0, out.stderr
    report = json.loads(out_json.read_text())
    assert [d["path"].rsplit("/", 1)[-1] for d in report["largest"]] == ["d3", "d2"]
    assert report["aging"] is None and report["free_space"] is None
    default = cli("scan", str(tree), "--json", str(out_json))
    assert default.returncode == 0, default.stderr
    assert len(json.loads(out_json.read_text())["largest"]) == min(ScanSpec().largest, 5)  # 5 directories: the root too


def test_run_lists_a_jobs_parameters_with_the_specs_bounds_and_help(cli, tmp_path):
    out = cli("run", "frag", "-p", "help=1", env={"FSSCOPE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert f"chunk_bytes = {FragSpec().chunk_bytes}  (at least 512 B; {_description(FragSpec, 'chunk_bytes')})" in lines
    assert [line.split(" = ")[0] for line in lines] == list(FragSpec.__struct_fields__)


COMMANDS = [("probe", "fsscope.cli.probe_cmd", "fsscope.workloads.probe:ProbeSpec"),
            ("bench", "fsscope.cli.bench_cmd", "fsscope.workloads.bench_spec:Spec"),
            ("syncwrite", "fsscope.cli.syncwrite_cmd", "fsscope.workloads.syncwrite_records:Spec"),
            ("age", "fsscope.cli.age_cmd", "fsscope.aging.job:Spec"),
            ("watch", "fsscope.cli.watch_cmd", "fsscope.watch.job:Spec"),
            ("replay", "fsscope.cli.replay_cmd", "fsscope.replay.job:Spec")]


# values written otherwise than in their unit: a list of sizes, a duration such as 2m
OWN_READERS = {("syncwrite", "buffer_sizes_bytes"), ("watch", "duration_s")}


@pytest.mark.parametrize(("command", "module", "spec"), COMMANDS)
def test_each_commands_help_is_its_specs(cli, command, module, spec):
    """Every option a command takes from its Spec is taught by the Spec's words, a size option
    as a SIZE and a seconds option as S, with the Spec's default in its unit."""
    import importlib

    from fsscope.cli.spec_options import UNITS, _unit

    options = getattr(importlib.import_module(module), "AGE_OPTIONS" if command == "age" else "SPEC_OPTIONS")
    spec_module, spec_name = spec.split(":")
    spec_type = getattr(importlib.import_module(spec_module), spec_name)
    out = cli(command, "--help", env={"COLUMNS": "1000", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())  # an option's help may start on the line after its flag
    for name in options:
        description = " ".join(_description(spec_type, name).split())
        assert description in text, f"{command}: no help says {description!r}"
        unit = _unit(name)
        if unit and (command, name) not in OWN_READERS:
            assert f"{UNITS[unit][0]} {description}" in text, f"{command} {name}: not a {UNITS[unit][0]}"
            default = spec_type.__struct_defaults__[list(spec_type.__struct_fields__).index(name)]
            if isinstance(default, int):
                assert f"{description} (default {UNITS[unit][2](default)})" in text, name


@pytest.mark.parametrize("job", ["watch", "replay", "age"])
def test_run_lists_the_parameters_of_a_job_whose_spec_needs_a_field_given(cli, job, tmp_path):
    """watch needs what to watch and replay its log before a Spec can be made: their parameters
    are listed from the declared defaults, not refused as an empty Spec would be."""
    out = cli("run", job, "-p", "help=1", env={"FSSCOPE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    says = {"age": "workers = 1  (at least 1; worker processes)"}.get(
        job, "slow_factor = 4.0  (more than 1; slow: at least X times its local baseline)")
    assert says in out.stdout.splitlines(), out.stdout
