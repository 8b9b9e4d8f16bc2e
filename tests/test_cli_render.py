"""The reports the CLI prints (fsscope/cli/render/): real jobs on small targets, each section
present with the numbers of the report the job wrote, and 'fsscope report RUN' into a pipe
printing the same report at full width."""

from __future__ import annotations

import json
import os
import re

import pytest

from fsscope.format import format_bytes, format_pct

# a pipe, as in 'fsscope report latest | less': no terminal, no COLUMNS (the test session's children
# inherit COLUMNS=80 otherwise)
PIPE = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
SMALL_BENCH = ["--runs", "2", "--duration", "2", "--files", "60", "--mean-file-size", "8K", "--workers", "2"]


def _words(text: str) -> str:
    """The output with rich's wrapping undone (a long line may wrap at the pipe's width)."""
    return " ".join(text.split())


def _job_report(out) -> str:
    """What the job printed, without the machine-load line (a 'report' re-reads the load recorded)."""
    return "\n".join(line for line in out.stdout.splitlines() if not line.startswith("machine:"))


def _row(*cells: str, text: str) -> bool:
    """Whether a table row holds these cells next to each other."""
    return re.search(r"\s*│\s*".join(re.escape(c) for c in cells), text) is not None


def _run_id(out) -> str:
    """The run the job recorded, from its last stderr line ("recorded in RUN_DIR (status)")."""
    return re.findall(r"recorded in \S*/runs/(\S+)", " ".join(out.stderr.split()))[-1]


def test_bench_sections_carry_the_reports_numbers(cli, scratch):
    workdir = scratch / "work"
    workdir.mkdir()
    out_json = scratch / "bench.json"
    out = cli("bench", "--personality", "varmail", *SMALL_BENCH, "--window", "1", "--dir", str(workdir),
              "--json", str(out_json), timeout_s=120, env=PIPE)
    assert out.returncode == 0, out.stderr
    report = json.loads(out_json.read_text())
    text = _words(out.stdout)
    runs, var = report["runs"], report["variation"]
    # head: personality, where, runs done of asked, run length, the file set
    work = report["workload"]
    assert (f"varmail on {report['fs']} ({report['target']['describe']}): 2 of 2 runs × 2 s, "
            f"{work['workers']} workers, {work['nfiles']} files of mean "
            f"{format_bytes(work['mean_file_size_bytes'])}") in text
    # runs table: one row per run with its ops/s and seconds
    for i, run in enumerate(runs):
        assert _row(str(i + 1), f"{run['ops_per_s']:,.0f}", f"{run['elapsed_s']:.1f}", text=out.stdout), i
    # cumulative throughput and its relative range across the runs
    assert (f"cumulative throughput: mean {var['mean_ops_per_s']:,.0f} ops/s "
            f"({var['min_ops_per_s']:,.0f}..{var['max_ops_per_s']:,.0f}); relative range "
            f"{format_pct(var['relative_range'])}, RSD {format_pct(var['rsd'])}") in text
    # Throughput-1: its windows, a sparkline per run, the per-window relative range
    band = var["windows"]["1"]
    assert (f"Throughput-1: {len(band['mean'])} windows, {min(band['min']):,.0f}..{max(band['max']):,.0f} "
            "ops/s") in text
    for i, run in enumerate(runs):
        series = [x for x in run["windows"]["1"] if x is not None]
        assert f"run {i + 1} " in text and f"{min(series):,.0f}..{max(series):,.0f}" in text
    assert "relative range across runs per window: median" in text
    # per op: every op of the personality, with its ops/s (mean over runs)
    for op in runs[0]["ops"]:
        rate = sum(r["ops"][op]["ops_per_s"] for r in runs) / len(runs)
        assert _row(op, f"{rate:,.0f}", text=out.stdout), op
    # flags (or that there are none), each with its note
    for flag in report["flags"]:
        assert _words(flag["title"]) in text and _words(flag["note"]) in text
    if not report["flags"]:
        assert "no variation flags" in text

    # the recorded run renders the same, into a pipe at the pipe's full width
    again = cli("report", _run_id(out), timeout_s=60, env=PIPE)
    assert again.returncode == 0, again.stderr
    assert _job_report(out) in again.stdout
    assert "…" not in again.stdout and max(len(line) for line in again.stdout.splitlines()) > 80


@pytest.mark.privileged
def test_frag_sections_carry_the_reports_numbers(cli, scratch):
    out_json = scratch / "frag.json"
    out = cli("frag", "--recipe", "ext4-default", "--ram", "--size", "300M", "--json", str(out_json), timeout_s=120,
              env=PIPE)
    assert out.returncode == 0, out.stderr
    report = json.loads(out_json.read_text())
    text = _words(out.stdout)
    assert f"fragmentation of ext4-default on {report['target']['describe']}" in text
    hist, test_file = report["free_space"], report["test_file"]
    assert _row("free space", format_bytes(report["space"]["free_bytes"]), text=out.stdout)
    assert _row("free extents", f"{hist['free_extent_count']:,}", text=out.stdout)
    assert _row("largest free extent", format_bytes(hist["largest_free_extent_bytes"]), text=out.stdout)
    assert _row(f"test file ({format_bytes(test_file['size_bytes'])}) fragments", f"{test_file['fragment_count']:,}",
                text=out.stdout)
    assert "free-space extent histogram" in text
    for lower, count in zip(hist["bucket_lower_bytes"], hist["bucket_extent_counts"]):
        assert _row(f"{format_bytes(lower)}–{format_bytes(lower * 2)}", f"{count:,}", text=out.stdout), lower
    again = cli("report", _run_id(out), timeout_s=60, env=PIPE)
    assert again.returncode == 0 and _job_report(out) in again.stdout, again.stderr
