"""fsscope on a file system it did not make: ``--dir`` measures the file system holding the
directory, and ``fsscope scan`` reads a live tree's directory structures without writing.

Every file system here is made BY THE TEST, by hand (losetup, mkfs with non-default
geometry, mount), never through fsscope's formatting, so fsscope meets it as an admin's file
system. The ground truth is the kernel's and the file system's own: the tracepoints that
fire at a format conversion, ext4's indexed flag as ``lsattr`` shows it, XFS's inode format
and block map as ``xfs_db`` reads them, and the block device's write counter.
"""

from __future__ import annotations

import json
import os
import subprocess
import traceback
from pathlib import Path

import pytest
from rich.console import Console

import fsscope.aging.profile  # noqa: F401 -- loaded before a forked child drops root (_as_user)
import fsscope.explain.xfs  # noqa: F401
import fsscope.layout.fiemap  # noqa: F401
import fsscope.layout.freespace  # noqa: F401
from fsscope.cli.render.probe import render_probe
from fsscope.engine import registry, runner
from fsscope.engine.registry import spec_from_data
from fsscope.explain.geometry import read_geometry
from fsscope.explain.rules import predict
from fsscope.scan import scan
from fsscope.targets import TargetSpec
from fsscope.trace.tracefs import unavailable_reason

pytestmark = pytest.mark.privileged

NAME_LENGTH = 20


@pytest.fixture
def hand_made(loop_device, scratch):
    """Factory: (device, mount point) of a file system made with ``mkfs`` and mounted by hand."""
    def make(fs: str, *mkfs_args: str, size: str = "600M", under: Path = scratch) -> tuple[str, Path]:
        dev = loop_device(size)
        subprocess.run([f"mkfs.{fs}", *mkfs_args, dev], check=True, capture_output=True)
        mnt = under / f"mnt-{Path(dev).name}"
        mnt.mkdir()
        subprocess.run(["mount", dev, str(mnt)], check=True)
        return dev, mnt

    return make


def _probe_dir(where: Path, files: int, runs: int = 3) -> dict:
    handle = runner.start("probe", spec_from_data("probe", {"files": files, "runs": runs, "name_length": NAME_LENGTH,
                                    "trace": "attribute"}), TargetSpec("dir", str(where)), None)
    handle.drain()
    assert handle.run_dir.status() == "ok", handle.run_dir.manifest().get("error")
    return handle.run_dir.report()


def _structure(report: dict, name: str) -> dict:
    """The structure's row, in the table or among the predictions the kernel contradicted."""
    (row,) = [s for s in report["structures"] + report.get("contradicted", []) if s["structure"] == name]
    return row


def _predicted(report: dict, name: str) -> dict:
    (p,) = [p for p in report["predictions"] if p["structure"] == name]
    return p


def _names(n: int) -> list[str]:
    return [f"{i:0{NAME_LENGTH}d}" for i in range(n)]


def _fill(directory: Path, n: int) -> None:
    directory.mkdir()
    for name in _names(n):
        (directory / name).touch()


# --- --dir on a hand-made file system ---------------------------------------------------------

