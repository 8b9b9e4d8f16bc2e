"""What the probe says: its data kinds (per-file latencies, the geometry, the kernel's view) and
its report, as records. Every wire key of the report.json the probe wrote before the records
is a field here (with a default, so older reports read); light (msgspec only), so the TUI's
job loop imports it without the probe's worker code."""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from fsscope.engine.events import DataRecord, Finding, KernelEvidence
from fsscope.explain.slab import SlabCache
from fsscope.records import Record, ReportRecord

# --------------------------------------------------------------------------------------------
# Data kinds

Number: TypeAlias = int | float  # as the analysis wrote it (an int stays an int)


class Samples(DataRecord, frozen=True, kw_only=True, tag="samples"):
    """A batch of per-file latencies of one probe run, files ``start``… (never written to
    events.ndjson: the run's latency array holds them)."""

    run: int = 0
    start: int = 0
    latency_ns: list[int] = []


class GeometryData(DataRecord, frozen=True, kw_only=True, tag="geometry"):
    """The first fresh file system's geometry (as the report's ``geometry``) and what the rules
    predict from it, as soon as it is read."""

    geometry: dict[str, Any] = {}
    predictions: list[dict[str, Any]] = []


# --------------------------------------------------------------------------------------------
# The report's sections


class LatencySummary(Record, frozen=True, kw_only=True):
    count: int = 0
    mean_ns: Number | None = None
    sd_ns: Number | None = None
    min_ns: Number | None = None
    p50_ns: Number | None = None
    p95_ns: Number | None = None
    p99_ns: Number | None = None
    max_ns: Number | None = None
    rsd: float | None = None


class LowHigh(Record, frozen=True, kw_only=True):
    """The paper's split: calls under ``threshold_ns`` (``factor`` × the median) and over it."""

    threshold_ns: Number | None = None
    factor: float | None = None
    low: LatencySummary = LatencySummary()
    high: LatencySummary = LatencySummary()


class Stats(Record, frozen=True, kw_only=True):
    overall: LatencySummary = LatencySummary()
    per_run: list[LatencySummary] = []
    low_high: LowHigh = LowHigh()
    low_high_per_run: list[LowHigh] = []


class FindingRow(Record, frozen=True, kw_only=True, tag_field="kind"):
    """A row of one of the analysis lists; its ``kind`` (the tag) is the flag it becomes."""


class OutlierRow(FindingRow, frozen=True, kw_only=True, tag="outlier"):
    index: int = 0
    runs_flagged: int = 0
    runs: int = 0
    median_ns: Number = 0
    typical_ns: Number = 0
    ratio: float | None = None


class SeriesRow(FindingRow, frozen=True, kw_only=True, tag="series"):
    start: int = 0
    stride: int = 1
    count: int = 0
    missing: int = 0
    chance: float | None = None
    members: list[int] = []


class LevelShiftRow(FindingRow, frozen=True, kw_only=True, tag="levelshift"):
    index: int = 0
    before_ns: Number = 0
    after_ns: Number = 0


class GrowthRow(FindingRow, frozen=True, kw_only=True, tag="lineargrowth"):
    start: int = 0
    end: int = 0
    slope_ns_per_file: float = 0.0
    r2: float = 0.0


class OutlierChance(Record, frozen=True, kw_only=True):
    """The repeatable-outlier rule's chance bound (``outliers.outlier_chance``): with the runs'
    share of slow calls (``noise_rate``) among ``files`` files, a file slow in
    ``slow_runs_needed`` of the runs is an outlier with a false flag per analysis <= ``alpha``;
    ``runs_to_decide``: how many runs would let one be (None: these runs can)."""

    alpha: float | None = None
    noise_rate: float = 0.0
    files: int = 0
    slow_runs_needed: int | None = None
    runs_to_decide: int | None = None


class Settings(Record, frozen=True, kw_only=True):
    """The thresholds the analysis used, so a report says how each flag was decided."""

    outlier_factor: float | None = None
    min_runs: int | None = None
    min_fraction: float | None = None
    block_files: int | None = None
    split_factor: float | None = None
    series_min_count: int | None = None
    series_alpha: float | None = None
    series_factor: float | None = None
    series_ratio: float | None = None
    shift_min_ratio: float | None = None
    growth_min_ratio: float | None = None
    min_z: float | None = None
    single_run: bool = False
    outlier_chance: OutlierChance | None = None
    disturbed_calls_per_run: list[int] | None = None


