"""``fsscope compare RUN_A RUN_B``: two recorded runs side by side with B/A ratios."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fsscope.analysis.compare import Section
from fsscope.engine import registry
from fsscope.engine.registry import compare_reports
from fsscope.records import convert, plain
from fsscope.workloads.probe_records import Report


def rows(sections: list[Section]) -> dict[str, dict]:
    return {f"{s.title}: {r.metric}": plain(r) for s in sections for r in s.rows}


def recorded(stderr: str) -> str:
    match = re.search(r"recorded in (\S+) \(ok\)", stderr)
    assert match, stderr
    return Path(match.group(1)).name


def probe_report(mean_ns: float, structures: list[tuple[str, int]]) -> Report:
    stats = {"count": 100, "mean_ns": mean_ns, "sd_ns": 5.0, "min_ns": 1.0, "p50_ns": mean_ns, "p95_ns": 2 * mean_ns,
             "p99_ns": 3 * mean_ns, "max_ns": 9 * mean_ns, "rsd": 0.1}
    flags = [{"index": i, "structure": s, "title": s} for s, i in structures] + [{"index": 5, "structure": None}]
    return registry.report_from_data("probe", {"op": "creat", "runs_completed": 3, "noise_count": 2,
                                                "stats": {"overall": stats}, "flags": flags})


def test_probe_comparison_has_stats_ratios_and_structures():
    sections = compare_reports("probe", probe_report(1000, [("ext4-dir-htree-conversion", 61)]),
                               probe_report(2500, [("ext4-dir-htree-conversion", 61), ("first-call", 0)]))
    by = rows(sections)
    mean = by["latency of creat (µs): mean"]
    assert (mean["a"], mean["b"], mean["ratio"]) == (1000, 2500, 2.5)
    assert by["flags: flags explained by a structure"]["ratio"] == 2.0
    assert by["structural thresholds found (where): first-call"]["a"] == "—"
    assert by["structural thresholds found (where): first-call"]["b"] == "file 0"
    assert by["structural thresholds found (where): ext4-dir-htree-conversion"]["a"] == "file 61"


def test_bench_comparison_has_throughput_and_per_op_percentiles():
    def bench(ops_per_s: float, p99_ns: float) -> dict:
        run = {"ops_per_s": ops_per_s, "ops": {"read": {"ops_per_s": ops_per_s / 2, "p50_ns": 10.0, "p99_ns": p99_ns}}}
        return {"personality": "varmail", "runs": [run, run],
                "variation": {"mean_ops_per_s": ops_per_s, "relative_range": 0.05, "rsd": 0.02, "runs": 2}}

    by = rows(compare_reports("bench", bench(1000, 100.0), bench(500, 400.0)))
    assert by["throughput (varmail): mean ops/s"]["ratio"] == 0.5
    assert by["per op (mean over runs; latency in µs): read p99"]["ratio"] == 4.0
    assert by["per op (mean over runs; latency in µs): read ops/s"]["a"] == 500


def test_age_and_generic_comparisons():
    def age(ops: int, extents: int) -> dict:
        frag = {"free_space": {"free_extent_count": extents, "largest_free_extent_bytes": 2**20},
                "test_file": {"fragment_count": extents // 10, "size_bytes": 2**20}, "space": {"fullness": 0.8}}
        return {"profile": "small", "seed": 1, "ops": ops, "ops_per_s": 10.0, "fullness": 0.8,
                "fit": {"size": {"p_value": 0.9}, "depth": {"p_value": 0.8}, "age": {"p_value": 0.5}},
                "aged": frag, "fresh": frag | {"free_space": {"free_extent_count": 5}}, "op_log_sha256": "ab" * 32}

    by = rows(compare_reports("age", age(100, 1000), age(300, 3000)))
    assert by["aging: ops"]["ratio"] == 3.0
    assert by["fragmentation, aged: free extents"]["ratio"] == 3.0
    assert by["fragmentation, aged: test-file fragments"]["b"] == 300
    assert by["fit (chi-squared p): age p-value"]["a"] == 0.5
    assert by["aging: op log sha256"]["a"] == by["aging: op log sha256"]["b"]
    generic = rows(compare_reports("smoke", {"files": 10, "nested": {"x": 2.0}, "name": "a"},
                                   {"files": 30, "nested": {"x": 1.0}}))
    assert generic["numbers both reports hold: files"]["ratio"] == 3.0
    assert generic["numbers both reports hold: nested.x"]["ratio"] == 0.5


def test_compare_two_probe_runs_prints_both_columns(cli, tmp_path):
    ids = []
    for files in ("60", "90"):
        proc = cli("probe", "--dir", str(tmp_path), "--runs", "2", "--max-runs", "2", "--files", files,
                   "--sync-before", "none")
        assert proc.returncode == 0, proc.stderr
        ids.append(recorded(proc.stderr))
    out = tmp_path / "cmp.json"
    proc = cli("compare", ids[0], ids[1], "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert ids[0] in proc.stdout and ids[1] in proc.stdout and "B / A" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["job"] == "probe" and doc["a"]["id"] == ids[0] and doc["b"]["id"] == ids[1]
    count = rows(convert(doc["sections"], list[Section]))["latency of creat (µs): count"]
    assert (count["a"], count["b"]) == (120, 180) and count["ratio"] == pytest.approx(1.5)


def test_compare_refuses_different_jobs_and_unknown_runs(cli, tmp_path):
    probe = cli("probe", "--dir", str(tmp_path), "--runs", "1", "--files", "20", "--sync-before", "none")
    smoke = cli("run", "smoke", "-p", "duration_s=0.2", "--dir", str(tmp_path))
    assert probe.returncode == 0 and smoke.returncode == 0, (probe.stderr, smoke.stderr)
    proc = cli("compare", recorded(probe.stderr), recorded(smoke.stderr))
    assert proc.returncode == 2 and "same job" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = cli("compare", "no-such-run-xyz", recorded(probe.stderr))
    assert proc.returncode == 2 and "no run 'no-such-run-xyz'" in proc.stderr
