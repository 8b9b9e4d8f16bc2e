"""The jobs fsscope can run, and the typed contract between a job and its consumers.

Each job is a module exposing:

    Spec: a SpecRecord (msgspec Struct)   the job's parameters; job.json holds it
    run(ctx: JobContext, spec)            does the work in the job child, returns the report
    DATA: tuple of DataRecord types       optional: the job's own event kinds (bench "samples"…),
                                          decoded to these types; kinds not declared are Data
    Report: a ReportRecord type           optional: the report's type (run returns one; readers
                                          get it from report_from_data)
    record_bytes(spec) -> int             optional: bytes of arrays it will write to the run
                                          record (checked against free space before it starts)

Modules are imported only when a job is used, so listing jobs stays cheap; the lookups below
give the types, and :func:`decode_event` reads a job's wire events into them.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

import msgspec

from fsscope.engine import events
from fsscope.errors import FsscopeError
from fsscope.records import ReportRecord, SpecRecord, convert

# name -> (module, one-line summary); the summary lives here so listing imports nothing.
JOBS: dict[str, tuple[str, str]] = {
    "smoke": ("fsscope.engine.smoke", "write+fsync small files for a few seconds (sanity check)"),
    "probe": ("fsscope.workloads.probe_job", "per-syscall latency of creat() & co. on fresh file systems"),
    "bench": ("fsscope.workloads.bench_job", "throughput personality runs and their variation (Throughput-N, relative range)"),
    "syncwrite": ("fsscope.workloads.syncwrite_job", "synchronous-write buffer sweep: throughput vs latency per buffer size"),
    "age": ("fsscope.aging.job", "profile-driven aging (Geriatrix): churn to a profile, fit, fresh vs aged fragmentation, snapshot"),
    "explore": ("fsscope.study.explore", "layout exploration (Chopper): LHS plan of disk states and write patterns, d-span, sensitivity"),
    "check": ("fsscope.check.job", "pre-benchmark sanity check: audit of what distorts results, runs needed (calibration)"),
    "variation": ("fsscope.study.variation", "configuration-space variation study (Cao et al.): LHS configurations x personalities, R runs, relative range"),
    "ladder": ("fsscope.workloads.ladder", "hygiene ladder (Cao et al.): baseline, no_lazy, umount, alloc; relative range per step"),
    "scan": ("fsscope.scan.job", "read-only: each directory's on-disk structure (checked against the file system), near-threshold and largest dirs, free space, aging"),
    "watch": ("fsscope.watch.job", "attach to a process, cgroup or command: its file-system calls, the slow ones and why, what repeats"),
    "replay": ("fsscope.replay.job", "play an op log (watch --capture) on a fresh file system: per call type and per file latency, throughput, what repeats"),
    "frag": ("fsscope.layout.job", "free-space extent histogram and a large test file's fragments (fresh or --from-snapshot)"),
}


# The jobs whose packages are an extra, not the core install: name -> (extra, its modules).
# `pip install fsscope` brings the core; the study engine's Dask and SALib (and, through them,
# pandas and matplotlib) come with `pip install 'fsscope[study]'`, which scripts/setup installs.
STUDY_EXTRA = ("study", ("distributed", "SALib"))
EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {"explore": STUDY_EXTRA, "variation": STUDY_EXTRA}


def missing_extra(name: str) -> str | None:
    """One line saying how to add what job ``name`` needs beyond the core install, or None
    when it is installed (or the job needs nothing more)."""
    if name not in EXTRAS:
        return None
    extra, modules = EXTRAS[name]
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (f"{name} needs fsscope's {extra} extra ({', '.join(missing)} not installed): "
            f"pip install 'fsscope[{extra}]' (in a checkout: scripts/setup)")


def require_extra(name: str) -> None:
    """Refuse, in one line (exit 2), a job whose extra is not installed."""
    problem = missing_extra(name)
    if problem:
        raise FsscopeError(problem)


#: Jobs the TUI's Setup screen does not offer yet (run from the CLI; a recorded run replays).
CLI_ONLY = frozenset({"watch", "replay"})


def load(name: str) -> ModuleType:
    if name not in JOBS:
        raise FsscopeError(f"unknown job '{name}' (known: {', '.join(JOBS)})")
    return importlib.import_module(JOBS[name][0])


def spec_type(name: str) -> type[SpecRecord]:
    return load(name).Spec


def report_type(name: str) -> type[ReportRecord] | None:
    return getattr(load(name), "Report", None)


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
