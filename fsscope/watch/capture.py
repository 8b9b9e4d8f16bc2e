"""``watch --capture``: the watched calls as an op log (:mod:`fsscope.oplog`) that ``fsscope
replay`` plays again on other file systems.

Each call gets the path it used *at the time* (the names module keeps only the last one):
XFS's directory-entry events inside the call name what it added or removed, so a file made
in ``tmp/`` and renamed into ``new/`` is opened as ``tmp/NAME`` and renamed from there; other
calls use the path their file or descriptor had then. ext4 records no names, only the
directory of a create (``ext4_allocate_inode``) and of a rename's target: such a call gets its
file's name at the end of the watch in that directory (a maildir file keeps its name from
``tmp/`` to ``new/``; one renamed to another name is not followed), and the log's notes say
how many calls were named that way. Dependencies between threads (ARTC's rule, Weiss et al. FAST '13): a
call waits for the last change another thread made to a name it uses (or to a directory
above it), and for the last use of its descriptor by another thread.

``--anonymize`` replaces every name with a pseudonym of the same byte length from a keyed
hash (HMAC-SHA256, a key made for this capture and not kept): directory formats, which
depend on name lengths, replay the same; the names cannot be recovered from the log.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections import defaultdict

import numpy as np

from fsscope import oplog
from fsscope.errors import FsscopeError
from fsscope.watch.names import Named, Tree, makes_fd
from fsscope.watch.sched import off_cpu, parts
from fsscope.watch.syscalls import OPS, syscall_codes
from fsscope.watch.tasks import OpenFile

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
#: Ops that change what a name refers to: a later call on that name waits for them.
NAMING_OPS = frozenset({"mkdir", "unlink", "rmdir", "rename"})


class Pseudonyms:
    """Every name -> a stable pseudonym of the same byte length (distinct names stay distinct)."""

    def __init__(self, key: bytes | None = None):
        self.key = key if key is not None else os.urandom(32)
        self.of: dict[str, str] = {}
        self.used: set[str] = set()

    def name(self, name: str) -> str:
        if name in self.of:
            return self.of[name]
        length = len(os.fsencode(name))
        salt = 0
        while True:
            stream = b""
            block = 0
            while len(stream) < length:
                stream += hmac.new(self.key, f"{salt}:{block}:".encode() + os.fsencode(name), hashlib.sha256).digest()
                block += 1
            fake = "".join(ALPHABET[b % len(ALPHABET)] for b in stream[:length])
            if fake not in self.used and fake not in (".", ".."):
                break
            salt += 1  # a collision between two names of the same length: try the next
        self.of[name] = fake
        self.used.add(fake)
        return fake

    def path(self, path: str | None) -> str | None:
        if path is None or path == ".":
            return path
        return "/".join(self.name(part) for part in path.split("/"))


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:k]) for k in range(1, len(parts))]


def think_parts(spans: np.ndarray | None, begin: int, end: int) -> tuple[int, int]:
    """Of the gap [begin, end) between a thread's calls: (on its CPU, asleep) in ns; the rest
    it was runnable and waited for a CPU (a load the replaying machine makes its own).
    (-1, 0), not known: the thread's scheduling was not traced (None), or the gap holds a span
    whose return the kernel did not record (how it divides between waiting and work is not
    known; the replay then keeps the whole think time). A sleep whose wake-up was recorded but
    not its return keeps its sleep, and the time from the wake-up to the thread's next event
    counts as work (waiting or running: the replay spins it, so keeps the whole gap)."""
    if spans is None:
        return -1, 0
    if end <= begin:
        return 0, 0
    p = parts(spans, begin, end)
    if p.unknown_ns > p.after_wake_ns:
        return -1, 0
    # the spans are disjoint (off_cpu), so off <= the gap; the bounds keep a part within it all the same
    off = min(p.known_ns, end - begin)
    return end - begin - off, min(p.asleep_ns, off)


def build(calls: np.ndarray, events: np.ndarray, where: np.ndarray, names: list[str], texts: list[str],
          tree: Tree, named: Named, *, tgid: dict[int, int], open_files: list[OpenFile]
          ) -> tuple[list[oplog.Entry], list[oplog.Op], list[str]]:
    """The starting tree's entries, the calls as log ops, and notes on what could not be named."""
    root = tree.root.rstrip("/") or "/"

    def rel(path: str | None) -> str | None:
        if path is None:
            return None
        if path == root:
            return "."
        if path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1:]
        return None

    def join(base: str | None, name: str) -> str | None:
        if base is None or not name or "/" in name or name in (".", ".."):
            return None
        return name if base == "." else f"{base}/{name}"

    cur: dict[int, str] = {}
    for ino, p in tree.paths.items():
        r = rel(p)
        if r is not None:
            cur[ino] = r
    for f in open_files:
        r = rel(f.path)
        if r is not None and f.dev == tree.dev:
            cur.setdefault(f.ino, r)
    final = {k: r for k, p in named.paths.items() if (r := rel(p)) is not None}
    _, _, syscall = syscall_codes(names)
    short = [n.split("/", 1)[-1] for n in names]
    per_call: dict[int, list[int]] = defaultdict(list)
    for row in np.flatnonzero(where >= 0).tolist():
        per_call[int(where[row])].append(row)
    offsets = _offsets(calls, events, syscall)

    file_ids: dict[int, int] = {}
    fds: dict[tuple[int, int], int] = {(f.pid, f.fd): f.ino for f in open_files if f.dev == tree.dev}
    last_name: dict[str, tuple[int, int]] = {}       # path -> (tid, seq) of the last change to it
    last_fd: dict[tuple[int, int], tuple[int, int]] = {}
    prev_end: dict[int, int] = {}
    spans = off_cpu(events, names)
    t0 = int(calls["start_ns"].min()) if len(calls) else 0
    ops: list[oplog.Op] = []
    late_names = unnamed = 0
    for i in range(len(calls)):
        c = calls[i]
        op, tid = OPS[int(c["op"])], int(c["tid"])
        proc = tgid.get(tid, tid)
        sc = syscall.get(int(c["code"]))
        adds, removes, looks, dirtied = [], [], [], []
        for k in per_call.get(i, ()):
            ev = events[k]
            name = short[int(ev["code"])]
            if name.startswith("xfs_dir2_") and name.endswith("_addname"):
                adds.append((int(ev["arg"]), texts[int(ev["sector"])], int(ev["bytes"])))
            elif name.startswith("xfs_dir2_") and name.endswith("_removename"):
                removes.append((int(ev["arg"]), texts[int(ev["sector"])]))
            elif name == "xfs_lookup":
                looks.append((int(ev["arg"]), texts[int(ev["sector"])]))
            elif name == "ext4_mark_inode_dirty":
                dirtied.append(int(ev["bytes"]))
        fd = int(c["fd"])
        key = int(named.file[i])
        if fd >= 0 and (proc, fd) in fds:
            key = fds[(proc, fd)]
        path = path2 = None
        if op == "rename" and not removes and key not in cur:
            # ext4: the moved file is among the inodes the rename changed; the one with a name
            key = next((ino for ino in dirtied if ino in cur and ino not in named.dirs), key)
        if op == "rename":
            path = join(cur.get(removes[0][0]), removes[0][1]) if removes else cur.get(key)
            path2 = join(cur.get(adds[0][0]), adds[0][1]) if adds else None
            if path2 is None and key in final:
                path2, late_names = _name_in(final.get(key), cur.get(int(named.dir[i]))) or final[key], late_names + 1
            if path2 is not None and key:
                cur[key] = path2
        elif adds and op in ("open", "mkdir"):
            path = join(cur.get(adds[0][0]), adds[0][1])
        elif removes and op in ("unlink", "rmdir"):
            path = join(cur.get(removes[0][0]), removes[0][1])
        elif op in ("open", "mkdir") and bool(named.created[i]) and key not in cur and key in final:
            path, late_names = _name_in(final.get(key), cur.get(int(named.dir[i]))) or final[key], late_names + 1
            cur[key] = path
        else:
            path = cur.get(key) if key else None
            if path is None and looks:
                path = join(cur.get(looks[0][0]), looks[0][1])
            if path is None and key in final:
                path, late_names = final[key], late_names + 1
        if path is None and op not in ("close",):
            unnamed += 1
        for d, name, ino in adds:
            made = join(cur.get(d), name)
            if made is not None and ino:
                cur[ino] = made
        if key and key not in file_ids:
            file_ids[key] = len(file_ids) + 1
        result = int(c["result"])
        # what this call waits for: the last change to its names (and the directories above
        # them) by another thread, and the last use of its descriptor by another thread
        after: dict[int, int] = {}
        used = [p for p in (path, path2) if p is not None and p != "."]
        for p in {q for u in used for q in (u, *_parents(u))}:
            if p in last_name and last_name[p][0] != tid:
                t, s = last_name[p]
                after[t] = max(after.get(t, -1), s)
        if fd >= 0 and (proc, fd) in last_fd and last_fd[(proc, fd)][0] != tid:
            t, s = last_fd[(proc, fd)]
            after[t] = max(after.get(t, -1), s)
        changes = result >= 0 and (op in NAMING_OPS or (op == "open" and bool(adds or named.created[i])))
        if changes:
            for p in used:
                last_name[p] = (tid, i)
        if op == "open" and result >= 0:
            fds[(proc, result)] = key
            last_fd[(proc, result)] = (tid, i)
        elif fd >= 0:
            last_fd[(proc, fd)] = (tid, i)
            if op == "close":
                fds.pop((proc, fd), None)
            elif makes_fd(op, int(c["flags"])) and result >= 0:  # the new descriptor names the same file
                if (proc, fd) in fds:
                    fds[(proc, result)] = fds[(proc, fd)]
                else:
                    fds.pop((proc, result), None)
                last_fd[(proc, result)] = (tid, i)
        start = int(c["start_ns"])
        flags = int(c["flags"])
        if sc is not None and sc.name == "creat":
            flags = os.O_CREAT | os.O_WRONLY | os.O_TRUNC
        # the think time's own parts, where the thread's scheduling was traced (not before its
        # first call: the thread may not have existed yet)
        cpu, slept = think_parts(spans.get(tid), prev_end[tid], start) if spans is not None and tid in prev_end \
            else (-1, 0)
        ops.append(oplog.Op(
            seq=i, tid=tid, proc=proc, op=op, syscall=sc.name if sc else op, path=path, path2=path2,
            fd=fd, flags=flags, offset=offsets.get(i), size=int(c["bytes"]), result=result,
            start_ns=start - t0, duration_ns=int(c["duration_ns"]),
            think_ns=max(0, start - prev_end.get(tid, t0)), think_cpu_ns=cpu, think_sleep_ns=slept,
            file=file_ids.get(key, 0),
            after=sorted(after.values())))
        prev_end[tid] = start + int(c["duration_ns"])
    entries = _starting_tree(tree, ops, rel)
    notes = []
    if late_names:
        notes.append(f"{late_names} call(s) named by their file's name when the watch ended, in the directory "
                     f"the kernel named at the call (ext4 records no names: a file renamed to another name "
                     f"is not followed)")
    if unnamed:
        notes.append(f"{unnamed} call(s) without a path: replay skips those that need one")
    if tree.truncated:
        notes.append("the watched tree was walked only partly at attach: the starting tree may lack entries")
    return entries, ops, notes


