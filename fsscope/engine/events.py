"""The event contract: what a job says while it runs, as typed records with one JSON encoding.

A job emits these through its context (``ctx.emit(Phase(name="populate"))``, or the short
forms ``ctx.phase(...)``, ``ctx.progress(...)``, ``ctx.log(...)``, ``ctx.finding(...)``,
``ctx.data(kind, ...)``); the engine writes them to the event pipe and ``events.ndjson``;
the headless CLI, the TUI, replay, ``report``/``compare`` and the tests read them back with
:func:`decode`. On the wire an event is one JSON object per line::

    {"t": 1.25, "kind": "phase", "name": "run 1 of 5", "run": 0, "runs": 5}

``t`` is seconds since the job started; ``kind`` picks the record; the other keys are the
record's fields (a record's ``detail``/``fields`` mapping is spread beside them). Kinds this
module does not know (a job's own: bench windows, sync-write points, telemetry, geometry…)
decode to :class:`Data`, so a new job needs no change here. The run's manifest records
``events_version`` (:data:`VERSION`); a reader seeing a newer one still decodes what it knows.

Findings also appear in reports (``report["flags"]``, the final analysis of all runs):
:func:`findings_from_report` reads them into the same :class:`Finding` records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fsscope.jsonsafe import dumps, plain

VERSION = 1
"""Bumped when a field changes meaning or goes away (adding a field or a kind is compatible)."""


@dataclass(frozen=True, kw_only=True)
class Event:
    """Fields common to every event. ``t``: seconds since the job started (the context sets it)."""

    kind: ClassVar[str] = ""
    t: float = 0.0

    def wire(self) -> dict[str, Any]:
        """The wire form, values as the record holds them (numpy etc. left to the encoder)."""
        return {"t": self.t, "kind": self.kind, **self._fields()}

    def to_json(self) -> dict[str, Any]:
        """The wire form in plain JSON values."""
        return plain(self.wire())

    def _fields(self) -> dict[str, Any]:
        raise NotImplementedError

    # Read like its wire dict (``event.get("kind")``, ``event["run"]``), for code written
    # against the dicts; new readers use the attributes.
    def get(self, key: str, default: Any = None) -> Any:
        return self.wire().get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.wire()[key]


@dataclass(frozen=True, kw_only=True)
class Phase(Event):
    """The job entered a stage (shown as the job's current activity). ``run``/``runs``: which
    of a repeated measurement; ``detail``: anything else worth recording (the target…)."""

    kind: ClassVar[str] = "phase"
    name: str
    run: int | None = None
    runs: int | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def _fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.run is not None:
            out["run"] = self.run
        if self.runs is not None:
            out["runs"] = self.runs
        return {**self.detail, **out}


@dataclass(frozen=True, kw_only=True)
class Progress(Event):
    """How far the job is (a gauge: only the latest matters). ``detail``: a job's own numbers
    beside it (the ager's phase, fit p-values…) that its view reads."""

    kind: ClassVar[str] = "progress"
    done: float
    total: float | None = None
    unit: str = ""
    info: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)

    def _fields(self) -> dict[str, Any]:
        out: dict[str, Any] = {"done": self.done, "total": self.total}
        if self.unit:
            out["unit"] = self.unit
        if self.info:
            out["info"] = self.info
        return {**self.detail, **out}


@dataclass(frozen=True, kw_only=True)
class Samples(Event):
    """A batch of per-file latencies of one run, files ``start``… (never written to
    events.ndjson: the run's latency array holds them)."""

    kind: ClassVar[str] = "samples"
    run: int
    start: int
    latency_ns: list[int]

    def _fields(self) -> dict[str, Any]:
        return {"run": self.run, "start": self.start, "latency_ns": self.latency_ns}


@dataclass(frozen=True, kw_only=True)
class Finding(Event):
    """A flag: something the analysis found, with the note that explains it.

    ``flag`` is its kind ("outlier", "series", "levelshift", "lineargrowth", "variation",
    "stopped"…); ``fields`` what locates and measures it (``index``; ``start``/``stride``/
    ``count``; ``start``/``end``; ``indices``; ``window_s``; ``structure``…)."""

    kind: ClassVar[str] = "finding"
    flag: str
    title: str = ""
    note: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)

    def _fields(self) -> dict[str, Any]:
        return {**self.fields, "flag": self.flag, "title": self.title or self.flag, "note": self.note}


@dataclass(frozen=True, kw_only=True)
class Log(Event):
    """A line for the log panel (a tool's command line and its stderr…)."""

    kind: ClassVar[str] = "log"
    line: str
    stderr: str = ""

    def _fields(self) -> dict[str, Any]:
        return {"line": self.line, **({"stderr": self.stderr} if self.stderr else {})}


@dataclass(frozen=True, kw_only=True)
class Result(Event):
    """The job's report (also written to report.json)."""

    kind: ClassVar[str] = "result"
    report: Mapping[str, Any]

    def _fields(self) -> dict[str, Any]:
        return {"report": self.report}


