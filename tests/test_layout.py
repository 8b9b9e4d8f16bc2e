"""fsscope.layout: FIEMAP extents and Chopper's metrics on real files (ext4, xfs, btrfs), and
free-space histograms of real file systems, plus the parsers on real captured tool output.

What makes a layout known without trusting fsscope's own reader: two files written block by
block in alternation, each block fsync'd, must interleave (so each has one fragment per block
and a d-span of at least 2n-1 blocks); a file written in one go on a fresh file system is one
piece; fallocate must show unwritten extents; free space must add up to what statvfs (or
``btrfs filesystem usage``) says; deleting every other small file must leave more free extents.
"""

from __future__ import annotations

import itertools
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

from fsscope.errors import FsscopeError
from fsscope.layout import fiemap, freespace
from fsscope.layout.fiemap import EXTENT_DTYPE
from fsscope.layout.probe_file import probe_file_layout, write_test_file
from fsscope.tools import run

FS_RECIPES = ["ext4-default", "xfs-default", "btrfs-default"]
FS_SIZE_BYTES = 512 * 2**20
BLOCK = 4096


def ext_array(rows: list[tuple[int, int, int, int]]) -> np.ndarray:
    return np.array(rows, dtype=EXTENT_DTYPE)


# --- pure metrics --------------------------------------------------------------------------

def test_fragments_merge_physically_adjacent_extents():
    exts = ext_array([(0, 1000 * BLOCK, 4 * BLOCK, 0),
                      (4 * BLOCK, 1004 * BLOCK, 4 * BLOCK, fiemap.FIEMAP_EXTENT_UNWRITTEN),  # adjacent
                      (8 * BLOCK, 2000 * BLOCK, 2 * BLOCK, 0),                               # jump
                      (20 * BLOCK, 2002 * BLOCK, 1 * BLOCK, fiemap.FIEMAP_EXTENT_LAST)])      # hole, adjacent
    assert fiemap.fragments(exts) == 2
    assert fiemap.physical_runs(exts).tolist() == [[1000 * BLOCK, 8 * BLOCK], [2000 * BLOCK, 3 * BLOCK]]
    assert fiemap.d_span_bytes(exts) == 2003 * BLOCK - 1000 * BLOCK


def test_unplaced_extents_do_not_count():
    exts = ext_array([(0, 0, BLOCK, fiemap.FIEMAP_EXTENT_DELALLOC | fiemap.FIEMAP_EXTENT_UNKNOWN),
                      (BLOCK, 50 * BLOCK, BLOCK, 0),
                      (2 * BLOCK, 7 * BLOCK, 60, fiemap.FIEMAP_EXTENT_DATA_INLINE | fiemap.FIEMAP_EXTENT_LAST)])
    assert fiemap.fragments(exts) == 1
    assert fiemap.d_span_bytes(exts) == BLOCK
    assert fiemap.fragments(ext_array([])) == 0 and fiemap.d_span_bytes(ext_array([])) == 0


def test_d_span_over_several_files_is_chopper_dspan():
    a = ext_array([(0, 10 * BLOCK, BLOCK, 1)])
    b = ext_array([(0, 90 * BLOCK, 2 * BLOCK, 1)])
    assert fiemap.d_span_bytes(fiemap.concat([a, b])) == 92 * BLOCK - 10 * BLOCK


def brute_layout_index(sector_sets: list[range]) -> float:
    sectors = sorted({s for r in sector_sets for s in r})
    total = sum(abs(x - y) for x, y in itertools.combinations(sectors, 2))
    n = len(sectors)
    ideal = sum(abs(x - y) for x, y in itertools.combinations(range(n), 2))
    return total / ideal


def test_layout_index_matches_chopper_formulas_and_brute_force():
    # Chopper: inside an extent n(n-1)(n+1)/6; between m and n sectors with gap k: m*n*(m+n+2k)/2.
    # m=2, n=3, k=4: 1 + 4 + 39 = 44; ideal for 5 sectors: 20.
    exts = ext_array([(0, 0, 2 * 512, 0), (4096, (2 + 4) * 512, 3 * 512, 1)])
    assert fiemap.layout_index(exts) == pytest.approx(44 / 20)
    rng = np.random.default_rng(7)
    for _ in range(20):
        starts = np.sort(rng.choice(200, size=4, replace=False)) * 3
        lengths = rng.integers(1, 6, size=4)
        rows = [(i * 10**6, int(s) * 512, int(n) * 512, 0) for i, (s, n) in enumerate(zip(starts, lengths))]
        want = brute_layout_index([range(int(s), int(s + n)) for s, n in zip(starts, lengths)])
        assert fiemap.layout_index(ext_array(rows)) == pytest.approx(want)
    assert fiemap.layout_index(ext_array([(0, 512 * 77, 512 * 1000, 1)])) == 1.0


