"""The probe held to the papers' setup (issue 24, items 3-5), with real probes on RAM images.

- ``--in-root``: the files go into the root of the file system the run made, as in Aota &
  Kono; the predictions follow (XFS short-form 22 and chunk series from 61 in the root, 12
  and 60 in a fresh subdirectory; ext4's root keeps lost+found: htree at 252, not 253).
- the series detector finds XFS's inode-chunk allocations from the per-file medians: all or
  nearly all 16 members of 1,024 creat() x 10 runs.
- the structure table and the flags' notes give one account: a hash-dependent window is a
  range, never "confirmed"; btrfs' leaf split lists the events its note cites.
"""

from __future__ import annotations

import json

import pytest

from fsscope import recipes
from fsscope.engine import runner
from fsscope.engine.registry import spec_from_data
from fsscope.targets import TargetSpec

pytestmark = pytest.mark.privileged

SIZE_BYTES = 400 * 2**20


def probe(recipe: str, files: int, runs: int, *, mkfs_opts: str = "", in_root: bool = False,
          trace: str = "off") -> dict:
    spec = {"files": files, "runs": runs, "trace": trace} | ({"in_root": True} if in_root else {})
    handle = runner.start("probe", spec_from_data("probe", spec),
                          TargetSpec("ram", size_bytes=SIZE_BYTES),
                          recipes.load(recipe).with_extra(mkfs_opts, ""))
    handle.drain()
    assert handle.run_dir.status() == "ok", handle.run_dir.manifest().get("error")
    return handle.run_dir.report()


def index_of(report: dict, structure: str) -> int | None:
    (p,) = [p for p in report["predictions"] if p["structure"] == structure]
    return p["index"]


def flagged_at(report: dict, structure: str) -> list[int]:
    return [f["index"] for f in report["flags"] if f["structure"] == structure and f["flag"] == "outlier"]


# --------------------------------------------------------------------------------------------
# item 3: the root directory, as in the papers


def test_xfs_in_the_root_fits_22_entries_and_allocates_chunks_from_61():
    root = probe("xfs-default", 100, 3, in_root=True)
    sub = probe("xfs-default", 100, 3)
    assert root["where"] == "root directory" and root["geometry"]["probe_dir_in_root"] is True
    assert index_of(root, "xfs-dir-shortform-to-block") == 22
    assert index_of(sub, "xfs-dir-shortform-to-block") == 12  # a new directory gets an attr fork
    assert index_of(root, "xfs-inode-chunk-alloc") == 61
    assert index_of(sub, "xfs-inode-chunk-alloc") == 60      # the subdirectory took an inode
    assert 22 in flagged_at(root, "xfs-dir-shortform-to-block"), json.dumps(root["flags"])[:2000]
    (p,) = [p for p in root["predictions"] if p["structure"] == "xfs-dir-shortform-to-block"]
    assert "root directory" in p["arithmetic"]


def test_ext4_root_keeps_lost_and_found_so_the_htree_starts_at_252():
    root = probe("ext4-default", 300, 3, mkfs_opts="-b 4096", in_root=True)
    sub = probe("ext4-default", 300, 3, mkfs_opts="-b 4096")
    assert index_of(root, "ext4-dir-htree-conversion") == 252
    assert index_of(sub, "ext4-dir-htree-conversion") == 253
    assert root["geometry"]["probe_dir_entry_name_bytes"] == [10]  # lost+found
    assert 252 in flagged_at(root, "ext4-dir-htree-conversion"), json.dumps(root["flags"])[:2000]


def test_in_root_is_refused_on_a_directory_fsscope_did_not_make(cli, scratch):
    done = cli("probe", "--dir", str(scratch), "--in-root", "--files", "10", "--runs", "2")
    assert done.returncode == 2 and "--in-root" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert list(scratch.iterdir()) == []  # nothing was made there
    done = cli("probe", "--ram", "--recipe", "xfs-default", "--in-root", "--same-fs", "--files", "10")
    assert done.returncode == 2 and "in_root" in done.stderr
    helptext = cli("probe", "--help").stdout
    assert "--in-root" in helptext and "indices depend" in " ".join(helptext.split())


# --------------------------------------------------------------------------------------------
# item 4: the inode-chunk series from the per-file medians


def _chunk_series(report: dict) -> tuple[dict | None, int]:
    """The stride-64 series with the most of the 16 predicted inode-chunk members, and how many."""
    start = index_of(report, "xfs-inode-chunk-alloc")
    members = set(range(start, 1024, 64))
    assert len(members) == 16

    def reported(s: dict) -> int:  # members the series reports as slow
        terms = set(range(s["start"], s["start"] + s["count"] * 64, 64))
        return len(members & set(s["members"])) if "members" in s else len(members & terms) - s["missing"]

    series = [s for s in report["series"] if s["stride"] == 64]
    best = max(series, key=reported, default=None)
    return best, reported(best) if best else 0


def test_xfs_inode_chunk_series_is_found_whole_in_1024_creates_times_10():
    # An inode chunk's first create is slow in about half the runs (the series search weighs
    # its members so), so a member's median sits near the bar: one more probe when the first
    # found fewer than 14 members or none beyond chance (load moves medians), as probe_real does
    for _attempt in range(2):
        report = probe("xfs-default", 1024, 10)
        best, found = _chunk_series(report)
        if best and found >= 14 and best.get("chance", 1.0) < 0.01:
            break
    assert best, json.dumps(report["series"])
    assert found >= 14 and best.get("chance", 1.0) < 0.01, best
    (flag,) = [f for f in report["flags"] if f["flag"] == "series" and f["index"] == best["start"]]
    assert flag["structure"] == "xfs-inode-chunk-alloc"


# --------------------------------------------------------------------------------------------
# item 5: one account of kernel vs prediction


def test_a_hash_window_is_a_range_and_btrfs_rows_cite_what_the_notes_cite():
    ext4 = probe("ext4-default", 600, 3, mkfs_opts="-b 4096", trace="attribute")
    rows = {r["structure"]: r for r in ext4["structures"]}
    split = rows["ext4-htree-first-leaf-split"]
    assert split.get("window") and split["predicted"] == [], split
    assert not split["verdict"].startswith("confirmed") and split["verdict"].startswith("range")
    low, high = split["window"]
    assert all(low <= i <= high for i in split["seen"])
    for flag in ext4["flags"]:
        # (an in-memory structure -- memory:CACHE, slab:CACHE -- may explain several series, each
        # with a row and a note of its own numbers: test_trace checks those)
        if flag.get("structure") in rows and not flag["structure"].startswith(("memory:", "slab:")):
            assert rows[flag["structure"]]["verdict"] in flag["note"]

    btrfs = probe("btrfs-default", 100, 3, trace="attribute")
    row = {r["structure"]: r for r in btrfs["structures"]}["btrfs-fs-tree-leaf-split"]
    cited = {name for f in btrfs["flags"] if f.get("structure") == "btrfs-fs-tree-leaf-split"
             for name in (f.get("kernel") or {}).get("events", {}) if name.startswith("btrfs_")}
    assert "no kernel event for this structure" not in row["verdict"]
    assert cited <= set(row.get("inside", [])), (cited, row)
    assert "btrfs_cow_block" in row["verdict"]