@pytest.mark.skipif(unavailable_reason() is not None, reason=f"tracefs: {unavailable_reason()}")
def test_probe_dir_on_hand_made_ext4_2k_blocks_finds_the_htree_conversion(hand_made):
    dev, mnt = hand_made("ext4", "-q", "-b", "2048")
    (mnt / "srv").mkdir()
    # the true index, by hand: the first create after which ext4 marks the directory indexed
    probe = mnt / "by-hand"
    probe.mkdir()
    true_index = None
    for i, name in enumerate(_names(200)):
        (probe / name).touch()
        flags = subprocess.run(["lsattr", "-d", str(probe)], capture_output=True, text=True,
                               check=True).stdout.split()[0]
        if "I" in flags:
            true_index = i
            break
    assert true_index == (2048 - 12 - 24) // (8 + NAME_LENGTH)  # 71: the rule's own arithmetic

    report = _probe_dir(mnt / "srv", files=160)
    geometry = report["geometry"]
    assert geometry["fs"] == "ext4" and geometry["device"] == dev and geometry["existing"] is True
    assert geometry["block_size_bytes"] == 2048 and "dir_index" in geometry["features"]
    assert geometry["mountpoint"] == str(mnt) and geometry["unread"] == []
    assert report["existing"]["fs"] == "ext4" and report["existing"]["source"] == dev
    assert _predicted(report, "ext4-dir-htree-conversion")["index"] == true_index
    # reported with the kernel's evidence: blocks allocated inside exactly that create. (Whether
    # it is also a latency outlier depends on the machine's load: that verdict is not this test's.)
    conversion = _structure(report, "ext4-dir-htree-conversion")
    assert conversion["verdict"] == "confirmed" and true_index in conversion["seen"], conversion
    (threshold,) = [t for t in report["thresholds"] if t["structure"] == "ext4-dir-htree-conversion"
                    and t["index"] == true_index]  # with kernel evidence, latency outlier or not
    assert threshold["evidence"] in ("kernel", "kernel+latency"), threshold
    assert "ext4_allocate_blocks" in threshold["kernel"]["events"], threshold


@pytest.mark.skipif(unavailable_reason() is not None, reason=f"tracefs: {unavailable_reason()}")
def test_probe_dir_on_hand_made_xfs_8k_dir_blocks_finds_every_format_change(hand_made):
    dev, mnt = hand_made("xfs", "-q", "-n", "size=8192")
    (mnt / "srv").mkdir()
    report = _probe_dir(mnt / "srv", files=1030)
    geometry = report["geometry"]
    assert geometry["fs"] == "xfs" and geometry["device"] == dev and geometry["existing"] is True
    assert geometry["dir_block_size_bytes"] == 8192 and geometry["block_size_bytes"] == 4096
    info = subprocess.run(["xfs_info", str(mnt)], capture_output=True, text=True, check=True).stdout
    assert "bsize=8192" in info.split("naming")[1].split("\n")[0]
    # the kernel's own event at every directory format change is at the predicted index
    for name in ("xfs-dir-shortform-to-block", "xfs-dir-block-to-leaf", "xfs-dir-leaf-to-node"):
        row = _structure(report, name)
        assert row["verdict"] == "confirmed" and row["seen"] == row["predicted"], row
    assert _predicted(report, "xfs-dir-block-to-leaf")["index"] == 201      # 8 KiB blocks, 20-char names
    assert _predicted(report, "xfs-dir-leaf-to-node")["index"] == 1012
    # ... and each is reported as a threshold there with that evidence, latency outlier or not
    for name, event in (("xfs-dir-shortform-to-block", "xfs_dir2_sf_to_block"),
                        ("xfs-dir-block-to-leaf", "xfs_dir2_block_to_leaf"),
                        ("xfs-dir-leaf-to-node", "xfs_dir2_leaf_to_node")):
        index = _predicted(report, name)["index"]
        (threshold,) = [t for t in report["thresholds"] if t["structure"] == name and t["index"] == index]
        assert threshold["evidence"] in ("kernel", "kernel+latency"), threshold
        assert event in threshold["kernel"]["events"], threshold
        if threshold["evidence"] == "kernel":  # the latency's word, said honestly
            assert threshold["latency"] and threshold["latency_ratio"] is not None, threshold
    assert _predicted(report, "xfs-dir-shortform-to-block")["index"] == 6
    # a threshold claims the kernel only where the table saw the structure's event at that index
    for threshold in report["thresholds"]:
        row = _structure(report, threshold["structure"])
        if "kernel" in threshold["evidence"]:
            assert threshold["index"] in row["seen"] or set(row["events"]) & set(threshold["kernel"]["events"])
        if threshold["evidence"] == "kernel":
            assert not row["verdict"].startswith("contradicted"), (threshold, row)
    # the CLI shows each kernel-only threshold with its latency label
    console = Console(record=True, width=400)
    render_probe(registry.report_from_data("probe", report), console)
    text = console.export_text()
    for threshold in [t for t in report["thresholds"] if t["evidence"] == "kernel"]:
        assert f"file {threshold['index']} — " in text and f"latency: {threshold['latency']}" in text, text
    assert not [s for s in report["structures"] if s["verdict"].startswith("contradicted")]  # kept apart
    unconfirmed = {s["structure"] for s in report["structures"] + report.get("contradicted", [])
                   if s["verdict"].startswith("contradicted") or not s["events"]}
    assert not [t for t in report["thresholds"] if t["structure"] in unconfirmed and t["evidence"] == "kernel"]
    used = _predicted(report, "xfs-inode-chunk-alloc")
    assert "in use, not fresh" in used["note"]  # state-dependent: the file system's current state


