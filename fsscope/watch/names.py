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

How many names a directory held before a call is counted from a listing of it on the traced
clock: the walk runs after tracing is on, so every watched call that changed the directory is
in the record, those that ended before its listing in the count, those that began after not.
A call that changed it while it was listed makes that listing unsure; the walk at detach (once
the watched tasks have ended, so no change went untraced) decides it then, else the count is
not known and its format changes get no verdict.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from fsscope.watch.syscalls import BYTE_OPS, F_DUPFD, F_DUPFD_CLOEXEC, OPS
from fsscope.watch.tasks import OpenFile

#: How many entries of the tree the attach walk reads at most (a huge tree is named partly).
WALK_LIMIT = 200_000


@dataclass
class Tree:
    """The watched tree, read without writing (descriptor-relative, O_NOATIME; never crossing
    into another file system nor following a link): inode -> path, what each directory holds."""

    root: str
    dev: int
    paths: dict[int, str] = field(default_factory=dict)
    entries: dict[int, int] = field(default_factory=dict)           # dir inode -> names in it
    name_bytes: dict[int, list[int]] = field(default_factory=dict)  # dir inode -> its names' lengths
    parent: dict[int, int] = field(default_factory=dict)            # inode -> its directory's
    sizes: dict[int, int] = field(default_factory=dict)             # inode -> st_size (the op log's starting tree)
    #: dir inode -> (monotonic ns before, after) its listing: the watched calls that changed it
    #: inside that span make its count unsure; those before it are in the count
    listed_ns: dict[int, tuple[int, int]] = field(default_factory=dict)
    truncated: bool = False
    swapped: list[str] = field(default_factory=list)  # directories swapped during the walk: not followed
    errors: list[str] = field(default_factory=list)

    @classmethod
    def walk(cls, root: str, limit: int = WALK_LIMIT) -> Tree:
        """Every directory under ``root`` (a resolved path) on its file system, never
        redirected: :class:`fsscope.trust.TreeWalk` opens each from its parent's descriptor
        (``O_NOFOLLOW``, device and inode checked against the listing, ``O_NOATIME``); a
        directory swapped meanwhile is not followed and is named in ``swapped``."""
        from fsscope import trust

        walker = trust.TreeWalk(root)
        walk = iter(walker)
        tree = cls(root, 0)
        seen = 0
        try:
            while True:
                before = time.monotonic_ns()  # the listing happens inside next(): bracket it
                listed = next(walk, None)
                if listed is None:
                    break
                after = time.monotonic_ns()
                ino = listed.st.st_ino
                if not tree.dev:
                    tree.dev = listed.st.st_dev
                    tree.paths[ino] = root
                tree.listed_ns[ino] = (before, after)
                tree.entries[ino] = len(listed.entries)
                tree.name_bytes[ino] = [len(os.fsencode(e.name)) for e in listed.entries]
                for entry in listed.entries:
                    seen += 1
                    if seen > limit:
                        tree.truncated = True
                        return tree
                    try:
                        est = entry.stat(follow_symlinks=False)  # fstatat on the listed descriptor
                    except OSError:
                        continue
                    if est.st_dev != tree.dev:
                        continue
                    path = os.path.join(listed.path, entry.name)
                    tree.paths.setdefault(est.st_ino, path)
                    tree.parent.setdefault(est.st_ino, ino)
                    tree.sizes.setdefault(est.st_ino, est.st_size)
        finally:
            walk.close()  # type: ignore[attr-defined]  # the descriptors still open
            tree.swapped, tree.errors = walker.swapped, walker.errors
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
    unsure: set[int] = field(default_factory=set)  # dirs changed while every usable listing read them

    call_paths: dict[int, str] = field(default_factory=dict)  # call -> its file's name then (a reused inode)

    def path(self, key: int) -> str | None:
        return self.paths.get(key) if key else None

    def file_path(self, call: int) -> str | None:
        """The name of the file call ``call`` touched, as it was named at that time."""
        return self.call_paths.get(call) or self.path(int(self.file[call]))


def _short(names: list[str]) -> list[str]:
    return [n.split("/", 1)[-1] for n in names]


