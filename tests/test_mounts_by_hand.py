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
    assert _finding(report, "free-space-fragmentation")["severity"] != "unknown"
    assert _finding(report, "loop-direct-io")["severity"] == "warn"   # losetup without --direct-io
    assert "not applicable" not in _finding(report, "other-io")["title"]


def test_btrfs_free_space_from_the_tree_search_equals_dump_tree(hand_made, cli, tmp_path):
    from fsscope.layout.freespace import free_space, free_space_live

    dev, mnt = hand_made("btrfs", "-q", "-f", "-n", "32768")
    for i in range(40):   # files of many sizes, every other one removed: holes in the data chunk
        (mnt / f"f{i}").write_bytes(os.urandom(4096 * (1 + 37 * i % 300)))
    for i in range(0, 40, 2):
        (mnt / f"f{i}").unlink()
    subprocess.run(["sync", "-f", str(mnt)], check=True)   # the transaction committed: both see it
    live = free_space_live("btrfs", str(mnt))
    tools = free_space("btrfs", device=dev, mountpoint=str(mnt))   # btrfs inspect-internal dump-tree
    assert live.free_extent_count > 2 and "TREE_SEARCH" in live.source
    for name in ("free_extent_count", "total_free_bytes", "largest_free_extent_bytes", "unallocated_bytes",
                 "bucket_free_bytes"):
        assert getattr(live, name) == getattr(tools, name), name
    out = tmp_path / "scan.json"
    got = cli("scan", str(mnt), "--json", str(out))
    assert got.returncode == 0, got.stderr
    scanned = json.loads(out.read_text())
    assert scanned["free_space"]["total_free_bytes"] == live.total_free_bytes


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
        assert any(f"new files go to {mnt / 'upper'} on xfs {dev}" in n for n in report["notes"]), report["notes"]
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
    probed = _probe(lambda args: cli(*args), fill, tmp_path / "probe.json")   # 60 empty files: df unmoved
    assert abs(probed["existing"]["fullness"]["use_percent"] - _df(mnt)) <= 1 and _df(mnt) - df_use <= 1


# --- a device the kernel will not open, even for root -----------------------------------------

DEVICES_V1 = Path("/sys/fs/cgroup/devices")


@pytest.fixture
def denied_device():
    """Factory: a cgroup (v1 devices controller) whose processes the kernel refuses ``dev``
    with EPERM, as a container's device cgroup refuses the root disk; ``run(args)`` runs a
    command inside it. Removed afterwards (its processes have exited by then)."""
    if not (DEVICES_V1 / "devices.deny").exists():
        pytest.skip("no cgroup v1 devices controller here (cgroup v2 device control needs a BPF program)")
    made: list[Path] = []

    def make(dev: str):
        rdev = os.stat(dev).st_rdev
        group = DEVICES_V1 / f"fsscope-test-deny-{os.getpid()}-{len(made)}"
        group.mkdir()
        made.append(group)
        (group / "devices.deny").write_text(f"b {os.major(rdev)}:{os.minor(rdev)} rwm")

        def run(args: list[str], **kw) -> subprocess.CompletedProcess:
            def enter() -> None:   # in the child, before exec: "0" moves the writer itself
                (group / "cgroup.procs").write_text("0")
            return subprocess.run(args, preexec_fn=enter, capture_output=True, text=True, timeout=600, **kw)
        return run

    yield make
    for group in made:
        group.rmdir()


def _lsattr_indexed(paths: list[str]) -> dict[str, bool]:
    """ext4's indexed flag as lsattr shows it ('I'), for many directories in one call."""
    out = subprocess.run(["lsattr", "-d", *paths], capture_output=True, text=True, check=True).stdout
    flags = {}
    for line in out.splitlines():
        attrs, path = line.split(None, 1)
        flags[path] = "I" in attrs
    return flags