def test_dir_jobs_say_which_file_system_they_measured(hand_made, cli, tmp_path):
    dev, mnt = hand_made("ext4", "-q", "-b", "2048")
    (mnt / "srv").mkdir()
    out_json = tmp_path / "frag.json"
    out = cli("frag", "--dir", str(mnt / "srv"), "--test-file", "4M", "--json", str(out_json))
    assert out.returncode == 0, out.stderr
    report = json.loads(out_json.read_text())
    assert report["fs"] == "ext4" and report["existing"]["source"] == dev
    assert report["free_space"]["fs"] == "ext4"  # the histogram of the file system holding it
    assert f"on {dev} at {mnt}" in " ".join(out.stderr.split())
    assert list((mnt / "srv").iterdir()) == []   # its scratch directory is gone


def test_probe_dir_on_tmpfs_names_it_and_says_why_no_structure_is_predicted(tmp_path):
    import tempfile

    from fsscope.targets.existing import existing_fs
    from fsscope.targets.target import RAM_DIR

    where = Path(tempfile.mkdtemp(dir=RAM_DIR))  # the session's RAM dir: tmpfs, no device
    found = existing_fs(where)
    handle = runner.start("probe", spec_from_data("probe", {"files": 30, "runs": 2, "trace": "off"}), TargetSpec("dir", str(where)), None)
    handle.drain()
    report = handle.run_dir.report()
    geometry = report["geometry"]
    assert geometry["fs"] == found.fs == report["existing"]["fs"] and geometry["existing"]
    assert geometry["block_size_bytes"] == os.statvfs(where).f_bsize
    assert any("no structure rules" in u for u in geometry["unread"]), geometry["unread"]
    assert [p["structure"] for p in report["predictions"]] == ["first-call"]
    assert list(where.iterdir()) == []
    where.rmdir()


# --- scan: read-only, checked against the file system ------------------------------------------

def _writes(dev: str) -> int:
    """Sectors written to the block device so far. Not the request counts: anyone's sync(2) on
    this shared machine sends every file system's device data-less flushes (thousands a minute
    under the suite's load, and the write and flush counters do not move in step), so only
    the bytes tell whether the scan wrote."""
    return int(Path(f"/sys/block/{Path(dev).name}/stat").read_text().split()[6])


def _settle(mnt: Path) -> None:
    """Everything the tree build dirtied is on disk (freeze: the XFS log is covered too)."""
    subprocess.run(["sync", "-f", str(mnt)], check=True)
    subprocess.run(["fsfreeze", "-f", str(mnt)], check=True)
    subprocess.run(["fsfreeze", "-u", str(mnt)], check=True)


def _scan(cli, tree: Path, out_json: Path, dev: str, mnt: Path) -> dict:
    _settle(mnt)
    before = _writes(dev)
    out = cli("scan", str(tree), "--json", str(out_json))
    assert out.returncode == 0, out.stderr
    subprocess.run(["sync", "-f", str(mnt)], check=True)
    assert _writes(dev) == before, "the scan wrote to the file system"
    return json.loads(out_json.read_text())


