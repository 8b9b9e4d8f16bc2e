"""Aged snapshots: kept by ``fsscope age``, restored before every run by ``--from-snapshot``.

One aged ext4 image is made per module; then: the fit the report claims is verified by
walking the restored tree (``fsscope prepare --from-snapshot`` … ``fsscope release``), a probe
restores it before each of its runs, ``frag`` measures it, bad snapshots are refused before
anything is touched, and snapshots are reflinks where the backing file system can clone.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from fsscope.aging.ager import STATE_FILE
from fsscope.aging.profile import load_profile
from fsscope.targets.journal import loops_backing

BASE = Path(os.environ["FSSCOPE_HOME"]).parent  # the session directory the leftover check covers
pytestmark = pytest.mark.privileged


def cli(*args: str, timeout_s: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fsscope", *args], capture_output=True, text=True,
                          timeout=timeout_s)


def run_dir(stderr: str) -> Path:
    match = re.search(r"recorded in (\S+) \(", stderr)
    assert match, stderr
    return Path(match.group(1))


@pytest.fixture(scope="module")
def aged():
    """(report, snapshot path, work dir): ext4 on a 128 MiB image aged with the small profile."""
    work = Path(tempfile.mkdtemp(dir=BASE))
    out = work / "age.json"
    proc = cli("age", "--image", str(work / "aged.img"), "--size", "128M", "--profile", "small",
               "--seed", "3", "--confidence", "0.5", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    snapshot = Path(report["snapshot"]["path"])
    assert snapshot == work / "aged.img.aged" and snapshot.is_file()
    return report, snapshot, work


def walk_counts(root: Path, now_ops: int) -> dict:
    """Bucket counts of the ager's files, from the files alone (names are the creating op)."""
    profile = load_profile("small")
    sizes, depths, born = [], [], []
    for dir_path, _, names in os.walk(root):
        rel = Path(dir_path).relative_to(root)
        if rel.parts[:1] == ("lost+found",):
            continue
        for name in names:
            if rel.parts == () and name == STATE_FILE:
                continue
            sizes.append(os.lstat(Path(dir_path) / name).st_size)
            depths.append(len(rel.parts))
            born.append(int(name))
    rel_age = (now_ops - np.array(born)) / now_ops
    cut = profile.relative_age_cutoffs()
    return {
        "n": len(sizes),
        "size": [sum(1 for s in sizes if s == b) for b in profile.size_bytes],
        "depth": [sum(1 for d in depths if d == b) for b in profile.depths],
        "age": list(np.bincount(np.minimum(np.searchsorted(cut, rel_age, side="left"), len(cut) - 1),
                                minlength=len(cut))),
    }


def test_fit_is_verified_by_walking_the_restored_tree(aged, scratch):
    report, snapshot, _ = aged
    proc = cli("prepare", "--image", str(scratch / "verify.img"), "--from-snapshot", str(snapshot),
               "--recipe", "ext4-default")
    assert proc.returncode == 0, proc.stderr
    mountpoint = Path(proc.stdout.strip())
    try:
        tree = walk_counts(mountpoint, report["ops"])
    finally:
        released = cli("release", str(mountpoint))
    assert released.returncode == 0, released.stderr
    assert not loops_backing(str(scratch / "verify.img"))
    assert tree["n"] == report["live_files"]
    for name in ("size", "depth", "age"):
        fit = report["fit"][name]
        counts = np.array(tree[name])
        assert list(counts) == fit["counts"], name
        assert list(counts / counts.sum()) == pytest.approx(fit["actual"], abs=1e-6), name
        expected = np.array(fit["target"]) * counts.sum()
        p_value = stats.chisquare(counts, expected / expected.sum() * counts.sum()).pvalue  # not fsscope's fit
        assert p_value == pytest.approx(fit["p_value"], rel=1e-3), name
        assert p_value >= 0.5, name


def test_probe_restores_the_snapshot_before_each_run(aged, scratch):
    report, snapshot, _ = aged
    proc = cli("probe", "--image", str(scratch / "run.img"), "--from-snapshot", str(snapshot),
               "--recipe", "ext4-default", "--runs", "2", "--max-runs", "2", "--files", "200", "--trace", "off")
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((run_dir(proc.stderr) / "manifest.json").read_text())
    probe = json.loads((run_dir(proc.stderr) / "report.json").read_text())
    assert probe["runs_completed"] == 2  # run 2 could make probe.d again: the snapshot was restored
    restores = manifest["target"]["restores"]
    assert len(restores) == 2
    for restore in restores:
        # the file system each run started from holds exactly the aged tree (not run 1's probe files)
        assert restore["inodes_used"] == report["inodes_used"]
        assert restore["method"] in ("copy", "reflink")
    commands = [c["argv"][0] for c in manifest["target"]["commands"]]
    assert "mkfs.ext4" not in commands and commands.count("cp") == 2
    assert manifest["target"]["spec"]["snapshot"] == str(snapshot)
    assert not loops_backing(str(scratch / "run.img"))