def test_scan_classifies_ext4_directories_when_the_device_is_refused(hand_made, denied_device, tmp_path):
    import random
    import sys

    dev, mnt = hand_made("ext4", "-q", "-b", "1024", "-N", "40000",
                         "-E", "lazy_itable_init=0,lazy_journal_init=0", size="300M")
    tree = mnt / "tree"
    tree.mkdir()
    rng = random.Random(35)
    for d in range(160):   # names of every length, counts on both sides of one block
        where = tree / f"d{d:03d}"
        where.mkdir()
        length = rng.choice((4, 8, 13, 20, 33, 60))
        for i in range(rng.randrange(0, 90)):
            (where / f"{i:0{length}d}").touch()
    shrunk = tree / "shrunk"   # 300 names then 295 removed: htree on disk, 5 names
    shrunk.mkdir()
    for i in range(300):
        (shrunk / f"{i:020d}").touch()
    for i in range(5, 300):
        (shrunk / f"{i:020d}").unlink()
    subprocess.run(["sync", "-f", str(mnt)], check=True)
    run = denied_device(dev)
    refused = run([sys.executable, "-c", f"import os; os.open({dev!r}, os.O_RDONLY)"])
    assert "PermissionError" in refused.stderr and "Operation not permitted" in refused.stderr
    out = tmp_path / "scan.json"
    got = run([sys.executable, "-m", "fsscope", "scan", str(tree), "--json", str(out)], stdin=subprocess.DEVNULL)
    assert got.returncode == 0, got.stderr
    report = json.loads(out.read_text())
    unread = report["geometry"]["unread"]
    assert [u for u in unread if "Operation not permitted" in u and dev in u], unread   # said once, with why
    assert "None" not in got.stdout and "None" not in json.dumps(report["structures"])
    dirs = [d for d in report["dirs"] if d["path"] != str(tree)]
    truth = _lsattr_indexed([d["path"] for d in dirs])
    # the file system's own account is the kernel's flag: every directory
    assert all(d["account"]["structure"] == ("htree" if truth[d["path"]] else "linear") for d in dirs)
    right = sum(d["structure"] == ("htree" if truth[d["path"]] else "linear") for d in dirs)
    assert right >= 0.95 * len(dirs), (right, len(dirs))
    # the header counts are the file system's: the shrunk directory counts as htree
    indexed = sum(truth.values()) + bool(_lsattr_indexed([str(tree)])[str(tree)])
    assert sum(n for k, n in report["structures"].items() if k.startswith("htree")) == indexed
    (s,) = [d for d in dirs if d["path"] == str(shrunk)]
    assert s["agrees"] is False and "never shrink" in s["why"]
    # the names are checked wherever metadata_csum (unreadable) cannot change the answer
    assert sum(d["agrees"] is True for d in dirs) >= 0.8 * len(dirs)
    assert all("never shrink" in d["why"] for d in dirs if d["agrees"] is False)


def test_check_reads_what_the_kernel_tells_when_the_device_is_refused(hand_made, denied_device, tmp_path):
    import sys

    dev, mnt = hand_made("ext4", "-q", "-b", "4096", "-I", "512", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                         size="300M")
    run = denied_device(dev)
    out = tmp_path / "check.json"
    got = run([sys.executable, "-m", "fsscope", "check", "--audit-only", "--sample", "1", "--dir", str(mnt),
               "--json", str(out)], stdin=subprocess.DEVNULL)
    assert out.exists(), got.stderr
    report = json.loads(out.read_text())
    free = _finding(report, "free-space-fragmentation")
    assert free["severity"] != "unknown" and "GETFSMAP" in free["evidence"]   # read live, as scan reads it
    lazy = _finding(report, "ext4-lazy-init")
    assert "Operation not permitted" in lazy["evidence"], lazy          # why, not dumpe2fs's version banner
    assert "dumpe2fs 1." not in lazy["evidence"]
    assert "None" not in got.stdout


# --- probe --dir on each of them: a report, and the file system named right -------------------

PROBE = ["probe", "--files", "60", "--runs", "1", "--max-runs", "1", "--trace", "off"]


def _probe(run_cli, where: Path, out: Path) -> dict:
    got = run_cli([*PROBE, "--dir", str(where), "--json", str(out)])
    assert got.returncode == 0 and out.exists(), got.stderr
    assert "None" not in got.stdout and "Traceback" not in got.stderr, got.stdout
    return json.loads(out.read_text())