def _xfs_db(dev: str, inode: int, *commands: str) -> str:
    args = ["xfs_db", "-r", "-c", f"inode {inode}"]
    for c in commands:
        args += ["-c", c]
    return subprocess.run([*args, dev], capture_output=True, text=True, check=True).stdout


def test_scan_xfs_structures_agree_with_xfs_db_without_writing(hand_made, cli, tmp_path):
    dev, mnt = hand_made("xfs", "-q", "-n", "size=8192")
    tree = mnt / "tree"
    tree.mkdir()
    counts = (5, 6, 7, 199, 200, 201, 202, 1010, 1011, 1012, 1013)
    for n in counts:
        _fill(tree / f"d{n}", n)
    report = _scan(cli, tree, tmp_path / "scan.json", dev, mnt)
    assert report["existing"]["fs"] == "xfs" and report["geometry"]["dir_block_size_bytes"] == 8192
    by_name = {Path(d["path"]).name: d for d in report["dirs"]}
    leaf_fsb, free_fsb = (32 << 30) // 4096, (64 << 30) // 4096
    for n in counts:
        d = by_name[f"d{n}"]
        ino = os.stat(d["path"]).st_ino
        fmt = _xfs_db(dev, ino, "print core.format")
        if "local" in fmt:
            truth = "shortform"
        else:
            offsets = [int(m.split()[0]) for m in
                       _xfs_db(dev, ino, "bmap").split("data offset ")[1:]]
            truth = ("node" if any(o >= free_fsb for o in offsets) else
                     "leaf" if any(o >= leaf_fsb for o in offsets) else "block")
        assert d["structure"] == truth and d["agrees"] is True, (n, truth, d)
    structures = {n: by_name[f"d{n}"]["structure"] for n in counts}
    assert structures[199] == structures[201] == "block" and structures[202] == "leaf"
    assert structures[1012] == "leaf" and structures[1013] == "node"
    near = {Path(d["path"]).name: d["creates_until_change"] for d in report["near_change"]}
    assert near["d201"] == {"creates": 1, "becomes": "leaf", "name_bytes": NAME_LENGTH}
    assert near["d1012"]["creates"] == 1 and near["d1012"]["becomes"] == "node"
    assert "d202" not in near and "d1013" not in near
    sf_limit = max(n for n in counts if structures[n] == "shortform")
    assert near[f"d{sf_limit}"] == {"creates": 1, "becomes": "block", "name_bytes": NAME_LENGTH}
    assert report["largest"][0]["entries"] == 1013
    assert report["free_space"]["fs"] == "xfs" and report["free_space"]["free_extent_count"] > 0
    assert report["aging"]["nearest"] and report["aging"]["nearest"][0]["distance"] >= 0


def test_scan_ext4_structures_agree_with_lsattr_without_writing(hand_made, cli, tmp_path):
    dev, mnt = hand_made("ext4", "-q", "-b", "2048", "-E", "lazy_itable_init=0,lazy_journal_init=0")
    tree = mnt / "tree"
    tree.mkdir()
    counts = (70, 71, 72, 73, 2000)
    for n in counts:
        _fill(tree / f"d{n}", n)
    report = _scan(cli, tree, tmp_path / "scan.json", dev, mnt)
    assert report["geometry"]["block_size_bytes"] == 2048
    by_name = {Path(d["path"]).name: d for d in report["dirs"]}
    for n in counts:
        d = by_name[f"d{n}"]
        flags = subprocess.run(["lsattr", "-d", d["path"]], capture_output=True, text=True,
                               check=True).stdout.split()[0]
        truth = "htree" if "I" in flags else "linear"
        assert d["structure"] == truth and d["agrees"] is True, (n, flags, d)
    assert by_name["d71"]["structure"] == "linear" and by_name["d72"]["structure"] == "htree"
    assert by_name["d2000"]["account"]["depth"] == 0 == by_name["d2000"]["depth"]
    near = {Path(d["path"]).name: d["creates_until_change"] for d in report["near_change"]}
    assert near["d71"] == {"creates": 1, "becomes": "htree", "name_bytes": NAME_LENGTH}
    assert near["d70"]["creates"] == 2 and "d72" not in near
    assert report["free_space"]["fs"] == "ext4"


