"""fsscope.explain: geometry on real images, predictions checked against the on-disk
structure (independent of timing), and matching of measured flags to predictions.

The structure checks grow a fresh directory one entry at a time and look at the structure
itself right before and right after each predicted index: XFS with bulkstat (format/extents)
and inode numbers, ext4 with the directory's size and indexed flag, btrfs with the fs tree's
level in dump-tree. Geometry is changed at mkfs time (inode size, block size, directory block
size, metadata_csum, dir_index, node size) and at the probe (name length), and the predicted
index must move to where the structure really changes.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from fsscope.analysis.findings import LevelShift, LinearGrowth, Outlier, Series
from fsscope.explain import OP_RULES, Geometry, explain, limits, predict, read_geometry, unobserved
from fsscope.explain.btrfs import btrfs_file_items
from fsscope.explain.ext4 import ext4_dir_limits
from fsscope.explain.geometry import parse_dumpe2fs, parse_inumbers, parse_xfs_info, xfs_geometry_from_info
from fsscope.explain.match import UNEXPLAINED
from fsscope.tools import run

PROBE_OPS = ("creat", "mkdir", "unlink", "stat", "rename", "open-existing", "write-fsync",
             "fallocate", "symlink")


def name(i: int, length: int) -> str:
    return f"{i:0{length}d}"


def by_structure(predictions, structure: str):
    found = [p for p in predictions if p.structure == structure]
    assert len(found) == 1, f"{structure}: {found}"
    return found[0]


def need_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None
               and shutil.which(t, path="/usr/sbin:/sbin") is None]
    if missing:
        reason = f"needs {', '.join(missing)}"
        if os.environ.get("FSSCOPE_REQUIRE_PRIVILEGED") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


# --- hand-made geometries: the paper's numbers ------------------------------------------

def xfs_paper_geometry(**changes) -> Geometry:
    """Aota & Kono's XFS: 512-byte v5 inodes (literal area 336 B, no attr fork), ftype,
    4 KiB directory blocks, files in the root directory's AG with 61 free inodes."""
    g = Geometry(fs="xfs", mountpoint="/x", block_size_bytes=4096, inode_size_bytes=512,
                 dir_block_size_bytes=4096, inode_chunk_inodes=64,
                 features=frozenset({"crc", "ftype"}), xfs_inode_core_bytes=176,
                 xfs_literal_area_bytes=336, xfs_dir_data_fork_bytes=336, xfs_ag_count=4,
                 xfs_inode_number_bits=20, xfs_agino_bits=18, xfs_dir_ag=0,
                 xfs_dir_ag_free_inodes=61)
    return replace(g, **changes)


def ext4_geometry(block_bytes=4096, csum=True, dir_index=True, **changes) -> Geometry:
    features = {"has_journal", "extent", "filetype"}
    features |= {"metadata_csum"} if csum else set()
    features |= {"dir_index"} if dir_index else set()
    g = Geometry(fs="ext4", mountpoint="/e", block_size_bytes=block_bytes,
                 dir_block_size_bytes=block_bytes, inode_size_bytes=256,
                 features=frozenset(features), ext4_dir_size_bytes=block_bytes)
    return replace(g, **changes)


def btrfs_geometry(free_bytes=16061, node_bytes=16384, **changes) -> Geometry:
    g = Geometry(fs="btrfs", mountpoint="/b", block_size_bytes=4096, node_size_bytes=node_bytes,
                 btrfs_sector_size_bytes=4096, btrfs_fs_tree_level=0,
                 btrfs_fs_tree_leaf_free_bytes=free_bytes, btrfs_max_inline_bytes=2048,
                 btrfs_tree_includes_dir=True)
    return replace(g, **changes)


def test_xfs_paper_numbers():
    """The paper's XFS flags: file 22 (short-form full: 15 x 22 + 6 = 336) and 61, 125, ...
    (inode chunks) -- derived, not hard-coded, from the geometry."""
    p = predict(xfs_paper_geometry(), "creat", 7, 1024)
    sf = by_structure(p, "xfs-dir-shortform-to-block")
    assert sf.index == 22 and "(336 - 6) // 15 = 22" in sf.arithmetic
    chunks = by_structure(p, "xfs-inode-chunk-alloc")
    assert chunks.indices() == [61, 125, 189, 253, 317, 381, 445, 509, 573, 637, 701, 765,
                                829, 893, 957, 1021]
    assert by_structure(p, "first-call").index == 0


