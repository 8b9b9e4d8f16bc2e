"""The latency probe on real RAM-backed images: the flags it measures sit where the geometry
predicts them, and they MOVE when the geometry does (name length, block size, node size).

Each case runs the real probe job (``runner.start("probe", ...)``: a fresh mkfs per run, 5
runs, creat() after sync() per file) and reads ``report["flags"]``: a structure counts as
found when a flag carries it with ``index == predicted_index`` (exact rules) or within the
rule's own ``tolerance_files`` (btrfs' leaf split, a level shift). Files: just past the
predicted threshold, so the whole module stays well under two minutes.

This machine is shared (2 cores, other jobs running), so a single probe can be spoiled by
load; a case that misses its structure probes once more (at most once) before failing.

Measured here, but NOT asserted (not reliably flagged on these images):
- XFS block->leaf (99 with 20-character names) and leaf->node (500): repeatable, but only
  ~1.5-1.7x a plain create -- weak outliers (``report["weak_outliers"]``), not flags; 500
  came out as a level shift in 1 of 3 probes of 1100 files.
- the XFS data-block series with 20-character names (stride 126): 4 members in 600 files
  are too few to beat chance; with 1100 files it was found in 1 of 2 probes.
- the first call (file 0): the probe makes and syncs its directory before timing, so on
  this kernel file 0 is not slow.
- XFS cold inode clusters of chunks allocated later (files 92, 156, ...): not slow -- new
  chunks' cluster buffers are initialised in memory (explained, asserted on disk in
  tests/test_explain.py: no device read there).
- btrfs 16 KiB: a second step near file 137 in about half the probes (a later leaf split,
  which the rules do not predict).
"""

from __future__ import annotations

import json

import pytest

from fsscope import recipes
from fsscope.engine import runner
from fsscope.engine.registry import spec_from_data
from fsscope.targets import TargetSpec

pytestmark = pytest.mark.privileged

RUNS = 5
SIZE_BYTES = 400 * 2**20  # XFS needs >= 300 MiB

#: config name -> (recipe, extra mkfs options, files, name length)
CONFIGS = {
    "xfs-7": ("xfs-default", "", 1100, 7),
    "xfs-20": ("xfs-default", "", 600, 20),
    "ext4-4k-7": ("ext4-default", "-b 4096", 400, 7),
    "ext4-4k-20": ("ext4-default", "-b 4096", 300, 20),
    "ext4-1k-7": ("ext4-default", "-b 1024", 200, 7),
    "ext4-1k-nocsum-7": ("ext4-default", "-b 1024 -O ^metadata_csum", 200, 7),
    "btrfs-16k": ("btrfs-default", "", 200, 7),
    "btrfs-4k": ("btrfs-default", "-n 4096", 200, 7),
}

_reports: dict[str, list[dict]] = {}


def _probe(config: str) -> dict:
    recipe, mkfs_opts, files, name_length = CONFIGS[config]
    handle = runner.start("probe", spec_from_data("probe", {"files": files, "runs": RUNS, "name_length": name_length, "trace": "off"}),
                          TargetSpec("ram", size_bytes=SIZE_BYTES),
                          recipes.load(recipe).with_extra(mkfs_opts, ""))
    handle.drain()
    assert handle.run_dir.status() == "ok", handle.run_dir.manifest().get("error")
    report = handle.run_dir.report()
    assert report["runs_completed"] >= RUNS and report["geometry"] is not None  # more when the noise needs them
    _reports.setdefault(config, []).append(report)
    return report


def probe_where(config: str, found, extra_probes: int = 1) -> dict:
    """A report of ``config`` in which ``found(report)`` holds: a probe already made for this
    module if one does, else up to ``extra_probes`` more (load on a shared machine can spoil
    one). Returns the last report tried, so a failing assertion shows what was measured."""
    for report in _reports.get(config) or [_probe(config)]:
        if found(report):
            return report
    for _ in range(extra_probes):
        report = _probe(config)
        if found(report):
            break
    return report


def predicted(report: dict, structure: str) -> dict:
    (prediction,) = [p for p in report["predictions"] if p["structure"] == structure]
    return prediction


def matched(report: dict, structure: str, flag: str) -> list[dict]:
    """Flags of kind ``flag`` explained by ``structure`` at the predicted index (within the
    rule's tolerance)."""
    tolerance = predicted(report, structure)["tolerance_files"]
    return [f for f in report["flags"]
            if f["flag"] == flag and f["structure"] == structure and f["predicted_index"] is not None
            and abs(f["index"] - f["predicted_index"]) <= tolerance]


def has(structure: str, flag: str):
    return lambda report: bool(matched(report, structure, flag))


def measured(report: dict) -> str:
    """What the probe flagged, for assertion messages."""
    return json.dumps({"flags": [(f["flag"], f["index"], f["structure"], f["predicted_index"])
                                 for f in report["flags"]],
                       "series": report["series"], "level_shifts": report["level_shifts"],
                       "predictions": [(p["structure"], p["index"], p["stride"])
                                       for p in report["predictions"]]})


# --------------------------------------------------------------------------------------------
# XFS


