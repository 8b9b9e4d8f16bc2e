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
catalog maps to record columns are read, so a record is 48 bytes whatever the event.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
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


def rwbs_text(bits: int) -> str:
    """Readable flags: "W FLUSH FUA SYNC"."""
    names = [("R", RWBS_READ), ("W", RWBS_WRITE), ("DISCARD", RWBS_DISCARD), ("FLUSH", RWBS_FLUSH),
             ("FUA", RWBS_FUA), ("SYNC", RWBS_SYNC), ("META", RWBS_META), ("AHEAD", RWBS_AHEAD)]
    return " ".join(name for name, bit in names if bits & bit)


@dataclass(frozen=True)
class Field:
    offset: int
    size: int
    signed: bool
    text: bool  # char[] (e.g. rwbs)


_FIELD_RE = re.compile(r"field:(?P<decl>[^;]+);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);"
                       r"\s*signed:(?P<signed>\d)")


def parse_format(text: str) -> tuple[int, dict[str, Field]]:
    """(event id, {field name: Field}) from an ``events/SYS/EVENT/format`` file."""
    event_id = int(re.search(r"^ID:\s*(\d+)", text, re.M).group(1))
    fields = {}
    for m in _FIELD_RE.finditer(text):
        decl = m.group("decl").strip()
        name = re.sub(r"\[.*\]$", "", decl.split()[-1])
        fields[name] = Field(int(m.group("off")), int(m.group("size")), m.group("signed") == "1",
                             "char" in decl and "[" in decl and "__data_loc" not in decl)
    return event_id, fields


@dataclass(frozen=True)
class EventLayout:
    code: int
    entry: CatalogEvent
    columns: tuple[tuple[str, Field], ...]  # (record column, kernel field)
    comm: Field | None = None  # sched_switch's next_comm: who took the CPU


def layouts(events_dir: Path, entries: list[CatalogEvent]) -> dict[int, EventLayout]:
    """Event id -> how to decode it, for the catalog entries (``code`` = position in
    ``entries``). Entries whose format file is missing are skipped."""
    out = {}
    for code, entry in enumerate(entries):
        try:
            text = (Path(events_dir) / entry.event / "format").read_text()
        except OSError:
            continue
        event_id, fields = parse_format(text)
        cols = tuple((col, fields[name]) for col, name in entry.columns.items() if name in fields)
        out[event_id] = EventLayout(code, entry, cols, fields.get("next_comm"))
    return out


_SIZES = {1: "B", 2: "H", 4: "I", 8: "Q"}


def _read_field(data: bytes, f: Field):
    if f.text:
        return data[f.offset:f.offset + f.size].split(b"\0", 1)[0].decode("ascii", "replace")
    fmt = _SIZES.get(f.size)
    if fmt is None:
        return 0
    return struct.unpack_from("<" + (fmt.lower() if f.signed else fmt), data, f.offset)[0]


@dataclass
class Decoded:
    events: np.ndarray          # EVENT_DTYPE, time-sorted
    comms: dict[int, str]       # pid -> command name, from sched_switch
    pages_with_loss: int        # pages the kernel marked "events missed before this one"


def decode_pages(raw: bytes, cpu: int, table: dict[int, EventLayout], *, page_bytes: int = 4096,
                 run: int = 0) -> Decoded:
    """Every event of ``raw`` (whole pages from one CPU's trace_pipe_raw) found in ``table``."""
    rows: list[tuple] = []
    comms: dict[int, str] = {}
    lost = 0
    u32, u64 = struct.Struct("<I"), struct.Struct("<Q")
    common = struct.Struct("<HBBi")
    for base in range(0, len(raw) - PAGE_HEADER_BYTES + 1, page_bytes):
        ts = u64.unpack_from(raw, base)[0]
        commit = u64.unpack_from(raw, base + 8)[0]
        if commit & _MISSED_EVENTS:
            lost += 1
        end = base + PAGE_HEADER_BYTES + min(commit & ~_COMMIT_FLAGS & 0xFFFFFFFF,
                                             page_bytes - PAGE_HEADER_BYTES)
        off = base + PAGE_HEADER_BYTES
        while off + 4 <= end:
            header = u32.unpack_from(raw, off)[0]
            type_len, delta = header & 0x1F, header >> 5
            if type_len == _PADDING:
                if delta == 0:
                    break
                off += 4 + u32.unpack_from(raw, off + 4)[0]
                continue
            if type_len == _TIME_EXTEND:
                ts += (u32.unpack_from(raw, off + 4)[0] << 27) | delta
                off += 8
                continue
            if type_len == _TIME_STAMP:
                ts = (u32.unpack_from(raw, off + 4)[0] << 27) | delta
                off += 8
                continue
            if type_len == 0:
                length = u32.unpack_from(raw, off + 4)[0] - 4
                start, off = off + 8, off + 8 + length
            else:
                length = type_len * 4
                start, off = off + 4, off + 4 + length
            ts += delta
            data = raw[start:start + length]
            if len(data) < 8:
                continue
            event_type, _flags, _preempt, pid = common.unpack_from(data, 0)
            layout = table.get(event_type)
            if layout is None:
                continue
            values = {"dev": 0, "sector": 0, "bytes": 0, "flags": 0, "arg": 0}
            for col, f in layout.columns:
                value = _read_field(data, f)
                if col == "flags" and isinstance(value, str):
                    value = rwbs_bits(value)
                values[col] = value
            if layout.entry.event == "block/block_rq_complete":
                values["bytes"] *= 512  # nr_sector -> bytes
            if layout.comm is not None:
                comms.setdefault(int(values["arg"]), _read_field(data, layout.comm))
            rows.append((ts, run, layout.code, cpu, int(values["flags"]) & 0xFFFF, pid,
                         int(values["dev"]) & 0xFFFFFFFF, int(values["sector"]) & (2**64 - 1),
                         int(values["bytes"]) & (2**64 - 1), int(values["arg"])))
    events = np.array(rows, dtype=EVENT_DTYPE)
    return Decoded(events, comms, lost)


def decode_files(paths: dict[int, Path], events_dir: Path, entries: list[CatalogEvent], *,
                 run: int = 0) -> Decoded:
    """Decode every CPU's raw file and merge them into one time-sorted record."""
    table = layouts(events_dir, entries)
    parts, comms, lost = [], {}, 0
    for cpu, path in sorted(paths.items()):
        decoded = decode_pages(Path(path).read_bytes(), cpu, table, run=run)
        parts.append(decoded.events)
        comms.update(decoded.comms)
        lost += decoded.pages_with_loss
    events = np.concatenate(parts) if parts else np.zeros(0, EVENT_DTYPE)
    events = events[np.argsort(events["ts_ns"], kind="stable")]
    return Decoded(events, comms, lost)
