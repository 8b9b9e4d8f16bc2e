"""Which file or directory each watched call touched, from what the kernel records.

The ``syscalls`` events carry no path, so a call is named from (in this order):

- the file-system events inside its window on its thread: an XFS directory entry added or
  removed (``xfs_dir2_*_addname``/``_removename``: the directory, the name, the entry's
  inode), an XFS lookup that missed the dcache (directory + name), ext4's inode allocation
  (the new inode and its directory) and unlink (inode and parent), a buffered read or write,
  an fsync, a page entering the page cache (the inode);
- inode numbers mapped to paths by a read-only walk of the watched tree when watch attached
  (and again when it stopped, for files made meanwhile), kept current from the entry events;
- descriptors: what ``/proc/PID/fd`` held at attach, then each open seen (its result is the
  descriptor, its window names the file) until the close; ``/proc/PID/fd`` polled while
  watching names inodes that were gone by the end (an SQLite WAL deleted at close).

A call none of these name has no file (``file`` -1) and the report says so. Keys: an inode
number, or for a name known only by directory + name (a lookup) a negative number.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from fsscope.watch.syscalls import BYTE_OPS, OPS
from fsscope.watch.tasks import OpenFile

#: How many entries of the tree the attach walk reads at most (a huge tree is named partly).
WALK_LIMIT = 200_000


@dataclass
class Tree:
    """The watched tree, read without writing (lstat, scandir; never crossing into another
    file system): inode -> path, what each directory holds."""

    root: str
    dev: int
    paths: dict[int, str] = field(default_factory=dict)
    entries: dict[int, int] = field(default_factory=dict)           # dir inode -> names in it
    name_bytes: dict[int, list[int]] = field(default_factory=dict)  # dir inode -> its names' lengths
    parent: dict[int, int] = field(default_factory=dict)            # inode -> its directory's
    sizes: dict[int, int] = field(default_factory=dict)             # inode -> st_size (the op log's starting tree)
    truncated: bool = False

    @classmethod
    def walk(cls, root: str, limit: int = WALK_LIMIT) -> Tree:
        st = os.lstat(root)
        tree = cls(root, st.st_dev)
        tree.paths[st.st_ino] = root
        todo = [(root, st.st_ino)]
        seen = 0
        while todo:
            path, ino = todo.pop()
            try:
                with os.scandir(path) as it:
                    found = list(it)
            except OSError:
                continue
            tree.entries[ino] = len(found)
            tree.name_bytes[ino] = [len(os.fsencode(e.name)) for e in found]
            for entry in found:
                seen += 1
                if seen > limit:
                    tree.truncated = True
                    return tree
                try:
                    est = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if est.st_dev != tree.dev:
                    continue
                tree.paths.setdefault(est.st_ino, entry.path)
                tree.parent.setdefault(est.st_ino, ino)
                tree.sizes.setdefault(est.st_ino, est.st_size)
                if entry.is_dir(follow_symlinks=False):
                    todo.append((entry.path, est.st_ino))
        return tree

    def is_dir(self, ino: int) -> bool:
        return ino in self.entries


@dataclass
class Named:
    """Per call (parallel to the calls array): the file and directory it touched (keys, 0 when
    not named), whether it made a new inode, and for a call that added or removed a name, the
    names in that directory before it (-1: not known)."""

    file: np.ndarray
    dir: np.ndarray
    created: np.ndarray
    entries_before: np.ndarray
    paths: dict[int, str]             # key -> path (what the walks and events named)
    dirs: set[int]                    # keys that are directories

    call_paths: dict[int, str] = field(default_factory=dict)  # call -> its file's name then (a reused inode)

    def path(self, key: int) -> str | None:
        return self.paths.get(key) if key else None

    def file_path(self, call: int) -> str | None:
        """The name of the file call ``call`` touched, as it was named at that time."""
        return self.call_paths.get(call) or self.path(int(self.file[call]))


def _short(names: list[str]) -> list[str]:
    return [n.split("/", 1)[-1] for n in names]


def name_calls(calls: np.ndarray, events: np.ndarray, where: np.ndarray, names: list[str],
               texts: list[str], tree: Tree, *, open_files: list[OpenFile], tgid: dict[int, int],
               fs: str, end_tree: Tree | None = None,
               later_files: list[tuple[int, OpenFile]] | None = None) -> Named:
    """Name every call (see the module docstring). ``where``: for each event, the call it fell
    inside (:func:`fsscope.watch.calls.inside`); ``tgid``: thread -> process (threads share a
    descriptor table); ``end_tree``: the walk at detach; ``later_files``: what the tasks'
    descriptors named while they were watched (``/proc/PID/fd``, polled: when each name was
    first seen, monotonic ns), for files gone by the end; an inode seen under several names
    (deleted, its number reused) is named per call by the name it had then."""
    n = len(calls)
    file = np.zeros(n, np.int64)
    dirk = np.zeros(n, np.int64)
    created = np.zeros(n, bool)
    entries_before = np.full(n, -1, np.int64)
    paths = dict(tree.paths)
    dirs = set(tree.entries)
    parent = dict(tree.parent)
    count = dict(tree.entries)
    lookups: dict[tuple[int, str], int] = {}
    by_path = {p: ino for ino, p in paths.items()}
    short = _short(names)
    ops = [OPS[o] for o in calls["op"]]

    def by_name(d: int, name: str) -> int:
        """A key for ``name`` in directory ``d``: the inode the walk found, else a new one."""
        base = paths.get(d)
        if base is not None and os.path.join(base, name) in by_path:
            return by_path[os.path.join(base, name)]
        key = lookups.setdefault((d, name), -(len(lookups) + 1))
        if base is not None:
            paths.setdefault(key, os.path.join(base, name))
        return key

    per_call: dict[int, list[int]] = defaultdict(list)
    for row in np.flatnonzero(where >= 0).tolist():
        per_call[int(where[row])].append(row)

    fds: dict[tuple[int, int], int] = {(f.pid, f.fd): f.ino for f in open_files if f.dev == tree.dev}
    for f in open_files:
        if f.dev == tree.dev:
            paths.setdefault(f.ino, f.path)
    for i in range(n):
        op, tid = ops[i], int(calls["tid"][i])
        proc = tgid.get(tid, tid)
        seen_dirs: list[int] = []
        seen_files: list[int] = []
        adds: list[tuple[int, int]] = []   # (dir, +1/-1) from the kernel's own entry events
        made = 0                           # the inode a name was added for (a create, a mkdir)
        synced = 0                         # the inode an fsync/fdatasync synced
        for k in per_call.get(i, ()):
            ev = events[k]
            name, d, ino = short[int(ev["code"])], int(ev["arg"]), int(ev["bytes"])
            if name.endswith("_addname") and name.startswith("xfs_dir2_"):
                text = texts[int(ev["sector"])]
                if d in paths and ino:
                    paths[ino] = os.path.join(paths[d], text)
                    by_path[paths[ino]] = ino
                parent[ino] = d
                dirs.add(d)
                adds.append((d, +1))
                seen_dirs.append(d)
                seen_files.append(ino)
                made = made or ino
            elif name.endswith("_removename") and name.startswith("xfs_dir2_"):
                dirs.add(d)
                adds.append((d, -1))
                seen_dirs.append(d)
                seen_files.append(by_name(d, texts[int(ev["sector"])]))
            elif name == "xfs_lookup":
                seen_dirs.append(d)
                seen_files.append(by_name(d, texts[int(ev["sector"])]))
            elif name == "ext4_allocate_inode":
                parent[ino] = d
                dirs.add(d)
                if op == "mkdir":
                    dirs.add(ino)
                created[i] = True
                made = made or ino
                adds.append((d, +1))
                seen_dirs.append(d)
                seen_files.append(ino)
            elif name == "ext4_unlink_enter":
                adds.append((d, -1))
                seen_dirs.append(d)
                seen_files.append(ino)
            elif name == "ext4_mark_inode_dirty":
                (seen_dirs if ino in dirs else seen_files).append(ino)
            elif name in ("ext4_sync_file_enter", "xfs_file_fsync") and ino:
                synced = synced or ino  # a file or a directory (fsync of a directory's descriptor)
            elif name in ("xfs_file_buffered_read",
                          "xfs_file_buffered_write", "ext4_da_write_begin", "ext4_write_begin",
                          "mm_filemap_add_to_page_cache") and ino:
                seen_files.append(ino)
        if op == "mkdir" and made and int(calls["result"][i]) == 0:  # a new directory: empty
            dirs.add(made)
            count.setdefault(made, 0)
        if fs in ("ext4", "ext3", "ext2") and op == "rename" and not adds:
            adds = _ext4_rename(seen_dirs, seen_files, parent)
        if any(name.endswith("_addname") for name in (short[int(events[k]["code"])] for k in per_call.get(i, ()))):
            created[i] = created[i] or op in ("open", "mkdir")
        if adds:  # one name per directory and direction: a conversion fires two addname events
            adds = list(dict.fromkeys(adds))
            d = next((a for a, delta in adds if delta > 0), adds[0][0])
            dirk[i] = d
            if d in count:
                entries_before[i] = count[d]
            for a, delta in adds:
                if a in count:
                    count[a] += delta
            if op == "rename":
                moved = next((f for f in seen_files if f and f not in dirs), 0)
                if moved:
                    parent[moved] = d
        # the file: the descriptor's, else what the kernel named inside
        fd = int(calls["fd"][i])
        key = fds.get((proc, fd), 0) if fd >= 0 else 0
        if not key:
            key = made or synced or next((f for f in seen_files if f and f not in dirs), 0)
        file[i] = key
        if not dirk[i]:
            dirk[i] = parent.get(key, 0) or next((d for d in seen_dirs if d), 0)
        result = int(calls["result"][i])
        if op == "open" and result >= 0:
            fds[(proc, result)] = key
        elif op == "close" and fd >= 0:
            fds.pop((proc, fd), None)
    if end_tree is not None:
        for ino, p in end_tree.paths.items():
            paths.setdefault(ino, p)
        for ino in end_tree.entries:
            dirs.add(ino)
    seen: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for t_ns, f in sorted(later_files or (), key=lambda tf: tf[0]):
        if f.dev == tree.dev and f.path not in (p for _, p in seen[f.ino]):
            seen[f.ino].append((t_ns, f.path))
    call_paths: dict[int, str] = {}
    for ino, names_then in seen.items():
        paths.setdefault(ino, names_then[-1][1])
        if len(names_then) > 1:  # the inode number was reused: the name each call's time had
            times = np.array([t for t, _ in names_then])
            for i in np.flatnonzero(file == ino).tolist():
                end = int(calls["start_ns"][i] + calls["duration_ns"][i])
                call_paths[i] = names_then[max(0, int(np.searchsorted(times, end, side="right")) - 1)][1]
    for (d, name), key in lookups.items():
        if key not in paths and d in paths:
            paths[key] = os.path.join(paths[d], name)
    return Named(file, dirk, created, entries_before, paths, dirs, call_paths)


def _ext4_rename(dirs: list[int], files: list[int], parent: dict[int, int]) -> list[tuple[int, int]]:
    """An ext4 rename has no entry event: the directories it changed are those ext4 marked
    dirty inside it. Between two, the source is the one that held the moved inode."""
    touched = list(dict.fromkeys(d for d in dirs if d))
    if len(touched) == 1:
        return []  # within one directory: the count does not change
    if len(touched) != 2:
        return []
    source = next((parent[f] for f in files if f in parent and parent[f] in touched), None)
    if source is None:
        return []
    target = touched[0] if touched[1] == source else touched[1]
    return [(target, +1), (source, -1)]


def transferred(calls: np.ndarray) -> np.ndarray:
    """Bytes each call moved: a read's, write's or getdents' result when it succeeded."""
    byte_ops = np.isin(calls["op"], [OPS.index(o) for o in BYTE_OPS])
    return np.where(byte_ops & (calls["result"] > 0), calls["result"], 0)
