"""The jobs fsscope can run, and the typed contract between a job and its consumers.

A job is one descriptor (:class:`~fsscope.engine.jobs.Job`, in :mod:`fsscope.engine.jobs`, which
names every part by where it lives and imports none); this module loads the job's own parts.
The job's module exposes:

    Spec: a SpecRecord (msgspec Struct)   the job's parameters; job.json holds it
    run(ctx: JobContext, spec)            does the work in the job child, returns the report
    DATA: tuple of DataRecord types       optional: the job's own event kinds (bench "samples"…),
                                          decoded to these types; kinds not declared are Data
    Report: a ReportRecord type           optional: the report's type (run returns one; readers
                                          get it from report_from_data)
    record_bytes(spec) -> int             optional: bytes of arrays it will write to the run
                                          record (checked against free space before it starts)
    partial_report(run_dir)               optional: the report of a run that did not finish

:func:`decode_event` reads a job's wire events into its types.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import msgspec

from fsscope.engine import events
from fsscope.engine.jobs import DESCRIPTORS, GENERIC_COMPARER, JOBS, job, missing_extra, require_extra, resolve
from fsscope.errors import FsscopeError
from fsscope.records import ReportRecord, SpecRecord, convert

# the descriptors, read here by the callers that also load a job's parts
__all__ = ["DESCRIPTORS", "JOBS", "data_kinds", "decode_event", "job", "load", "missing_extra", "report_from_data",
           "report_type", "require_extra", "resolve", "spec_from_data", "spec_type"]


def load(name: str) -> ModuleType:
    """Job ``name``'s module (what its child process runs)."""
    return importlib.import_module(job(name).module)


def spec_type(name: str) -> type[SpecRecord]:
    return resolve(job(name).spec_ref)


def report_type(name: str) -> type[ReportRecord] | None:
    """Job ``name``'s Report record type; None for a job without one (smoke)."""
    module, _, attribute = job(name).report_ref.partition(":")
    return getattr(importlib.import_module(module), attribute, None)


def data_kinds(name: str) -> dict[str, type[events.DataRecord]]:
    """The job's own event kinds by their wire ``kind``."""
    return {cls.kind_name(): cls for cls in getattr(load(name), "DATA", ())}


def spec_from_data(name: str, data: Any) -> SpecRecord:
    """A job's spec from plain data (job.json's "spec", ``-p KEY=VALUE``); one line on error."""
    return convert(data, spec_type(name))


def report_from_data(name: str | None, data: Any) -> Any:
    """Job ``name``'s report as its ``Report`` record when the job declares one (a report.json
    or a result event; an older report's missing fields take their defaults), else as it was
    read (a dict; None stays None). A report that does not fit is one line, FsscopeError."""
    kind = report_type(name) if name in JOBS else None
    if kind is None or data is None or isinstance(data, kind):
        return data
    own = {f.encode_name for f in msgspec.structs.fields(kind)} - \
        {f.encode_name for f in msgspec.structs.fields(ReportRecord)}
    if isinstance(data, dict) and own and not own & data.keys():  # every field has a default: {} would pass
        raise FsscopeError(f"{name} report is not in the shape fsscope writes (it has none of its fields)")
    try:
        return convert(data, kind, f"{name} report")
    except FsscopeError as exc:
        raise FsscopeError(f"{name} report is not in the shape fsscope writes ({exc})") from None


def decode_event(name: str | None, data: Any) -> events.Event:
    """A wire event (a dict or one JSON line) of job ``name`` as its record: the common kinds,
    the job's declared data kinds, or :class:`~fsscope.engine.events.Data`; a result carries
    the job's report record (see :func:`report_from_data`)."""
    event = events.decode(data, data_kinds(name) if name in JOBS else None)
    if isinstance(event, events.Result) and name in JOBS and report_type(name) is not None:
        return msgspec.structs.replace(event, report=report_from_data(name, event.report))
    return event


def compare_reports(name: str, a: Any, b: Any) -> list:
    """Two runs of job ``name`` side by side: the sections (of ``analysis.compare.Row``) its
    descriptor's comparer makes of their reports; the numbers both hold for a job without one
    (or a job this fsscope does not know, recorded by another version)."""
    ref = JOBS[name].comparer if name in JOBS else ""
    return resolve(ref or GENERIC_COMPARER)(a, b)