def _offsets(calls: np.ndarray, events: np.ndarray, syscall: dict) -> dict[int, int]:
    """The file position each call named (its entry event's ``sector`` column), by call index."""
    codes = [code for code, s in syscall.items() if s.offset]
    if not len(calls) or not codes:
        return {}
    ev = events[np.isin(events["code"], codes)]
    at = {(int(e["pid"]), int(e["ts_ns"]), int(e["code"])): int(e["sector"]) for e in ev}
    out = {}
    for i in np.flatnonzero(np.isin(calls["code"], codes)).tolist():
        c = calls[i]
        pos = at.get((int(c["tid"]), int(c["start_ns"]), int(c["code"])))
        if pos is not None:
            out[i] = pos - (1 << 64) if pos >= 1 << 63 else pos  # loff_t: signed
    return out


def _name_in(last: str | None, directory: str | None) -> str | None:
    """ext4 names no entry: a file's last name (at the end of the watch), in the directory the
    kernel named at the call."""
    if last is None or directory is None:
        return last
    name = last.rsplit("/", 1)[-1]
    return name if directory == "." else f"{directory}/{name}"


def _starting_tree(tree: Tree, ops: list[oplog.Op], rel) -> list[oplog.Entry]:
    """Each directory the calls touched, as it was at attach: the directories above it and
    every name it held, with sizes."""
    by_rel = {r: ino for ino, p in tree.paths.items() if (r := rel(p)) is not None}
    touched: set[str] = set()
    for op in ops:
        for p in (op.path, op.path2):
            if p is None or p == ".":
                continue
            touched.update(_parents(p))
            if by_rel.get(p) in tree.entries:
                touched.add(p)
    touched.add(".")
    out: dict[str, oplog.Entry] = {}
    for d in sorted(touched):
        ino = by_rel.get(d)
        if ino is None or ino not in tree.entries:
            continue  # made during the watch: the calls make it
        for a in [*_parents(d), d] if d != "." else []:
            out.setdefault(a, oplog.Entry(path=a, kind="dir", size_bytes=tree.sizes.get(by_rel.get(a, -1), 0)))
        for child, parent in tree.parent.items():
            if parent != ino or child not in tree.paths:
                continue
            r = rel(tree.paths[child])
            if r is None:
                continue
            out.setdefault(r, oplog.Entry(path=r, kind="dir" if child in tree.entries else "file",
                                          size_bytes=tree.sizes.get(child, 0)))
    return sorted(out.values(), key=lambda e: (e.path.count("/"), e.path))


