"""SVG snapshots of the main screens (pytest-textual-snapshot). Update after an intended change
with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and look at the SVGs.

Everything on screen is deterministic: a fixed FSSCOPE_HOME path, fake block devices, and
recorded runs written by the test itself (seeded latencies and ops counts, fixed events and
timestamps).
"""

from __future__ import annotations

import fcntl
import shutil
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from pilot_wait import until, until_screen
from textual.widgets import DataTable, Input

from fsscope.engine import events
from fsscope.engine.events import Finding, Log, Phase, Progress, Result
from fsscope.store import RunDir
from fsscope.targets import TargetSpec
from fsscope.targets import spec as target_spec
from fsscope.targets.devices import Device
from fsscope.tui import AppConfig, make_app
from fsscope.tui.screens.compare import CompareScreen
from fsscope.tui.screens.help import HelpScreen
from fsscope.tui.screens.keys import KeysScreen
from fsscope.tui.screens.lab import LabScreen
from fsscope.tui.screens.live import LiveScreen
from fsscope.tui.widgets import target_picker

HOME = Path("/tmp/fsscope-snapshot-home")
SIZE = (140, 45)


def fake_devices() -> list[Device]:
    def device(name, size_gib, model, **kw):
        base = dict(name=name, path=f"/dev/{name}", size_bytes=size_gib * 2**30, model=model, rotational=False,
                    scheduler="none", partitions=(), mountpoints=(), signature="", holders=(), swap=False,
                    backing_file="")
        return Device(**(base | kw))

    return [device("nvme0n1", 476, "Samsung SSD 980", partitions=("nvme0n1p1", "nvme0n1p2"),
                   mountpoints=("/", "/boot/efi"), signature="gpt"),
            device("sdb", 100, "QEMU HARDDISK"),
            device("sdc", 50, "USB stick", signature="ext4")]


def record(name: str, spec: dict, recipe: str, started: str, recorded: list[events.Event],
           arrays: dict[str, np.ndarray]) -> Path:
    """A finished run of the job its name ends with (20250101-120000-probe) on the demo image,
    written through the real run-record code (store + event encoding)."""
    manifest = {"job": name.rsplit("-", 1)[1], "spec": spec, "status": "ok", "started": started,
                "target": {"spec": {"kind": "image", "path": "/var/tmp/demo.img"}},
                "recipe": {"name": recipe, "fs": recipe.split("-")[0]}}
    run = RunDir(HOME / "runs" / name)
    run.path.mkdir(parents=True)
    run.update_manifest(events_version=events.VERSION, **manifest)
    for array_name, array in arrays.items():
        run.save_array(array_name, array)
    for event in recorded:
        run.append_line(events.encode(event))
    run.close()
    return run.path


def write_run(name: str, seed: int, *, shift: float = 1.0) -> Path:
    rng = np.random.default_rng(seed)
    files, runs = 600, 3
    latency = rng.lognormal(np.log(18_000 * shift), 0.25, (runs, files))
    latency[:, 300:] *= 2.0
    latency[:, 12] *= 12
    latency[:, 64::64] *= 3
    spec = {"op": "creat", "files": files, "runs": runs, "name_length": 7, "sync_before": "each"}
    recorded = [
        Phase(t=0.0, name="setup"),
        Log(t=0.1, line="$ losetup --find --show --direct-io=on /var/tmp/demo.img  → exit 0 (0.02 s)"),
        Log(t=0.2, line="$ mkfs.xfs -f -q /dev/loop7  → exit 0 (0.19 s)"),
        Log(t=0.3, line="$ mount -t xfs -o relatime /dev/loop7 /mnt/fsscope  → exit 0 (0.03 s)"),
        Phase(t=2.5, name="run 3 of 3: creat × 600"),
        Progress(t=3.0, done=1800, total=1800),
        Finding(t=3.1, flag="outlier", fields={"index": 12, "structure": "xfs-dir-shortform-to-block"},
                title="file 12 slow in 3/3 runs (12.0× typical) — xfs-dir-shortform-to-block",
                note="The directory's entries lived inside its own inode (short-form). File 12 does not fit: "
                     "XFS allocates a directory block and moves every entry into it, once per directory."),
        Finding(t=3.1, flag="series",
                fields={"index": 64, "start": 64, "stride": 64, "count": 8, "structure": "xfs-inode-chunk-alloc"},
                title="every 64 files from 64 (8×) — xfs-inode-chunk-alloc",
                note="XFS allocates inodes in chunks of 64: every 64th create allocates a new chunk."),
        Finding(t=3.2, flag="levelshift", fields={"index": 300, "before_ns": 18000, "after_ns": 36000},
                title="level shift at file 300: 18.0 → 36.0 µs — repeatable, unexplained",
                note="The typical latency doubles from file 300 on, in every run."),
        Result(t=3.3, report={"op": "creat"}),
    ]
    return record(name, spec, "xfs-default", "2025-01-01T12:00:00+0000", recorded, {"latency_ns": latency.astype(np.int64)})


