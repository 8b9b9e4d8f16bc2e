"""The aged tree on disk: the ager's files found by a walk, and the file system's usage."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from fsscope.aging import fit
from fsscope.aging.planner import Planner
from fsscope.aging.state import STATE_FILE


def walk_aged_tree(root: Path, planner: Planner
                   ) -> tuple[list[tuple[int, int, int, int]], int, int]:
    """The ager's files under ``root`` as (born, size bucket, depth bucket, sibling).

    Also returns how many other files there are (ignored) and the files' logical bytes.
    """
    index = planner.dir_index()
    bucket_bytes = np.array(planner.size_bytes)
    files: list[tuple[int, int, int, int]] = []
    sizes: list[int] = []
    foreign = 0
    root_str = str(root)
    for dir_path, _dir_names, file_names in os.walk(root_str):
        rel_dir = os.path.relpath(dir_path, root_str)
        rel_dir = "" if rel_dir == "." else rel_dir
        place = index.get(rel_dir)
        for name in file_names:
            if rel_dir == "" and name.startswith(STATE_FILE):
                continue
            if place is None or not name.isdigit():
                foreign += 1
                continue
            try:
                st = os.lstat(os.path.join(dir_path, name))
            except OSError:
                continue
            files.append((int(name), 0, place[0], place[1]))
            sizes.append(st.st_size)
    if files:
        buckets = fit.size_bucket_index(np.array(sizes), bucket_bytes)
        files = [(b, int(s), d, j) for (b, _, d, j), s in zip(files, buckets)]
    return files, foreign, int(sum(sizes))


def measure(root: Path) -> tuple[int, int, int]:
    """(total bytes, used bytes, fragment size) of the file system holding ``root``."""
    vfs = os.statvfs(root)
    return vfs.f_blocks * vfs.f_frsize, (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize, vfs.f_frsize