def anonymized(entries: list[oplog.Entry], ops: list[oplog.Op], pseudonyms: Pseudonyms
               ) -> tuple[list[oplog.Entry], list[oplog.Op]]:
    import msgspec

    return ([msgspec.structs.replace(e, path=pseudonyms.path(e.path)) for e in entries],
            [msgspec.structs.replace(o, path=pseudonyms.path(o.path), path2=pseudonyms.path(o.path2)) for o in ops])


def header(*, source: str, tree: str, fs: str, duration_s: float, comms: dict[int, str], anonymize: bool,
           notes: list[str]) -> oplog.Header:
    kept = ["each call's kind, system call, flags, file position, size, result, start, duration and think time",
            "the threads' order and the dependencies between them",
            "the starting tree of the directories the calls touched: "
            + ("name lengths and sizes" if anonymize else "names and sizes")]
    dropped = ["file contents (replay writes a fixed pattern of the recorded sizes)"]
    if anonymize:
        dropped += ["names: each replaced by a pseudonym of the same byte length (a keyed hash; the key "
                    "is not kept)", "what was watched, the tree's path and the threads' commands"]
    else:
        kept.append("names, what was watched and the threads' commands")
    return oplog.Header(
        created_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), source="" if anonymize else source,
        tree="" if anonymize else tree, fs=fs, duration_s=duration_s, anonymized=anonymize, kept=kept,
        dropped=dropped, threads={str(t): ("" if anonymize else c) for t, c in sorted(comms.items())},
        notes=notes)


