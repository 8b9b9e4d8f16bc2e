"""Every message the job worker and the telemetry worker post, as dataclasses.

Workers collect and post; handlers (on the app thread) change widgets. ``can_replace`` is
used only for latest-value gauges (progress, telemetry): a newer one makes an older queued
one worthless. Sample batches, findings and log lines are never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from fsscope.engine.events import Event, Finding


@dataclass
class JobStarted(Message):
    """A job's child process is running; its run directory exists."""

    index: int
    job: str
    run_id: str
    run_path: str
    pid: int


@dataclass
class PhaseChanged(Message):
    index: int
    name: str
    t: float
    run: int | None = None


@dataclass
class ProgressUpdated(Message):
    """Latest progress of a job (a gauge: a newer one replaces a queued older one)."""

    index: int
    done: float
    total: float | None
    unit: str = ""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ProgressUpdated) and message.index == self.index


@dataclass
class SamplesArrived(Message):
    """A batch of per-file latencies of one run (never replaced: every batch matters)."""

    index: int
    run: int
    start: int
    latency_ns: list[int]
    t: float


@dataclass
class FindingArrived(Message):
    index: int
    finding: Finding


@dataclass
class JobEvent(Message):
    """Any other event of a job (bench windows, sync-write points, telemetry, geometry…; a
    progress with the job's own fields): the job's own view model reads what it knows."""

    index: int
    kind: str
    event: Event


@dataclass
class LogLine(Message):
    index: int
    line: str
    stderr: str = ""


@dataclass
class JobFinished(Message):
    """The child exited; status from its run directory, and what was cleaned up after it."""

    index: int
    status: str
    error: str | None
    report: Any  # the job's Report record (a dict for a job not typed yet), or None
    returncode: int | None
    leftovers: list[str] = field(default_factory=list)


@dataclass
class PlanFinished(Message):
    """Every job of the plan has ended (or the plan was cancelled)."""

    cancelled: bool


@dataclass
class TelemetryTick(Message):
    """Device and CPU rates (a gauge)."""

    device: str
    iops: float
    bytes_per_s: float
    cpu_percent: float

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, TelemetryTick)


@dataclass
class FlagSelected(Message):
    """The user picked a flag in the flags panel (None: selection cleared)."""

    position: int | None


@dataclass
class HeatCursorMoved(Message):
    """The heatmap cursor is on files [first, last] of run ``run``; value by the aggregate."""

    run: int
    first: int
    last: int
    latency_ns: int
    aggregate: str


@dataclass
class RunsListed(Message):
    """The runs screen's table rows, read from the run directories in a thread:
    (run, mark-less row cells) newest first."""

    runs: list
    rows: list[tuple[str, ...]]


@dataclass
class RunsLoaded(Message):
    """Recorded runs read in a thread (replay.load_run), to open (one) or compare (two)."""

    records: list


@dataclass
class RecordedArrayLoaded(Message):
    """A finished job's recorded latency_ns, read in a thread (a job that streams no samples)."""

    index: int
    array: object