class NullGate(Record, frozen=True, kw_only=True):
    """The findings the permuted worlds took back (``analysis.nullgate``): a null world gave one
    as strong, so they are not flags."""

    worlds: int = 0
    bound: float | None = None
    null: str = ""
    gated: list[str] = []
    sure_chance: float | None = None  # a series this unlikely is not searched for in the worlds
    rejected: list[dict[str, Any]] = []


class Explained(Record, frozen=True, kw_only=True):
    """What a flag and a threshold share: where, the structure that explains it, the note, and
    the kernel's side when traced."""

    index: int | None = None
    predicted_index: int | None = None
    structure: str | None = None
    note: str = ""
    flag: str = ""
    kernel: KernelEvidence | None = None
    kernel_verdict: str | None = None


class ReportFlag(Explained, frozen=True, kw_only=True):
    """One flag: a finding of the analysis of all runs (in the order of its list), or why the
    probe stopped (``run``, ``errno``)."""

    title: str = ""
    run: int | None = None
    errno: int | None = None


class Threshold(Explained, frozen=True, kw_only=True):
    """An explained structure: a flag the geometry explains (``evidence`` "latency" or
    "kernel+latency") or one only the kernel marked ("kernel": ``indices`` of a series,
    ``window`` of a hash-dependent index, ``latency`` what it cost)."""

    evidence: str = ""
    indices: list[int] | None = None
    latency: str | None = None
    latency_ratio: float | None = None
    window: list[int] | None = None


class Candidate(Record, frozen=True, kw_only=True):
    index: int = 0
    source: str = ""
    verdict: str = "undecided"
    slow_votes: int = 0
    votes: int = 0
    llr: float = 0.0
    decided_at_run: int | None = None
    kernel: dict[str, int] = {}


class Decisions(Record, frozen=True, kw_only=True):
    """How many runs the probe made and why (the sequential test per candidate file)."""

    sequential: bool = False
    runs_min: int = 0
    run_cap: int = 0
    runs_used: int = 0
    why: str = ""
    statistic: str = ""
    candidates: list[Candidate] = []


class Sync(Record, frozen=True, kw_only=True):
    before_each_call: bool = False
    scope: str = ""
    note: str = ""


class TraceSummary(Record, frozen=True, kw_only=True):
    """The kernel tracing: its mode, why it is off, what was enabled and lost."""

    mode: str = ""
    active: bool = False
    reason: str | None = None
    runs_traced: list[int] = []
    event_names: list[str] = []
    comms: dict[str, str] = {}
    pid: int | None = None
    enabled: list[str] = []
    missing: list[str] = []
    filter_errors: list[str] = []
    events: int = 0
    overrun: int = 0
    dropped: int = 0
    complete: bool = True
    events_per_s: float | None = None
    median_ratio_vs_untraced: float | None = None


class StructuralEvent(Record, frozen=True, kw_only=True):
    index: int = 0
    event: str = ""
    runs: int = 0
    latency_outlier: bool = False


class StructureRow(Record, frozen=True, kw_only=True):
    """A predicted structure: the files the geometry names, those the kernel saw its event at,
    those slow, and the verdict (``window``: a hash-dependent index's range)."""

    structure: str = ""
    events: list[str] = []
    predicted: list[int] = []
    seen: list[int] = []
    slow: list[int] = []
    verdict: str = ""
    window: list[int] | None = None
    inside: list[str] | None = None  # no event marks it: the file-system events that fired in its calls


class NoiseCause(Record, frozen=True, kw_only=True):
    run: int = 0
    index: int = 0
    latency_ns: Number = 0
    cause: str = ""


class KernelFlag(Record, frozen=True, kw_only=True):
    index: int | None = None
    flag: str | None = None
    kernel: KernelEvidence | None = None
    note: str | None = None


class KernelData(DataRecord, frozen=True, kw_only=True, tag="kernel"):
    """The kernel's view at the end of a traced probe: each flag's evidence, the structure table
    and the causes of one-off noise."""

    flags: list[KernelFlag] = []
    structures: list[StructureRow] = []
    noise: list[NoiseCause] = []


