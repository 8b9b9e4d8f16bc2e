"""The study engine on real treatments: a LocalCluster here, a real Dask scheduler and two
worker processes on loopback, an interrupted study resumed, a worker killed mid-treatment.

The plan is small (one file, one CPU, 64 MiB ext4 states). The local, resumed and Dask paths
must give the same table: the same treatments in the same order with the same factors, each
with its metrics. Not necessarily the same d-spans: ext4 picks a small file's per-CPU
locality group on the CPU that runs the allocation, and delayed allocation may run in a
writeback worker on either CPU -- the nondeterminism Chopper found (measured here: one
treatment gave 16 KiB and 2 MiB in two runs), which ``--repeat 2`` reports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import pytest
from pilot_wait import wait_for

from fsscope import paths, recipes
from fsscope.records import plain
from fsscope.study import execute, player
from fsscope.study import space as spaces
from fsscope.study.explore import ExploreRow, ExploreTreatment
from fsscope.study.plan import Failed, Plan
from fsscope.targets.journal import Journal

pytestmark = pytest.mark.privileged

OVERRIDES = {"DiskSize": "64M", "UsedRatio": "0", "FreeSpaceLayout": "1,6", "CPUCount": "1",
             "FileCount": "1", "FileSize": "16K,128K"}
N = 4


def small_plan() -> Plan:
    space = spaces.load("small", player.EXPLORE_SCHEMA).with_levels(OVERRIDES, player.EXPLORE_SCHEMA)
    return Plan.make(space, N, seed=11)


def treatment_fn(plan: Plan, cache: str, hold: str = "") -> ExploreTreatment:
    return ExploreTreatment({"ext4-default": plain(recipes.load("ext4-default"))},
                            dict(plan.space.settings), cache, hold)


def comparable(rows: list[ExploreRow | Failed]) -> list[tuple]:
    """What the plan decides about a row, which metrics it has, and whether it failed."""
    return [(r.id, r.recipe, r.row, r.repeat, json.dumps(r.factors, sort_keys=True),
             sorted(k for k, v in msgspec.structs.asdict(r).items() if v is not None and k not in ("pid", "host")),
             len(r.files) if isinstance(r, ExploreRow) else 0, r.error if isinstance(r, Failed) else None)
            for r in rows]


def study_leftovers() -> list[str]:
    """Study journal entries, clones and loop devices left on this host."""
    left = [f"journal {e.kind} {e.group}" for e in Journal().entries() if e.group.startswith("study-")]
    ram = Path(os.environ["FSSCOPE_RAM_DIR"])
    left += [str(p) for p in ram.glob("fsscope-study-*")]  # clones and disk-state caches
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            name = backing.read_text().strip()
        except OSError:
            continue
        if name.startswith(str(ram)):
            left.append(name)
    return left


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The local path: the whole plan on a LocalCluster of two worker processes."""
    plan = small_plan()
    study = tmp_path_factory.mktemp("whole")
    fn = treatment_fn(plan, "fsscope-study-whole")
    rows = execute.run_study(plan, fn, study, ExploreRow, workers=2, teardown=fn.drop_cache)
    return plan, rows


def test_local_study_gives_every_row(uninterrupted):
    plan, rows = uninterrupted
    assert [r.id for r in rows] == [t.id for t in plan.treatments()]
    assert all(isinstance(r, ExploreRow) and r.d_span_bytes > 0 for r in rows), rows
    assert all(set(r.timing_s) >= {"clone_s", "mount_s", "play_s", "fiemap_s", "release_s"} for r in rows
               if isinstance(r, ExploreRow))
    assert study_leftovers() == []
    assert not list(Path(os.environ["FSSCOPE_RAM_DIR"]).glob("fsscope-study-whole"))  # cache dropped


def test_resumed_study_gives_the_same_table(uninterrupted, tmp_path):
    plan, whole = uninterrupted
    fn = treatment_fn(plan, "fsscope-study-resume")
    seen = []
    first = execute.run_study(plan, fn, tmp_path, ExploreRow, workers=1, cancelled=lambda: len(seen) >= 2,
                              on_row=lambda row, done, total: seen.append(row.id), teardown=fn.drop_cache)
    assert 2 <= len(first) < N  # stopped early, the rest not run
    recorded = execute.load_rows(tmp_path, ExploreRow)
    assert len(recorded) == len(first)
    again = execute.run_study(Plan.load(tmp_path), fn, tmp_path, ExploreRow, workers=1, teardown=fn.drop_cache)
    assert comparable(again) == comparable(whole)
    kept = {r.id: r for r in again}
    assert all(kept[r.id] == r for r in recorded)  # rows measured before the stop are not run again
    assert study_leftovers() == []