def write_capture(ctx, spec, calls: np.ndarray, recorded, where: np.ndarray, named: Named, tree: Tree,
                  watched, fs: str, open_files: list[OpenFile]) -> str:
    """Build the log, keep it in the run record (``oplog.gz``), write it where --capture asked
    (checked as --json is); the report's note saying so."""
    from pathlib import Path

    from fsscope import trust

    entries, ops, notes = build(calls, recorded.events, where, recorded.names, recorded.texts, tree, named,
                                tgid=watched.tgid, open_files=open_files)
    if spec.anonymize:
        entries, ops = anonymized(entries, ops, Pseudonyms())
    head = header(source=watched.label, tree=tree.root, fs=fs, duration_s=round(recorded.duration_s, 3),
                  comms={t: watched.comms.get(t, "") for t in sorted({o.tid for o in ops})},
                  anonymize=spec.anonymize, notes=notes)
    data = oplog.to_bytes(head, entries, ops)
    kept = Path(ctx.run_dir.path) / "oplog.gz"
    kept.write_bytes(data)
    try:
        trust.write_output(spec.capture, data, "--capture")
        written = spec.capture
    except (FsscopeError, OSError) as exc:  # the report and the log are kept all the same
        written = f"{kept} (not to {spec.capture}: {exc})"
    return (f"op log: {len(ops)} call(s) and a starting tree of {len(entries)} entries written to "
            f"{written}" + (" (names anonymized)" if spec.anonymize else "") + "".join(f"; {n}" for n in notes))
