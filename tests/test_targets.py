"""Real mkfs and mounts on loop images: options take effect, safety refusals hold, nothing leaks."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fsscope.targets import devices
from fsscope.targets.journal import Journal

pytestmark = pytest.mark.privileged


def _mount_line(mountpoint: str) -> list[str]:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        if line.split()[1] == mountpoint:
            return line.split()
    return []


def _prepare(cli, *args):
    out = cli("prepare", *args)
    assert out.returncode == 0, out.stderr
    mountpoint = out.stdout.strip()
    assert mountpoint and os.path.ismount(mountpoint), out
    return mountpoint


def _release(cli, mountpoint):
    out = cli("release", mountpoint)
    assert out.returncode == 0, out.stderr
    assert not os.path.ismount(mountpoint)


def test_prepare_release_ext4_options_take_effect(cli):
    mp = _prepare(cli, "--recipe", "ext4-bench", "--ram", "--size", "256M", "--mkfs-opts", "-I 512 -b 2048")
    try:
        source, _, fstype, opts = _mount_line(mp)[:4]
        assert fstype == "ext4" and "noatime" in opts.split(",")
        header = subprocess.run(["dumpe2fs", "-h", source], capture_output=True, text=True).stdout
        fields = {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in header.splitlines() if ":" in ln)}
        assert fields["Inode size"] == "512"
        assert fields["Block size"] == "2048"
        assert "Directory Hash Seed" not in fields  # null_hash_seed: dumpe2fs omits a null seed
        assert "Default directory hash" in fields
        sched = Path(f"/sys/block/{Path(source).name}/queue/scheduler").read_text()
        assert "[none]" in sched
    finally:
        _release(cli, mp)


def test_prepare_release_xfs_options_take_effect(cli):
    mp = _prepare(cli, "--recipe", "xfs-agcount", "--ram", "--size", "2G", "--mkfs-opts", "-i size=1024")
    try:
        info = subprocess.run(["xfs_info", mp], capture_output=True, text=True).stdout
        assert "isize=1024" in info
        assert "agcount=16" in info
        assert "noatime" in _mount_line(mp)[3].split(",")
    finally:
        _release(cli, mp)


def test_prepare_release_btrfs_options_take_effect(cli):
    mp = _prepare(cli, "--recipe", "btrfs-nodatacow", "--ram", "--size", "512M", "--mkfs-opts", "-n 8192")
    try:
        source, _, fstype, opts = _mount_line(mp)[:4]
        assert fstype == "btrfs" and "nodatacow" in opts.split(",")
        super_ = subprocess.run(["btrfs", "inspect-internal", "dump-super", source], capture_output=True, text=True).stdout
        assert any(ln.split() == ["nodesize", "8192"] for ln in super_.splitlines())
    finally:
        _release(cli, mp)


def test_image_target_keeps_image_and_uses_direct_io(cli, scratch):
    image = scratch / "kept.img"
    out = cli("prepare", "--recipe", "ext4-default", "--image", str(image), "--size", "128M")
    assert out.returncode == 0, out.stderr
    mp = out.stdout.strip()
    try:
        assert "direct I/O on" in out.stderr  # the backing fs (ext4 or tmpfs) supports O_DIRECT
        assert image.stat().st_size == 128 * 2**20
        assert image.stat().st_blocks * 512 < 128 * 2**20  # sparse
    finally:
        _release(cli, mp)
    assert image.exists()  # a user's image stays; only RAM images are removed
    # fsscope made it, so formatting it again needs no --yes-destroy despite its ext4 signature
    _release(cli, _prepare(cli, "--recipe", "btrfs-default", "--image", str(image)))


def test_refuses_a_mounted_loop_device(cli, loop_device, scratch):
    dev = loop_device()
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    mnt = scratch / "m"
    mnt.mkdir()
    subprocess.run(["mount", dev, str(mnt)], check=True)
    try:
        out = cli("prepare", "--recipe", "xfs-default", "--device", dev, "--yes-destroy", dev)
        assert out.returncode == 2
        assert out.stderr.strip().splitlines() == [f"fsscope: error: refusing to format {dev}: mounted at {mnt}"]
        assert os.path.ismount(mnt)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def _uuid(dev: str) -> str:
    return subprocess.run(["blkid", "-p", "-s", "UUID", "-o", "value", dev], capture_output=True, text=True).stdout.strip()


def test_refuses_a_device_with_a_signature_unless_named(cli, loop_device):
    dev = loop_device()
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    before = _uuid(dev)
    out = cli("prepare", "--recipe", "xfs-default", "--device", dev)
    assert out.returncode == 2
    assert "carries a ext4 signature" in out.stderr and f"--yes-destroy {dev}" in out.stderr
    other = loop_device("64M")
    out = cli("prepare", "--recipe", "xfs-default", "--device", dev, "--yes-destroy", other)
    assert out.returncode == 2 and "names another device" in out.stderr
    assert _uuid(dev) == before  # untouched
    mp = _prepare(cli, "--recipe", "xfs-default", "--device", dev, "--yes-destroy", dev)
    try:
        assert _mount_line(mp)[2] == "xfs"
    finally:
        _release(cli, mp)


def test_a_blank_unused_loop_device_is_usable_and_listed(cli, loop_device):
    dev = loop_device("64M")
    listed = {d.path: d for d in devices.discover()}
    assert listed[dev].usable, listed[dev].verdict()
    out = cli("devices")
    assert out.returncode == 0 and Path(dev).name in out.stdout


def test_refuses_the_root_device_and_non_block_paths(cli, scratch):
    root_dev = next((p.device for p in __import__("psutil").disk_partitions() if p.mountpoint == "/"), None)
    if root_dev and os.path.exists(root_dev):
        out = cli("prepare", "--recipe", "ext4-default", "--device", root_dev, "--yes-destroy", root_dev)
        assert out.returncode == 2 and "holds /" in out.stderr
    out = cli("prepare", "--recipe", "ext4-default", "--device", str(scratch))
    assert out.returncode == 2 and "not a block device" in out.stderr


def test_refuses_a_foreign_image_with_a_signature(cli, scratch):
    image = scratch / "foreign.img"
    subprocess.run(["truncate", "-s", "64M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    out = cli("prepare", "--recipe", "ext4-default", "--image", str(image))
    assert out.returncode == 2 and "not created by fsscope" in out.stderr


def test_bad_input_gives_one_line_and_exit_2(cli, scratch):
    cases = [
        (["prepare", "--recipe", "nosuch", "--ram"], "unknown recipe 'nosuch'"),
        (["prepare", "--recipe", "ext4-default", "--ram", "--size", "1M"], "too small"),
        (["prepare", "--recipe", "ext4-default", "--ram", "--mkfs-opts=--bogus-flag"], "not a ext4 mkfs option"),
        (["prepare", "--recipe", "ext4-default", "--ram", "--mkfs-opts=-b 999"], "mkfs.ext4 failed"),
        (["prepare", "--recipe", "xfs-default", "--ram", "--size", "64M"], "XFS needs at least 300M"),
        (["prepare", "--recipe", "f2fs-default", "--ram"], "no f2fs support"),
        (["prepare", "--recipe", "ext4-default", "--ram", "--prep", "nosuch=1"], "unknown prep step 'nosuch'"),
        (["release", str(scratch)], "not a mount point fsscope made"),
    ]
    for argv, message in cases:
        out = cli(*argv)
        assert out.returncode == 2, (argv, out)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], (argv, out.stderr)
    assert Journal().entries() == []  # nothing half-made stays behind
    out = cli("prepare", "--no-such-option")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "unrecognized arguments" in out.stderr
