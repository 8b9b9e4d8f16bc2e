"""The event contract: what a job says while it runs, as typed records with one JSON encoding.

A job emits these through its context (``ctx.emit(Phase(name="populate"))``, or the short
forms ``ctx.phase(...)``, ``ctx.progress(...)``, ``ctx.log(...)``, ``ctx.finding(...)``,
``ctx.data(kind, ...)``); the engine writes them to the event pipe and ``events.ndjson``;
the headless CLI, the TUI, replay, ``report``/``compare`` and the tests read them back with
:func:`decode` (or ``registry.decode_event(job, …)``, which knows the job's own kinds). On the
wire an event is one JSON object per line::

    {"t": 1.25, "kind": "phase", "name": "run 1 of 5", "run": 0, "runs": 5}

``t`` is seconds since the job started; ``kind`` picks the record (a msgspec tagged union on
"kind"); the other keys are the record's fields. The mapping of a :attr:`Event.spread` kind
(Phase/Progress ``detail``, Finding ``fields``, Data ``fields``) is spread beside them, and a
key the record does not name is read back into it, so lines of any earlier release decode.

A job's own kinds are :class:`DataRecord` subclasses declared in its module (``DATA``, see
:mod:`fsscope.engine.registry`): ``class WindowSample(DataRecord, tag="samples")``; they
decode to that type. Kinds no job declares decode to :class:`Data`. The run's manifest
records ``events_version`` (:data:`VERSION`); a reader seeing a newer one still decodes what
it knows.

Findings also appear in reports (the final analysis of all runs): :func:`findings_from_report`
gives them as the same :class:`Finding` records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import msgspec

from fsscope.records import Record, dumps, loads, plain
from fsscope.records import encode as encode_json

VERSION = 1
"""Bumped when a field changes meaning or goes away (adding a field or a kind is compatible)."""


class Event(Record, frozen=True, omit_defaults=True, tag_field="kind"):
    """Fields common to every event. ``t``: seconds since the job started (the context sets it)."""

    spread: ClassVar[str] = ""  # the mapping field whose keys sit beside the others on the wire

    t: float = 0.0

    @property
    def kind(self) -> str:
        return str(type(self).__struct_config__.tag)

    def wire(self) -> dict[str, Any]:
        """The wire form, values as the record holds them (numpy etc. left to the encoder)."""
        out: dict[str, Any] = {"t": self.t, "kind": self.kind}
        extra: Mapping[str, Any] = {}
        for name in self.__struct_fields__:
            value = getattr(self, name)
            if name == self.spread:
                extra = value
            elif name not in out and value is not None and value != "":
                out[name] = value
        return {**extra, **out} if extra else out


class Phase(Event, frozen=True, tag="phase"):
    """The job entered a stage (shown as the job's current activity). ``run``/``runs``: which
    of a repeated measurement; ``detail``: anything else worth recording (the target…)."""

    spread: ClassVar[str] = "detail"
    name: str = ""
    run: int | None = None
    runs: int | None = None
    detail: dict[str, Any] = {}


class Progress(Event, frozen=True, tag="progress"):
    """How far the job is (a gauge: only the latest matters). ``detail``: a job's own numbers
    beside it (the ager's phase, fit p-values…) that its view reads."""

    spread: ClassVar[str] = "detail"
    done: float = 0.0
    total: float | None = None
    unit: str = ""
    info: str = ""
    detail: dict[str, Any] = {}


MAX_FLAG_INDICES = 200_000
"""The most file indices a finding lists (a series over millions of files is drawn in part)."""


class KernelEvidence(Record, frozen=True, kw_only=True):
    """The kernel's side of a finding (a traced job): in how many traced runs each event fired
    inside the call(s), the block I/O issued, what kept the call off the CPU; for a series,
    in how many of its ``calls`` each event fired (``members``)."""

    events: dict[str, int] = {}
    io_requests: int = 0
    io_bytes: int = 0
    runs_traced: int = 0
    off_cpu: list[str] = []
    members: dict[str, int] | None = None
    calls: int | None = None


class Finding(Event, frozen=True, kw_only=True, tag="finding"):
    """A flag: something the analysis found, with the note that explains it.

    ``flag`` is its kind ("outlier", "series", "levelshift", "lineargrowth", "variation",
    "stopped"…). Where it is: ``index`` (one file); ``start``/``stride``/``count`` (a series);
    ``start``/``end`` (a range: linear growth); ``indices`` (a list); ``window_s`` (a
    throughput window); ``structure`` (what it is, when explained); ``id`` (what it names: a
    study's configuration); ``kernel`` (the kernel's side). ``fields``: its other numbers.
    ``provisional``: why a finding streamed while the job runs may not stand (the probe's
    series, shifts and ramps are not yet tried against null worlds; an outlier is not yet
    decided by the sequential test); empty when it is final. A report's findings are final:
    they replace the streamed ones, and a streamed one they lack is shown withdrawn."""

    spread: ClassVar[str] = "fields"
    flag: str
    title: str = ""
    note: str = ""
    index: int | None = None
    start: int | None = None
    stride: int | None = None
    count: int | None = None
    end: int | None = None
    indices: list[int] | None = None
    window_s: float | None = None
    structure: str | None = None
    id: str | None = None
    kernel: KernelEvidence | None = None
    provisional: str = ""
    fields: dict[str, Any] = {}

    def wire(self) -> dict[str, Any]:
        return super().wire() | {"title": self.title or self.flag, "note": self.note}

    def file_indices(self) -> tuple[int, ...]:
        """The file indices it is about: its ``indices``, a series' members by stride, a
        range's files, or its one ``index``."""
        if self.indices is not None:
            return tuple(self.indices[:MAX_FLAG_INDICES])
        if self.start is not None and self.stride is not None:
            count = min(self.count if self.count is not None else 1, MAX_FLAG_INDICES)
            return tuple(self.start + k * max(1, self.stride) for k in range(count))
        if self.start is not None and self.end is not None:
            return tuple(range(self.start, min(self.end, self.start + MAX_FLAG_INDICES)))
        return () if self.index is None else (self.index,)


#: A finding's typed fields (where it is), read from the wire beside the rest.
_PLACE_TYPES: dict[str, Any] = {"index": int, "start": int, "stride": int, "count": int, "end": int,
                                "indices": list[int], "window_s": float, "structure": str, "id": str,
                                "kernel": KernelEvidence}
_PLACE = tuple(_PLACE_TYPES)


class Log(Event, frozen=True, tag="log"):
    """A line for the log panel (a tool's command line and its stderr…)."""

    line: str = ""
    stderr: str = ""


class Result(Event, frozen=True, tag="result"):
    """The job's report (also written to report.json): a dict on the wire, the job's ``Report``
    record once ``registry.decode_event`` has read it (for a job that declares one)."""

    report: Any = {}


class Error(Event, frozen=True, tag="error"):
    """What stopped the job (or one of its runs), in one line."""

    message: str = ""


class DataRecord(Event, frozen=True):
    """Base of a job's own event kinds: ``class WindowSample(DataRecord, tag="samples")`` in
    the job's module, listed in its ``DATA``. Encoded field by field (no spread)."""

    @classmethod
    def kind_name(cls) -> str:
        return str(cls.__struct_config__.tag)


class Data(Event, frozen=True, tag=False):
    """A kind no job declares (yet), read by its own view model from ``fields``: ``kind``
    names it (syncwrite "samples" with a ``point``, "telemetry", "geometry"…)."""

    spread: ClassVar[str] = "fields"
    kind: str = ""  # a field here, the tag elsewhere
    fields: dict[str, Any] = {}


KINDS: dict[str, type[Event]] = {cls.__struct_config__.tag: cls  # type: ignore[misc]
                                 for cls in (Phase, Progress, Finding, Log, Result, Error)}
UNLOGGED_KINDS = frozenset({"samples", "variation_row"})
"""Not written to events.ndjson: bulk data that the run's arrays (or a study's
treatments.ndjson) already hold."""


def make(kind: str, t: float = 0.0, **fields: Any) -> Event:
    """The record for ``kind`` from keyword fields (as a consumer reading ``kind`` would get it)."""
    return decode({"t": t, "kind": kind, **fields})


def decode(data: Mapping[str, Any] | str | bytes, kinds: Mapping[str, type[Event]] | None = None) -> Event:
    """The record a wire event (a dict or one JSON line) stands for: a job's own kind from
    ``kinds`` (see ``registry.decode_event``), a common kind, else :class:`Data` (as is a
    line whose fields do not fit its kind)."""
    if isinstance(data, (str, bytes)):
        data = loads(data)
    if not isinstance(data, Mapping):
        raise ValueError(f"an event is a JSON object, not {type(data).__name__}")
    kind = str(data.get("kind") or "")
    body = {k: v for k, v in data.items() if k != "kind"}
    cls = (kinds or {}).get(kind) or KINDS.get(kind)
    if cls is Finding:
        return finding_from_dict(body, t=_seconds(body.get("t")))
    if cls is not None:
        if cls.spread:  # keys the record does not name go into its spread mapping
            names = set(cls.__struct_fields__)
            extra = {k: body.pop(k) for k in list(body) if k not in names}
            body[cls.spread] = {**(body.get(cls.spread) or {}), **extra}
        try:
            return msgspec.convert(body, cls, strict=False)
        except msgspec.ValidationError:
            pass  # a line that does not fit its kind: still shown, as Data
    t = _seconds(body.pop("t", None))
    return Data(t=t, kind=kind, fields=body)


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def finding_from_dict(data: Mapping[str, Any], *, t: float = 0.0) -> Finding:
    """A finding from its dict form (an event's fields, or an entry of a report's flags): the
    keys that say where it is become its typed fields (a value of another type stays in
    ``fields``, as an older line wrote it)."""
    body = {k: v for k, v in data.items() if k != "t"}
    flag = body.pop("flag", None)
    if not flag:
        flag = "threshold" if body.get("structure") else "flag"
    title, note = body.pop("title", None), body.pop("note", None)
    provisional = body.pop("provisional", None)
    place: dict[str, Any] = {}
    for name in _PLACE:
        if body.get(name) is None:
            body.pop(name, None)
            continue
        try:
            place[name] = msgspec.convert(body[name], _PLACE_TYPES[name],
                                          strict=False)
        except msgspec.ValidationError:
            continue
        del body[name]
    return Finding(t=t, flag=str(flag), title=str(title or flag), note=str(note or ""),
                   provisional=str(provisional or ""), fields=body, **place)


def read_run(run_dir, kinds: Mapping[str, type[Event]] | None = None) -> list[Event]:
    """The events a run directory recorded (a torn last line of a killed job is left out)."""
    return [decode(data, kinds) for data in run_dir.events()]


def encode(event: Event) -> str:
    """One line of JSON (no newline): the wire and events.ndjson form."""
    return dumps(event.wire()) if event.spread else encode_json(event).decode()


# --------------------------------------------------------------------------------------------
# Findings in reports


@runtime_checkable
class WithFindings(Protocol):
    """A job's report record that says its own findings (the probe's ``Report``)."""

    def findings(self) -> list[Finding] | None: ...


def findings_from_report(report: Any) -> list[Finding] | None:
    """The FINAL findings of a job's report, or None if it has none.

    Findings stream while a job runs, each from the runs so far; the report's list is the
    analysis of all runs and replaces them. A report record says them itself
    (:class:`WithFindings`: the probe's, each flag with its analysis numbers); a report still
    a dict lists them in ``flags`` (a variation flag names its kind ``kind``)."""
    if isinstance(report, WithFindings) and callable(report.findings):  # (a check's are a list)
        return report.findings()
    if isinstance(report, msgspec.Struct):  # another job's Report record: its flags as written
        report = plain(report)
    if not isinstance(report, Mapping) or not isinstance(report.get("flags"), list):
        return None
    out = []
    for flag in report["flags"]:
        if isinstance(flag, Mapping):
            entry = dict(flag)
            kind = entry.pop("kind", None)
            entry.setdefault("flag", kind)
            out.append(finding_from_dict(entry))
    return out