def test_probe_on_a_btrfs_subvolume_reads_that_subvolume_s_tree(hand_made, cli, tmp_path):
    from fsscope.explain.geometry import read_geometry

    dev, mnt = hand_made("btrfs", "-q", "-f", "-n", "16384")
    subprocess.run(["btrfs", "subvolume", "create", str(mnt / "sub")], check=True, capture_output=True)
    for i in range(30):   # the top level's tree differs from the subvolume's
        (mnt / f"top{i:03d}").touch()
    (mnt / "sub" / "srv").mkdir()
    subprocess.run(["sync", "-f", str(mnt)], check=True)
    tree_id = int(subprocess.run(["btrfs", "inspect-internal", "rootid", str(mnt / "sub")], capture_output=True,
                                 text=True, check=True).stdout)
    dump = subprocess.run(["btrfs", "inspect-internal", "dump-tree", "-t", str(tree_id), dev],
                          capture_output=True, text=True, check=True).stdout
    leaf_free = int(dump.split(" free space ")[1].split()[0])
    g = read_geometry("btrfs", dev, str(mnt), probe_dir=mnt / "sub" / "srv")
    assert g.raw["fs_tree_id"] == tree_id and g.btrfs_fs_tree_leaf_free_bytes == leaf_free
    assert g.btrfs_fs_tree_level == 0
    report = _probe(lambda args: cli(*args), mnt / "sub" / "srv", tmp_path / "probe.json")
    assert report["existing"]["fs"] == "btrfs" and report["existing"]["subvolume"] == "/sub"
    assert any(p["structure"] == "btrfs-fs-tree-leaf-split" for p in report["predictions"])


def test_probe_finishes_on_a_bind_mount_an_overlay_and_a_refused_device(hand_made, denied_device, cli, tmp_path):
    import sys

    dev, mnt = hand_made("ext4", "-q", "-b", "2048", "-E", "lazy_itable_init=0,lazy_journal_init=0")
    xdev, xmnt = hand_made("xfs", "-q", "-b", "size=2048", "-i", "size=1024", "-n", "size=16384")
    (mnt / "data").mkdir()
    for d in ("lower", "upper", "work"):
        (xmnt / d).mkdir()
    with mounted("--bind", str(mnt / "data"), at=tmp_path / "bound") as bound:
        report = _probe(lambda args: cli(*args), bound, tmp_path / "bind.json")
        assert report["existing"]["bind"] and report["geometry"]["fs"] == "ext4"
        assert report["geometry"]["unread"] == [] and "dir_index" in report["geometry"]["features"]
    opts = f"lowerdir={xmnt / 'lower'},upperdir={xmnt / 'upper'},workdir={xmnt / 'work'}"
    with mounted("-t", "overlay", "overlay", "-o", opts, at=tmp_path / "ovl") as ovl:
        report = _probe(lambda args: cli(*args), ovl, tmp_path / "ovl.json")
        assert report["existing"]["fs"] == "overlay" and report["existing"]["upper"]["fs"] == "xfs"
        assert report["existing"]["upper"]["source"] == xdev
    run = denied_device(dev)
    report = _probe(lambda args: run([sys.executable, "-m", "fsscope", *args], stdin=subprocess.DEVNULL),
                    mnt / "data", tmp_path / "refused.json")
    unread = " ".join(report["geometry"]["unread"])
    assert "Operation not permitted" in unread and report["geometry"]["block_size_bytes"] == 2048


def test_scan_lists_the_larger_directories_near_a_change_and_counts_the_rest(hand_made, cli, tmp_path):
    """A tree of many tiny XFS directories: each is a create or two from leaving short form.
    The largest are listed; the rest are counted by what they become, none dropped."""
    from fsscope.scan import NEAR_ROWS

    dev, mnt = hand_made("xfs", "-q", "-n", "size=8192")
    tree = mnt / "tree"
    tree.mkdir()
    for d in range(NEAR_ROWS + 15):          # 5 names of 20 B: one create from a block
        (tree / f"tiny{d:03d}").mkdir()
        for i in range(5):
            (tree / f"tiny{d:03d}" / f"{i:020d}").touch()
    (tree / "big").mkdir()                   # 201 names: one create from leaf format
    for i in range(201):
        (tree / "big" / f"{i:020d}").touch()
    out = tmp_path / "scan.json"
    got = cli("scan", str(tree), "--json", str(out))
    assert got.returncode == 0, got.stderr
    report = json.loads(out.read_text())
    near = [d for d in report["dirs"] if d.get("creates_until_change") and d["creates_until_change"]["creates"] <= 4]
    listed = report["near_change"]
    assert len(listed) == NEAR_ROWS and Path(listed[0]["path"]).name == "big"   # the soonest, then larger
    assert sum(report["near_change_more"].values()) + len(listed) == len(near)
    assert report["near_change_more"] == {"block": len(near) - NEAR_ROWS}
    assert f"and {len(near) - NEAR_ROWS} smaller directories as near: {len(near) - NEAR_ROWS} → block" \
        in " ".join(got.stdout.split())


