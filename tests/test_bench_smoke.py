"""Benchmarks that cannot rot unseen: every script in bench/ starts (its imports and the
fsscope API it uses at import time resolve, its ``--help`` parses), has a ``--smoke`` mode --
its own code path at tiny sizes, seconds long -- and that mode runs to the end here and prints
the machine's load. A moved function (``parse_size_bytes`` left ``fsscope.workloads.cgroup``)
fails here, not the next time someone measures; a new script without a smoke mode fails too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
SCRIPTS = sorted(p for p in BENCH.glob("*.py") if p.name != "benchlib.py")

# smoke modes that format loop images, mount, trace or run a study: root and loop devices
PRIVILEGED = {"check_time.py", "explain_timing.py", "explore_rate.py", "replay_fidelity.py", "syncwrite_fio.py",
              "trace_overhead.py", "tui_observer.py", "variation_rate.py", "watch_overhead.py"}
# smoke modes of 20 s or more at load 6-8 on 2 CPUs (a study, the TUI in tmux, check's budget):
# marked so that -m 'not slow' keeps this module to about a minute while iterating
SLOW = {"check_time.py", "explore_rate.py", "replay_fidelity.py", "tui_observer.py", "variation_rate.py",
        "workload_rate.py"}


def _run(script: Path, *args: str, timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          timeout=timeout_s, cwd=BENCH.parent)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_bench_script_starts_and_offers_a_smoke_mode(script):
    done = _run(script, "--help", timeout_s=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:"), done.stdout[:200]
    assert "--smoke" in done.stdout, f"{script.name} has no --smoke mode (every bench script needs one)"


def test_the_marked_lists_name_real_scripts():
    assert {p.name for p in SCRIPTS} >= PRIVILEGED | SLOW


def _marks(name: str) -> list[pytest.MarkDecorator]:
    return ([pytest.mark.privileged] if name in PRIVILEGED else []) + ([pytest.mark.slow] if name in SLOW else [])


@pytest.mark.parametrize("script", [pytest.param(p, marks=_marks(p.name)) for p in SCRIPTS], ids=lambda p: p.name)
def test_smoke_modes_run_to_the_end_and_print_the_load(script):
    done = _run(script, "--smoke", timeout_s=300)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    assert "load " in done.stdout and "CPUs" in done.stdout, done.stdout