OPS = ("create", "write", "close", "open", "append", "read", "delete", "stat")


def write_bench_run(name: str, seed: int) -> Path:
    """A recorded 3-run fileserver bench: per-run counts per 1-s bin, telemetry, the report."""
    rng = np.random.default_rng(seed)
    runs, bins = 3, 12
    arrays = {}
    level = np.array([1.0, 0.93, 1.06])
    report_runs = []
    for r in range(runs):
        warm = np.minimum(1.0, 0.6 + 0.1 * np.arange(bins))
        per_bin = 18_000 * level[r] * warm * rng.normal(1.0, 0.03, bins)
        counts = np.outer(np.array([1, 1, 3, 2, 1, 1, 1, 1]), per_bin).astype(np.int64)
        arrays[f"run{r}_counts"] = counts
        telemetry = np.zeros((bins, 18))
        telemetry[:, 0] = np.arange(1, bins + 1)
        telemetry[:, 4] = rng.normal(900, 60, bins)  # write ops
        telemetry[:, 2] = telemetry[:, 4] * 16384  # write bytes
        telemetry[:, 9] = rng.normal(40, 3, bins)  # idle %
        arrays[f"run{r}_telemetry"] = telemetry
        total = counts.sum()
        windows = (counts.sum(axis=0)[: bins // 4 * 4].reshape(-1, 4).sum(axis=1) / 4).tolist()
        report_runs.append({"ops_per_s": total / bins, "elapsed_s": float(bins), "windows": {"4": windows},
                            "ops": {op: {"count": int(counts[i].sum()), "ops_per_s": counts[i].sum() / bins,
                                         "p50_ns": 2_000.0 * (i + 1), "p99_ns": 9_000.0 * (i + 1) * level[r]}
                                    for i, op in enumerate(OPS)}})
    arrays["elapsed_s"] = np.full(runs, float(bins))
    x = np.array([r["ops_per_s"] for r in report_runs])
    spec = {"personality": "fileserver", "runs": runs, "duration_s": bins, "workers": 4, "nfiles": None,
            "mean_file_size_bytes": None, "mem_limit_bytes": None, "window_sizes_s": [4], "threshold": 0.1,
            "seed": 1, "fresh_fs": True}
    flags = [{"kind": "variation", "relative_range": float(np.ptp(x) / x.mean()), "rsd": 0.06, "threshold": 0.1,
              "title": f"throughput varies {np.ptp(x) / x.mean():.0%} across runs (relative range)",
              "note": "Cumulative throughput varies across the runs above the 10% threshold: one run is not "
                      "a reliable result for this setup."},
             {"kind": "warmup", "warmup_s": 4, "windows": 1, "direction": "up", "window_s": 4,
              "title": "warm-up (up): settles after 4 s",
              "note": "The first Throughput-4 window is slower than the rest in every run: caches filling."}]
    report = {"personality": "fileserver", "runs": report_runs, "bin_s": 1.0, "flags": flags,
              "variation": {"relative_range": float(np.ptp(x) / x.mean()), "rsd": float(x.std(ddof=1) / x.mean()),
                            "mean_ops_per_s": float(x.mean()), "runs": runs},
              "notes": ["no --mem-limit: a file set that fits in RAM is served from the page cache"]}
    recorded = [
        Phase(t=0.0, name="setup"),
        Log(t=0.2, line="$ mkfs.ext4 -F -q /dev/loop7  → exit 0 (0.05 s)"),
        Log(t=0.3, line="$ mount -t ext4 -o relatime /dev/loop7 /mnt/fsscope  → exit 0 (0.01 s)"),
        Phase(t=30.0, name="run 3/3: fileserver × 4 workers", run=2),
        Progress(t=42.0, done=36, total=36, unit="s"),
        Finding(t=42.1, flag="variation", title="an interim flag the report replaces", note="interim"),
        Result(t=42.2, report=report),
    ]
    return record(name, spec, "ext4-default", "2025-01-01T14:00:00+0000", recorded, arrays)


@contextmanager
def own_home():
    """The fixed HOME (its path shows in the pictures) for this test alone: suites running at
    the same time on this machine (other checkouts, CI) take turns instead of sharing it."""
    with open(f"{HOME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(HOME, ignore_errors=True)
        HOME.mkdir(parents=True)
        try:
            yield
        finally:
            shutil.rmtree(HOME, ignore_errors=True)


@pytest.fixture
def bench_snapshot_home(monkeypatch):
    with own_home():
        monkeypatch.setenv("FSSCOPE_HOME", str(HOME))
        write_bench_run("20250101-140000-bench", seed=3)
        yield HOME


@pytest.fixture
def snapshot_home(monkeypatch):
    with own_home():
        monkeypatch.setenv("FSSCOPE_HOME", str(HOME))
        monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)  # no blinking cursor in pictures
        monkeypatch.setattr(target_picker, "RAM_DIR", Path("/dev/shm"))  # not the session's random RAM dir
        monkeypatch.setattr(target_picker, "found_text",  # not this host's file system and its fill
                            lambda path: "Found there: ext4 on /dev/sda2 at / (rw,relatime), 100.0 GiB, 50% used.")
        write_run("20250101-120000-probe", seed=1)
        write_run("20250101-130000-probe", seed=2, shift=1.3)
        yield HOME


def app_for(**kw):
    config = AppConfig(target=TargetSpec("image", "/var/tmp/demo.img", 512 * 2**20), is_root=True,
                       discover_devices=fake_devices, job_defaults={"probe": {"files": 200, "runs": 2}},
                       jobs=("smoke", "probe"), **kw)
    return make_app(config)


def _tables_measured(app) -> bool:
    """DataTables measure new rows on their next idle (column widths): a picture taken before
    that shows the columns at their labels' width."""
    return not any(t._require_update_dimensions or t._updated_cells for t in app.screen.query(DataTable))


async def settle(pilot) -> None:
    """Every background worker (device discovery, reading run directories) is done, its
    messages are handled and the tables they filled are measured."""
    app = pilot.app
    await until(pilot, lambda: all(w.is_finished for w in app.workers) and _tables_measured(app)
                and getattr(app.screen, "listed", True), "background work")


def test_setup_screen(snap_compare, snapshot_home):
    assert snap_compare(app_for(), terminal_size=SIZE, run_before=settle)


def test_setup_screen_without_root(snap_compare, snapshot_home):
    config = AppConfig(is_root=False, discover_devices=fake_devices, jobs=("smoke", "probe"))
    assert snap_compare(make_app(config), terminal_size=SIZE, run_before=settle)


def test_runs_screen(snap_compare, snapshot_home):
    assert snap_compare(app_for(start_screen="runs"), terminal_size=SIZE, run_before=settle)


@pytest.mark.parametrize("theme", ["fsscope-dark", "fsscope-light", "fsscope-high-contrast"])
def test_replay_live_screen(snap_compare, snapshot_home, theme):
    async def open_and_select_flag(pilot):
        await settle(pilot)
        await pilot.press("enter")  # newest run
        await until_screen(pilot, pilot.app, LiveScreen)
        await settle(pilot)
        await pilot.press("tab", "down")  # flags panel: the second flag (a series)
        await pilot.pause()

    assert snap_compare(app_for(start_screen="runs", theme=theme), terminal_size=SIZE,
                        run_before=open_and_select_flag)


def test_compare_screen(snap_compare, snapshot_home):
    async def compare(pilot):
        await settle(pilot)
        await pilot.press("space", "down", "c")
        await until_screen(pilot, pilot.app, CompareScreen)
        await settle(pilot)

    assert snap_compare(app_for(start_screen="runs"), terminal_size=SIZE, run_before=compare)


def test_help_screen(snap_compare, snapshot_home):
    async def help_(pilot):
        await settle(pilot)
        await pilot.press("f1")
        await until_screen(pilot, pilot.app, HelpScreen)
        await settle(pilot)

    assert snap_compare(app_for(start_screen="runs"), terminal_size=SIZE, run_before=help_)


def test_replay_bench_screen(snap_compare, bench_snapshot_home):
    """A recorded bench in its own live view: run 3 over the band of runs 1–2 (Throughput-4),
    per-op latency, the variation table, the report's flags with the first one's note."""
    async def open_and_select_flag(pilot):
        await settle(pilot)
        await pilot.press("enter")
        await until_screen(pilot, pilot.app, LiveScreen)
        await settle(pilot)
        await pilot.press("tab", "down")  # from the chart to the flags panel: the first flag
        await pilot.pause()

    assert snap_compare(app_for(start_screen="runs"), terminal_size=SIZE, run_before=open_and_select_flag)


# -- the same views at the two sizes the walk used (issue 27): 80×24 is supported, 160×48 roomy --
async def replay_newest(pilot):
    await settle(pilot)
    await pilot.press("enter")
    await until_screen(pilot, pilot.app, LiveScreen)
    await settle(pilot)
    await pilot.press("tab", "down")
    await pilot.pause()


async def open_help(pilot):
    await settle(pilot)
    await pilot.press("f1")
    await until_screen(pilot, pilot.app, HelpScreen)
    await settle(pilot)


async def compare_two(pilot):
    await settle(pilot)
    await pilot.press("space", "down", "c")
    await until_screen(pilot, pilot.app, CompareScreen)
    await settle(pilot)


async def open_lab(pilot):
    await settle(pilot)
    await pilot.press("f5")
    await until_screen(pilot, pilot.app, LabScreen)
    await settle(pilot)


async def keys_of_replay(pilot):
    """``?`` over the probe's replay, the heatmap focused: its keys, the screen's, the app's."""
    await replay_newest(pilot)
    pilot.app.screen.query_one("#heatmap").focus()
    await pilot.press("question_mark")
    await until_screen(pilot, pilot.app, KeysScreen)
    await settle(pilot)


VIEWS = {"setup": ("setup", settle), "runs": ("runs", settle), "replay": ("runs", replay_newest),
         "compare": ("runs", compare_two), "help": ("runs", open_help), "lab": ("setup", open_lab),
         "keys": ("runs", keys_of_replay)}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_view_at_walk_sizes(snap_compare, snapshot_home, view, size):
    start, run_before = VIEWS[view]
    assert snap_compare(app_for(start_screen=start), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_replay_bench_at_walk_sizes(snap_compare, bench_snapshot_home, size):
    assert snap_compare(app_for(start_screen="runs"), terminal_size=size, run_before=replay_newest)


# -- every job's view, replayed from a real recorded run (tests/fixtures/snapshot_runs: recorded
# once by the CLI on a --dir target; the pictures are stable because the record is) -----------
RECORDED = Path(__file__).parent / "fixtures" / "snapshot_runs"
JOB_RUNS = {path.name.rsplit("-", 1)[1]: path for path in sorted(RECORDED.iterdir())}


@pytest.fixture
def recorded_home(monkeypatch, request):
    with own_home():
        monkeypatch.setenv("FSSCOPE_HOME", str(HOME))
        # a RAM target is named with the RAM directory: not the session's random one
        monkeypatch.setattr(target_spec, "RAM_DIR", Path("/dev/shm"))
        shutil.copytree(JOB_RUNS[request.param], HOME / "runs" / JOB_RUNS[request.param].name)
        yield HOME


@pytest.mark.parametrize("recorded_home", sorted(JOB_RUNS), indirect=True)
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_job_view_at_walk_sizes(snap_compare, recorded_home, size):
    assert snap_compare(app_for(start_screen="runs"), terminal_size=size, run_before=replay_newest)