def _as_user(user, work):
    """``work()`` in a forked child running as ``user`` (its modules are already loaded: the
    user cannot read this venv), its JSON-able result back through a pipe."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to the user, work, report, exit without cleanup handlers
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(user.gid)
            os.setuid(user.uid)
            try:
                result = {"report": work()}
            except BaseException:  # noqa: BLE001 -- carried to the parent's assertion
                result = {"error": traceback.format_exc()}
            with os.fdopen(write_fd, "w") as out:
                json.dump(result, out, default=str)
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as got:
        text = got.read()
    os.waitpid(pid, 0)
    result = json.loads(text)
    assert "error" not in result, result["error"]
    return result["report"]


def test_scan_ext4_htree_depth_agrees_with_debugfs(hand_made, cli, tmp_path):
    """1 KiB blocks: the htree root indexes at most 123 leaves, so 6,000 names need a level of
    index nodes (depth 1) and 2,000 do not."""
    dev, mnt = hand_made("ext4", "-q", "-b", "1024", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                         size="300M")
    tree = mnt / "tree"
    tree.mkdir()
    for n in (2000, 6000):
        _fill(tree / f"d{n}", n)
    report = _scan(cli, tree, tmp_path / "scan.json", dev, mnt)
    by_name = {Path(d["path"]).name: d for d in report["dirs"]}
    for n, depth in ((2000, 0), (6000, 1)):
        dump = subprocess.run(["debugfs", "-R", f"htree_dump /tree/d{n}", dev], capture_output=True,
                              text=True, check=True).stdout
        assert f"Indirect levels: {depth}" in dump
        d = by_name[f"d{n}"]
        assert (d["structure"], d["depth"], d["account"]["depth"], d["agrees"]) == ("htree", depth, depth, True)
    assert report["structures"]["htree depth 1"] == 1


def test_scan_btrfs_dirs_are_items_sized_by_their_names_without_writing(hand_made, cli, tmp_path):
    dev, mnt = hand_made("btrfs", "-q", "-f", "-n", "4096")
    tree = mnt / "tree"
    tree.mkdir()
    for n in (3, 300):
        _fill(tree / f"d{n}", n)
    report = _scan(cli, tree, tmp_path / "scan.json", dev, mnt)  # a subvolume's st_dev is anonymous
    assert report["existing"]["fs"] == "btrfs" and report["existing"]["source"] == dev
    assert report["geometry"]["node_size_bytes"] == 4096
    by_name = {Path(d["path"]).name: d for d in report["dirs"]}
    for n in (3, 300):  # btrfs: a directory's size is its names' bytes twice (DIR_ITEM + DIR_INDEX)
        d = by_name[f"d{n}"]
        assert d["structure"] == "items" and d["agrees"] is True
        assert d["size_bytes"] == os.stat(d["path"]).st_size == 2 * n * NAME_LENGTH
    # btrfs' own account, live through the tree-search ioctl (no GETFSMAP, no device opened)
    assert report["free_space"]["fs"] == "btrfs" and "TREE_SEARCH" in report["free_space"]["source"]


def test_scan_as_a_user_reads_what_it_may_and_says_what_it_cannot(local_user, hand_made):
    # mounted in the user's home (the test's scratch is private); unmounted before it goes
    dev, mnt = hand_made("ext4", "-q", "-b", "2048", "-E", "lazy_itable_init=0,lazy_journal_init=0",
                         under=local_user.home)
    tree = mnt / "tree"
    tree.mkdir()
    for n in (71, 72):
        _fill(tree / f"d{n}", n)
    subprocess.run(["chown", "-R", f"{local_user.uid}:{local_user.gid}", str(tree)], check=True)
    _settle(mnt)
    before = _writes(dev)
    def work():
        geometry = read_geometry("ext4", dev, str(mnt), existing=True)  # what --dir reads
        return {"scan": scan(tree), "geometry": geometry.to_dict(),
                "predicted": [(p.structure, p.index_low, p.index_high, p.condition)
                              for p in predict(geometry, "creat", NAME_LENGTH, 200)]}

    got = _as_user(local_user, work)
    report = got["scan"]
    subprocess.run(["sync", "-f", str(mnt)], check=True)
    assert _writes(dev) == before  # the owner may ask for O_NOATIME: nothing written
    assert report["read_only"]["noatime_refused"] == 0
    unread = " ".join(report["geometry"]["unread"])
    assert "superblock" in unread and "root" in unread  # the superblock is on the device
    # the directories are still classified: the kernel's indexed flag and st_size, the names
    # checked where metadata_csum (only the superblock says) cannot change the answer
    by_name = {Path(d["path"]).name: d for d in report["dirs"]}
    assert all("superblock not read" in d["account"]["how"] for d in report["dirs"])
    assert by_name["d71"]["structure"] == "linear" and by_name["d71"]["agrees"] is True
    # 72 names of 20 B need 2040 B of a 2048 B block: they fit without metadata_csum's 12 B tail
    assert by_name["d72"]["structure"] == by_name["d72"]["account"]["structure"] == "htree"
    assert by_name["d72"]["agrees"] is None and "metadata_csum" in by_name["d72"]["why"]
    # --dir without root: the same gap, said; the conversion predicted with what is missing
    # said as its condition (dir_index assumed; metadata_csum's 12 B tail: file 71 or 72)
    assert got["geometry"]["existing"] and "superblock" in " ".join(got["geometry"]["unread"])
    assert got["geometry"]["block_size_bytes"] == 2048  # statfs still knows this
    (conversion,) = [p for p in got["predicted"] if p[0] == "ext4-dir-htree-conversion"]
    assert conversion[1:3] == [71, 72] and "dir_index assumed" in conversion[3]
    assert sorted(p[0] for p in got["predicted"]) == ["ext4-dir-htree-conversion", "first-call"]
    assert report["free_space"]["fs"] == "ext4"  # ext4's GETFSMAP needs no privilege (xfs': root)


# --- scan in the TUI -------------------------------------------------------------------------

async def test_scan_job_in_the_tui_shows_the_near_threshold_directories(hand_made):
    from test_tui import SIZE, assert_clean, job_view, run_plan

    from fsscope.tui import AppConfig, make_app
    from fsscope.tui.widgets.scan_view import ScanView

    dev, mnt = hand_made("xfs", "-q", "-n", "size=8192")
    tree = mnt / "tree"
    tree.mkdir()
    for n in (201, 1013):
        _fill(tree / f"d{n}", n)
    _settle(mnt)
    before = _writes(dev)
    app = make_app(AppConfig(target=TargetSpec("dir", str(tree)), jobs=("scan",)))
    async with app.run_test(size=SIZE) as pilot:
        live, job = await run_plan(pilot, app, "scan", 120)
        view = job_view(live, ScanView)
        table = view.query_one("#scan-dirs")
        rows = [tuple(str(cell) for cell in table.get_row_at(i)) for i in range(table.row_count)]  # Text cells
        near = [r for r in rows if r[0] == "near"]
        assert [(Path(r[1]).name, r[3], r[4], r[5]) for r in near] == [("d201", "block", "in 1 → leaf", "agrees")]
        assert ("largest", str(tree / "d1013"), "1013", "node", "-", "agrees") in rows
        assert "xfs on " + dev in " ".join(str(view.query_one("#scan-summary").content).split())
    subprocess.run(["sync", "-f", str(mnt)], check=True)
    assert _writes(dev) == before  # the job made no scratch directory there: nothing written
    assert_clean()
    assert not app.worker_errors