def test_flag_names():
    assert fiemap.flag_names(0x801) == ["last", "unwritten"]
    assert fiemap.flag_names(0x200 | 0x100 | 0x1) == ["last", "not_aligned", "inline"]
    assert fiemap.flag_names(0x40000) == ["0x40000"]


def test_fiemap_on_tmpfs_says_not_supported():
    if fiemap.fs_type_of("/dev/shm") != "tmpfs":
        pytest.skip("/dev/shm is not tmpfs here")
    with tempfile.NamedTemporaryFile(dir="/dev/shm") as handle:
        handle.write(b"x" * 5000)
        handle.flush()
        with pytest.raises(FsscopeError, match=r"\(tmpfs\) does not support FIEMAP"):
            fiemap.extents(handle.name)


# --- parsers on real captured output -------------------------------------------------------

TOOL_OUTPUT = Path(__file__).parent / "fixtures" / "tool_output"  # as the tools printed it, byte for byte

# e2freefrag 1.47 on a 512 MiB ext4 after 400 files of 12 KiB were written and every other
# one deleted (statvfs at that moment: 116882 free 4 KiB blocks).
E2FREEFRAG_AGED = (TOOL_OUTPUT / "e2freefrag-aged.txt").read_text()

# e2freefrag on a fresh 64 MiB ext4 with 1 KiB blocks.
E2FREEFRAG_1K = (TOOL_OUTPUT / "e2freefrag-1k-blocks.txt").read_text()

# e2freefrag on a fresh 20 GiB ext4 (G units).
E2FREEFRAG_20G_TAIL = (TOOL_OUTPUT / "e2freefrag-20g-tail.txt").read_text()


def test_parse_e2freefrag_aged():
    h = freespace.parse_e2freefrag(E2FREEFRAG_AGED)
    assert h.fs == "ext4" and h.block_size_bytes == 4096
    assert h.free_extent_count == 201 == sum(h.bucket_extent_counts)
    assert h.total_free_bytes == 116578 * 4096 == sum(h.bucket_free_bytes)
    assert h.largest_free_extent_bytes == 130812 * 1024
    assert h.smallest_free_extent_bytes == 12 * 1024
    assert h.mean_free_extent_bytes == pytest.approx(116578 * 4096 / 201)
    assert h.bucket_lower_bytes[:3] == (4096, 8192, 16384)
    assert h.bucket_upper_bytes[-1] == 128 * 2**20
    assert h.bucket_extent_counts == (0, 186, 7, 0, 0, 0, 1, 2, 0, 0, 1, 0, 0, 0, 4)


def test_parse_e2freefrag_1k_blocks_and_gigabyte_buckets():
    h = freespace.parse_e2freefrag(E2FREEFRAG_1K)
    assert h.block_size_bytes == 1024 and h.bucket_lower_bytes[0] == 1024
    assert dict(zip(h.bucket_lower_bytes, h.bucket_extent_counts))[2 * 2**20] == 1
    assert h.total_free_bytes == 56023 * 1024 == sum(h.bucket_free_bytes)
    big = freespace.parse_e2freefrag(E2FREEFRAG_20G_TAIL)
    assert big.bucket_lower_bytes[-1] == 2**30 and big.bucket_extent_counts[-1] == 9
    assert sum(big.bucket_extent_counts) == big.free_extent_count == 20


def test_parse_e2freefrag_rejects_garbage():
    with pytest.raises(FsscopeError, match="e2freefrag output not understood"):
        freespace.parse_e2freefrag("e2freefrag: Bad magic number in super-block\n")


# xfs_spaceman 6.1 -c "freesp -s -d" on a fresh 512 MiB xfs (4 AGs).
XFS_SPACEMAN_FRESH = (TOOL_OUTPUT / "xfs_spaceman-freesp-fresh.txt").read_text()