@dataclass(frozen=True, kw_only=True)
class Error(Event):
    """What stopped the job (or one of its runs), in one line."""

    kind: ClassVar[str] = "error"
    message: str

    def _fields(self) -> dict[str, Any]:
        return {"message": self.message}


@dataclass(frozen=True, kw_only=True)
class Data(Event):
    """A job's own event, read by its own view model: ``kind`` names it (bench "samples" with
    a ``window``, syncwrite "samples" with a ``point``, "telemetry", "geometry"…)."""

    kind: str  # type: ignore[misc]  # an instance field here, a class constant elsewhere
    fields: Mapping[str, Any] = field(default_factory=dict)

    def _fields(self) -> dict[str, Any]:
        return dict(self.fields)


KINDS: dict[str, type[Event]] = {cls.kind: cls for cls in (Phase, Progress, Samples, Finding, Log, Result, Error)}
UNLOGGED_KINDS = frozenset({"samples", "variation_row"})
"""Not written to events.ndjson: bulk data that the run's arrays (or a study's
treatments.ndjson) already hold."""


def make(kind: str, t: float = 0.0, **fields: Any) -> Event:
    """The record for ``kind`` from keyword fields (as a consumer reading ``kind`` would get it)."""
    return decode({"t": t, "kind": kind, **fields})


def _split(data: dict[str, Any], known: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    known = set(known)
    return ({k: v for k, v in data.items() if k in known}, {k: v for k, v in data.items() if k not in known})


def decode(data: Mapping[str, Any] | str | bytes) -> Event:
    """The record a wire event (a dict or one JSON line) stands for. Unknown kinds, and
    "samples" that carry no per-file latencies, are :class:`Data`."""
    if isinstance(data, (str, bytes)):
        data = json.loads(data)
    if not isinstance(data, Mapping):
        raise ValueError(f"an event is a JSON object, not {type(data).__name__}")
    body = {k: v for k, v in data.items() if k not in ("t", "kind")}
    t = float(data.get("t") or 0.0)
    kind = str(data.get("kind") or "")
    if kind == "phase":
        known, detail = _split(body, ("name", "run", "runs"))
        return Phase(t=t, name=str(known.get("name", "")), run=_int_or_none(known.get("run")),
                     runs=_int_or_none(known.get("runs")), detail=detail)
    if kind == "progress":
        known, detail = _split(body, ("done", "total", "unit", "info"))
        total = known.get("total")
        return Progress(t=t, done=float(known.get("done") or 0.0), total=float(total) if total else None,
                        unit=str(known.get("unit") or ""), info=str(known.get("info") or ""), detail=detail)
    if kind == "samples" and "latency_ns" in body:
        return Samples(t=t, run=int(body.get("run") or 0), start=int(body.get("start") or 0),
                       latency_ns=list(body.get("latency_ns") or []))
    if kind == "finding":
        return finding_from_dict(body, t=t)
    if kind == "log":
        return Log(t=t, line=str(body.get("line", "")), stderr=str(body.get("stderr") or ""))
    if kind == "result":
        report = body.get("report")
        return Result(t=t, report=report if isinstance(report, Mapping) else {})
    if kind == "error":
        return Error(t=t, message=str(body.get("message", "")))
    return Data(t=t, kind=kind, fields=body)


def finding_from_dict(data: Mapping[str, Any], *, t: float = 0.0) -> Finding:
    """A finding from its dict form (an event's fields, or an entry of a report's flags)."""
    body = dict(data)
    flag = body.pop("flag", None)
    if not flag:
        flag = "threshold" if body.get("structure") else "flag"
    title, note = body.pop("title", None), body.pop("note", None)
    return Finding(t=t, flag=str(flag), title=str(title or flag), note=str(note or ""), fields=body)


def read_run(run_dir) -> list[Event]:
    """The events a run directory recorded (a torn last line of a killed job is left out)."""
    return [decode(data) for data in run_dir.events()]


def encode(event: Event) -> str:
    """One line of JSON (no newline): the wire and events.ndjson form."""
    return dumps(event.wire())


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# --------------------------------------------------------------------------------------------
# Findings in reports

#: The probe report's analysis lists, in the order its ``flags`` list follows them.
_FINDING_LISTS = (("outliers", "outlier"), ("series", "series"), ("level_shifts", "levelshift"),
                  ("linear_growth", "lineargrowth"))


def findings_from_report(report: Mapping[str, Any] | None) -> list[Finding] | None:
    """The FINAL findings of a job's report (``report["flags"]``), or None if it has none.

    Findings stream while a job runs, each from the runs so far; the report's list is the
    analysis of all runs and replaces them. A probe report's flags carry only where and why;
    the finding's own fields (stride, count, end, ratio…) come from its analysis lists, which
    the flags follow in order. Variation flags name their kind ``kind``."""
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
