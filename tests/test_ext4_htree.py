"""ext4's directory hash and htree leaf splits computed as the kernel does them
(explain/ext4_htree.py), against a hand-made ext4: debugfs's own hash of names, the block
where the directory's size first grows after the conversion (the first leaf split), and the
number of leaves debugfs's htree_dump lists after many names."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from fsscope.explain.ext4_htree import HASH_NAMES, dirhash, grow
from fsscope.explain.geometry import read_geometry
from fsscope.explain.rules import predict

pytestmark = pytest.mark.privileged

NAME_LENGTH = 7


@pytest.fixture
def hand_made(loop_device, scratch):
    def make(*mkfs_args: str, hash_alg: str) -> tuple[str, Path]:
        dev = loop_device("200M")
        subprocess.run(["mkfs.ext4", "-q", *mkfs_args, dev], check=True, capture_output=True)
        subprocess.run(["tune2fs", "-E", f"hash_alg={hash_alg}", dev], check=True, capture_output=True)
        mnt = scratch / f"mnt-{Path(dev).name}"
        mnt.mkdir()
        subprocess.run(["mount", dev, str(mnt)], check=True)
        return dev, mnt
    return make


def _debugfs(dev: str, request: str) -> str:
    return subprocess.run(["debugfs", "-R", request, dev], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize("block,hash_alg", [(1024, "half_md4"), (2048, "tea")])
def test_exact_leaf_splits_match_the_kernel_and_debugfs(hand_made, block, hash_alg):
    dev, mnt = hand_made("-b", str(block), "-E", "lazy_itable_init=0,lazy_journal_init=0", hash_alg=hash_alg)
    (mnt / "probe").mkdir()
    g = read_geometry("ext4", dev, str(mnt), probe_dir=mnt / "probe", existing=True, sync=False)
    assert g.ext4_hash_seed is not None and HASH_NAMES[g.ext4_hash_version].startswith(hash_alg)
    seed_text = subprocess.run(["dumpe2fs", "-h", dev], capture_output=True, text=True,
                               check=True).stdout.split("Directory Hash Seed:")[1].split()[0]

    def hash_of(name: bytes) -> int:
        return dirhash(name, g.ext4_hash_version, g.ext4_hash_seed)

    for name in (b"0000000", b"0000123", b"lost+found", b"a" * 40):   # debugfs hashes them alike
        said = _debugfs(dev, f"dx_hash -h {hash_alg} -s {seed_text} {name.decode()}")
        assert int(re.search(r"is (0x[0-9a-f]+)", said).group(1), 16) == hash_of(name), (name, said)
    # the probe's names, created one at a time: where the directory's blocks grow
    names = [f"{i:0{NAME_LENGTH}d}".encode() for i in range(1500)]
    blocks = []
    for name in names:
        (mnt / "probe" / name.decode()).touch()
        blocks.append(os.stat(mnt / "probe").st_size // block)
    grew = [i for i in range(1, len(blocks)) if blocks[i] != blocks[i - 1]]
    tree, events = grow(names, block_bytes=block, csum=g.has_csum, hash_of=hash_of)
    assert grew == [i for i, e in enumerate(events) if e in ("convert", "split")]
    # the probe's prediction: the first split after the conversion, exactly
    (split,) = [p for p in predict(g, "creat", NAME_LENGTH, 1500) if p.structure == "ext4-htree-first-leaf-split"]
    assert split.exact and split.index == grew[1] and "exact" in split.tolerance_why
    # and the leaves debugfs finds in the root's index after all of them
    subprocess.run(["sync", "-f", str(mnt)], check=True)
    dump = _debugfs(dev, "htree_dump /probe")
    assert "Indirect levels: 0" in dump
    count = int(re.search(r"Number of entries \(count\): (\d+)", dump).group(1))
    assert count == len(tree.index) == len(tree.leaves) and count > 10