def _scheduler_address(sched_file: Path) -> str | None:
    """The address in the scheduler's file once it is whole: distributed writes it in place
    (open, then json.dump), so a read can find it empty or cut."""
    try:
        return json.loads(sched_file.read_text()).get("address")
    except (FileNotFoundError, json.JSONDecodeError):
        return None


@pytest.fixture
def dask_cluster(tmp_path):
    """A real `dask scheduler` and two `dask worker` processes (no nanny) on 127.0.0.1, over
    mutual TLS with certificates made as the README says; yields (address, processes, the
    ``--security`` file)."""
    import dask_tls

    bin_dir = Path(sys.executable).parent
    certs = tmp_path / "certs"
    certs.mkdir(mode=0o700)
    security = dask_tls.make_certs(certs)
    tls = ["--tls-ca-file", str(certs / "ca.pem"), "--tls-cert", str(certs / "cert.pem"),
           "--tls-key", str(certs / "key.pem")]
    sched_file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([str(bin_dir / "dask"), "scheduler", "--protocol", "tls", "--host", "127.0.0.1",
                               "--port", "0", "--no-dashboard", "--scheduler-file", str(sched_file), *tls],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        address = wait_for(lambda: _scheduler_address(sched_file), "the scheduler file", timeout_s=60)
        for _ in range(2):
            procs.append(subprocess.Popen([str(bin_dir / "dask"), "worker", address, "--nthreads", "1",
                                           "--no-nanny", "--host", "127.0.0.1", "--no-dashboard", *tls],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        from distributed import Client

        from fsscope.study.credentials import load_security_file

        with Client(address, timeout="30s", security=load_security_file(str(security)).security()) as client:
            client.wait_for_workers(2, timeout=60)
        yield address, procs, str(security)
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def drive_study(*args, **kwargs) -> tuple[threading.Thread, dict]:
    """``execute.run_study(*args, **kwargs)`` in a thread; the dict gets its "rows" or "error"."""
    result: dict = {}

    def drive():
        try:
            result["rows"] = execute.run_study(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - the test's assertions read it
            result["error"] = exc

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    return driver, result


def test_dask_worker_killed_mid_treatment(uninterrupted, dask_cluster, tmp_path):
    plan, whole = uninterrupted
    address, procs, security = dask_cluster
    worker_pids = {p.pid for p in procs[1:]}
    hold = tmp_path / "hold"
    hold.write_text("treatments wait here, mounted, while this file exists\n")
    fn = treatment_fn(plan, "fsscope-study-dask", str(hold))
    (tmp_path / "study").mkdir()
    driver, result = drive_study(plan, fn, tmp_path / "study", ExploreRow, scheduler=address, security=security,
                                 teardown=fn.drop_cache)
    deadline = time.monotonic() + 120
    owners: set[int] = set()
    while len(owners) < 2 and time.monotonic() < deadline:  # both workers mid-treatment, mounted
        owners = {e.owner_pid for e in Journal().entries() if e.kind == "mount" and e.group.startswith("study-")}
        time.sleep(0.05)
    assert owners == worker_pids, owners
    victim = min(owners)
    os.kill(victim, signal.SIGKILL)
    next(p for p in procs if p.pid == victim).wait(10)
    hold.unlink()
    driver.join(180)
    assert not driver.is_alive() and "error" not in result, result
    rows = result["rows"]
    assert comparable(rows) == comparable(whole)  # the Dask path gives the local path's rows
    assert {r.pid for r in rows if isinstance(r, ExploreRow)} == worker_pids - {victim}  # the survivor's, in the end
    assert study_leftovers() == []


def _fsscope(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fsscope", *args], capture_output=True, text=True,
                          timeout=timeout_s)


def test_explore_cli_end_to_end(tmp_path):
    out = tmp_path / "explore.json"
    proc = _fsscope("explore", "--treatments", "2", "--repeat", "2", "--workers", "1", "--seed", "4",
                    *[f"--factor={k}={v}" for k, v in OVERRIDES.items()], "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    # exactly the keys (and more)
    t = report["treatments"][0]
    assert {"id", "fs", "repeat", "factors", "files"} <= set(t)
    assert {"d_span_bytes", "extents", "size_bytes"} <= set(t["files"][0])
    assert set(t["factors"]) == set(TABLE_FACTORS)
    assert {"factor", "first_order"} <= set(report["prioritization"][0])
    assert {"quantile", "threshold_bytes", "levels"} <= set(report["tail"])
    assert {"factor", "level", "tail_share", "significant"} <= set(report["tail"]["levels"][0])
    assert "changed_share" in report["nondeterminism"] and report["nondeterminism"]["pairs"] == 2
    # the same summaries per file system; the response is Chopper's per-file d-span
    assert {"prioritization", "tail", "nondeterminism"} <= set(report["by_fs"]["ext4"])
    assert report["by_fs"]["ext4"]["nondeterminism"]["pairs"] == 2
    assert all(t["d_span_bytes"] == max(f["d_span_bytes"] for f in t["files"])
               and t["dspan_all_files_bytes"] >= t["d_span_bytes"] for t in report["treatments"])
    assert len(report["treatments"]) == 4 and report["notes"]
    study = Path(report["study_dir"])
    header = (study / "treatments.csv").read_text().splitlines()[0].split(",")
    assert {"id", "fs", "d_span_bytes", "dspan_all_files_bytes", "FileSize", "file0_d_span_bytes",
            "t_clone_s"} <= set(header)
    assert (study / "plan.json").exists()
    # resuming a finished study runs nothing and reports the same table
    again = tmp_path / "again.json"
    proc = _fsscope("explore", "--resume", str(study), "--json", str(again))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(again.read_text())["treatments"] == report["treatments"]
    assert "fsscope explore --space chopper" in _fsscope("explore", "--help").stdout
    assert study_leftovers() == []


TABLE_FACTORS = ["DiskSize", "UsedRatio", "FreeSpaceLayout", "CPUCount", "FileSize", "ChunkCount",
                 "InternalDensity", "ChunkOrder", "Fsync", "Sync", "FileCount", "DirectorySpan"]


@pytest.mark.parametrize("args, says", [
    (["--space", "/nonexistent.toml"], "--space /nonexistent.toml: no such file"),
    (["--factor", "FileSize=huge"], "factors.FileSize[0]"),
    (["--factor", "Colour=red"], "--factor Colour: no such factor"),
    (["--recipes", "ext9"], "ext9"),
    (["--resume", "/nonexistent-run"], "--resume /nonexistent-run"),
])
def test_explore_cli_bad_input_is_one_line(args, says, capsys):
    from fsscope.cli import main

    def explore_runs() -> set:
        return set(paths.runs_dir().glob("*-explore*")) if paths.runs_dir().is_dir() else set()

    before = explore_runs()
    assert main(["explore", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert explore_runs() == before  # refused before any run record


def test_resume_latest_names_the_newest_study_of_its_job(tmp_path, monkeypatch):
    """`--resume latest`: the study made last, even when several share a second (a sort by
    name took "-2" over "-10"), of the command's own job, and only one with a plan."""
    from fsscope import store
    from fsscope.cli.common import resolve_study_run

    monkeypatch.setenv("FSSCOPE_HOME", str(tmp_path))
    stray = paths.runs_dir() / "mine"                       # a record whose name is not an id
    stray.mkdir(parents=True)
    (stray / "manifest.json").write_text("{}")
    made = {}
    for job, with_plan in [("explore", True), ("variation", True)] * 6 + [("explore", False)]:
        run = store.RunDir.create(job, paths.runs_dir())
        (run.path / "manifest.json").write_text("{}")
        if with_plan:
            (run.path / "plan.json").write_text("{}")
            made[job] = str(run.path)
    assert resolve_study_run("latest") == made["explore"]
    assert resolve_study_run("latest", "variation") == made["variation"]


def test_explore_cli_cancel_stops_promptly_and_cleans_up():
    """SIGTERM to the headless command (what Ctrl-C does): the job's process group, LocalCluster
    workers included, is told to stop; the study notices although no row can come any more,
    records 'cancelled', and leaves nothing mounted or attached -- resumable later."""
    before = set(paths.runs_dir().glob("*-explore*")) if paths.runs_dir().is_dir() else set()
    proc = subprocess.Popen([sys.executable, "-m", "fsscope", "explore", "--treatments", "30", "--workers", "2",
                             *[f"--factor={k}={v}" for k, v in OVERRIDES.items()]],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        rows: list[dict] = []
        while time.monotonic() < deadline and not rows:
            new = set(paths.runs_dir().glob("*-explore*")) - before if paths.runs_dir().is_dir() else set()
            rows = execute.load_rows(next(iter(new)), ExploreRow) if new else []
            time.sleep(0.2)
        assert rows, "no treatment finished"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run = next(iter(set(paths.runs_dir().glob("*-explore*")) - before))
    assert json.loads((run / "manifest.json").read_text())["status"] == "cancelled"
    assert 0 < len(execute.load_rows(run, ExploreRow)) < 30
    assert study_leftovers() == []