# --------------------------------------------------------------------------------------------
# The report

#: The analysis lists in the order the flags follow them.
_FINDING_LISTS = ("outliers", "series", "level_shifts", "linear_growth")


class Writer(Record, frozen=True, kw_only=True):
    """Another process that did I/O on the probed device or file system during runs (0-based):
    /proc/PID/io between the start and the end of each run, its rate at most the device's over
    the same run (``counted_bytes_per_s``: as /proc/PID/io counted it)."""

    pid: int = 0
    command: str = ""                   # its comm, as format.visible shows it (its owner chose it)
    read_bytes: int = 0
    write_bytes: int = 0
    bytes_per_s: float = 0.0            # the highest of its runs, capped at the device's
    counted_bytes_per_s: float = 0.0
    device_bytes_per_s: float | None = None  # the device's in that run (None: no block device)
    runs: list[int] = []
    exited: bool = False                # gone before its run ended: named from the block layer's trace
    seen_by: str = "/proc/PID/io"       # /proc/PID/io, block_bio_queue, or both
    tasks: int = 1                      # exited processes of this command, counted as this one row


class Report(ReportRecord, frozen=True, kw_only=True):
    """The probe's report: the statistics and findings of all runs, explained; how many runs
    and why; the geometry, its predictions and the kernel's side."""

    op: str = ""
    files: int = 0
    runs: int = 0
    runs_completed: int | None = None
    spec: dict[str, Any] = {}
    stopped_by: str | None = None
    sync: Sync | None = None
    where: str = ""
    timed_in: str = ""
    stats: Stats = Stats()
    outliers: list[OutlierRow] = []
    inconclusive_outliers: list[OutlierRow] = []  # the 80 % rule's, not beyond chance at these runs
    noise_count: int = 0
    weak_outliers: list[OutlierRow] = []
    series: list[SeriesRow] = []
    level_shifts: list[LevelShiftRow] = []
    linear_growth: list[GrowthRow] = []
    settings: Settings = Settings()
    null_gate: NullGate | None = None
    thresholds: list[Threshold] = []
    flags: list[ReportFlag] | None = None  # None: a report that says nothing of its flags (the live ones stand)
    decisions: Decisions | None = None
    geometry: dict[str, Any] | None = None
    predictions: list[dict[str, Any]] = []
    not_predicted: list[str] = []  # what the rules do not cover for this geometry and op, and why
    trace: TraceSummary | None = None
    structural_events: list[StructuralEvent] = []
    structures: list[StructureRow] = []
    contradicted: list[StructureRow] = []  # predictions the kernel contradicted: out of the table, kept here
    slabs: list[SlabCache] = []            # the slab caches (/proc/slabinfo at the run) that explained a series
    noise: list[NoiseCause] = []
    writers: list[Writer] = []  # other processes' I/O on the probed device during the runs
    writers_watched: str = ""   # how they were watched: what a writer must do to be named

    def findings(self) -> list[Finding] | None:
        """The final findings, each flag with where it is and its numbers from its analysis
        list (the flags follow outliers, series, level shifts, linear growth in order; a flag
        of the job's own, "stopped", comes after them); None when the report lists none."""
        if self.flags is None:
            return None
        rows: list[FindingRow] = [row for name in _FINDING_LISTS for row in getattr(self, name)]
        aligned = len(rows) <= len(self.flags) and all(row.__struct_config__.tag == f.flag
                                                       for row, f in zip(rows, self.flags))
        return [_finding(flag, rows[n] if aligned and n < len(rows) else None)
                for n, flag in enumerate(self.flags)]


def _finding(flag: ReportFlag, row: FindingRow | None) -> Finding:
    numbers = msgspec.structs.asdict(row) if row is not None else {}
    place = {k: numbers.pop(k) for k in ("start", "stride", "count", "end") if k in numbers}
    numbers.pop("index", None)
    extra = {"predicted_index": flag.predicted_index, "kernel_verdict": flag.kernel_verdict,
             "run": flag.run, "errno": flag.errno}
    numbers |= {k: v for k, v in extra.items() if v is not None}
    return Finding(flag=flag.flag or "flag", title=flag.title or flag.flag or "flag", note=flag.note,
                   index=flag.index, structure=flag.structure, kernel=flag.kernel, fields=numbers, **place)