def test_xfs_prediction_follows_geometry():
    base = predict(xfs_paper_geometry(), "creat", 7, 1024)
    longer = predict(xfs_paper_geometry(), "creat", 20, 1024)
    bigger = predict(xfs_paper_geometry(inode_size_bytes=1024, xfs_literal_area_bytes=848,
                                        xfs_dir_data_fork_bytes=848), "creat", 7, 1024)
    sf = lambda ps: by_structure(ps, "xfs-dir-shortform-to-block").index  # noqa: E731
    assert (sf(base), sf(longer), sf(bigger)) == (22, (336 - 6) // 28, (848 - 6) // 15)
    # an attr fork preallocated by the kernel shrinks the fork to 192 B, whatever the inode
    attr = predict(xfs_paper_geometry(xfs_dir_data_fork_bytes=192), "creat", 7, 1024)
    assert sf(attr) == 12


def test_xfs_unknown_fork_gives_both_conditional_predictions():
    g = xfs_paper_geometry(xfs_dir_data_fork_bytes=None, xfs_dir_ag_free_inodes=None,
                           xfs_ag0_free_inodes=61)
    p = predict(g, "creat", 7, 1024)
    sfs = [x for x in p if x.structure == "xfs-dir-shortform-to-block"]
    assert sorted(x.index for x in sfs) == [12, 22]
    assert all(x.condition for x in sfs)
    chunks = by_structure(p, "xfs-inode-chunk-alloc")
    assert chunks.index == 60 and "AG 0" in chunks.condition
    assert len([x for x in p if x.structure == "xfs-dir-block-to-leaf"]) == 1


def test_ext4_paper_numbers():
    """ext4 4 KiB blocks, 16-byte entries: a fresh directory's block 0 holds
    (4096 - 24) // 16 = 254 names, (4096 - 12 - 24) // 16 = 253 with metadata_csum.
    (The paper's 253 was the root directory with lost+found and no csum: same count.)"""
    conv = lambda g: by_structure(predict(g, "creat", 7, 1024),  # noqa: E731
                                  "ext4-dir-htree-conversion").index
    assert conv(ext4_geometry(csum=True)) == 253
    assert conv(ext4_geometry(csum=False)) == 254
    assert conv(ext4_geometry(block_bytes=1024, csum=True)) == 61
    lin = by_structure(predict(ext4_geometry(), "creat", 7, 1024), "ext4-dir-linear-scan")
    assert (lin.index, lin.end) == (0, 253)
    window = by_structure(predict(ext4_geometry(), "creat", 7, 1024),
                          "ext4-htree-first-leaf-split")
    assert window.index is None and window.index_low < window.index_high <= 2 * 255
    no_dx = by_structure(predict(ext4_geometry(dir_index=False), "creat", 7, 1024),
                         "ext4-dir-new-linear-block")
    assert no_dx.indices()[:3] == [253, 508, 763]


def test_btrfs_paper_numbers():
    """btrfs: 16061 B free in the fresh fs-tree leaf, 351 B of items per 7-character file
    -> 45 files fit, the 46th (file 45) splits the leaf (paper: 16061 / 351 = 45.75)."""
    per_file, in_call, _ = btrfs_file_items(7, "creat", symlink_target_bytes=22,
                                            write_bytes=4096, max_inline_bytes=2048,
                                            sector_bytes=4096)
    assert (per_file, in_call) == (351, 289)
    shift = by_structure(predict(btrfs_geometry(), "creat", 7, 1024), "btrfs-fs-tree-leaf-split")
    assert shift.kind == "level_shift" and shift.index == 45 and shift.tolerance_files == 2
    # 4 KiB nodes fill four times sooner
    small = by_structure(predict(btrfs_geometry(free_bytes=4096 - 101 - 222), "creat", 7, 1024),
                         "btrfs-fs-tree-leaf-split")
    assert small.index == (4096 - 101 - 222) // 351


def test_ops_with_and_without_rules():
    assert set(OP_RULES) == set(PROBE_OPS)
    for op in ("stat", "open-existing", "rename", "fallocate"):
        for g in (xfs_paper_geometry(), ext4_geometry(), btrfs_geometry()):
            assert [p.structure for p in predict(g, op, 7, 1024)] == ["first-call"], (op, g.fs)
    # mkdir: entries like creat, but no XFS chunk series with several AGs
    mk = predict(xfs_paper_geometry(), "mkdir", 7, 1024)
    assert "xfs-inode-chunk-alloc" not in {p.structure for p in mk}
    assert by_structure(mk, "xfs-dir-shortform-to-block").index == 22
    assert any("rotate" in line for line in limits(xfs_paper_geometry(), "mkdir"))
    # write_fsync spelled with an underscore is the same op
    assert predict(ext4_geometry(), "write_fsync", 7, 1024) == predict(ext4_geometry(),
                                                                       "write-fsync", 7, 1024)
    # btrfs symlink/write-fsync add their extent items
    sym = by_structure(predict(btrfs_geometry(), "symlink", 7, 1024), "btrfs-fs-tree-leaf-split")
    assert "inline EXTENT_DATA 68" in sym.arithmetic and sym.index <= 16061 // 419 + 1
    # unlink on ext4: directories never shrink -> first call only
    assert [p.structure for p in predict(ext4_geometry(), "unlink", 7, 1024)] == ["first-call"]
    # unlink on XFS from block form: back to short-form when 22 entries remain
    un = by_structure(predict(xfs_paper_geometry(), "unlink", 7, 100), "xfs-dir-block-to-shortform")
    assert un.index == 100 - 1 - 22


def test_unknown_fs_and_tmpfs_geometry(tmp_path):
    g = read_geometry("tmpfs", None, str(tmp_path))
    assert g.fs == "tmpfs" and g.block_size_bytes
    assert [p.structure for p in predict(g, "creat", 7, 100)] == ["first-call"]
    g = read_geometry("nilfs2", None, str(tmp_path))
    assert predict(g, "creat", 7, 0) == []


def test_only_indices_below_files():
    p = predict(xfs_paper_geometry(), "creat", 7, 20)
    assert {x.structure for x in p} == {"first-call"}
    p = predict(xfs_paper_geometry(), "creat", 7, 23)
    assert {x.structure for x in p} == {"first-call", "xfs-dir-shortform-to-block"}


# --- matching ---------------------------------------------------------------------------

def test_explain_matches_exactly_and_says_unexplained_otherwise():
    predictions = predict(xfs_paper_geometry(), "creat", 7, 1024)
    findings = [Outlier(22, 10, 10, 7_900_000, 150_000), Outlier(23, 10, 10, 400_000, 150_000),
                Series(61, 64, 16), Series(125, 64, 15), Series(61, 32, 30),
                Outlier(509, 10, 10, 380_000, 150_000), Outlier(0, 10, 10, 540_000, 150_000)]
    out = explain(findings, predictions)
    assert [e.structure for e in out] == ["xfs-dir-shortform-to-block", None,
                                          "xfs-inode-chunk-alloc", "xfs-inode-chunk-alloc", None,
                                          "xfs-inode-chunk-alloc", "first-call"]
    assert [e.predicted_index for e in out] == [22, None, 61, 125, None, 509, 0]
    sf = out[0]
    assert sf.to_json().keys() == {"index", "predicted_index", "structure", "note"}
    assert "(336 - 6) // 15 = 22" in sf.note and "52.7x" in sf.note
    for e in (out[1], out[4]):
        assert e.note.startswith(UNEXPLAINED + ":") and e.prediction is None
        assert e.to_json()["structure"] is None
    assert "nearest prediction is xfs-dir-shortform-to-block at file 22" in out[1].note
    # a wider tolerance is the caller's explicit choice
    assert explain([Outlier(23, 10, 10, 1, 1)], predictions, tolerance=1)[0].structure == \
        "xfs-dir-shortform-to-block"
    assert explain([Outlier(23, 10, 10, 1, 1)], predictions,
                   tolerance={"outlier": 1})[0].predicted_index == 22
    # two structures in one call: with 60 free inodes the second chunk is allocated at file
    # 124, the very call that moves the directory's leaf out of its block
    both = explain([Outlier(124, 5, 5, 1, 1)],
                   predict(xfs_paper_geometry(xfs_dir_ag_free_inodes=60), "creat", 7, 1024))[0]
    assert {both.structure, *(p.structure for p in both.also)} == {"xfs-dir-block-to-leaf",
                                                                  "xfs-inode-chunk-alloc"}
    assert "also changes another structure" in both.note
    left = unobserved(predictions, out)
    assert "xfs-dir-block-to-leaf" in {p.structure for p in left}


def test_explain_btrfs_window_and_level_shift_tolerance():
    predictions = predict(btrfs_geometry(), "creat", 7, 1024)
    shifts = [LevelShift(i, 200_000, 260_000) for i in (43, 45, 47, 48)]
    out = explain(shifts, predictions)
    assert [e.structure for e in out] == ["btrfs-fs-tree-leaf-split"] * 3 + [None]
    assert "16061 // 351 = 45" in out[1].note
    # the splitting call itself may be flagged as an outlier
    assert explain([Outlier(45, 9, 10, 1, 1)], predictions)[0].structure == \
        "btrfs-fs-tree-leaf-split"


def test_explain_ext4_linear_window_and_level_change():
    predictions = predict(ext4_geometry(), "creat", 7, 1024)
    window = by_structure(predictions, "ext4-htree-first-leaf-split")
    out = explain([LinearGrowth(5, 250, 120.0, 0.93), LinearGrowth(300, 1000, 50.0, 0.9),
                   Outlier(window.index_low + 3, 7, 10, 1, 1), Outlier(253, 10, 10, 1, 1),
                   LevelShift(253, 200_000, 150_000), Outlier(700, 8, 10, 1, 1)], predictions)
    assert [e.structure for e in out] == ["ext4-dir-linear-scan", None,
                                          "ext4-htree-first-leaf-split",
                                          "ext4-dir-htree-conversion",
                                          "ext4-dir-htree-conversion", None]
    assert out[2].predicted_index is None and "window" in out[2].note
    assert "level changes after the format change" in out[4].note
    # a fitted range straddling the conversion is not the first block's scan
    assert explain([LinearGrowth(0, 550, 28.0, 0.55)], predictions)[0].structure is None
    # without dir_index the scan covers the whole directory: any piece of it matches
    flat = predict(ext4_geometry(dir_index=False), "creat", 7, 1024)
    assert [e.structure for e in explain([LinearGrowth(116, 311, 110.0, 0.6),
                                          LinearGrowth(619, 676, 430.0, 0.65)], flat)] == \
        ["ext4-dir-linear-scan"] * 2


# --- parsers ----------------------------------------------------------------------------

XFS_INFO = """\
meta-data=/dev/loop0             isize=512    agcount=4, agsize=32768 blks
         =                       sectsz=512   attr=2, projid32bit=1
         =                       crc=1        finobt=1, sparse=1, rmapbt=0
         =                       reflink=1    bigtime=1 inobtcount=1 nrext64=0
data     =                       bsize=4096   blocks=131072, imaxpct=25
         =                       sunit=0      swidth=0 blks
naming   =version 2              bsize=8192   ascii-ci=0, ftype=1
log      =internal log           bsize=4096   blocks=16384, version=2
         =                       sectsz=512   sunit=0 blks, lazy-count=1
realtime =none                   extsz=4096   blocks=0, rtextents=0
"""


def test_parse_xfs_info_sections():
    info = parse_xfs_info(XFS_INFO)
    assert info["meta-data"]["isize"] == "512" and info["naming"]["bsize"] == "8192"
    assert info["data"]["bsize"] == "4096" and info["naming"]["ftype"] == "1"
    g = xfs_geometry_from_info(XFS_INFO)
    assert (g.inode_size_bytes, g.dir_block_size_bytes, g.block_size_bytes) == (512, 8192, 4096)
    assert g.xfs_literal_area_bytes == 336 and g.xfs_agino_bits == 15 + 3
    assert {"crc", "ftype", "finobt", "sparse"} <= g.features
    assert parse_inumbers("xi_startino = 128\n\txi_allocmask = 0xf\n\txi_alloccount = 4\n") == \
        [{"startino": 128, "allocmask": 15, "alloccount": 4}]
    assert parse_dumpe2fs("Block size:               1024\nFilesystem features:      a b\n") == \
        {"Block size": "1024", "Filesystem features": "a b"}


# --- XFS offline: mkfs.xfs -p protofile (libxfs, same directory code as the kernel) -----
# mkfs populates /d with k files through libxfs' own directory code and without an attr
# fork, so the whole literal area is the data fork -- including geometries this kernel no
# longer mounts (V4: 256-byte inodes, ftype=0).

def _proto_image(tmp_path: Path, files: int, length: int, mkfs_args: list[str]) -> Path:
    proto = tmp_path / f"proto-{files}.txt"
    lines = ["/dev/null", "0 0", "d--755 0 0", "d d--755 0 0"]
    lines += [f"{name(i, length)} ---644 0 0 /dev/null" for i in range(files)]
    proto.write_text("\n".join(lines + ["$", "$", ""]))
    image = tmp_path / f"xfs-{files}.img"
    image.unlink(missing_ok=True)
    with open(image, "wb") as fh:
        fh.truncate(512 * 2**20)
    run("mkfs.xfs", "-q", "-f", *mkfs_args, "-p", str(proto), str(image))
    return image


def _xfs_db_dir(image: Path) -> dict[str, int]:
    out = run("xfs_db", "-r", "-c", "path /d", "-c",
              "print core.format core.forkoff core.nextents core.size", str(image))
    return {k.split(".")[1]: int(v) for k, v in re.findall(r"(core\.\w+) = (\d+)", out)}


@pytest.mark.parametrize("mkfs_args,length", [
    ([], 7), ([], 4), ([], 12), ([], 20),
    (["-i", "size=1024"], 7), (["-i", "size=2048"], 7),
    (["-n", "size=8192"], 7),
    (["-m", "crc=0", "-i", "size=256", "-n", "ftype=0"], 7),
    (["-m", "crc=0", "-i", "size=256", "-n", "ftype=1"], 7),
    (["-m", "crc=0", "-i", "size=512", "-n", "ftype=0"], 12),
])
def test_xfs_offline_format_changes_at_predicted_index(tmp_path, mkfs_args, length):
    need_tools("mkfs.xfs", "xfs_db", "xfs_info")
    image = _proto_image(tmp_path, 0, length, mkfs_args)
    g = xfs_geometry_from_info(run("xfs_info", str(image)))
    assert _xfs_db_dir(image)["forkoff"] == 0
    g = replace(g, xfs_dir_data_fork_bytes=g.xfs_literal_area_bytes)  # no attr fork: measured
    predictions = predict(g, "creat", length, 2000)
    sf = by_structure(predictions, "xfs-dir-shortform-to-block").index
    # exactly sf entries: still inside the inode; one more: extents
    before, after = (_xfs_db_dir(_proto_image(tmp_path, k, length, mkfs_args))
                     for k in (sf, sf + 1))
    assert before["format"] == 1 and after["format"] == 2, (sf, before, after)
    leaf = [p for p in predictions if p.structure == "xfs-dir-block-to-leaf"]
    if leaf:  # the leaf moves out of the single block: a second extent
        b = leaf[0].index
        before, after = (_xfs_db_dir(_proto_image(tmp_path, k, length, mkfs_args))
                         for k in (b, b + 1))
        assert (before["nextents"], after["nextents"]) == (1, 2), (b, before, after)


def test_xfs_offline_geometry_moves_the_index(tmp_path):
    """Same name length, bigger inode -> bigger literal area -> later conversion."""
    need_tools("mkfs.xfs", "xfs_info")
    found = {}
    for size in (512, 1024, 2048):
        image = _proto_image(tmp_path, 0, 7, ["-i", f"size={size}"])
        g = xfs_geometry_from_info(run("xfs_info", str(image)))
        g = replace(g, xfs_dir_data_fork_bytes=g.xfs_literal_area_bytes)
        found[size] = by_structure(predict(g, "creat", 7, 2000),
                                   "xfs-dir-shortform-to-block").index
    assert found == {512: 22, 1024: 56, 2048: 124}


# --- real, mounted file systems -----------------------------------------------------------

def _xfs_dir_state(mountpoint: str, d: Path) -> tuple[int, int]:
    """(size, extents) of the directory, live (bulkstat through XFS_IOC_BULKSTAT)."""
    out = run("xfs_io", "-c", f"bulkstat_single {d.stat().st_ino}", mountpoint)
    extents = int(re.search(r"bs_extents64 = (\d+)", out).group(1))
    return d.stat().st_size, extents


@pytest.mark.privileged
@pytest.mark.parametrize("mkfs_opts,length,files", [
    ("", 7, 700), ("", 4, 600), ("", 12, 200), ("", 20, 200),
    ("-i size=1024", 7, 200), ("-n size=8192", 7, 1100),
])
def test_xfs_mounted_structures_change_at_predicted_indices(fresh_fs, mkfs_opts, length, files):
    fs = fresh_fs("xfs-default", mkfs_opts=mkfs_opts)
    d = Path(fs.workdir) / "probe.d"
    d.mkdir()
    g = read_geometry(fs.fs, fs.device, fs.mountpoint, probe_dir=d)
    assert g.fs == "xfs" and g.xfs_dir_data_fork_bytes is not None
    assert g.xfs_dir_ag_free_inodes is not None and g.dir_block_size_bytes == (
        8192 if "size=8192" in mkfs_opts else 4096)
    if "size=1024" in mkfs_opts:
        assert g.inode_size_bytes == 1024 and g.xfs_literal_area_bytes == 848
    predictions = predict(g, "creat", length, files)
    assert all(not p.condition for p in predictions), "everything measured: no assumptions"
    sf = by_structure(predictions, "xfs-dir-shortform-to-block").index
    leaf = by_structure(predictions, "xfs-dir-block-to-leaf").index
    data = by_structure(predictions, "xfs-dir-new-data-block")
    node = [p.index for p in predictions if p.structure == "xfs-dir-leaf-to-node"]
    chunks = by_structure(predictions, "xfs-inode-chunk-alloc")
    seen_chunks = {d.stat().st_ino >> 6}  # the directory's own chunk already exists
    new_chunk_at, size_grew_at, extents_grew_at = [], [], []
    blk = g.dir_block_size_bytes
    blocks, extents = _xfs_dir_state(fs.mountpoint, d)[0] // blk, 0
    checkpoints = {sf, leaf, *node, *data.indices()}
    query_at = checkpoints | {c - 1 for c in checkpoints}
    for i in range(files):
        path = d / name(i, length)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        chunk = path.stat().st_ino >> 6
        if chunk not in seen_chunks:
            new_chunk_at.append(i)
            seen_chunks.add(chunk)
        if d.stat().st_size // blk > blocks:  # short-form sizes stay below one block
            size_grew_at.append(i)
        blocks = d.stat().st_size // blk
        if i in query_at:  # extents only right before and at each predicted index
            new_extents = _xfs_dir_state(fs.mountpoint, d)[1]
            if new_extents > extents:
                extents_grew_at.append(i)
            extents = new_extents
    assert new_chunk_at == chunks.indices(), "inode chunks allocated exactly at the series"
    # short-form -> block: the size becomes one directory block; then data blocks
    assert size_grew_at[:1] == [sf]
    assert size_grew_at[1:] == data.indices()
    # the leaf leaves the block (extents +1), then node format adds blocks without data size
    assert leaf in extents_grew_at and leaf - 1 not in extents_grew_at
    for n in node:
        assert n in extents_grew_at and n not in size_grew_at and n - 1 not in extents_grew_at


@pytest.mark.privileged
def test_xfs_mounted_name_length_moves_the_index_and_xfs_db_agrees(fresh_fs):
    """On this kernel's directories (attr fork or not, as measured) the short-form limit
    moves with the name length; after umount xfs_db shows local vs extents format."""
    fs = fresh_fs("xfs-default")
    found = {}
    dirs = {}
    for length in (4, 7, 12, 20):
        d = Path(fs.workdir) / f"len{length}"
        d.mkdir()
        g = read_geometry(fs.fs, fs.device, fs.mountpoint, probe_dir=d)
        sf = by_structure(predict(g, "creat", length, 100), "xfs-dir-shortform-to-block").index
        found[length] = sf
        for i in range(sf):  # exactly full: still short-form
            os.close(os.open(d / name(i, length), os.O_CREAT | os.O_WRONLY, 0o644))
        full = Path(fs.workdir) / f"over{length}"
        full.mkdir()
        for i in range(sf + 1):  # one more: block format
            os.close(os.open(full / name(i, length), os.O_CREAT | os.O_WRONLY, 0o644))
        dirs[length] = (d.stat().st_ino, full.stat().st_ino)
    assert len(set(found.values())) == 4 and found[4] > found[7] > found[12] > found[20]
    os.sync()
    run("umount", fs.mountpoint)
    try:
        for length, (small, big) in dirs.items():
            formats = [re.search(r"core.format = \d+ \((\w+)\)",
                                 run("xfs_db", "-r", "-c", f"inode {ino}", "-c",
                                     "print core.format", fs.device)).group(1)
                       for ino in (small, big)]
            assert formats == ["local", "extents"], (length, found[length], formats)
    finally:
        run("mount", "-t", "xfs", fs.device, fs.mountpoint)


@pytest.mark.privileged
def test_xfs_mounted_unlink_back_to_shortform(fresh_fs):
    fs = fresh_fs("xfs-default")
    d = Path(fs.workdir) / "probe.d"
    d.mkdir()
    files = 100
    for i in range(files):
        os.close(os.open(d / name(i, 7), os.O_CREAT | os.O_WRONLY, 0o644))
    os.sync()
    g = read_geometry(fs.fs, fs.device, fs.mountpoint, probe_dir=d)
    index = by_structure(predict(g, "unlink", 7, files), "xfs-dir-block-to-shortform").index
    shrunk_at = None
    for i in range(files):
        os.unlink(d / name(i, 7))
        if shrunk_at is None and d.stat().st_size < g.dir_block_size_bytes:
            shrunk_at = i
    assert shrunk_at == index


def _ext4_indexed(d: Path) -> bool:
    fd = os.open(d, os.O_RDONLY)
    try:
        flags = struct.unpack("l", fcntl.ioctl(fd, 0x80086601, b"\0" * 8))[0]  # FS_IOC_GETFLAGS
    finally:
        os.close(fd)
    return bool(flags & 0x1000)  # EXT4_INDEX_FL, lsattr's 'I'


@pytest.mark.privileged
@pytest.mark.parametrize("mkfs_opts,length", [
    ("", 7), ("-O ^metadata_csum", 7), ("-b 1024", 7), ("-b 1024 -O ^metadata_csum", 7),
    ("", 20), ("-b 2048", 12), ("-O ^dir_index", 7),
])
def test_ext4_mounted_directory_changes_at_predicted_indices(fresh_fs, mkfs_opts, length):
    fs = fresh_fs("ext4-default", mkfs_opts=mkfs_opts)
    d = Path(fs.workdir) / "probe.d"
    d.mkdir()
    g = read_geometry(fs.fs, fs.device, fs.mountpoint, probe_dir=d)
    B = g.block_size_bytes
    assert (1024 if "-b 1024" in mkfs_opts else 2048 if "-b 2048" in mkfs_opts else 4096) == B
    assert ("metadata_csum" in g.features) == ("^metadata_csum" not in mkfs_opts)
    assert ("dir_index" in g.features) == ("^dir_index" not in mkfs_opts)
    predictions = predict(g, "creat", length, 3000)
    lim = ext4_dir_limits(block_bytes=B, name_length=length, csum=g.has_csum)
    grew_at = []
    size = d.stat().st_size
    assert size == B
    stop = 2 * lim.block_files + 2
    for i in range(stop):
        os.close(os.open(d / name(i, length), os.O_CREAT | os.O_WRONLY, 0o644))
        new = d.stat().st_size
        if new != size:
            grew_at.append((i, new // B, _ext4_indexed(d)))
        size = new
    if "dir_index" in g.features:
        conv = by_structure(predictions, "ext4-dir-htree-conversion").index
        window = by_structure(predictions, "ext4-htree-first-leaf-split")
        # file `conv` needs a second block: root + two leaves, indexed
        assert grew_at[0] == (conv, 3, True), grew_at
        assert window.index_low <= grew_at[1][0] <= window.index_high, (window, grew_at)
        assert by_structure(predictions, "ext4-dir-linear-scan").end == conv
    else:
        series = by_structure(predictions, "ext4-dir-new-linear-block")
        expected = [i for i in series.indices() if i < stop]
        assert [i for i, _, _ in grew_at] == expected
        assert not any(indexed for _, _, indexed in grew_at)


def _btrfs_fs_tree_level(device: str) -> int:
    os.sync()
    out = run("btrfs", "inspect-internal", "dump-tree", "-t", "root", device)
    return int(re.search(r"key \(FS_TREE ROOT_ITEM 0\).*?\n\s+level (\d+)", out, re.S).group(1))


@pytest.mark.privileged
@pytest.mark.parametrize("mkfs_opts,length,op", [
    ("", 7, "creat"), ("-n 4096", 7, "creat"), ("", 20, "creat"), ("-n 4096", 12, "creat"),
    ("", 7, "symlink"), ("", 7, "mkdir"),
])
def test_btrfs_mounted_leaf_split_at_predicted_index(fresh_fs, mkfs_opts, length, op):
    fs = fresh_fs("btrfs-default", mkfs_opts=mkfs_opts)
    d = Path(fs.workdir) / "probe.d"
    d.mkdir()
    g = read_geometry(fs.fs, fs.device, fs.mountpoint, probe_dir=d)
    assert g.node_size_bytes == (4096 if "4096" in mkfs_opts else 16384)
    assert g.btrfs_fs_tree_level == 0 and g.btrfs_tree_includes_dir
    shift = by_structure(predict(g, op, length, 2000), "btrfs-fs-tree-leaf-split")
    per_file, _, _ = btrfs_file_items(length, op, symlink_target_bytes=22, write_bytes=4096,
                                      max_inline_bytes=2048, sector_bytes=4096)
    fit = g.btrfs_fs_tree_leaf_free_bytes // per_file
    assert shift.index in (fit, fit + 1)

    def make(i: int) -> None:
        path = d / name(i, length)
        if op == "symlink":
            os.symlink(b"fsscope-symlink-target", path)
        elif op == "mkdir":
            os.mkdir(path)
        else:
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))

    for i in range(fit):
        make(i)
    assert _btrfs_fs_tree_level(fs.device) == 0, f"{fit} files must fit one leaf"
    make(fit)
    assert _btrfs_fs_tree_level(fs.device) == 1, f"file {fit} must split the leaf"
    # the level shift moves with the geometry: 4 KiB nodes fill ~4x sooner
    if "4096" in mkfs_opts:
        assert shift.index < 12


# --- XFS inode clusters -----------------------------------------------------------------

def test_xfs_cold_cluster_rule_from_geometry():
    """mkfs's chunk 128..191 holds root 128, rt inodes 129-130, probe.d 131; clusters of 32
    (512-B v5 inodes: 8 KiB x 512/256 = 16 KiB): file 28 gets inode 160, a cold cluster."""
    g = xfs_paper_geometry(xfs_dir_inode=131, xfs_root_inode=128, xfs_inode_cluster_inodes=32,
                           xfs_dir_ag_chunks=((128, 0xF, 0),), xfs_dir_ag_free_inodes=60)
    p = by_structure(predict(g, "creat", 7, 400), "xfs-inode-cluster-read")
    assert (p.kind, p.index) == ("outlier", 28) and "file 28 gets inode 160" in p.arithmetic
    # 16-inode clusters (8 KiB of 512-B inodes when v5 scaling is not allowed): a series
    g16 = replace(g, xfs_inode_cluster_inodes=16)
    s = by_structure(predict(g16, "creat", 7, 400), "xfs-inode-cluster-read")
    assert s.indices() == [12, 28, 44] and s.stride == 16
    from fsscope.explain.geometry import xfs_inode_cluster_inodes
    assert xfs_inode_cluster_inodes(inode_size_bytes=512, block_size_bytes=4096, crc=True,
                                    inode_align_blocks=8) == 32
    assert xfs_inode_cluster_inodes(inode_size_bytes=1024, block_size_bytes=4096, crc=True,
                                    inode_align_blocks=16) == 32
    assert xfs_inode_cluster_inodes(inode_size_bytes=512, block_size_bytes=4096, crc=True,
                                    inode_align_blocks=2) == 16
    assert xfs_inode_cluster_inodes(inode_size_bytes=512, block_size_bytes=4096, crc=False,
                                    inode_align_blocks=None) == 16


def _device_reads(device: str) -> int:
    return int(Path(f"/sys/block/{Path(os.path.realpath(device)).name}/stat").read_text().split()[0])


def _creates_that_read(fs, before: int, files: int):
    """On a fresh XFS: the predictions for ``files`` creates in a new directory (after
    ``before`` files in the root and a remount), which creates read the device, and the
    inode each file got."""
    root = Path(fs.mountpoint)
    if before:
        for i in range(before):
            os.close(os.open(root / f"pre{i}", os.O_CREAT | os.O_WRONLY, 0o644))
        os.sync()
        run("umount", fs.mountpoint)
        run("mount", "-t", "xfs", fs.device, fs.mountpoint)
    d = root / "probe.d"
    d.mkdir()
    os.sync()
    g = read_geometry(fs.fs, fs.device, fs.mountpoint, probe_dir=d)
    assert g.xfs_inode_cluster_inodes == 32 and g.xfs_inode_align_blocks is not None
    predictions = predict(g, "creat", 7, files)
    assert all(not p.condition for p in predictions)
    first_free = d.stat().st_ino + 1
    cold = by_structure(predictions, "xfs-inode-cluster-read")
    assert cold.index == (first_free // 32 + 1) * 32 - first_free
    read_at, inodes = set(), {}
    for i in range(files):
        os.sync()
        r0 = _device_reads(fs.device)
        path = d / name(i, 7)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
        if _device_reads(fs.device) > r0:
            read_at.add(i)
        inodes[i] = path.stat().st_ino
    return predictions, read_at, inodes


@pytest.mark.privileged
@pytest.mark.parametrize("mkfs_opts,before", [("", 0), ("-i size=1024", 0), ("", 20)])
def test_xfs_mounted_cold_cluster_read_at_predicted_index(fresh_fs, mkfs_opts, before):
    """The create predicted to open a cold inode cluster is the one that reads the device:
    its inode is the first of a cluster, and it is the only create (besides short-form ->
    block) that reads in two fresh file systems. ``before`` files made in the root and a
    remount first move the probe directory's inode and so the index (inode 152 -> file 7
    reaches inode 160). Two file systems, as the probe repeats runs: on a loaded machine the
    kernel may drop cached metadata buffers, and the create after that reads them back once
    (seen at files 0, 12, 56, 60), a one-off where the cold cluster read repeats."""
    runs = [_creates_that_read(fresh_fs("xfs-default", mkfs_opts=mkfs_opts), before, files=200)
            for _ in range(2)]
    predictions, _, inodes = runs[0]
    assert [p.index for p in runs[1][0]] == [p.index for p in predictions]  # same geometry, same calls
    cold = by_structure(predictions, "xfs-inode-cluster-read")
    sf = by_structure(predictions, "xfs-dir-shortform-to-block").index
    assert inodes[cold.index] % 32 == 0 and inodes[cold.index - 1] % 32 == 31
    for _, read_at, _ in runs:  # the predicted reads happen every time
        assert set(cold.indices()) <= read_at, (sorted(read_at), cold)
    repeated = runs[0][1] & runs[1][1]
    assert sorted(repeated - {sf}) == cold.indices(), ([sorted(r) for _, r, _ in runs], cold)
    # a chunk allocated during the probe: its second cluster is initialised in memory
    chunk = by_structure(predictions, "xfs-inode-chunk-alloc").index
    for _, read_at, inodes in runs:
        assert inodes[chunk + 32] % 32 == 0 and chunk + 32 not in read_at


def _btrfs_fs_tree_leaves(device: str) -> int:
    os.sync()
    out = run("btrfs", "inspect-internal", "dump-tree", "-t", "5", device)
    return len(re.findall(r"^leaf \d+ items", out, re.M))


@pytest.mark.privileged
def test_btrfs_mounted_later_leaf_splits_within_tolerance(fresh_fs):
    """Sequential creates (sync each, like the probe): the fs tree goes to 3 leaves near file
    44 + ~46 and splits again near 137 (16 KiB nodes, 7-char names): packed-leaf arithmetic."""
    fs = fresh_fs("btrfs-default")
    d = Path(fs.workdir) / "probe.d"
    d.mkdir()
    g = read_geometry(fs.fs, fs.device, fs.mountpoint, probe_dir=d)
    predictions = predict(g, "creat", 7, 200)
    splits = {k: by_structure(predictions, f"btrfs-fs-tree-leaf-split-{k}") for k in (2, 3)}
    grew_at, leaves = {}, 1
    for i in range(splits[3].index + splits[3].tolerance_files + 1):
        os.sync()
        os.close(os.open(d / name(i, 7), os.O_CREAT | os.O_WRONLY, 0o644))
        if i >= splits[2].index - splits[2].tolerance_files:
            now = _btrfs_fs_tree_leaves(fs.device)
            if now > leaves:
                grew_at.setdefault(leaves, i)
            leaves = now
    for k, p in splits.items():
        assert k in grew_at and abs(grew_at[k] - p.index) <= p.tolerance_files, (grew_at, p)


def test_btrfs_deep_tree_predicts_no_split_and_says_why_with_the_arithmetic():
    """An existing subvolume whose fs tree has a level above its leaves: the rightmost leaf's
    and its neighbour's free space are unknown, so no split is claimed; the limit says so with
    the per-file items and the leaf and root-node capacities. The same for an unread root."""
    from fsscope.explain.rules import limits

    deep = btrfs_geometry(btrfs_fs_tree_level=1, btrfs_fs_tree_leaf_free_bytes=None)
    assert not [p for p in predict(deep, "creat", 7, 5000) if p.structure.startswith("btrfs-")]
    (said,) = [line for line in limits(deep, "creat") if "level(s) above its leaves" in line]
    assert "185 + 35 + 2 x 55 = 330 B + 3 x the name length" in said
    assert "16283-B leaf" in said and "493 pointers (16283 // 33-B key pointers)" in said   # (16384 - 101) // 33
    unread = btrfs_geometry(btrfs_fs_tree_level=None, btrfs_fs_tree_leaf_free_bytes=None)
    assert not [p for p in predict(unread, "creat", 7, 5000) if p.structure.startswith("btrfs-")]
    assert any("root was not read" in line for line in limits(unread, "creat"))
    fresh = btrfs_geometry()
    assert not [line for line in limits(fresh, "creat") if "not read" in line or "level(s)" in line]