# xfs_db -r -c "freesp -s -d" on the same device (reads on-disk AGFs: AGFL blocks show up).
XFS_DB_FRESH = (TOOL_OUTPUT / "xfs_db-freesp-fresh.txt").read_text()


def test_parse_xfs_freesp_spaceman_and_db():
    h = freespace.parse_xfs_freesp(XFS_SPACEMAN_FRESH, 4096)
    assert h.free_extent_count == 5 and h.total_free_bytes == 114640 * 4096
    assert h.largest_free_extent_bytes == 32758 * 4096 and h.smallest_free_extent_bytes == 6 * 4096
    assert h.mean_free_extent_bytes == pytest.approx(22928 * 4096)
    assert h.bucket_extent_counts == (0, 0, 1) + (0,) * 10 + (1, 3)
    assert sum(h.bucket_free_bytes) == h.total_free_bytes
    db = freespace.parse_xfs_freesp(XFS_DB_FRESH, 4096)
    assert db.free_extent_count == 21 and db.bucket_extent_counts[0] == 16


def test_parse_xfs_freesp_refuses_summary_without_extent_list():
    summary_only = XFS_SPACEMAN_FRESH.split("   from")[1]
    with pytest.raises(FsscopeError, match="was -d given"):
        freespace.parse_xfs_freesp("   from" + summary_only, 4096)


# btrfs-progs 6.2 dump-tree -t chunk / -t extent of a fresh 256 MiB btrfs.
BTRFS_CHUNK_FRESH = (TOOL_OUTPUT / "btrfs-dump-tree-chunk-fresh.txt").read_text()

# The start of a real extent tree (a 512 MiB btrfs with 300 000-byte files), cut after item 4.
BTRFS_EXTENT_HEAD = (TOOL_OUTPUT / "btrfs-dump-tree-extent-head.txt").read_text()


def test_parse_btrfs_chunk_tree_and_free_extents_of_fresh_fs():
    chunks, devices = freespace.parse_btrfs_chunk_tree(BTRFS_CHUNK_FRESH)
    assert devices == {1: 268435456}
    assert [(c.logical_bytes, c.length_bytes, c.profile) for c in chunks] == [
        (13631488, 8388608, "SINGLE"), (22020096, 8388608, "DUP"), (30408704, 33554432, "DUP")]
    assert chunks[2].stripes == ((1, 38797312), (1, 72351744))
    lengths, unallocated = freespace.btrfs_free_extents(chunks, devices, np.zeros((0, 2), np.int64))
    # Whole data chunk free; device holes [1 MiB, 13 MiB) and [101 MiB, 256 MiB).
    assert sorted(lengths.tolist()) == [8388608, 12582912, 268435456 - 105906176]
    # dev item: total - bytes_used = unallocated + the reserved first MiB
    assert unallocated == 268435456 - 92274688 - 2**20


def test_parse_btrfs_extent_tree_and_gaps_in_data_chunk():
    allocated = freespace.parse_btrfs_extent_tree(BTRFS_EXTENT_HEAD, 16384)
    assert allocated.tolist() == [[13631488, 303104], [13934592, 303104], [14540800, 303104],
                                  [22036480, 16384]]
    chunks, devices = freespace.parse_btrfs_chunk_tree(BTRFS_CHUNK_FRESH)
    lengths, _ = freespace.btrfs_free_extents(chunks, {}, allocated)
    data_end = 13631488 + 8388608
    assert lengths.tolist() == [14540800 - 14237696, data_end - (14540800 + 303104)]


def test_histogram_grid():
    h = freespace.histogram_from_lengths("x", np.array([4096, 8191, 8192, 5 * 2**20]), 4096, source="t")
    assert h.bucket_extent_counts[:3] == (2, 1, 0)  # [4 KiB, 8 KiB) holds 4096 and 8191
    assert freespace.bucket_index(np.array([2**45 - 1, 2**45]), 1).tolist() == [44, 45]
    assert h.bucket_lower_bytes[-1] == 4 * 2**20 and h.bucket_extent_counts[-1] == 1
    assert h.largest_free_extent_bytes == 5 * 2**20 and h.free_extent_count == 4
    empty = freespace.histogram_from_lengths("x", np.array([], np.int64), 4096, source="t")
    assert empty.free_extent_count == 0 and empty.mean_free_extent_bytes == 0.0
    assert h.to_dict()["bucket_extent_counts"][:3] == [2, 1, 0]


