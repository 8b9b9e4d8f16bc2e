"""The one account of "what is mounted here" (targets/existing.py) on file systems an admin
made by hand, not through fsscope: btrfs at its top level and in a subvolume, a bind mount,
an overlay whose upper directory is on an XFS loop image; and fullness as ``df`` counts it
(ext4 with blocks reserved for root, XFS). check, scan and probe all read the one account."""

from __future__ import annotations

import json
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from fsscope.check import target as T
from fsscope.check.system import Root
from fsscope.targets.existing import df_fullness, existing_fs

pytestmark = pytest.mark.privileged


@pytest.fixture
def hand_made(loop_device, scratch):
    """Factory: (device, mount point) of a file system made with ``mkfs`` and mounted by hand."""
    def make(fs: str, *mkfs_args: str, size: str = "600M", opts: str = "") -> tuple[str, Path]:
        dev = loop_device(size)
        subprocess.run([f"mkfs.{fs}", *mkfs_args, dev], check=True, capture_output=True)
        mnt = scratch / f"mnt-{Path(dev).name}"
        mnt.mkdir()
        subprocess.run(["mount", *(["-o", opts] if opts else []), dev, str(mnt)], check=True)
        return dev, mnt

    return make


@contextmanager
def mounted(*args: str, at: Path):
    """A mount made by the test (bind, overlay, a subvolume), unmounted even on failure."""
    at.mkdir(exist_ok=True)
    subprocess.run(["mount", *args, str(at)], check=True)
    try:
        yield at
    finally:
        subprocess.run(["umount", str(at)], check=False)


def _df(path: Path, column: str = "pcent") -> int:
    """df's own Use% (``ipcent``: IUse%) of the file system holding ``path``."""
    out = subprocess.run(["df", f"--output={column}", str(path)],
                         capture_output=True, text=True, check=True).stdout.split()
    return int(out[-1].rstrip("%"))


def _check_json(cli, where: Path, out: Path) -> dict:
    got = cli("check", "--audit-only", "--sample", "1", "--dir", str(where), "--json", str(out))
    assert got.returncode in (0, 1, 2) and out.exists(), got.stderr
    assert "Traceback" not in got.stderr, got.stderr
    return json.loads(out.read_text())


def _finding(report: dict, fid: str) -> dict:
    (f,) = [f for f in report["findings"] if f["id"] == fid]
    return f


def test_btrfs_top_level_and_subvolume_are_the_loop_device_for_check(hand_made, cli, tmp_path):
    dev, mnt = hand_made("btrfs", "-q", "-f", "-n", "32768")
    subprocess.run(["btrfs", "subvolume", "create", str(mnt / "sub")], check=True, capture_output=True)
    (mnt / "sub" / "inner").mkdir()
    loop = Path(dev).name
    for where, subvolume in ((mnt, "/"), (mnt / "sub" / "inner", "/sub")):
        assert os.stat(where).st_dev != os.stat(dev).st_rdev   # anonymous: not the disk's number
        found = existing_fs(where)
        assert (found.fs, found.source, found.mountpoint) == ("btrfs", dev, str(mnt))
        assert found.subvolume == subvolume and not found.bind
        assert found.block_devno == f"{os.major(os.stat(dev).st_rdev)}:{os.minor(os.stat(dev).st_rdev)}"
        t = T.locate(str(where))
        assert (t.fs, t.block, t.mountpoint) == ("btrfs", loop, str(mnt)) and t.loop_backing
        assert loop in t.disks
    # a subvolume mounted on its own (subvol=) is a subvolume, not a bind mount
    with mounted("-o", "subvol=/sub", dev, at=tmp_path / "subvol") as sub:
        found = existing_fs(sub / "inner")
        assert found.mountpoint == str(sub) and found.subvolume == "/sub" and not found.bind
        report = _check_json(cli, sub, tmp_path / "check.json")
    assert report["checked"]["fs"] == "btrfs" and loop in report["checked"]["disks"]
    assert _finding(report, "loop-direct-io")["severity"] == "warn"   # losetup without --direct-io
    assert "not applicable" not in _finding(report, "other-io")["title"]


