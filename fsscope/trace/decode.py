"""Decode ``trace_pipe_raw`` pages into one compact numpy record per event.

The binary ring-buffer format (``events/header_page``, ``events/header_event``; kernel
``ring_buffer.c``): a sub-buffer starts with a u64 timestamp and a u64 ``commit`` (data
length; bit 31 set when events were lost before this page), then events. Each event starts
with a u32 ``type_len:5 | time_delta:27``:

- 1..28: data of ``type_len * 4`` bytes follows; 0: the next u32 is the length (+4 for
  itself), data after it; the event's time is the running time + ``time_delta``;
- 29 padding (``time_delta`` 0: the rest of the page is empty), 30 time extend (running
  time += ``array[0] << 27 | time_delta``), 31 absolute time stamp (same encoding).

An event's data starts with the common fields (``common_type`` u16 at 0, ``common_pid`` s32
at 4), then its own fields at the offsets its ``format`` file gives. Only the fields the
catalog maps to record columns are read, so a record is 48 bytes whatever the event. A string
field the catalog names in ``texts`` (a ``char[N]`` such as a block request's ``comm``, or a
``__data_loc`` string such as an XFS directory entry's name, whose u32 holds its length << 16
| its offset in the event) is kept once in ``Decoded.texts``; the record's column holds its
index there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fsscope.trace.catalog import CatalogEvent

#: One event. ``code`` indexes the run's event-name list; ``run`` the traced run (probe) or 0.
EVENT_DTYPE = np.dtype([("ts_ns", "<i8"), ("run", "<i2"), ("code", "<i2"), ("cpu", "<i2"),
                        ("flags", "<u2"), ("pid", "<i4"), ("dev", "<u4"), ("sector", "<u8"),
                        ("bytes", "<u8"), ("arg", "<i8")])

PAGE_HEADER_BYTES = 16
_MISSED_EVENTS = 1 << 31
_COMMIT_FLAGS = (1 << 31) | (1 << 30)
_PADDING, _TIME_EXTEND, _TIME_STAMP = 29, 30, 31

# blk_fill_rwbs(): [F=preflush] op (W R D N, F=flush op, DE secure erase) then F=FUA A S M.
RWBS_READ, RWBS_WRITE, RWBS_DISCARD, RWBS_FLUSH = 1, 2, 4, 8
RWBS_FUA, RWBS_SYNC, RWBS_META, RWBS_AHEAD = 16, 32, 64, 128
_OPS = {"R": RWBS_READ, "W": RWBS_WRITE, "D": RWBS_DISCARD, "N": 0, "F": RWBS_FLUSH}
_AFTER = {"F": RWBS_FUA, "S": RWBS_SYNC, "M": RWBS_META, "A": RWBS_AHEAD, "E": RWBS_DISCARD}


def rwbs_bits(rwbs: str) -> int:
    """Flag bits of a block request's RWBS string ("FWFS": preflush, write, FUA, sync)."""
    bits, i = 0, 0
    if len(rwbs) > 1 and rwbs[0] == "F" and rwbs[1] in _OPS:
        bits |= RWBS_FLUSH  # REQ_PREFLUSH before the op letter
        i = 1
    if i < len(rwbs):
        bits |= _OPS.get(rwbs[i], 0)
        i += 1
    for ch in rwbs[i:]:
        bits |= _AFTER.get(ch, 0)
    return bits


@dataclass(frozen=True)
class Field:
    offset: int
    size: int
    signed: bool
    text: bool  # char[] (e.g. rwbs)
    data_loc: bool = False  # __data_loc char[]: the u32 is (length << 16) | offset


_FIELD_RE = re.compile(r"field:(?P<decl>[^;]+);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);"
                       r"\s*signed:(?P<signed>\d)")


def parse_format(text: str) -> tuple[int, dict[str, Field]]:
    """(event id, {field name: Field}) from an ``events/SYS/EVENT/format`` file; ValueError
    when the text has no ``ID:`` line (not a format file)."""
    found = re.search(r"^ID:\s*(\d+)", text, re.M)
    if found is None:
        raise ValueError("no 'ID:' line: not an event format file")
    event_id = int(found.group(1))
    fields = {}
    for m in _FIELD_RE.finditer(text):
        decl = m.group("decl").strip()
        name = re.sub(r"\[.*\]$", "", decl.split()[-1])
        fields[name] = Field(int(m.group("off")), int(m.group("size")), m.group("signed") == "1",
                             "char" in decl and "[" in decl and "__data_loc" not in decl,
                             "__data_loc" in decl)
    return event_id, fields