def test_xfs_shortform_to_block_moves_with_the_name_length():
    structure = "xfs-dir-shortform-to-block"
    short = probe_where("xfs-7", has(structure, "outlier"))
    long = probe_where("xfs-20", has(structure, "outlier"))
    for report in (short, long):
        (flag,) = matched(report, structure, "outlier")
        expected = predicted(report, structure)["index"]
        assert flag["index"] == flag["predicted_index"] == expected, measured(report)
    short_index = predicted(short, structure)["index"]
    long_index = predicted(long, structure)["index"]
    # fewer long names fit into the directory inode: the conversion comes earlier
    # (this kernel preallocates an attr fork: 12 -> 6 files)
    assert long_index < short_index, (short_index, long_index)


def series_members(report: dict, structure: str) -> tuple[int, float]:
    """(members the probe found in the flagged series, the fewest the test accepts)."""
    flags = matched(report, structure, "series")
    series = [s for s in report["series"] if flags and s["start"] == flags[0]["index"]]
    members = series[0]["count"] - series[0]["missing"] if series else 0
    # a series of ~2x slow files: most members are only weak outliers, yet all repeat
    return members, 0.8 * predicted(report, structure)["count"] - 1


def test_xfs_inode_chunk_series_found_and_explained():
    structure = "xfs-inode-chunk-alloc"

    def full_series(report: dict) -> bool:  # a loaded machine can hide one weak member
        members, fewest = series_members(report, structure)
        return has(structure, "series")(report) and members >= fewest

    for config in ("xfs-7", "xfs-20"):
        report = probe_where(config, full_series, extra_probes=2)
        prediction = predicted(report, structure)
        assert prediction["stride"] == 64
        (flag,) = matched(report, structure, "series")
        assert flag["index"] == flag["predicted_index"], measured(report)
        series = [s for s in report["series"] if s["start"] == flag["index"]]
        assert series and series[0]["stride"] == 64
        members, fewest = series_members(report, structure)
        assert members >= fewest, measured(report)


def test_xfs_data_block_series_found_with_short_names():
    structure = "xfs-dir-new-data-block"

    def from_the_start(report: dict) -> bool:
        return any(f["index"] == predicted(report, structure)["index"] for f in matched(report, structure, "series"))

    # load can hide the first member (one ~2x file): probe again before accepting a series
    # found from a later member. Under CPU hogs the search found these six ~2x members in 6
    # of 7 probes re-analysed (aa72fb7), so up to three more probes, as btrfs' 4 KiB shift has
    report = probe_where("xfs-7", from_the_start, extra_probes=3)
    prediction = predicted(report, structure)
    (flag,) = matched(report, structure, "series")
    assert flag["index"] == flag["predicted_index"], measured(report)
    # the series found is the predicted one: its stride, on the predicted lattice
    assert flag["index"] >= prediction["index"], measured(report)
    assert (flag["index"] - prediction["index"]) % prediction["stride"] == 0, measured(report)
    strides = [s["stride"] for s in report["series"] if s["start"] == flag["index"]]
    assert strides == [prediction["stride"]], measured(report)


def test_xfs_cold_inode_cluster_read_explained():
    """File 28 (any name length) gets inode 160, the first of the second 32-inode cluster of
    the chunk mkfs made; its buffer was never read since mount: ~3x, every run."""
    structure = "xfs-inode-cluster-read"
    for config in ("xfs-7", "xfs-20"):
        report = (_reports.get(config) or [_probe(config)])[-1]
        assert predicted(report, structure)["index"] == 28, measured(report)
        # not always a full outlier in the long probes: when file 28 is flagged, it is explained
        for flag in report["flags"]:
            if flag["index"] == 28 and flag["flag"] == "outlier":
                assert flag["structure"] == structure, measured(report)


# --------------------------------------------------------------------------------------------
# ext4


def test_ext4_htree_conversion_moves_with_block_size_checksums_and_name_length():
    structure = "ext4-dir-htree-conversion"
    index = {}
    for config in ("ext4-4k-7", "ext4-1k-7", "ext4-1k-nocsum-7", "ext4-4k-20"):
        report = probe_where(config, has(structure, "outlier"))
        (flag,) = matched(report, structure, "outlier")
        assert flag["index"] == flag["predicted_index"], measured(report)
        index[config] = flag["index"]
        csum = "metadata_csum" in report["geometry"]["features"]
        assert csum == (config != "ext4-1k-nocsum-7")
    # block 0 holds (block - 12 csum tail - 24 for . and ..) // roundup4(8 + name) entries
    assert index == {"ext4-4k-7": 253, "ext4-1k-7": 61, "ext4-1k-nocsum-7": 62, "ext4-4k-20": 145}


# --------------------------------------------------------------------------------------------
# btrfs


def test_btrfs_first_leaf_split_is_a_level_shift_that_moves_with_the_node_size():
    structure = "btrfs-fs-tree-leaf-split"
    index = {}
    for config in ("btrfs-16k", "btrfs-4k"):
        # the 4 KiB split (file 9) is seen in ~88% of probes on a loaded machine: allow more tries
        report = probe_where(config, has(structure, "levelshift"), extra_probes=1 if config == "btrfs-16k" else 3)
        flags = matched(report, structure, "levelshift")
        assert flags, measured(report)
        shift = [s for s in report["level_shifts"] if s["index"] == flags[0]["index"]][0]
        assert shift["after_ns"] > 1.2 * shift["before_ns"]  # two leaves and a root: slower
        index[config] = predicted(report, structure)["index"]
    assert index["btrfs-4k"] < index["btrfs-16k"], index  # a smaller leaf fills sooner
