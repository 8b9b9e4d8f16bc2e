"""How busy the machine was: every job's run record keeps the load averages and the CPU busy
share of its run (its own and the rest of the machine's), and the CLI says it in one line,
warning when there was more runnable work than CPUs."""

from __future__ import annotations

import json

import pytest

from fsscope import store
from fsscope.telemetry import machine as M

KEYS = {"ncpu", "elapsed_s", "load1_start", "load5_start", "load1_end", "load5_end", "load1_max",
        "cpu_busy_pct", "job_cpu_pct", "others_cpu_pct", "busy"}


def test_busy_shares_and_the_line():
    # 2 CPUs for 10 s: 1,500 of 2,000 ticks busy, the job's processes used 5 CPU-seconds
    pcts = M.busy_pcts(1500, 2000, 5_000_000, 10.0, 2)
    assert pcts == {"cpu_busy_pct": 75.0, "job_cpu_pct": 25.0, "others_cpu_pct": 50.0}
    calm = {"ncpu": 2, "load1_start": 0.5, "load1_end": 0.8, "load1_max": 1.2} | pcts
    assert not M.busy(calm) and "noisy" not in M.machine_line(calm)
    assert M.machine_line(calm).startswith("machine: load 0.5 → 0.8 (max 1.2) on 2 CPUs, CPUs 75% busy")
    loaded = calm | {"load1_max": 9.3}
    assert M.busy(loaded) and "more runnable work than CPUs" in M.machine_line(loaded)


def test_a_probe_records_how_busy_the_machine_was(cli, scratch):
    out_json = scratch / "probe.json"
    work = scratch / "work"
    work.mkdir()
    out = cli("probe", "--dir", str(work), "--files", "50", "--runs", "1", "--op", "stat", "--json", str(out_json))
    assert out.returncode == 0, out.stderr
    machine = json.loads(out_json.read_text())["machine"]
    assert set(machine) == KEYS and machine["ncpu"] >= 1 and machine["elapsed_s"] > 0
    assert 0 <= machine["cpu_busy_pct"] <= 100 and machine["load1_max"] >= machine["load1_start"]
    if machine["job_cpu_pct"] is not None:  # the job's own cgroup (none without a writable v2 hierarchy)
        assert machine["job_cpu_pct"] > 0 and machine["others_cpu_pct"] >= 0
    assert machine["busy"] == (max(machine["load1_start"], machine["load1_end"], machine["load1_max"])
                               > machine["ncpu"])
    run = store.list_runs()[-1]
    assert run.manifest()["machine"] == machine  # the run record keeps it beside the report
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("machine: load"))
    assert f"on {machine['ncpu']} CPUs" in line and (("noisy" in line) == machine["busy"])
    again = cli("report", str(run.path))
    assert again.returncode == 0 and "machine: load" in again.stdout


@pytest.mark.parametrize("job", ["bench", "syncwrite"])
def test_bench_and_syncwrite_record_it_too(cli, scratch, job):
    out_json = scratch / f"{job}.json"
    work = scratch / "work"
    work.mkdir()
    args = (["--personality", "varmail", "--runs", "1", "--duration", "1", "--files", "20"] if job == "bench" else
            ["--repeats", "1", "--sizes", "4K", "--bytes-per-point", "64K", "--mode", "fdatasync"])
    out = cli(job, *args, "--dir", str(work), "--json", str(out_json), timeout_s=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out_json.read_text())
    if job == "syncwrite":
        (report,) = report["recipes"].values()
    assert set(report["machine"]) == KEYS
    assert "machine: load" in out.stdout