@dataclass(frozen=True)
class EventLayout:
    code: int
    entry: CatalogEvent
    columns: tuple[tuple[str, Field], ...]  # (record column, kernel field)
    comm: Field | None = None  # sched_switch's next_comm: who took the CPU
    texts: tuple[tuple[str, Field], ...] = ()  # (record column, string field): index in Decoded.texts


def layouts(events_dir: Path, entries: list[CatalogEvent]) -> dict[int, EventLayout]:
    """Event id -> how to decode it, for the catalog entries (``code`` = position in
    ``entries``). Entries whose format file is missing or unreadable are skipped."""
    out = {}
    for code, entry in enumerate(entries):
        try:
            event_id, fields = parse_format((Path(events_dir) / entry.event / "format").read_text())
        except (OSError, ValueError):
            continue
        cols = tuple((col, fields[name]) for col, name in entry.columns.items() if name in fields)
        texts = tuple((col, fields[name]) for col, name in entry.texts.items() if name in fields)
        out[event_id] = EventLayout(code, entry, cols, fields.get("next_comm"), texts)
    return out


@dataclass
class Decoded:
    events: np.ndarray          # EVENT_DTYPE, time-sorted
    comms: dict[int, str]       # pid -> command name, from sched_switch
    pages_with_loss: int        # pages the kernel marked "events missed before this one"
    texts: list[str] = field(default_factory=list)  # strings of ``texts`` columns, each once
    #: where each loss was, as (after, before) ns: the events missed on a CPU fell between its
    #: last event kept (0: none) and the marked page's time stamp
    losses: list[tuple[int, int]] = field(default_factory=list)