def test_traced_probe_names_the_htree_conversion_when_the_device_is_refused(hand_made, denied_device, tmp_path):
    """The kernel's block allocation at the conversion is named even without the superblock:
    a window of two files (metadata_csum unknown) that holds the file where it happened."""
    import sys

    from fsscope.trace.tracefs import unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(f"tracefs: {unavailable_reason()}")
    dev, mnt = hand_made("ext4", "-q", "-b", "2048", "-E", "lazy_itable_init=0,lazy_journal_init=0")
    (mnt / "srv").mkdir()
    run = denied_device(dev)
    out = tmp_path / "probe.json"
    got = run([sys.executable, "-m", "fsscope", "probe", "--files", "140", "--runs", "2", "--max-runs", "2",
               "--trace", "attribute", "--dir", str(mnt / "srv"), "--json", str(out)], stdin=subprocess.DEVNULL)
    assert got.returncode == 0 and out.exists(), got.stderr
    report = json.loads(out.read_text())
    assert "Operation not permitted" in " ".join(report["geometry"]["unread"])
    (predicted,) = [p for p in report["predictions"] if p["structure"] == "ext4-dir-htree-conversion"]
    # 2048 B blocks, 7-character names (16 B entries): (2048 - 12 - 24) // 16 = 125 with the
    # csum tail mke2fs enables by default, 126 without it
    assert (predicted["index_low"], predicted["index_high"]) == (125, 126) and predicted["condition"]
    (row,) = [r for r in report["structures"] if r["structure"] == "ext4-dir-htree-conversion"]
    assert 125 in row["seen"], row


def test_scan_xfs_with_the_device_refused_reads_the_geometry_ioctl(hand_made, denied_device, tmp_path):
    """xfs_info asks the mounted file system (XFS_IOC_FSGEOMETRY), not the device: every
    directory is still classified and checked against its block map."""
    import sys

    dev, mnt = hand_made("xfs", "-q", "-b", "size=2048", "-i", "size=1024", "-n", "size=16384")
    tree = mnt / "tree"
    tree.mkdir()
    for n in (3, 30, 400, 2000):
        (tree / f"d{n}").mkdir()
        for i in range(n):
            (tree / f"d{n}" / f"{i:020d}").touch()
    run = denied_device(dev)
    out = tmp_path / "scan.json"
    got = run([sys.executable, "-m", "fsscope", "scan", str(tree), "--json", str(out)], stdin=subprocess.DEVNULL)
    assert got.returncode == 0, got.stderr
    report = json.loads(out.read_text())
    g = report["geometry"]
    assert (g["block_size_bytes"], g["inode_size_bytes"], g["dir_block_size_bytes"]) == (2048, 1024, 16384)
    assert report["checked"]["disagree"] == 0 and report["checked"]["not_checked"] == 0
    assert {Path(d["path"]).name: d["structure"] for d in report["dirs"]}["d2000"] in ("leaf", "node")
    assert "None" not in got.stdout


def test_scan_infers_metadata_csum_off_from_a_directory_when_the_device_is_refused(hand_made, denied_device,
                                                                                    tmp_path):
    import sys

    dev, mnt = hand_made("ext4", "-q", "-b", "1024", "-O", "^metadata_csum", size="100M")
    tree = mnt / "tree"
    tree.mkdir()
    proof = tree / "proof"      # 24 + 35 x 28 + 16 = 1020 B of names: one block only without the tail
    proof.mkdir()
    for i in range(35):
        (proof / f"{i:020d}").touch()
    (proof / "eightchr").touch()
    edge = tree / "edge"        # 24 + 35 x 28 + 12 = 1016 B: the same question (a proof as well)
    edge.mkdir()
    for i in range(35):
        (edge / f"{i:020d}").touch()
    (edge / "four").touch()
    assert os.stat(proof).st_size == 1024 and not _lsattr_indexed([str(proof)])[str(proof)]
    run = denied_device(dev)
    out = tmp_path / "scan.json"
    got = run([sys.executable, "-m", "fsscope", "scan", str(tree), "--json", str(out)], stdin=subprocess.DEVNULL)
    assert got.returncode == 0, got.stderr
    report = json.loads(out.read_text())
    (said,) = [u for u in report["geometry"]["unread"] if "metadata_csum: off, inferred" in u]
    assert str(proof) in said or str(edge) in said   # whichever the walk met first
    by_name = {Path(d["path"]).name: d for d in report["dirs"]}
    for name in ("proof", "edge"):
        assert by_name[name]["structure"] == "linear" and by_name[name]["agrees"] is True, by_name[name]


