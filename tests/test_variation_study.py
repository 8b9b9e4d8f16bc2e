"""The configuration-space variation study (#15): spaces, knob mapping, report statistics
recomputed from the saved rows, and one real study through the CLI (Dask LocalCluster, RAM
images, 2 configurations x 2 runs x 1 s)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from test_study_engine import dask_cluster  # noqa: F401 - the real scheduler + workers fixture

from fsscope import paths, records
from fsscope.analysis.variation.metrics import relative_range
from fsscope.analysis.variation.stats import range_change
from fsscope.errors import FsscopeError
from fsscope.study import space as spaces
from fsscope.study import variation as study
from fsscope.study.execute import load_rows
from fsscope.study.plan import Plan, Treatment

GIB = 1 << 30


def test_expert_space_is_table_2():
    space = spaces.load("cao-expert", study.SCHEMA)
    assert space.factor("ext4_block_size").levels == (1024, 2048, 4096)
    assert space.factor("ext4_inode_size").levels == (128, 512, 2048, 8192)
    assert space.factor("btrfs_node_size").levels == (4096, 16384, 65536)
    assert set(space.factor("btrfs_data").levels) == {"default", "nodatacow", "nodatasum"}
    assert space.factor("xfs_agcount").levels[0] == 8 and space.factor("xfs_agcount").levels[-1] == 512
    assert set(space.factor("scheduler").levels) == {"none", "mq-deadline", "bfq", "kyber"}
    assert set(space.factor("device").levels) == {"ram", "disk"}  # HDD/SSD there; RAM/disk images here
    assert space.settings["file_systems"] == ["ext4", "xfs", "btrfs"]


def test_bad_knob_level_names_the_field():
    with pytest.raises(FsscopeError, match="ext4_journal.*'sometimes'"):
        spaces.load("cao-small", study.SCHEMA).with_levels({"ext4_journal": "sometimes"}, study.SCHEMA)


def test_knobs_are_capped_to_what_mkfs_accepts_and_say_so():
    f = {"ext4_block_size": 1024, "ext4_inode_size": 8192, "ext4_journal": "journal", "xfs_block_size": 1024,
         "xfs_inode_size": 2048, "xfs_agcount": 512, "btrfs_node_size": 65536, "btrfs_data": "nodatasum",
         "atime": "noatime", "scheduler": "none"}
    recipe, knobs = study.configure("ext4", f, GIB)
    assert knobs["ext4_inode_size"] == 1024 and recipe.mkfs_opts == ("-b", "1024", "-I", "1024")
    assert recipe.effective_mount_opts() == ["data=journal", "noatime"] and recipe.prep.no_lazy_init
    assert "xfs_agcount" not in knobs and knobs["scheduler"] == "none"
    recipe, knobs = study.configure("xfs", f, GIB)
    assert (knobs["xfs_inode_size"], knobs["xfs_agcount"]) == (512, 8)  # half the block; 1 GiB / 128 MiB
    _, knobs = study.configure("xfs", f, 64 * GIB)
    assert knobs["xfs_agcount"] == 512
    recipe, _ = study.configure("btrfs", f, GIB)
    assert recipe.mkfs_opts == ("-n", "65536") and "nodatasum" in recipe.effective_mount_opts()


def test_plan_crosses_file_systems_and_personalities():
    plan = study.make_plan(study.Spec(configurations=4, file_systems=("ext4", "xfs"),
                                      personalities=("varmail",), runs=2))
    assert plan.recipes == ("ext4:varmail", "xfs:varmail") and len(plan.treatments()) == 8
    assert plan.space.settings["runs"] == 2


def _row(id_, ops, hists, knobs, fs="ext4", row=0, starts=None) -> study.VariationRow:
    data = {"id": id_, "recipe": f"{fs}:varmail", "row": row, "repeat": 0, "factors": knobs, "fs": fs,
            "personality": "varmail", "knobs": knobs,
            "runs": [{"ops_per_s": o, "elapsed_s": 4.0, "counts_per_bin": [o] * 4, "op_names": ["read"],
                      "latency_hist": [h]} for o, h in zip(ops, hists)]}
    for run, start in zip(data["runs"], starts or ()):
        run["placement"] = {"available": True, "first_byte_median": start}
    return records.convert(data, study.VariationRow)


def test_report_statistics_on_known_rows():
    plan = study.make_plan(study.Spec(configurations=2, file_systems=("ext4",), personalities=("varmail",),
                                      duration_s=4))
    same = [[10, 5]]
    rows = [_row("a", [100, 100, 100], [same, same, same], {"atime": "noatime"}),
            _row("b", [90, 100, 110], [[[10, 5]], [[10, 5], [20, 5]], [[20, 5]]], {"atime": "relatime"}, row=1)]
    rep = study.report(plan, rows, threshold=0.1, windows=(1, 2))
    a, b = rep.configurations
    assert a.relative_range == 0 and a.ks_range == 0
    assert b.relative_range is not None and b.ks_range is not None
    assert math.isclose(b.relative_range, 0.2) and math.isclose(b.ks_range, 1.0)
    assert [f.id for f in rep.flagged] == ["b"]
    shared = [lv for lv in rep.flagged_levels if lv.shared]
    assert shared == [study.FlaggedLevel(fs="ext4", knob="atime", level="relatime", flagged=1, configurations=1,
                                         flagged_share=1.0, shared=True)]
    # Throughput-1 windows: config a has 4 windows of range 0, b 4 of range 0.2
    cdf = rep.relative_range_cdf["1"]
    assert [x for x, _ in cdf] == pytest.approx([0] * 4 + [0.2] * 4) and cdf[-1][1] == 1.0
    assert a.placement_pcc is None                       # no placement recorded in these rows
    # Fig. 4: datasets starting further into the device, slower runs -> r = -1
    placed = _row("b", [90, 100, 110], [[[10, 5]], [[10, 5], [20, 5]], [[20, 5]]], {"atime": "relatime"}, row=1,
                  starts=(3e8, 2e8, 1e8))
    assert study.configuration_stats(placed).placement_pcc == pytest.approx(-1.0)


@pytest.mark.privileged
def test_study_cli_end_to_end_and_resume(tmp_path, cli):
    out = tmp_path / "v.json"
    proc = cli("study", "variation", "--configurations", "2", "--runs", "2", "--duration", "1",
               "--files", "40", "--file-systems", "ext4", "--personalities", "varmail", "--workers", "2",
               "--json", str(out), timeout_s=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rep = json.loads(out.read_text())
    assert {"configurations", "relative_range_cdf", "pcc", "flagged"} <= set(rep)
    assert {"r", "p"} <= set(rep["pcc"]) and rep["completed"] == 2 and not rep["failed"]
    for c in rep["configurations"]:
        assert {"id", "fs", "knobs", "personality", "runs", "mean_ops_per_s", "relative_range", "ks_range"} <= set(c)
        assert len(c["runs"]) == 2 and all(r["ops_per_s"] > 0 for r in c["runs"])
        assert c["fs"] == "ext4" and "ext4_block_size" in c["knobs"]
    # the statistics again, from the saved rows alone
    study_dir = rep["study_dir"]
    rows = load_rows(study_dir, study.VariationRow)
    again = study.report(Plan.load(study_dir), rows, threshold=rep["threshold"])
    by_id = {d.id: d for d in again.configurations}
    for c in rep["configurations"]:
        d = by_id[c["id"]]
        ops = [r["ops_per_s"] for r in c["runs"]]
        assert d.relative_range == pytest.approx(relative_range(ops)) == pytest.approx(c["relative_range"])
        assert d.ks_range == pytest.approx(c["ks_range"])
        row = next(r for r in rows if r.id == c["id"])
        assert isinstance(row, study.VariationRow) and np.sum(row.runs[0].counts_per_bin) > 0
    # a finished study resumed runs nothing and reports the same
    out2 = tmp_path / "again.json"
    proc = cli("study", "variation", "--resume", study_dir, "--json", str(out2), timeout_s=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [c["mean_ops_per_s"] for c in json.loads(out2.read_text())["configurations"]] == \
        [c["mean_ops_per_s"] for c in rep["configurations"]]


@pytest.mark.privileged
@pytest.mark.parametrize("where", ["device", "image"])
def test_ladder_steps_change_what_they_claim(tmp_path, cli, loop_device, where):
    """Every step runs on the target given (a loop device the test made, or an image file on
    disk), not on RAM images of its own."""
    out = tmp_path / "ladder.json"
    if where == "device":
        dev = loop_device("320M")
        target = ["--device", dev, "--yes-destroy", dev]
    else:
        dev = None
        target = ["--image", str(tmp_path / "ladder.img"), "--size", "320M"]
    proc = cli("bench", "--ladder", "--runs", "2", "--duration", "1", "--files", "40", *target,
               "--personality", "varmail", "--json", str(out), timeout_s=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["target"]["kind"] == where
    devices = {r["device"] for s in report["ladder"] for r in s["runs"]}
    if where == "device":
        assert devices == {dev}
    else:
        assert len(devices) == 1 and devices.pop().startswith("/dev/loop")
        assert (tmp_path / "ladder.img").stat().st_size == 320 * 2**20
    ladder = {s["step"]: s for s in report["ladder"]}
    assert report["order"] == "interleaved" and all([r["round"] for r in s["runs"]] == [0, 1] for s in ladder.values())
    assert list(ladder) == ["baseline", "no_lazy", "umount", "alloc"]
    for step in ladder.values():
        assert len(step["runs"]) == 2 and all(r["ops_per_s"] > 0 and len(r["image_sha256"]) == 64 for r in step["runs"])
        assert step["relative_range"] == pytest.approx(relative_range([r["ops_per_s"] for r in step["runs"]]))
    # no_lazy: the mkfs that ran wrote inode tables and journal up front; baseline's did not
    assert all("lazy_itable_init=0,lazy_journal_init=0" in " ".join(r["mkfs_argv"]) for r in ladder["no_lazy"]["runs"])
    assert not any("lazy_itable_init" in " ".join(r["mkfs_argv"]) for r in ladder["baseline"]["runs"])
    # umount: the superblock counts one more mount than without it (populate, then mounted again)
    assert [r["mount_count"] for r in ladder["umount"]["runs"]] == [r["mount_count"] + 1 for r in ladder["no_lazy"]["runs"]]
    # alloc: no mkfs, no populate -- every run starts from the same bytes; re-populated runs do not
    assert not any(r["mkfs_argv"] for r in ladder["alloc"]["runs"])
    assert {r["image_sha256"] for r in ladder["alloc"]["runs"]} == {report["dataset_sha256"]}  # the dataset's bytes
    assert all(r["restore"] == "sparse device write" for r in ladder["alloc"]["runs"])  # every target here is a loop
    assert len({r["image_sha256"] for r in ladder["umount"]["runs"]}) == 2
    # each step against the one before, recomputed from the runs: 2+2 runs can never show a growth
    for prev, step in zip(ladder, list(ladder)[1:]):
        change = range_change(*([r["ops_per_s"] for r in ladder[s]["runs"]] for s in (prev, step)))
        assert ladder[step]["vs_previous"] == {"step": prev, "p": pytest.approx(change.p), "grew": False,
                                               "note": change.note, "verdict": "inconclusive",
                                               "p_fell": pytest.approx(change.p_fell),
                                               "runs_to_decide": change.runs_to_decide}
    # 2+2 runs decide no direction: neither agreeing nor disagreeing with the paper
    assert report["paper_direction"] is None and report["paper_comparison"]["verdict"] != "agree"


@pytest.mark.privileged
def test_bench_duration_auto_says_what_it_chose(tmp_path, cli):
    out = tmp_path / "auto.json"
    proc = cli("bench", "--personality", "varmail", "--runs", "2", "--duration", "auto", "--duration-max", "8",
               "--files", "40", "--ram", "--size", "256M", "--json", str(out), timeout_s=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rep = json.loads(out.read_text())
    d = rep["duration"]
    assert d["auto"] and 5 <= d["chosen_s"] <= 8 and "cumulative throughput" in d["criterion"]
    assert len(d["calibration_ops_per_s"]) >= d["chosen_s"] or not d["settled"]
    assert rep["spec"]["duration_s"] == d["chosen_s"]
    assert all(abs(r["elapsed_s"] - d["chosen_s"]) < 2 for r in rep["runs"])


@pytest.mark.privileged
def test_study_on_a_dask_cluster(tmp_path, cli, dask_cluster):  # noqa: F811 - the imported fixture
    address, _, security = dask_cluster  # `dask worker --no-nanny`: the worker may start the personality's processes
    out = tmp_path / "v.json"
    proc = cli("study", "variation", "--configurations", "1", "--runs", "2", "--duration", "1", "--files", "40",
               "--file-systems", "ext4", "--personalities", "varmail,fileserver", "--scheduler", address,
               "--security", security, "--json", str(out), timeout_s=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rep = json.loads(out.read_text())
    assert rep["completed"] == 2 and not rep["failed"]
    assert {c["personality"] for c in rep["configurations"]} == {"varmail", "fileserver"}


@pytest.mark.parametrize("argv, says", [
    (["study", "variation", "--factor", "ext4_journal=sometimes"], "ext4_journal"),
    (["study", "variation", "--file-systems", "ntfs"], "ntfs"),
    (["study", "variation", "--space", "nosuch"], "nosuch"),
    (["bench", "--ladder", "--duration", "auto"], "--ladder"),
])
def test_bad_study_input_is_one_line(cli, argv, says):
    proc = cli(*argv)
    lines = [ln for ln in proc.stderr.strip().splitlines() if not ln.startswith("note:")]
    assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], proc.stderr


def test_paper_preset_is_the_papers_scale_and_its_cost_adds_up():
    plan = study.make_plan(study.Spec(space=study.PAPER.space, configurations=study.PAPER.configurations,
                                      paper=True))
    s = plan.space.settings
    assert s["runs"] == 10 and s["mem_limit_bytes"] == 4 * GIB
    assert s["durations_s"] == {"webserver": 800, "fileserver": 800, "varmail": 2000}      # Table 3
    # the dataset is 2.5x the memory limit at Filebench's mean sizes: Table 3's ~80,000 / ~640,000 files
    assert s["nfiles_per_personality"] == {"fileserver": 81920, "webserver": 655360, "varmail": 655360}
    assert plan.n * len(s["file_systems"]) == 108                                           # ~ its 107
    cost = study.cost(plan)
    assert cost.treatments == 108 * 3 and cost.runs == 3240
    assert cost.measure_s == 108 * 10 * (800 + 800 + 2000)
    # explicit options win over the preset
    mine = study.make_plan(study.Spec(space="cao-small", configurations=2, paper=True, runs=2, duration_s=3,
                                      mem_limit_bytes=GIB, file_systems=("ext4",), personalities=("varmail",)))
    assert mine.space.settings["runs"] == 2 and "durations_s" not in mine.space.settings
    assert study.cost(mine).measure_s == 2 * 2 * 3
    assert mine.space.settings["nfiles_per_personality"]["varmail"] == math.ceil(2.5 * GIB / (16 << 10))


def test_paper_dry_run_prints_the_cost_and_runs_nothing(cli):
    proc = cli("study", "variation", "--paper", "--dry-run", timeout_s=60)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())           # the console wraps lines
    assert "3,240 runs" in said and "45.0 days" in said and "varmail 2000 s" in said
    assert "recorded in" not in proc.stdout + proc.stderr         # no job ran


@pytest.mark.privileged
def test_a_treatment_runs_its_personalitys_own_length_under_the_memory_limit():
    settings = study.Settings(runs=1, duration_s=3, durations_s={"varmail": 1.0}, image_size="256M",
                              nfiles_per_personality={"varmail": 40}, mem_limit_bytes=64 << 20, seed=1)
    row = study.VariationTreatment(settings)(Treatment(id="t", row=0, recipe="ext4:varmail", repeat=0, factors={}))
    run = row.runs[0]
    assert run.elapsed_s == pytest.approx(1.0, abs=0.05) and run.ops_per_s > 0
    assert run.cgroup is not None and run.cgroup["limit_bytes"] == 64 << 20
    placed = run.placement                     # Fig. 4: where this run's dataset landed
    assert placed is not None and placed.available and placed.unit == "block_group"
    assert sum(count for _, count in placed.groups or []) == placed.files_placed > 0


@pytest.mark.privileged
@pytest.mark.parametrize("device", ["ram", "disk"])
def test_the_device_knob_puts_the_image_in_ram_or_on_disk(device):
    settings = study.Settings(runs=1, duration_s=1, image_size="256M", nfiles=40, seed=1)
    row = study.VariationTreatment(settings)(Treatment(id="t", row=0, recipe="ext4:varmail", repeat=0,
                                                       factors={"device": device, "atime": "noatime"}))
    run = row.runs[0]
    where = paths.disk_dir() if device == "disk" else paths.ram_dir()
    assert row.knobs["device"] == device and run.ops_per_s > 0
    assert Path(run.image).parent == where and not Path(run.image).exists()  # removed after its run