def test_free_space_not_available_for_other_fs():
    with pytest.raises(FsscopeError, match="not available for f2fs"):
        freespace.free_space("f2fs", device="/dev/null")


# --- real files on real file systems -------------------------------------------------------

def write_interleaved(path_a: str, path_b: str, blocks: int) -> None:
    """Block i of A, then block i of B, each fsync'd: the allocator must interleave them."""
    buf = os.urandom(BLOCK)
    fds = [os.open(p, os.O_WRONLY | os.O_CREAT, 0o644) for p in (path_a, path_b)]
    try:
        for i in range(blocks):
            for fd in fds:
                os.pwrite(fd, buf, i * BLOCK)
                os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)


@pytest.mark.privileged
@pytest.mark.parametrize("recipe", FS_RECIPES)
def test_file_layouts_on_real_fs(fresh_fs, recipe):
    fs = fresh_fs(recipe, size_bytes=FS_SIZE_BYTES)
    work = fs.workdir

    # One write on a fresh fs: one piece, d-span = its size, Chopper index 1.
    contiguous = write_test_file(work, 2**20, 2**20, name="contiguous")
    exts = fiemap.extents(contiguous)
    assert fiemap.fragments(exts) == 1, exts
    assert fiemap.d_span_bytes(exts) == 2**20 and fiemap.layout_index(exts) == 1.0
    assert exts["flags"][-1] & fiemap.FIEMAP_EXTENT_LAST

    # Interleaved: the two files' blocks alternate on disk, so each file is cut into many
    # fragments. How many is the allocator's choice (ext4's mballoc sometimes gives a file two
    # adjacent blocks), so count where the next logical extent does not continue physically.
    n = 16
    write_interleaved(f"{work}/a", f"{work}/b", n)
    ea, eb = fiemap.extents(f"{work}/a"), fiemap.extents(f"{work}/b")
    for e in (ea, eb):
        starts, ends = e["physical_bytes"], e["physical_bytes"] + e["length_bytes"]
        breaks = int((starts[1:] != ends[:-1]).sum())  # in logical (file) order
        assert fiemap.fragments(e) == breaks + 1 >= 3, e
        assert fiemap.d_span_bytes(e) == int(ends.max() - starts.min()) > n * BLOCK
        assert fiemap.layout_index(e) > 1.2
    both = fiemap.concat([ea, eb])
    assert fiemap.d_span_bytes(both) >= 2 * n * BLOCK

    # Holes: two extents at the written offsets, only the written bytes mapped.
    holes = f"{work}/holes"
    fd = os.open(holes, os.O_WRONLY | os.O_CREAT, 0o644)
    os.pwrite(fd, os.urandom(65536), 0)
    os.pwrite(fd, os.urandom(65536), 10 * 65536)
    os.close(fd)
    summary = fiemap.layout_summary(holes)
    eh = fiemap.extents(holes)
    assert eh["logical_bytes"].tolist() == [0, 655360]
    assert summary["mapped_bytes"] == 131072 and summary["size_bytes"] == 11 * 65536
    assert summary["d_span_bytes"] >= 131072

    # fallocate: allocated but unwritten.
    fa = f"{work}/fallocated"
    fd = os.open(fa, os.O_WRONLY | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, 4 * 2**20)
    os.close(fd)
    summary = fiemap.layout_summary(fa)
    assert summary["unwritten_bytes"] == 4 * 2**20 == summary["mapped_bytes"]
    assert "unwritten" in summary["flags_seen"]


