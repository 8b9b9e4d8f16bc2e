"""The replay report: typed records (msgspec), light to import (the CLI's renderer reads them)."""

from __future__ import annotations

from fsscope.engine.events import DataRecord
from fsscope.records import Record, ReportRecord
from fsscope.watch.records import FormatChange, Repeat  # watch's records, judged the same way


class OpStats(Record, frozen=True, kw_only=True):
    """One call type over every run: its latency distribution, throughput, and the captured
    calls' latencies beside it (the same calls on the file system they were watched on)."""

    op: str
    calls: int
    p50_us: float
    p99_us: float
    mean_us: float
    max_us: float
    calls_per_s: float            # calls of this type per second of replay (all threads)
    bytes: int = 0
    mb_per_s: float = 0.0
    failed: int = 0
    slow: int = 0                 # slow against its own kind on its file or directory (watch's judge)
    captured_calls: int = 0
    captured_p50_us: float | None = None
    captured_p99_us: float | None = None


class FileStats(Record, frozen=True, kw_only=True):
    """The files (and directories) that took the most time."""

    path: str
    calls: int
    total_ms: float
    p50_us: float
    p99_us: float


#: How a report says its pace.
PACE_WORDS = {"asap": "as fast as possible", "recorded": "at the recorded pace",
              "wall": "at the recorded pace in wall time"}


class RunStats(Record, frozen=True, kw_only=True):
    run: int
    elapsed_s: float
    played: int
    skipped: int
    differs: int = 0              # succeeded here and failed when captured, or the reverse
    timeouts: int = 0             # dependencies not met in time
    p50_us: dict[str, float] = {}    # per call type: this run's median
    mean_us: dict[str, float] = {}


class RunPlayed(DataRecord, frozen=True, kw_only=True, tag="replay-run"):
    """A run as it ends (live): its calls per type, before the judges of the report (no slow
    counts, no captured latencies: those come with the report)."""

    run: int
    runs: int
    elapsed_s: float
    played: int
    ops: list[OpStats] = []


DATA = (RunPlayed,)  # the replay's own event kind (registry.decode_event reads it)


class Report(ReportRecord, frozen=True, kw_only=True):
    log: str = ""
    source: str = ""              # what was captured ("" when anonymized)
    captured_fs: str = ""
    anonymized: bool = False
    pace: str = "asap"
    fs: str = ""                  # the file system replayed on
    snapshot: str = ""            # the aged image every run started from ("" : a fresh mkfs)
    threads: int = 0
    calls: int = 0                # in the log
    tree_entries: int = 0
    tree_bytes: int = 0
    runs: list[RunStats] = []
    ops: list[OpStats] = []
    files: list[FileStats] = []
    slow_total: int = 0
    repeats: list[Repeat] = []
    skipped: dict[str, int] = {}  # why -> calls, over every run
    kept: list[str] = []          # what the log says it holds, and what not
    dropped: list[str] = []
    traced: bool = False          # replayed under watch's tracing: kernel-timed calls, format changes, causes
    format_changes: list[FormatChange] = []   # the first traced run's (``call``: the op's number in the log)
    format_changes_per_run: list[int] = []
    causes: dict[str, int] = {}   # the slow calls' causes by kind, over every run
    notes: list[str] = []