def test_frag_on_the_snapshot_matches_the_aged_report(aged, scratch):
    report, snapshot, _ = aged
    out = scratch / "frag.json"
    proc = cli("frag", "--ram", "--from-snapshot", str(snapshot), "--recipe", "ext4-default", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    frag = json.loads(out.read_text())
    assert frag["restores"][0]["inodes_used"] == report["inodes_used"]
    aged_free = report["aged"]["free_space"]
    # exact: the aged histogram is read after a remount, with no preallocation held
    assert frag["free_space"]["total_free_bytes"] == aged_free["total_free_bytes"]
    assert frag["free_space"]["free_extent_count"] == pytest.approx(aged_free["free_extent_count"], rel=0.1)
    assert frag["test_file"]["fragment_count"] >= 1
    assert "free extents" in proc.stdout


def test_bad_snapshots_are_refused_before_anything_is_touched(aged, scratch):
    _, snapshot, _ = aged
    target = scratch / "untouched.img"
    cases = [
        (["--image", str(target), "--from-snapshot", str(scratch / "missing.img"), "--recipe", "ext4-default"],
         "no such file"),
        (["--image", str(target), "--from-snapshot", str(snapshot), "--recipe", "xfs-default"],
         "holds ext4, but recipe xfs-default is xfs"),
        (["--dir", str(scratch), "--from-snapshot", str(snapshot)], "not --dir"),
        (["--image", str(snapshot), "--from-snapshot", str(snapshot), "--recipe", "ext4-default"],
         "the target image itself"),
    ]
    for args, message in cases:
        proc = cli("probe", *args, "--runs", "1", "--files", "10")
        assert proc.returncode == 2, (args, proc.stderr)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith(("run ", "recorded in"))]
        assert any(message in ln for ln in lines), (message, proc.stderr)
        assert not target.exists()
    blank = scratch / "blank.img"
    blank.write_bytes(b"\0" * 2**20)
    proc = cli("frag", "--image", str(target), "--from-snapshot", str(blank), "--recipe", "ext4-default")
    assert proc.returncode == 2 and "carries no file-system signature" in proc.stderr


def test_snapshots_are_reflinks_where_the_backing_fs_clones(scratch):
    from fsscope.targets import image

    plain = scratch / "plain.img"
    plain.write_bytes(os.urandom(2**20))
    backing_fs = subprocess.run(["stat", "-f", "-c", "%T", str(scratch)], capture_output=True, text=True).stdout
    if "xfs" not in backing_fs and "btrfs" not in backing_fs:
        assert image.copy_image(plain, scratch / "plain.copy") == "copy"
    # an xfs (reflink=1 by default) file system to hold the images
    proc = cli("prepare", "--recipe", "xfs-default", "--image", str(scratch / "xfs.img"), "--size", "512M")
    assert proc.returncode == 0, proc.stderr
    mountpoint = Path(proc.stdout.strip())
    try:
        source = mountpoint / "aged.img"
        source.write_bytes(os.urandom(4 * 2**20))
        os.sync()
        assert image.copy_image(source, mountpoint / "aged.img.aged") == "reflink"
        assert (mountpoint / "aged.img.aged").read_bytes() == source.read_bytes()
    finally:
        assert cli("release", str(mountpoint)).returncode == 0


def test_device_targets_get_the_snapshot_written_onto_them(aged, loop_device):
    report, snapshot, _ = aged
    device = loop_device("256M")  # a blank device the test made: the safety checks still run
    proc = cli("frag", "--device", device, "--from-snapshot", str(snapshot), "--recipe", "ext4-default",
               "--test-file", "4M")
    assert proc.returncode == 0, proc.stderr
    frag = json.loads((run_dir(proc.stderr) / "report.json").read_text())
    assert frag["restores"][0]["method"] == "sparse device write"  # a loop device: discard, then the data only
    assert frag["restores"][0]["inodes_used"] == report["inodes_used"]
    small = loop_device("64M")
    proc = cli("frag", "--device", small, "--from-snapshot", str(snapshot), "--recipe", "ext4-default")
    assert proc.returncode == 2 and "does not fit" in proc.stderr