def test_probe_on_a_deep_btrfs_tree_claims_no_split_and_says_why(hand_made, cli, tmp_path):
    """A subvolume whose fs tree already has a level above its leaves (4-KiB nodes, 300
    files): the probe predicts no leaf split it cannot know and says why, with the arithmetic."""
    dev, mnt = hand_made("btrfs", "-q", "-f", "-n", "4096")
    for i in range(300):
        (mnt / f"old{i:04d}").touch()
    (mnt / "srv").mkdir()
    subprocess.run(["sync", "-f", str(mnt)], check=True)
    root = subprocess.run(["btrfs", "inspect-internal", "dump-tree", "-t", "5", dev], capture_output=True,
                          text=True, check=True).stdout
    level = int(root.split(" level ", 1)[1].split()[0])   # the fs tree's root, as dump-tree prints it first
    assert level >= 1, root[:200]
    report = _probe(lambda args: cli(*args), mnt / "srv", tmp_path / "probe.json")
    assert report["geometry"]["btrfs_fs_tree_level"] == level
    assert not [p for p in report["predictions"] if p["structure"].startswith("btrfs-")]
    (said,) = [n for n in report["not_predicted"] if "level(s) above its leaves" in n]
    assert f"already has {level} level(s)" in said and "3995-B leaf" in said   # 4096 - 101


async def test_the_tui_shows_dfs_fullness_for_a_directory_target(hand_made):
    """The setup screen's note on a directory target says the file system's fullness: df's Use%."""
    from pilot_wait import until

    from fsscope.targets import TargetSpec
    from fsscope.tui.app import make_app
    from fsscope.tui.config import AppConfig

    dev, mnt = hand_made("ext4", "-q", "-m", "5", "-b", "1024", size="300M")
    with open(mnt / "big", "wb") as out:   # about a third of the blocks; 5 % reserved for root
        out.write(os.urandom(1 << 20) * 90)
    subprocess.run(["sync", "-f", str(mnt)], check=True)
    df_use = _df(mnt)
    app = make_app(AppConfig(target=TargetSpec("dir", str(mnt)), is_root=True))
    async with app.run_test(size=(160, 50)) as pilot:
        await until(pilot, lambda: "Found there" in str(app.screen.query_one("#target-note").content),
                    "the target note")
        note = " ".join(str(app.screen.query_one("#target-note").content).split())
    shown = int(note.split("% used as df counts")[0].rsplit(None, 1)[-1])
    assert abs(shown - df_use) <= 1 and "reserved for root" in note, (note, df_use)


def test_check_scan_and_probe_each_finish_on_btrfs_a_subvolume_and_a_bind_mount(hand_made, cli, tmp_path):
    """The three --dir jobs on each mount kind (the overlay and the refused device have tests of
    their own above): a report, no raw None, no traceback, and what each says about the mount
    is the mount's."""
    dev, mnt = hand_made("btrfs", "-q", "-f", "-n", "32768")
    subprocess.run(["btrfs", "subvolume", "create", str(mnt / "sub")], check=True, capture_output=True)
    for d in (mnt / "top", mnt / "sub" / "srv"):
        d.mkdir()
        for i in range(20):
            (d / f"f{i:02d}").touch()
    edev, emnt = hand_made("ext4", "-q", "-b", "2048", "-E", "lazy_itable_init=0,lazy_journal_init=0")
    (emnt / "data" / "deep").mkdir(parents=True)
    with mounted("-o", "subvol=/sub", dev, at=tmp_path / "subvol") as sub, \
            mounted("--bind", str(emnt / "data"), at=tmp_path / "bound") as bound:
        cases = [("btrfs", mnt / "top", dev, str(mnt), {"subvolume": "/", "bind": False}),
                 ("btrfs", sub / "srv", dev, str(sub), {"subvolume": "/sub", "bind": False}),
                 ("ext4", bound / "deep", edev, str(bound), {"bind": True, "mount_root": "/data"})]
        for fs, where, source, mountpoint, says in cases:
            name = f"{fs}-{Path(mountpoint).name}"
            report = _check_json(cli, where, tmp_path / f"{name}-check.json")
            assert (report["checked"]["fs"], report["checked"]["mountpoint"]) == (fs, mountpoint), name
            assert Path(source).name in report["checked"]["disks"], name
            assert "not applicable" not in _finding(report, "other-io")["title"], name
            assert "None" not in json.dumps(report["findings"]), name
            out = tmp_path / f"{name}-scan.json"
            got = cli("scan", str(where), "--json", str(out))
            assert got.returncode == 0 and "Traceback" not in got.stderr and "None" not in got.stdout, got.stderr
            scanned = json.loads(out.read_text())
            assert scanned["existing"]["fs"] == fs and scanned["existing"]["source"] == source, name
            assert {k: scanned["existing"][k] for k in says} == says, name
            assert "None" not in json.dumps(scanned["structures"]), name
            probed = _probe(lambda args: cli(*args), where, tmp_path / f"{name}-probe.json")
            assert probed["existing"]["fs"] == fs and probed["geometry"]["fs"] == fs, name
            assert {k: probed["existing"][k] for k in says} == says, name