def name_calls(calls: np.ndarray, events: np.ndarray, where: np.ndarray, names: list[str],
               texts: list[str], tree: Tree, *, open_files: list[OpenFile], open_files_ns: int | None = None,
               tgid: dict[int, int],
               fs: str, end_tree: Tree | None = None, end_settled: bool = False,
               later_files: list[tuple[int, OpenFile]] | None = None) -> Named:
    """Name every call (see the module docstring). ``where``: for each event, the call it fell
    inside (:func:`fsscope.watch.calls.inside`); ``open_files_ns``: when ``open_files`` were read
    (tracing on): what they say holds again from then, over the opens and closes traced before
    it (None: read before tracing began); ``tgid``: thread -> process (threads share a
    descriptor table); ``end_tree``: the walk at detach (``end_settled``: the watched tasks had
    ended by then, so its counts can decide a directory the first walk was unsure of); ``later_files``: what the tasks'
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
    changes: dict[int, list[tuple[int, int]]] = {}  # call -> the names it added (+1) or removed (-1) per dir
    made_dirs: dict[int, int] = {}                  # call -> the directory a mkdir made
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
    at_attach = {(f.pid, f.fd): f.ino for f in open_files if f.dev == tree.dev}
    for i in range(n):
        if open_files_ns is not None and int(calls["start_ns"][i]) >= open_files_ns:
            fds.update(at_attach)  # the descriptors as /proc listed them, from when it did
            open_files_ns = None
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
            made_dirs[i] = made
        if fs in ("ext4", "ext3", "ext2") and op == "rename" and not adds:
            adds = _ext4_rename(seen_dirs, seen_files, parent)
        if any(name.endswith("_addname") for name in (short[int(events[k]["code"])] for k in per_call.get(i, ()))):
            created[i] = created[i] or op in ("open", "mkdir")
        if adds:  # one name per directory and direction: a conversion fires two addname events
            adds = list(dict.fromkeys(adds))
            d = next((a for a, delta in adds if delta > 0), adds[0][0])
            dirk[i] = d
            changes[i] = adds
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
        elif makes_fd(op, int(calls["flags"][i])) and result >= 0:  # dup2 over an open one replaces it
            if fds.get((proc, fd)):
                fds[(proc, result)] = fds[(proc, fd)]
            else:
                fds.pop((proc, result), None)
    unsure = _entries_before(calls, changes, made_dirs, dirk, entries_before,
                             [tree] + ([end_tree] if end_tree is not None and end_settled else []))
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
    return Named(file, dirk, created, entries_before, paths, dirs, unsure, call_paths)


def _entries_before(calls: np.ndarray, changes: dict[int, list[tuple[int, int]]], made_dirs: dict[int, int],
                    dirk: np.ndarray, entries_before: np.ndarray, listings: list[Tree]) -> set[int]:
    """Fill ``entries_before`` for each call that changed a directory: the names it held when
    tracing began, from the first listing no watched change overlapped (those that ended
    before it are in its count), then each change in call order. Returns the directories no
    listing could count (changed while each was being listed)."""
    start = calls["start_ns"]
    end = start + calls["duration_ns"]
    by_dir: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for i, adds in changes.items():
        for d, delta in adds:
            by_dir[d].append((i, delta))
    count: dict[int, int] = {}
    unsure: set[int] = set()
    made = set(made_dirs.values())
    for d, rows in by_dir.items():
        if d in made:
            continue  # made while watched: counted from its making (empty), no listing needed
        for listing in listings:
            if d not in listing.listed_ns:
                continue
            t0, t1 = listing.listed_ns[d]
            if any(start[i] < t1 and end[i] > t0 for i, _ in rows):
                continue  # a watched call changed it while it was listed: that count is unsure
            count[d] = listing.entries[d] - sum(delta for i, delta in rows if end[i] <= t0)
            break
        else:
            if any(d in listing.listed_ns for listing in listings):
                unsure.add(d)
    for i in sorted(set(changes) | set(made_dirs)):
        if i in made_dirs:  # made here: empty
            count[made_dirs[i]] = 0
        d = int(dirk[i])
        if i in changes and d in count:
            entries_before[i] = count[d]
        for a, delta in changes.get(i, ()):
            if a in count:
                count[a] += delta
    return unsure


def makes_fd(op: str, flags: int) -> bool:
    """The call returns a new descriptor for its descriptor's file (dup, dup2, dup3,
    fcntl F_DUPFD/F_DUPFD_CLOEXEC; ``flags`` holds fcntl's command)."""
    return op == "dup" or (op == "fcntl" and flags in (F_DUPFD, F_DUPFD_CLOEXEC))


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
