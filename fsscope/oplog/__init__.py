"""fsscope's op log: a workload's file-system calls as ``fsscope watch --capture LOG`` records
them, for ``fsscope replay`` and for any other tool (this module needs only msgspec).

The file
--------
A gzip stream (RFC 1952; ``zcat`` reads it) of frames. Each frame is a 4-byte little-endian
length, then one record encoded as msgpack by msgspec, tagged by its ``type`` field:

``header`` (first, once)
    ``format`` ("fsscope-oplog"), ``version`` (this reader's :data:`VERSION`; a reader refuses a
    newer one), when and from what it was captured, the file system, whether names were
    anonymized, and in ``kept``/``dropped`` what the log holds of the workload and what it does
    not (file contents are never recorded).
``entry`` (the starting tree, before any ``op``)
    one per directory the calls touched and per name those directories held when the capture
    began (``path`` relative to the watched tree, ``kind`` dir|file, ``size_bytes``) -- from a
    read-only walk at attach.
``op`` (one per call, in order of their start)
    ``seq`` (0, 1, ...), ``tid`` and ``proc`` (the thread and the process whose descriptor
    table it used), ``op`` (watch's name: open, read, write, fsync, rename, ...), ``syscall``
    (openat, pwrite64, ...), ``path`` (relative; for descriptor calls the descriptor's file)
    and ``path2`` (a rename's target), ``fd``, ``flags`` (open flags as the kernel got them,
    O_CREAT/O_SYNC/O_DIRECT/O_APPEND...; lseek's whence), ``offset`` (pread/pwrite/lseek/
    fallocate), ``size`` (bytes asked for), ``result``, ``start_ns`` (since the first call),
    ``duration_ns``, ``think_ns`` (since the same thread's previous call returned) and its parts
    ``think_cpu_ns`` (the thread on its CPU; -1 where its scheduling was not traced, as for a
    thread's first call, or the kernel recorded no switch back to it in the gap) and ``think_sleep_ns`` (asleep; the rest it waited for a CPU), ``file``
    (a number per file, stable across renames; 0 not known) and ``after`` (calls of other
    threads this one depended on: the last change to a name it uses, the open of the
    descriptor it uses).
``end`` (last, once)
    how many entries and ops came before it: a log without it, or whose counts differ, is
    truncated.

Paths are '/'-separated, relative, without '.' or '..' components or NUL ("." alone is the tree); a reader refuses
any other (a log is input: it must not name anything outside the tree it is replayed in).

Reading
-------
:func:`read` returns an :class:`OpLog` (header, entries, ops), :func:`frames` yields the records
one by one. Anything that is not a whole, valid log raises :class:`OpLogError` with one line.
"""

from __future__ import annotations

import gzip
import io
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec

from fsscope.errors import FsscopeError

FORMAT = "fsscope-oplog"
VERSION = 1
#: A frame longer than this is not one fsscope wrote (a corrupted length).
MAX_FRAME_BYTES = 16 << 20
_LEN = struct.Struct("<I")


class OpLogError(FsscopeError):
    """The file is not a whole, valid op log (one line)."""


class Header(msgspec.Struct, frozen=True, kw_only=True, tag="header", tag_field="type"):
    format: str = FORMAT
    version: int = VERSION
    created_utc: str = ""
    source: str = ""                  # what was watched ("" when anonymized)
    tree: str = ""                    # the watched tree's absolute path ("" when anonymized)
    fs: str = ""
    duration_s: float = 0.0
    anonymized: bool = False
    kept: list[str] = []
    dropped: list[str] = []
    threads: dict[str, str] = {}      # tid -> command ({} -> tids only, when anonymized)
    notes: list[str] = []


class Entry(msgspec.Struct, frozen=True, kw_only=True, tag="entry", tag_field="type"):
    path: str
    kind: Literal["dir", "file"]
    size_bytes: int = 0


class Op(msgspec.Struct, frozen=True, kw_only=True, tag="op", tag_field="type"):
    seq: int
    tid: int
    proc: int
    op: str
    syscall: str
    path: str | None = None
    path2: str | None = None
    fd: int = -1
    flags: int = 0
    offset: int | None = None
    size: int = 0
    result: int = 0
    start_ns: int
    duration_ns: int
    think_ns: int = 0
    think_cpu_ns: int = -1            # of think_ns: on the thread's CPU (-1: not known)
    think_sleep_ns: int = 0           # of think_ns: asleep (the rest: runnable, waiting for a CPU)
    file: int = 0
    after: list[int] = []


class End(msgspec.Struct, frozen=True, kw_only=True, tag="end", tag_field="type"):
    entries: int
    ops: int


Frame = Header | Entry | Op | End
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Frame)


@dataclass
class OpLog:
    header: Header
    entries: list[Entry]
    ops: list[Op]

    def threads(self) -> dict[int, list[Op]]:
        """Each thread's calls, in order."""
        out: dict[int, list[Op]] = {}
        for op in self.ops:
            out.setdefault(op.tid, []).append(op)
        return out


