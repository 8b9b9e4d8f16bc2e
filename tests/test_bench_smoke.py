"""Benchmarks that cannot rot unseen: every script in bench/ starts (its imports and the
fsscope API it uses at import time resolve, its ``--help`` parses), and each that has a
``--smoke`` mode runs it (seconds, small sizes) to the end and prints the machine's load.
A moved function (``parse_size_bytes`` left ``fsscope.workloads.cgroup``) fails here, not
the next time someone measures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if p.name != "benchlib.py")


def _run(script: Path, *args: str, timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          timeout=timeout_s, cwd=BENCH.parent)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_bench_script_starts_and_explains_itself(script):
    done = _run(script, "--help", timeout_s=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:"), done.stdout[:200]


SMOKED = [p for p in SCRIPTS if "--smoke" in p.read_text()]


def test_the_scale_benchmarks_have_a_smoke_mode():
    assert {"probe_scale.py", "analysis_scale.py"} <= {p.name for p in SMOKED}


@pytest.mark.parametrize("script", SMOKED, ids=lambda p: p.name)
def test_smoke_modes_run_to_the_end_and_print_the_load(script):
    done = _run(script, "--smoke", timeout_s=300)
    assert done.returncode == 0, done.stderr
    assert "load " in done.stdout and "CPUs" in done.stdout, done.stdout
