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
