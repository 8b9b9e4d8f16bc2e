"""bench/tui_heatmap.py's smoke mode, so the bench cannot rot: it runs the real Textual app
headless on a tiny matrix through every switch and prints its figures and verdict line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "tui_heatmap.py"


def test_the_heatmap_bench_smoke_mode_runs_and_reports_cpu_wall_and_load():
    proc = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "load " in out and "CPUs" in out
    for line in ("heatmap switch frames", "heatmap batch frames", "reference (blank screen)"):
        row = next(r for r in out.splitlines() if line in r)
        assert "CPU ms median" in row and "wall ms median" in row
    assert "target: CPU per frame median <= 16 ms and worst <= 33 ms:" in out


def test_the_heatmap_bench_refuses_a_bad_size_with_one_line():
    proc = subprocess.run([sys.executable, str(BENCH), "--size", "wide"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--size" in proc.stderr