@pytest.mark.privileged
@pytest.mark.parametrize("recipe", FS_RECIPES)
def test_many_extents_are_read_in_batches(fresh_fs, recipe):
    fs = fresh_fs(recipe, size_bytes=FS_SIZE_BYTES)
    path = fs.workdir / "sparse"
    buf = os.urandom(BLOCK)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for i in range(2500):  # a hole after every block: one extent per block
            os.pwrite(fd, buf, 2 * i * BLOCK)
        whole = fiemap.extents_of_fd(fd)
        batched = fiemap.extents_of_fd(fd, batch_extents=7)
    finally:
        os.close(fd)
    assert np.array_equal(whole, batched)
    # xfs turns its speculative preallocation into unwritten extents in the holes (and past
    # EOF); the written ones are exactly the 2500 blocks.
    written = whole[(whole["flags"] & fiemap.FIEMAP_EXTENT_UNWRITTEN) == 0]
    assert written["logical_bytes"].tolist() == [2 * i * BLOCK for i in range(2500)]
    assert (written["length_bytes"] == BLOCK).all()
    assert int(whole["flags"][-1]) & fiemap.FIEMAP_EXTENT_LAST
    assert not (whole["flags"][:-1] & fiemap.FIEMAP_EXTENT_LAST).any()


def expected_free_bytes(fs) -> tuple[int, str]:
    """What the kernel says is free, in the same sense as each histogram, and why."""
    st = os.statvfs(fs.mountpoint)
    if fs.fs == "xfs":  # statvfs hides the reserve pool, which freesp sees as free
        resblks = int(re.search(r"reserved blocks = (\d+)", run("xfs_io", "-x", "-c", "resblks",
                                                                fs.mountpoint)).group(1))
        return (st.f_bfree + resblks) * st.f_frsize, "statvfs f_bfree + xfs reserve pool"
    if fs.fs == "btrfs":  # data-chunk free + unallocated = what df shows as available
        return st.f_bavail * st.f_frsize, "statvfs f_bavail"
    return st.f_bfree * st.f_frsize, "statvfs f_bfree"


def make_holes(mountpoint: str, directory, count: int, size_bytes: int) -> None:
    """``count`` small files, synced, then every other one deleted: ~count/2 small holes."""
    os.makedirs(directory)
    buf = os.urandom(size_bytes)
    for i in range(count):
        with open(f"{directory}/{i:05d}", "wb") as handle:
            handle.write(buf)
    freespace.syncfs(mountpoint)  # allocated side by side before any is deleted
    for i in range(0, count, 2):
        os.unlink(f"{directory}/{i:05d}")


@pytest.mark.privileged
@pytest.mark.parametrize("recipe", FS_RECIPES)
def test_free_space_histogram_fresh_then_holed(fresh_fs, recipe):
    fs = fresh_fs(recipe, size_bytes=FS_SIZE_BYTES)
    fresh = freespace.free_space_of(fs)
    assert fresh.fs == fs.fs and fresh.free_extent_count >= 1
    assert sum(fresh.bucket_extent_counts) == fresh.free_extent_count
    assert sum(fresh.bucket_free_bytes) == fresh.total_free_bytes
    assert fresh.largest_free_extent_bytes <= fresh.total_free_bytes
    want, what = expected_free_bytes(fs)
    # ext4: mballoc preallocations; xfs: per-AG reservations; btrfs: global reserve.
    assert abs(fresh.total_free_bytes - want) <= 0.02 * FS_SIZE_BYTES, (fresh, want, what)
    if fs.fs == "btrfs":
        usage = run("btrfs", "filesystem", "usage", "-b", fs.mountpoint)
        unallocated = int(re.search(r"Device unallocated:\s+(\d+)", usage).group(1))
        assert fresh.unallocated_bytes == unallocated - freespace.BTRFS_DEVICE_RESERVED_BYTES

    make_holes(fs.mountpoint, fs.workdir / "small", 600, 3 * BLOCK)
    holed = freespace.free_space_of(fs)
    assert holed.free_extent_count >= fresh.free_extent_count + 200, (fresh, holed)
    small = sum(c for lo, c in zip(holed.bucket_lower_bytes, holed.bucket_extent_counts)
                if lo <= 3 * BLOCK)
    assert small >= 200, holed
    assert holed.total_free_bytes < fresh.total_free_bytes
    want, what = expected_free_bytes(fs)
    assert abs(holed.total_free_bytes - want) <= 0.02 * FS_SIZE_BYTES, (holed, want, what)

    # The large test file of the aging report: pieces add up, file removed afterwards.
    probe = probe_file_layout(fs.workdir, 64 * 2**20, 2**20)
    assert probe.fragment_count >= 1 and sum(probe.run_lengths_bytes) == 64 * 2**20
    assert probe.d_span_bytes >= 64 * 2**20
    assert not os.path.exists(probe.path)