def _walk(raw: bytes, page_bytes: int) -> tuple[list[int], list[int], list[tuple[int, int]]]:
    """The serial part: each data event's start offset and timestamp (headers only), and
    where events were missed (see :attr:`Decoded.losses`)."""
    words = memoryview(raw)[: len(raw) // 4 * 4].cast("I")
    starts: list[int] = []
    stamps: list[int] = []
    losses: list[tuple[int, int]] = []
    for base in range(0, len(raw) - PAGE_HEADER_BYTES + 1, page_bytes):
        w = base // 4
        ts = words[w] | (words[w + 1] << 32)
        commit = words[w + 2] | (words[w + 3] << 32)
        if commit & _MISSED_EVENTS:
            losses.append((stamps[-1] if stamps else 0, ts))
        end = w + 4 + min(commit & ~_COMMIT_FLAGS & 0xFFFFFFFF, page_bytes - PAGE_HEADER_BYTES) // 4
        i = w + 4
        while i < end:
            header = words[i]
            type_len, delta = header & 0x1F, header >> 5
            if type_len == 0:  # long event: the next word is its length (+4 for itself)
                ts += delta
                starts.append((i + 2) * 4)
                stamps.append(ts)
                i += 1 + words[i + 1] // 4
            elif type_len <= 28:
                ts += delta
                starts.append((i + 1) * 4)
                stamps.append(ts)
                i += 1 + type_len
            elif type_len == _PADDING:
                if delta == 0:
                    break
                i += 1 + words[i + 1] // 4
            elif type_len == _TIME_EXTEND:
                ts += (words[i + 1] << 27) | delta
                i += 2
            else:  # _TIME_STAMP: absolute
                ts = (words[i + 1] << 27) | delta
                i += 2
    return starts, stamps, losses


def _gather(raw_u8: np.ndarray, starts: np.ndarray, f: Field) -> np.ndarray:
    """Field ``f`` of the events starting at ``starts``, vectorised (unaligned-safe)."""
    idx = starts[:, None] + f.offset + np.arange(f.size)
    chunk = np.ascontiguousarray(raw_u8[idx])
    if f.text:
        return chunk
    kind = "i" if f.signed else "u"
    if f.size not in (1, 2, 4, 8):
        return np.zeros(len(starts), np.int64)
    return chunk.view(f"<{kind}{f.size}").reshape(-1)


def _texts(chunk: np.ndarray) -> list[str]:
    return [bytes(row).split(b"\0", 1)[0].decode("ascii", "replace") for row in chunk]


def _strings(raw_u8: np.ndarray, at: np.ndarray, f: Field) -> list[str]:
    """A string field of the events starting at ``at``: a char[N] in place, or a __data_loc
    string where its u32 points."""
    if not f.data_loc:
        return _texts(_gather(raw_u8, at, f))
    locs = _gather(raw_u8, at, Field(f.offset, 4, False, False)).astype(np.int64)
    out = []
    for start, loc in zip(at.tolist(), locs.tolist()):
        begin = start + (loc & 0xFFFF)
        out.append(bytes(raw_u8[begin:begin + (loc >> 16)]).split(b"\0", 1)[0].decode("utf-8", "replace"))
    return out


def decode_pages(raw: bytes, cpu: int, table: dict[int, EventLayout], *, page_bytes: int = 4096,
                 run: int = 0, texts: list[str] | None = None) -> Decoded:
    """Every event of ``raw`` (whole pages from one CPU's trace_pipe_raw) found in ``table``:
    one serial walk over the headers, then each event type's fields gathered at once.
    ``texts``: the list string columns index into (shared by several calls; a new one if None)."""
    texts = [] if texts is None else texts
    interned = {text: i for i, text in enumerate(texts)}
    starts_list, stamps, losses = _walk(raw, page_bytes)
    lost = len(losses)
    if not starts_list:
        return Decoded(np.zeros(0, EVENT_DTYPE), {}, lost, texts, losses)
    raw_u8 = np.frombuffer(raw, dtype=np.uint8)
    starts = np.asarray(starts_list, dtype=np.int64)
    types = _gather(raw_u8, starts, Field(0, 2, False, False))
    parts: list[np.ndarray] = []
    comms: dict[int, str] = {}
    for event_id, layout in table.items():
        rows = np.flatnonzero(types == event_id)
        if len(rows) == 0:
            continue
        at = starts[rows]
        out = np.zeros(len(rows), EVENT_DTYPE)
        out["ts_ns"] = np.asarray(stamps, dtype=np.int64)[rows]
        out["run"], out["code"], out["cpu"] = run, layout.code, cpu
        out["pid"] = _gather(raw_u8, at, Field(4, 4, True, False))
        for col, f in layout.columns:
            values = _gather(raw_u8, at, f)
            if f.text:  # rwbs: a handful of distinct strings
                bits = {text: rwbs_bits(text) for text in set(_texts(values))}
                values = np.array([bits[t] for t in _texts(values)], dtype=np.int64)
            if col == "flags":
                values = values.astype(np.int64) & 0xFFFF
            out[col] = values.astype(out.dtype[col], copy=False) if col != "arg" else values.astype(np.int64)
        if layout.entry.event == "block/block_rq_complete":
            out["bytes"] *= 512  # nr_sector -> bytes
        if layout.comm is not None:
            names = _texts(_gather(raw_u8, at, layout.comm))
            for pid, name in zip(out["arg"].tolist(), names):
                comms.setdefault(int(pid), name)
        for col, f in layout.texts:
            out[col] = [interned.setdefault(text, len(interned)) for text in _strings(raw_u8, at, f)]
        parts.append(out)
    texts[len(texts):] = list(interned)[len(texts):]
    events = np.concatenate(parts) if parts else np.zeros(0, EVENT_DTYPE)
    return Decoded(events, comms, lost, texts, losses)


def decode_files(paths: dict[int, Path], events_dir: Path, entries: list[CatalogEvent], *,
                 run: int = 0) -> Decoded:
    """Decode every CPU's raw file and merge them into one time-sorted record."""
    table = layouts(events_dir, entries)
    parts, comms, lost = [], {}, 0
    texts: list[str] = []
    losses: list[tuple[int, int]] = []
    for cpu, path in sorted(paths.items()):
        decoded = decode_pages(Path(path).read_bytes(), cpu, table, run=run, texts=texts)
        parts.append(decoded.events)
        comms.update(decoded.comms)
        lost += decoded.pages_with_loss
        losses += decoded.losses
    events = np.concatenate(parts) if parts else np.zeros(0, EVENT_DTYPE)
    events = events[np.argsort(events["ts_ns"], kind="stable")]
    return Decoded(events, comms, lost, texts, sorted(losses))