def write(path: str | Path, header: Header, entries: Iterable[Entry], ops: Iterable[Op]) -> int:
    """Write a log to ``path`` (a new file, or one replaced); the bytes written."""
    data = to_bytes(header, entries, ops)
    Path(path).write_bytes(data)
    return len(data)


def to_bytes(header: Header, entries: Iterable[Entry], ops: Iterable[Op]) -> bytes:
    buf = io.BytesIO()
    counts = {"entries": 0, "ops": 0}
    # mtime 0: the same calls give the same bytes
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        def put(record: Frame) -> None:
            body = _encoder.encode(record)
            gz.write(_LEN.pack(len(body)) + body)

        put(header)
        for e in entries:
            check_path(e.path)
            put(e)
            counts["entries"] += 1
        for op in ops:
            put(op)
            counts["ops"] += 1
        put(End(**counts))
    return buf.getvalue()


def check_path(path: str | None) -> None:
    """Refuse a path that could name something outside the tree (see the module docstring)."""
    if path is None or path == ".":  # "." is the tree itself
        return
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts) or "\0" in path:
        raise OpLogError(f"not a relative path inside the tree: {path!r}")


def frames(path: str | Path) -> Iterator[Frame]:
    """The log's records in order; OpLogError (one line) where it stops being a valid log."""
    name = str(path)
    try:
        with gzip.open(path, "rb") as gz:
            index = 0
            while True:
                head = gz.read(_LEN.size)
                if not head:
                    return
                if len(head) < _LEN.size:
                    raise OpLogError(f"{name}: truncated (record {index} is cut short)")
                (n,) = _LEN.unpack(head)
                if n > MAX_FRAME_BYTES:
                    raise OpLogError(f"{name}: corrupted (record {index} claims {n} bytes)")
                body = gz.read(n)
                if len(body) < n:
                    raise OpLogError(f"{name}: truncated (record {index} is cut short)")
                try:
                    yield _decoder.decode(body)
                except msgspec.DecodeError as exc:
                    raise OpLogError(f"{name}: corrupted (record {index}: {exc})") from None
                index += 1
    except EOFError:
        raise OpLogError(f"{name}: truncated (the compressed stream ends early)") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise OpLogError(f"{name}: not an fsscope op log or corrupted ({exc})") from None
    except OSError as exc:
        raise OpLogError(f"{name}: cannot read it ({exc.strerror or exc})") from None


def _check_entry(name: str, entry: Entry, kinds: dict[str, str]) -> None:
    """The starting tree must be one replay can make as it reads it: each name once, never the
    tree itself, no name under a file, no file where an earlier name needed a directory (a
    crafted log's "a" as a file and "a/b" beside it stopped replay after it had formatted)."""
    if entry.path == ".":
        raise OpLogError(f"{name}: corrupted (the starting tree lists the tree itself as an entry)")
    known = kinds.get(entry.path)
    if known in ("dir", "file") or (known == "above" and entry.kind == "file"):
        raise OpLogError(f"{name}: corrupted (the starting tree lists {entry.path!r} twice, or as a file "
                         f"with names under it)")
    for above in _ancestors(entry.path):
        if kinds.get(above) == "file":
            raise OpLogError(f"{name}: corrupted (the starting tree lists {entry.path!r} under a file)")
        kinds.setdefault(above, "above")  # a directory recreate makes for it
    kinds[entry.path] = entry.kind


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:k]) for k in range(1, len(parts))]


def read(path: str | Path) -> OpLog:
    """The whole log, checked: header first, entries, ops in order, the end's counts."""
    name = str(path)
    it = frames(path)
    header = next(it, None)
    if not isinstance(header, Header) or header.format != FORMAT:
        raise OpLogError(f"{name}: not an fsscope op log (no header)")
    if header.version > VERSION:
        raise OpLogError(f"{name}: op log version {header.version}; this fsscope reads up to {VERSION}")
    entries: list[Entry] = []
    kinds: dict[str, str] = {}  # the starting tree so far: path -> dir|file|above (made for a name under it)
    ops: list[Op] = []
    end: End | None = None
    for record in it:
        if end is not None:
            raise OpLogError(f"{name}: corrupted (records after the end)")
        if isinstance(record, Entry):
            if ops:
                raise OpLogError(f"{name}: corrupted (a tree entry after the calls)")
            check_path(record.path)
            _check_entry(name, record, kinds)
            entries.append(record)
        elif isinstance(record, Op):
            if record.seq != len(ops):
                raise OpLogError(f"{name}: corrupted (call {len(ops)} is numbered {record.seq})")
            check_path(record.path)
            check_path(record.path2)
            if any(a < 0 or a >= record.seq for a in record.after):
                raise OpLogError(f"{name}: corrupted (call {record.seq} depends on a call that is not before it)")
            ops.append(record)
        elif isinstance(record, End):
            end = record
        else:
            raise OpLogError(f"{name}: corrupted (a second header)")
    if end is None:
        raise OpLogError(f"{name}: truncated (no end record after {len(ops)} call(s))")
    if (end.entries, end.ops) != (len(entries), len(ops)):
        raise OpLogError(f"{name}: corrupted (the end counts {end.ops} calls, the log holds {len(ops)})")
    return OpLog(header, entries, ops)
