"""SVG snapshots of the main screens (pytest-textual-snapshot). Update after an intended change
with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and look at the SVGs.

Everything on screen is deterministic: a fixed FSSCOPE_HOME path, fake block devices, and
recorded runs written by the test itself (seeded latencies, fixed events and timestamps).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from textual.widgets import Input

from fsscope.targets import TargetSpec
from fsscope.targets.devices import Device
from fsscope.tui import AppConfig, make_app

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


def write_run(name: str, seed: int, *, shift: float = 1.0) -> Path:
    run = HOME / "runs" / name
    run.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    files, runs = 600, 3
    latency = rng.lognormal(np.log(18_000 * shift), 0.25, (runs, files))
    latency[:, 300:] *= 2.0
    latency[:, 12] *= 12
    latency[:, 64::64] *= 3
    np.save(run / "latency_ns.npy", latency.astype(np.int64))
    spec = {"op": "creat", "files": files, "runs": runs, "name_length": 7, "sync_before": "each"}
    manifest = {"job": "probe", "spec": spec, "status": "ok", "started": "2025-01-01T12:00:00+0000",
                "target": {"spec": {"kind": "image", "path": "/var/tmp/demo.img"}},
                "recipe": {"name": "xfs-default", "fs": "xfs"}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    events = [
        {"t": 0.0, "kind": "phase", "name": "setup"},
        {"t": 0.1, "kind": "log", "line": "$ losetup --find --show --direct-io=on /var/tmp/demo.img  → exit 0 (0.02 s)"},
        {"t": 0.2, "kind": "log", "line": "$ mkfs.xfs -f -q /dev/loop7  → exit 0 (0.19 s)"},
        {"t": 0.3, "kind": "log", "line": "$ mount -t xfs -o relatime /dev/loop7 /mnt/fsscope  → exit 0 (0.03 s)"},
        {"t": 2.5, "kind": "phase", "name": "run 3 of 3: creat × 600"},
        {"t": 3.0, "kind": "progress", "done": 1800, "total": 1800},
        {"t": 3.1, "kind": "finding", "flag": "outlier", "index": 12, "structure": "xfs-dir-shortform-to-block",
         "title": "file 12 slow in 3/3 runs (12.0× typical) — xfs-dir-shortform-to-block",
         "note": "The directory's entries lived inside its own inode (short-form). File 12 does not fit: "
                 "XFS allocates a directory block and moves every entry into it, once per directory."},
        {"t": 3.1, "kind": "finding", "flag": "series", "index": 64, "start": 64, "stride": 64, "count": 8,
         "structure": "xfs-inode-chunk-alloc", "title": "every 64 files from 64 (8×) — xfs-inode-chunk-alloc",
         "note": "XFS allocates inodes in chunks of 64: every 64th create allocates a new chunk."},
        {"t": 3.2, "kind": "finding", "flag": "levelshift", "index": 300, "before_ns": 18000, "after_ns": 36000,
         "title": "level shift at file 300: 18.0 → 36.0 µs — repeatable, unexplained",
         "note": "The typical latency doubles from file 300 on, in every run."},
        {"t": 3.3, "kind": "result", "report": {"op": "creat"}},
    ]
    (run / "events.ndjson").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run


@pytest.fixture
def snapshot_home(monkeypatch):
    shutil.rmtree(HOME, ignore_errors=True)
    HOME.mkdir(parents=True)
    monkeypatch.setenv("FSSCOPE_HOME", str(HOME))
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)  # no blinking cursor in pictures
    write_run("20250101-120000-probe", seed=1)
    write_run("20250101-130000-probe", seed=2, shift=1.3)
    yield HOME
    shutil.rmtree(HOME, ignore_errors=True)


def app_for(**kw):
    config = AppConfig(target=TargetSpec("image", "/var/tmp/demo.img", 512 * 2**20), is_root=True,
                       discover_devices=fake_devices, job_defaults={"probe": {"files": 200, "runs": 2}},
                       jobs=("smoke", "probe"), **kw)
    return make_app(config)


def test_setup_screen(snap_compare, snapshot_home):
    async def settle(pilot):
        await pilot.pause(0.3)

    assert snap_compare(app_for(), terminal_size=SIZE, run_before=settle)


def test_setup_screen_without_root(snap_compare, snapshot_home):
    async def settle(pilot):
        await pilot.pause(0.3)

    config = AppConfig(is_root=False, discover_devices=fake_devices, jobs=("smoke", "probe"))
    assert snap_compare(make_app(config), terminal_size=SIZE, run_before=settle)


def test_runs_screen(snap_compare, snapshot_home):
    assert snap_compare(app_for(start_screen="runs"), terminal_size=SIZE, run_before=lambda pilot: pilot.pause(0.3))


@pytest.mark.parametrize("theme", ["fsscope-dark", "fsscope-light", "fsscope-high-contrast"])
def test_replay_live_screen(snap_compare, snapshot_home, theme):
    async def open_and_select_flag(pilot):
        await pilot.pause(0.2)
        await pilot.press("enter")  # newest run
        await pilot.pause(0.2)
        await pilot.press("tab", "down")  # flags panel: the second flag (a series)
        await pilot.pause(0.2)

    assert snap_compare(app_for(start_screen="runs", theme=theme), terminal_size=SIZE,
                        run_before=open_and_select_flag)


def test_compare_screen(snap_compare, snapshot_home):
    async def compare(pilot):
        await pilot.pause(0.2)
        await pilot.press("space", "down", "c")
        await pilot.pause(0.3)

    assert snap_compare(app_for(start_screen="runs"), terminal_size=SIZE, run_before=compare)


def test_help_screen(snap_compare, snapshot_home):
    async def help_(pilot):
        await pilot.pause(0.2)
        await pilot.press("f1")
        await pilot.pause(0.3)

    assert snap_compare(app_for(start_screen="runs"), terminal_size=SIZE, run_before=help_)