def test_bind_mount_is_the_same_device_and_says_it_is_bound(hand_made, tmp_path):
    dev, mnt = hand_made("ext4", "-q", "-b", "2048")
    (mnt / "data" / "deep").mkdir(parents=True)
    with mounted("--bind", str(mnt / "data"), at=tmp_path / "bound") as bound:
        found = existing_fs(bound / "deep")
        assert (found.fs, found.source, found.mountpoint) == ("ext4", dev, str(bound))
        assert found.bind and found.mount_root == "/data" and "bind mount of its /data" in found.summary()
        t = T.locate(str(bound / "deep"))
        assert t.block == Path(dev).name and t.fs == "ext4" and t.mountpoint == str(bound)


def test_overlay_is_judged_as_the_device_under_its_upper_directory(hand_made, cli, tmp_path):
    dev, mnt = hand_made("xfs", "-q", "-n", "size=8192")
    for d in ("lower", "upper", "work"):
        (mnt / d).mkdir()
    (mnt / "lower" / "old.txt").write_text("below")
    opts = f"lowerdir={mnt / 'lower'},upperdir={mnt / 'upper'},workdir={mnt / 'work'}"
    with mounted("-t", "overlay", "overlay", "-o", opts, at=tmp_path / "ovl") as ovl:
        found = existing_fs(ovl)
        assert found.fs == "overlay" and found.upperdir == str(mnt / "upper")
        assert found.lowerdirs == (str(mnt / "lower"),)
        assert found.upper is not None and (found.upper.fs, found.upper.source) == ("xfs", dev)
        assert f"upper directory {mnt / 'upper'} on xfs {dev}" in found.summary()
        t = T.locate(str(ovl))
        assert t.fs == "overlay" and t.block == Path(dev).name and t.loop_backing
        rot = T.rotational(Root(), t)
        assert "in RAM" not in rot.title and (rot.severity == "unknown" or rot.values.get("rotational") is not None)
        assert T.loop_direct_io(Root(), t).severity == "warn"   # the upper's loop device is buffered
        report = _check_json(cli, ovl, tmp_path / "check.json")
        assert "not applicable" not in _finding(report, "other-io")["title"]
        assert _finding(report, "free-space-fragmentation")["severity"] != "unknown"   # the upper's xfs
        scan_out = tmp_path / "scan.json"
        got = cli("scan", str(ovl), "--json", str(scan_out))
        assert got.returncode == 0, got.stderr
        scanned = json.loads(scan_out.read_text())
        assert scanned["existing"]["upper"]["fs"] == "xfs" and "None" not in json.dumps(scanned["structures"])


@pytest.mark.parametrize("fs,args", [("ext4", ("-q", "-m", "5", "-b", "1024", "-N", "40000")),
                                     ("xfs", ("-q", "-i", "size=512"))])
def test_fullness_is_dfs_everywhere_it_is_shown(hand_made, cli, tmp_path, fs, args):
    dev, mnt = hand_made(fs, *args, size="300M")
    fill = mnt / "fill"
    fill.mkdir()
    with open(fill / "big", "wb") as out:   # about a third of the blocks
        out.write(os.urandom(1 << 20) * 90)
    for i in range(3000):                   # and some inodes
        (fill / f"f{i}").touch()
    subprocess.run(["sync", "-f", str(mnt)], check=True)
    df_use, df_iuse = _df(mnt), _df(mnt, "ipcent")
    full = df_fullness(os.statvfs(mnt))
    assert abs(full.use_percent - df_use) <= 1 and abs(full.inodes_use_percent - df_iuse) <= 1
    if fs == "ext4":
        assert full.reserved_bytes > 0 and "reserved for root" in full.text
    # check's finding, scan's header and the report every --dir job carries say the same number
    f = T.fullness(T.locate(str(fill)), os.statvfs(fill))
    assert abs(f.values["use_percent"] - df_use) <= 1 and f"{f.values['use_percent']}% " in f.evidence
    assert f"{full.use_percent}% used as df counts" in existing_fs(fill).summary()
    scan_out = tmp_path / "scan.json"
    got = cli("scan", str(fill), "--json", str(scan_out))
    assert got.returncode == 0, got.stderr
    assert f"{full.use_percent}% used as df counts" in " ".join(got.stdout.split())
    scanned = json.loads(scan_out.read_text())
    assert abs(scanned["existing"]["fullness"]["use_percent"] - df_use) <= 1
