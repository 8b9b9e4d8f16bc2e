"""fsscope.study and fsscope.analysis.sensitivity: factor spaces, balanced LHS plans, disk
states, the layout player against filefrag, sensitivity estimators against known answers.

Known answers without trusting fsscope: the space file is the paper's Table 1 (level counts
from anchors §2.3); balance is counted; a synthetic Y with known variance decomposition;
`filefrag -v` (e2fsprogs, its own FIEMAP caller) for the layouts; the requested hole list
for the free-space histogram read back with e2freefrag.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import msgspec
import numpy as np
import pytest

from fsscope import paths, recipes, records
from fsscope.analysis import sensitivity
from fsscope.errors import FsscopeError
from fsscope.layout import freespace
from fsscope.study import diskstate, explore, player
from fsscope.study import space as spaces
from fsscope.study.plan import Plan, Treatment, balanced_lhs
from fsscope.targets.journal import loops_backing

TABLE1_LEVELS = {"DiskSize": 7, "UsedRatio": 4, "FreeSpaceLayout": 6, "CPUCount": 2, "FileSize": 32,
                 "ChunkCount": 1, "InternalDensity": 10, "ChunkOrder": 24, "Fsync": 16, "Sync": 8,
                 "FileCount": 2, "DirectorySpan": 12}


# --- spaces -----------------------------------------------------------------------------------

def test_chopper_space_is_table_1():
    space = spaces.load("chopper", player.EXPLORE_SCHEMA)
    assert {f.name: len(f.levels) for f in space.factors} == TABLE1_LEVELS
    assert space.factor("FileSize").levels[0] == 8192 and space.factor("FileSize").levels[-1] == 256 * 1024
    assert space.factor("DiskSize").levels[-1] == 64 * 2**30
    assert space.factor("InternalDensity").levels == tuple(round(0.2 * i, 10) for i in range(1, 11))
    assert all(s.endswith("1") for s in space.factor("Sync").levels)
    assert sorted(space.factor("ChunkOrder").levels)[0] == "0123"
    assert spaces.load("small", player.EXPLORE_SCHEMA).name == "small"


def test_levels_overridable():
    space = spaces.load("chopper", player.EXPLORE_SCHEMA)
    changed = space.with_levels({"FileSize": "8K,64K", "ChunkOrder": "0123,3210"}, player.EXPLORE_SCHEMA)
    assert changed.factor("FileSize").levels == (8192, 65536)
    assert changed.factor("ChunkOrder").levels == ("0123", "3210")  # not the number 123
    assert changed.factor("CPUCount").levels == (1, 2)
    with pytest.raises(FsscopeError, match="--factor: factors.FileSize\\[0\\].*size"):
        space.with_levels({"FileSize": "big"}, player.EXPLORE_SCHEMA)
    with pytest.raises(FsscopeError, match="--factor Nope: no such factor"):
        space.with_levels({"Nope": "1"}, player.EXPLORE_SCHEMA)


@pytest.mark.parametrize("text, field", [
    ('[factors]\nFileSize = ["8K", "x"]\n', "factors.FileSize[1]"),
    ('[factors]\nFreeSpaceLayout = [1, 9]\n', "factors.FreeSpaceLayout[1]"),
    ('[factors]\nWhat = [1]\n', "factors.What: unknown factor"),
    ('[factors]\nChunkOrder = "shuffled"\n', "factors.ChunkOrder"),
    ('[factors]\nFileSize = {from = "8K", to = "4K", step = "4K"}\n', "factors.FileSize"),
    ('name = "x"\n', "factors: missing"),
    ('[factors\n', "not valid TOML"),
    ('colour = 1\n[factors]\nCPUCount=[1]\n', "unknown key 'colour'"),
])
def test_bad_space_names_the_field(tmp_path, text, field):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(FsscopeError) as info:
        spaces.load(str(path), player.EXPLORE_SCHEMA)
    assert str(path) in str(info.value) and field in str(info.value)


# --- plans ------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [24, 50, 7])
def test_plan_is_balanced_and_reproducible(n):
    counts = [7, 4, 6, 2, 32, 1, 10, 24]
    design = balanced_lhs(n, counts, seed=5)
    for j, levels in enumerate(counts):
        seen = np.bincount(design[:, j], minlength=levels)
        assert seen.max() - seen.min() <= 1, (j, seen)  # every level equally often (floor/ceil)
        assert seen.sum() == n
    assert np.array_equal(design, balanced_lhs(n, counts, seed=5))
    assert not np.array_equal(design, balanced_lhs(n, counts, seed=6))


def test_plan_round_trips_and_names_treatments(tmp_path):
    space = spaces.load("small", player.EXPLORE_SCHEMA)
    plan = Plan.make(space, 6, 3, ("ext4-default", "xfs-default"), repeat=2)
    ids = [t.id for t in plan.treatments()]
    assert len(ids) == 24 == len(set(ids)) and ids[0] == "ext4-default-0-r0" and ids[1] == "ext4-default-0-r1"
    plan.save(tmp_path)
    again = Plan.load(tmp_path)
    assert again.treatments() == plan.treatments()
    with pytest.raises(FsscopeError, match="no plan.json"):
        Plan.load(tmp_path / "nothing")


# --- the explore report: the paper's d-span, per file system ---------------------------------

def _row(t: Treatment, fs: str, spans: list[int], between: int) -> explore.ExploreRow:
    """A treatment's row as a worker returns it: files of the given d-spans, ``between``
    bytes apart on disk (what the span over all files sees)."""
    files = [player.FileLayout(path=f"file{i}", size_bytes=8192, d_span_bytes=s, extents=1, fragments=1,
                               mapped_bytes=8192, layout_score=1.0, d_span_ideal_ratio=s / 8192)
             for i, s in enumerate(spans)]
    return explore.ExploreRow(**msgspec.structs.asdict(t), fs=fs, files=files, d_span_bytes=max(spans),
                              extents=len(spans), layout_score=1.0, d_span_ideal_ratio=max(spans) / 8192,
                              dspan_all_files_bytes=between + spans[-1], layout_score_all_files=9.0)


def test_explore_report_uses_per_file_dspan_and_ranks_each_fs():
    """Two file systems: on ext4 FileSize decides the d-span and repeats land differently; on
    xfs nothing varies but the distance between two files (a second directory in another AG).
    The report's response is per file (xfs's tail is not inflated by the distance between
    files), and every summary exists per file system beside the pooled one."""
    space = spaces.load("small", player.EXPLORE_SCHEMA).with_levels(
        spaces.parse_overrides(["FileSize=8K,256K", "FileCount=1,2", "DiskSize=64M", "UsedRatio=0",
                                "FreeSpaceLayout=6", "CPUCount=1"]), player.EXPLORE_SCHEMA)
    plan = Plan.make(space, 16, 1, ("ext4-default", "xfs-default"), repeat=2)
    rows = []
    for t in plan.treatments():
        f = t.factors
        if t.recipe.startswith("ext4"):
            span = (8192 if f["FileSize"] == 8192 else 300 << 20) + 4096 * (t.repeat * (t.row % 2))
            rows.append(_row(t, "ext4", [span] * f["FileCount"], 0))
        else:  # xfs: each file compact; two files 1 GiB apart
            rows.append(_row(t, "xfs", [8192] * f["FileCount"], (1 << 30) * (f["FileCount"] - 1)))
    rep = explore.report(plan, rows)
    xfs = [t for t in rep.treatments if t.fs == "xfs"]
    assert all(t.d_span_bytes == 8192 for t in xfs)
    assert max(t.dspan_all_files_bytes or 0 for t in xfs) > 1 << 30
    assert set(rep.by_fs) == {"ext4", "xfs"}
    for part in rep.by_fs.values():
        assert part.prioritization and part.tail.levels and part.completed == 32
    ext4, xfs_part = rep.by_fs["ext4"], rep.by_fs["xfs"]
    assert ext4.prioritization[0].factor == "FileSize"
    assert all(p.first_order in (0, None) for p in xfs_part.prioritization)  # nothing varies per file
    assert xfs_part.nondeterminism.changed_share == 0
    assert ext4.nondeterminism.changed_share == pytest.approx(0.5)
    assert rep.nondeterminism.changed_share == pytest.approx(0.25)  # pooled: half of each
    # the notes name each file system's own top factor, and explain the between-files span as what it is
    notes = " ".join(rep.notes)
    assert "On ext4: FileSize drives the d-span most" in notes
    top = ext4.prioritization[0]
    assert top.permutation_p is not None and top.permutation_p < 0.01 and "permutation p = " in notes
    assert "FileCount drives" not in notes and "dspan_all_files_bytes" in notes
    # an undecided tail level says how many of its runs would decide it; a decided one has no such key
    wire = json.loads(records.dumps(rep))
    undecided = [lv for lv in wire["tail"]["levels"] if not lv["significant"]]
    assert undecided and all("runs_to_decide" in lv for lv in undecided)
    assert all("runs_to_decide" not in lv for lv in wire["tail"]["levels"] if lv["significant"])
    # a row recorded before the response was per file (its d_span_bytes spanned both files)
    old = msgspec.structs.replace(rows[-1], dspan_all_files_bytes=None, layout_score_all_files=None,
                                  d_span_bytes=1 << 30)
    fixed = explore.per_file_response(old)
    assert fixed.d_span_bytes == max(f.d_span_bytes for f in old.files) and fixed.dspan_all_files_bytes == 1 << 30


def test_runs_to_decide_a_tail_share():
    """The binomial test just passes at the runs returned, and not one run earlier."""
    from scipy import stats

    n = sensitivity.runs_to_decide_share(0.3, 0.1, 0.05 / 20)
    assert n is not None and 10 < n < 100
    assert stats.binomtest(round(0.3 * n), n, 0.1, alternative="greater").pvalue < 0.05 / 20
    assert stats.binomtest(round(0.3 * (n - 1)), n - 1, 0.1, alternative="greater").pvalue >= 0.05 / 20
    assert sensitivity.runs_to_decide_share(0.1, 0.1, 0.01) is None  # no excess: nothing to decide


# --- sensitivity on known answers -------------------------------------------------------------

def _synthetic(n=4000, seed=2):
    """Y = 4 g(X1) + 2 g(X2) + 0 X3 (+ X4 X5 with pure interaction): every term's variance
    share is known exactly from the level values."""
    design = balanced_lhs(n, [10, 10, 10, 2, 2], seed)
    g = (design[:, :3] - 4.5) / 10  # levels -0.45 .. 0.45, balanced
    s4, s5 = design[:, 3] * 2 - 1, design[:, 4] * 2 - 1  # +-1
    y = 4 * g[:, 0] + 2 * g[:, 1] + 0.5 * s4 * s5
    v = np.var(np.arange(10) / 10)
    total = 16 * v + 4 * v + 0.25
    return design, y, {"S1": 16 * v / total, "S2": 4 * v / total, "S45": 0.25 / total}


def test_first_order_and_interactions_known_indices():
    codes, y, known = _synthetic()
    s = sensitivity.first_order(codes, y)
    assert s[0] == pytest.approx(known["S1"], abs=0.01)
    assert s[1] == pytest.approx(known["S2"], abs=0.01)
    assert s[2] < 0.01 and s[3] < 0.01 and s[4] < 0.01  # X4, X5 act only together
    inter = sensitivity.interactions(codes, y)
    assert inter[3, 4] == pytest.approx(known["S45"], abs=0.01)
    assert abs(inter[0, 1]) < 0.02
    assert sensitivity.top_interactions(codes, y, 1)[0][0] == (3, 4)


def test_salib_rbd_fast_agrees_with_own_estimator():
    codes, y, known = _synthetic()
    x_unit = sensitivity.unit_positions(codes, [10, 10, 10, 2, 2])
    s_salib = sensitivity.salib_first_order(x_unit, y, ["X1", "X2", "X3", "X4", "X5"])
    s_own = sensitivity.first_order(codes, y)
    assert s_salib[0] == pytest.approx(known["S1"], abs=0.05)
    assert s_salib[1] == pytest.approx(known["S2"], abs=0.05)
    assert np.allclose(s_salib[:3], s_own[:3], atol=0.05)


def test_factor_mapping_flags_the_level_that_makes_the_tail():
    design = balanced_lhs(400, [4, 5], seed=1)
    rng = np.random.default_rng(0)
    y = rng.normal(size=400) + 10 * (design[:, 0] == 3)  # level 3 of factor 0 is the tail
    tail = sensitivity.factor_mapping(design, y, 0.9)
    assert tail.tail_share == pytest.approx(0.1, abs=0.01)
    assert tail.levels[0][3][0] > 0.35 and tail.levels[0][3][3]
    assert not any(sig for _, _, _, sig in tail.levels[1].values())
    assert not tail.levels[0][0][3]
    heat = sensitivity.tail_heatmap(design, y, 0, 1)
    assert heat.shape == (4, 5) and heat[3].min() > heat[:3].max()


def test_nondeterminism_share_cdf_and_concentration():
    names = ["A", "B"]
    runs, factors = [], {}
    for row in range(40):
        a, b = row % 2, (row // 2) % 2
        factors[("ext4", row)] = {"A": a, "B": b}
        runs += [("ext4", row, 0, 100), ("ext4", row, 1, 100 + (50 if a == 1 and b == 1 else 0))]
    nd = sensitivity.nondeterminism(runs, factors, names)
    assert nd["pairs"] == 40 and nd["changed_share"] == pytest.approx(0.25)
    assert nd["abs_diff_cdf"][-1] == [50.0, 1.0]
    assert nd["concentrated"][0]["levels"] == [1, 1] and nd["concentrated"][0]["changed_share"] == 1.0


# --- real disk states and layouts -------------------------------------------------------------

@pytest.fixture
def ext4():
    return recipes.load("ext4-default")


def _requested_histogram(holes: np.ndarray) -> np.ndarray:
    idx = np.log2(holes // 4096).astype(int)
    return np.bincount(idx, minlength=30)


@pytest.mark.privileged
@pytest.mark.parametrize("layout", [1, 3])
def test_punched_holes_give_the_requested_free_extent_histogram(tmp_path, ext4, layout):
    state = diskstate.DiskState(ext4, 64 * 2**20, 0.2, layout)
    info = diskstate.build(state, tmp_path / "base.img")
    assert info["holes"] > 10 and info["placeholder_bytes"] == int(64 * 2**20 * 0.2) // 4096 * 4096
    timing: dict = {}
    with diskstate.clone(tmp_path / "base.img", ext4, timing) as mnt:
        device = [d for d in _loops_under(paths.ram_dir())][0]
        measured = freespace.free_space("ext4", device=device, mountpoint=str(mnt))
    holes = diskstate.hole_sizes(layout, info["budget_bytes"])  # what build() punched (same seed)
    assert int(holes.sum()) == info["hole_bytes"]
    requested = _requested_histogram(holes)
    assert measured.block_size_bytes == 4096
    got = np.zeros(30, dtype=int)
    got[:len(measured.bucket_extent_counts)] = measured.bucket_extent_counts
    main = requested >= 20  # size classes with enough holes to compare
    assert main.any()
    # every punched hole is a free extent of its size class; metadata in the punch file's way
    # (block-group headers) splits a few, and the 1 % left over adds a few larger ones
    assert np.all(np.abs(got[main] - requested[main]) <= 0.05 * requested[main] + 3), (got[:12], requested[:12])
    assert set(timing) >= {"clone_s", "mount_s", "release_s"}


def _loops_under(root: Path) -> list[str]:
    out = []
    for img in root.glob("fsscope-study-*.img"):
        out += loops_backing(str(img))
    return out


def _filefrag(path: Path) -> tuple[int, int]:
    """(extent count, d-span bytes) from `filefrag -v`."""
    text = subprocess.run(["filefrag", "-v", str(path)], capture_output=True, text=True, check=True).stdout
    block = int(re.search(r"\((\d+) blocks? of (\d+) bytes\)", text).group(2)) if "blocks of" in text else 4096
    rows = re.findall(r"^\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+)\.\.\s*(\d+):", text, re.M)
    starts = [int(a) for a, _ in rows]
    ends = [int(b) + 1 for _, b in rows]
    return len(rows), (max(ends) - min(starts)) * block


@pytest.mark.privileged
@pytest.mark.parametrize("recipe", ["ext4-default", "xfs-default"])
def test_known_layouts_agree_with_filefrag(tmp_path, recipe):
    r = recipes.load(recipe)
    size = 64 * 2**20 if r.fs == "ext4" else 320 * 2**20
    base = tmp_path / "base.img"
    diskstate.build(diskstate.DiskState(r, size, 0.0, 6), base)
    cases = {
        # written backwards, fsync after every chunk: ext4/xfs allocate each chunk on its own
        "backwards": {"FileSize": 64 * 1024, "ChunkCount": 4, "ChunkOrder": "3210", "Fsync": "1111",
                      "Sync": "0001", "FileCount": 1},
        # two files, chunks interleaved, each chunk fsync'd: their blocks alternate on disk
        "interleaved": {"FileSize": 32 * 1024, "ChunkCount": 4, "ChunkOrder": "0123", "Fsync": "1111",
                        "Sync": "0001", "FileCount": 2},
    }
    for name, factors in cases.items():
        with diskstate.clone(base, r, {}) as mnt:
            result, _ = player.play(mnt, factors, {"dir_depth": 2, "start_level": 1})
            files = sorted(mnt.glob("tree/**/file*"))
            assert len(files) == factors["FileCount"]
            for path, measured in zip(files, sorted(result["files"], key=lambda f: f.path)):
                extents, span = _filefrag(path)
                assert (measured.extents, measured.d_span_bytes) == (extents, span), (name, path)
            if name == "backwards":
                assert result["files"][0].fragments > 1  # not one piece: the pattern shows
            else:
                # Chopper's d-span is per file: the treatment's is its largest file's; the span
                # over the pair (which covers both files) is a metric of its own
                assert result["d_span_bytes"] == max(f.d_span_bytes for f in result["files"])
                assert result["dspan_all_files_bytes"] >= max(2 * 32 * 1024, result["d_span_bytes"])


def test_first_order_is_not_fooled_by_one_run_per_level():
    """24 levels over 24 runs: the plain variance of level means is the whole variance;
    the corrected estimate says it cannot tell, and a pure-noise factor scores about 0."""
    rng = np.random.default_rng(3)
    design = balanced_lhs(24, [24, 2], seed=1)
    y = rng.normal(size=24)
    s = sensitivity.first_order(design, y)
    assert np.isnan(s[0])
    noise = balanced_lhs(2000, [10], seed=2)
    assert abs(sensitivity.first_order(noise, rng.normal(size=2000))[0]) < 0.01


def test_a_top_factor_is_held_to_its_chance_share():
    """A 7-level factor in 24 runs takes a share of the variance by chance alone (the issue's
    "DiskSize explains 26 %" was that): shuffled responses say how much, and the permutation
    p is under 0.05 in about 5 % of null worlds and for a factor that really moves the response."""
    rng = np.random.default_rng(11)
    codes = np.column_stack([rng.integers(0, 7, 24), rng.integers(0, 3, 24)])
    ps = [sensitivity.first_order_chance(codes, rng.lognormal(0, 2, 24), 0, permutations=199)[1] for _ in range(100)]
    assert sum(p < 0.05 for p in ps) <= 9
    driven = np.exp(codes[:, 0] + rng.normal(0, 0.3, 24))
    chance, p = sensitivity.first_order_chance(codes, driven, 0, permutations=199)
    assert p < 0.01 and chance < sensitivity.first_order(codes, driven)[0]


def test_chunk_writes_follow_order_density_and_rounds():
    # 4 chunks of 16 KiB written 3,1,2,0; half of each chunk, its end (the paper: "only the
    # 2KB at the end of each chunk"): the file's last byte is written
    writes = player.chunk_writes(64 * 1024, 4, 0.5, "3120")
    assert writes == [(0, 56 * 1024, 8192), (1, 24 * 1024, 8192), (2, 40 * 1024, 8192), (3, 8 * 1024, 8192)]
    # density 1.5: the whole file once, then the last half of every chunk again (overwrite)
    again = player.chunk_writes(64 * 1024, 4, 1.5, "0123")
    assert [w[2] for w in again] == [16384] * 4 + [8192] * 4 and sum(w[2] for w in again) == 96 * 1024
    assert [w[1] for w in again[4:]] == [8192, 24 * 1024, 40 * 1024, 56 * 1024]
    # a 4-chunk order serves 2 chunks: digits >= the count are skipped
    assert [w[1] for w in player.chunk_writes(8192, 2, 1.0, "3120")] == [4096, 0]


def test_files_spread_over_directory_span(tmp_path):
    tree = player.directory_tree(tmp_path / "t", 4)
    assert len(tree) == 31 and all(d.is_dir() for d in tree)
    level2 = tree[3:]  # breadth-first from level 2
    assert player.file_dirs(tree, 4, 2, 1, 1) == [level2[0]]
    assert player.file_dirs(tree, 4, 2, 5, 1) == [level2[4]]
    assert player.file_dirs(tree, 4, 2, 12, 2) == [level2[0], level2[11]]


def test_rows_read_back_as_records_older_ones_too(tmp_path):
    """treatments.ndjson reads back into the study's row type with the one decoder: a failed
    treatment's row as Failed, a row Python's json wrote with NaN (before the one encoder),
    and a torn last line from a kill ends the rows."""
    from fsscope.study.execute import ROWS_FILE, load_rows
    from fsscope.study.plan import Failed

    t = {"row": 0, "recipe": "ext4-default", "repeat": 0, "factors": {"FileSize": 8192}}
    lines = [json.dumps(t | {"id": "a", "fs": "ext4", "d_span_bytes": 4096, "d_span_ideal_ratio": float("nan")}),
             records.dumps(t | {"id": "b", "error": "RecipeError: mkfs failed"}),
             json.dumps({"id": 7}),  # no row of this study: its treatment runs again
             '{"id": "c", "row": 0, "rec']
    (tmp_path / ROWS_FILE).write_text("\n".join(lines))
    a, b = load_rows(tmp_path, explore.ExploreRow)
    assert isinstance(a, explore.ExploreRow) and a.d_span_bytes == 4096 and a.fs == "ext4"
    assert a.d_span_ideal_ratio is not None and np.isnan(a.d_span_ideal_ratio)
    assert isinstance(b, Failed) and b.error.startswith("RecipeError")
    # written back by the one encoder: NaN is null, and reads back as None
    (tmp_path / ROWS_FILE).write_text(records.dumps(a) + "\n")
    assert load_rows(tmp_path, explore.ExploreRow)[0].d_span_ideal_ratio is None
