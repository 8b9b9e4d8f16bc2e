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

Findings also appear in reports (``report["flags"]``, the final analysis of all runs):
:func:`findings_from_report` reads them into the same :class:`Finding` records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

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


class Samples(Event, frozen=True, tag="samples"):
    """A batch of per-file latencies of one probe run, files ``start``… (never written to
    events.ndjson: the run's latency array holds them)."""

    run: int = 0
    start: int = 0
    latency_ns: list[int] = []


class Finding(Event, frozen=True, kw_only=True, tag="finding"):
    """A flag: something the analysis found, with the note that explains it.

    ``flag`` is its kind ("outlier", "series", "levelshift", "lineargrowth", "variation",
    "stopped"…); ``fields`` what locates and measures it (``index``; ``start``/``stride``/
    ``count``; ``start``/``end``; ``indices``; ``window_s``; ``structure``…)."""

    spread: ClassVar[str] = "fields"
    flag: str
    title: str = ""
    note: str = ""
    fields: dict[str, Any] = {}

    def wire(self) -> dict[str, Any]:
        return super().wire() | {"title": self.title or self.flag, "note": self.note}


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
                                 for cls in (Phase, Progress, Samples, Finding, Log, Result, Error)}
UNLOGGED_KINDS = frozenset({"samples", "variation_row"})
"""Not written to events.ndjson: bulk data that the run's arrays (or a study's
treatments.ndjson) already hold."""


def make(kind: str, t: float = 0.0, **fields: Any) -> Event:
    """The record for ``kind`` from keyword fields (as a consumer reading ``kind`` would get it)."""
    return decode({"t": t, "kind": kind, **fields})


def decode(data: Mapping[str, Any] | str | bytes, kinds: Mapping[str, type[Event]] | None = None) -> Event:
    """The record a wire event (a dict or one JSON line) stands for: a job's own kind from
    ``kinds`` (see ``registry.decode_event``), a common kind, else :class:`Data` (as is a
    "samples" without per-file latencies, or a line whose fields do not fit its kind)."""
    if isinstance(data, (str, bytes)):
        data = loads(data)
    if not isinstance(data, Mapping):
        raise ValueError(f"an event is a JSON object, not {type(data).__name__}")
    kind = str(data.get("kind") or "")
    body = {k: v for k, v in data.items() if k != "kind"}
    cls = (kinds or {}).get(kind) or KINDS.get(kind)
    if cls is Samples and "latency_ns" not in body:
        cls = None
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
    """A finding from its dict form (an event's fields, or an entry of a report's flags)."""
    body = {k: v for k, v in data.items() if k != "t"}
    flag = body.pop("flag", None)
    if not flag:
        flag = "threshold" if body.get("structure") else "flag"
    title, note = body.pop("title", None), body.pop("note", None)
    return Finding(t=t, flag=str(flag), title=str(title or flag), note=str(note or ""), fields=body)


def read_run(run_dir, kinds: Mapping[str, type[Event]] | None = None) -> list[Event]:
    """The events a run directory recorded (a torn last line of a killed job is left out)."""
    return [decode(data, kinds) for data in run_dir.events()]


def encode(event: Event) -> str:
    """One line of JSON (no newline): the wire and events.ndjson form."""
    return dumps(event.wire()) if event.spread else encode_json(event).decode()


# --------------------------------------------------------------------------------------------
# Findings in reports

#: The probe report's analysis lists, in the order its ``flags`` list follows them.
_FINDING_LISTS = (("outliers", "outlier"), ("series", "series"), ("level_shifts", "levelshift"),
                  ("linear_growth", "lineargrowth"))


def findings_from_report(report: Mapping[str, Any] | Record | None) -> list[Finding] | None:
    """The FINAL findings of a job's report (``report["flags"]``), or None if it has none.

    Findings stream while a job runs, each from the runs so far; the report's list is the
    analysis of all runs and replaces them. A probe report's flags carry only where and why;
    the finding's own fields (stride, count, end, ratio…) come from its analysis lists, which
    the flags follow in order. Variation flags name their kind ``kind``."""
    if isinstance(report, Record):  # a job's Report record: its flags as they are written
        report = plain(report)
    if not isinstance(report, Mapping) or not isinstance(report.get("flags"), list):
        return None
    flags = [f for f in report["flags"] if isinstance(f, Mapping)]
    analysed: list[dict] = []
    for key, kind in _FINDING_LISTS:
        analysed += [{**f, "kind": kind} for f in report.get(key) or [] if isinstance(f, Mapping)]
    # a job may append flags of its own after the analysis ones (a probe's "stopped")
    aligned = len(analysed) <= len(flags) and all(
        finding.get("kind") == flag.get("flag") for finding, flag in zip(analysed, flags))
    out = []
    for n, flag in enumerate(flags):
        entry = dict(flag)
        if "flag" not in entry and "kind" in entry:
            entry["flag"] = entry.pop("kind")
        if aligned and n < len(analysed):
            entry |= {k: v for k, v in analysed[n].items() if k != "kind" and k not in entry}
        entry.pop("kind", None)
        out.append(finding_from_dict(entry))
    return out