def test_scan_near_n_is_the_caller_s_reach(hand_made, cli, tmp_path):
    """``--near N`` lists (or counts) exactly the directories at most N creates from a change;
    a reach that is not a positive number is one line and exit 2."""
    dev, mnt = hand_made("xfs", "-q", "-n", "size=8192")
    tree = mnt / "tree"
    tree.mkdir()
    for n in (195, 197, 199, 201):          # 201 names of 20 B: one create from leaf format
        (tree / f"d{n}").mkdir()
        for i in range(n):
            (tree / f"d{n}" / f"{i:020d}").touch()
    reports = {}
    for near in (1, 4, 8):
        out = tmp_path / f"scan{near}.json"
        got = cli("scan", str(tree), "--near", str(near), "--json", str(out))
        assert got.returncode == 0, got.stderr
        reports[near] = json.loads(out.read_text())
    for near, report in reports.items():
        within = sorted(Path(d["path"]).name for d in report["dirs"]
                        if d.get("creates_until_change") and d["creates_until_change"]["creates"] <= near)
        assert report["near_entries"] == near
        assert sorted(Path(d["path"]).name for d in report["near_change"]) == within   # few: all listed
        assert sum(report["near_change_more"].values()) == 0
    assert [Path(d["path"]).name for d in reports[1]["near_change"]] == ["d201"]
    assert len(reports[1]["near_change"]) < len(reports[4]["near_change"]) <= len(reports[8]["near_change"])
    bad = cli("scan", str(tree), "--near", "-1")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--near" in bad.stderr


def test_a_probe_on_an_overlay_names_the_writer_on_its_upper_device(hand_made, cli, tmp_path):
    """Writers through an overlay land on the device under its upper directory: the probe
    watches that device and names them; on tmpfs it says there is nothing to watch."""
    from short_writers import COMM, short_lived_writers

    from fsscope.trace.tracefs import unavailable_reason

    if unavailable_reason() is not None:
        pytest.skip(f"tracefs: {unavailable_reason()}")
    dev, mnt = hand_made("xfs", "-q", "-n", "size=8192")
    for d in ("lower", "upper", "work"):
        (mnt / d).mkdir()
    opts = f"lowerdir={mnt / 'lower'},upperdir={mnt / 'upper'},workdir={mnt / 'work'}"
    with mounted("-t", "overlay", "overlay", "-o", opts, at=tmp_path / "ovl") as ovl:
        (ovl / "srv").mkdir()
        with short_lived_writers(ovl / "w.bin"):
            got = cli("probe", "--files", "200", "--runs", "2", "--max-runs", "2", "--dir", str(ovl / "srv"),
                      "--json", str(tmp_path / "probe.json"))
        assert got.returncode == 0, got.stderr
        report = json.loads((tmp_path / "probe.json").read_text())
    (w,) = [w for w in report["writers"] if w["command"] == COMM]
    assert w["exited"] and 0 < w["bytes_per_s"] <= w["device_bytes_per_s"]
    assert any(f["flag"] == "other-io" and COMM in f["title"] for f in report["flags"])
    ram = tmp_path / "ram"
    with mounted("-t", "tmpfs", "-o", "size=64m", "tmpfs", at=ram):
        tmpfs = _probe(lambda args: cli(*args), ram, tmp_path / "tmpfs.json")
    assert tmpfs["writers"] == [] and "no block device" in tmpfs["writers_watched"]
