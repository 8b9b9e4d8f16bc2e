"""What a bench says: its event kinds (a 1-s window, a telemetry sample, the kernel's counts
per window) and its report, as records. Every field has a default, so an older report.json
or event line still reads; the wire keys are the ones the bench always wrote."""

from __future__ import annotations

from typing import Any

from fsscope.analysis.variation.report import OpLatency, RunVariation, Variation
from fsscope.engine.events import DataRecord
from fsscope.layout.placement import Placement
from fsscope.records import Record, ReportRecord
from fsscope.workloads import personalities as P
from fsscope.workloads.bench_spec import Spec
from fsscope.workloads.probe_records import Writer

# ---------------------------------------------------------------- event kinds


class WindowSample(DataRecord, frozen=True, kw_only=True, tag="samples"):
    """One 1-s bin of run ``run`` as it is measured (the live view's bars and sparklines)."""

    run: int
    window: P.LiveSample


class TelemetryRow(Record, frozen=True, kw_only=True):
    """One telemetry sample: device counters per disk since the previous sample, CPU shares,
    memory, and the workers' own I/O and delays."""

    t_s: float = 0.0
    disk_read_bytes: dict[str, int] = {}
    disk_write_bytes: dict[str, int] = {}
    disk_read_count: dict[str, int] = {}
    disk_write_count: dict[str, int] = {}
    disk_read_time: dict[str, int] = {}
    disk_write_time: dict[str, int] = {}
    disk_busy_time: dict[str, int] = {}
    cpu_user_pct: float | None = None
    cpu_system_pct: float | None = None
    cpu_iowait_pct: float | None = None
    cpu_idle_pct: float | None = None
    mem_available_bytes: int | None = None
    mem_cached_bytes: int | None = None
    mem_dirty_bytes: int | None = None
    mem_writeback_bytes: int | None = None
    proc_read_bytes: int | None = None
    proc_write_bytes: int | None = None
    blkio_delay_ns: int | None = None
    cpu_delay_ns: int | None = None


class TelemetrySample(DataRecord, frozen=True, kw_only=True, tag="telemetry"):
    """About once a second while run ``run`` measures (the live screen's device line)."""

    run: int
    sample: TelemetryRow


class KernelWindows(Record, frozen=True, kw_only=True):
    """The kernel's events per Throughput-N window of one traced run."""

    window_s: float = 1.0
    start_ns: int = 0
    journal_commits: list[int] = []
    writeback_starts: list[int] = []
    write_requests: list[int] = []
    bytes_written: list[int] = []
    flushes: list[int] = []

    def tracked(self) -> dict[str, list[int]]:
        """The per-window counts by name (what a dip is annotated with)."""
        return {"journal_commits": self.journal_commits, "writeback_starts": self.writeback_starts,
                "write_requests": self.write_requests, "bytes_written": self.bytes_written,
                "flushes": self.flushes}


class KernelCounts(DataRecord, frozen=True, kw_only=True, tag="kernel"):
    """A traced run finished: its kernel counts per window."""

    run: int
    windows: KernelWindows


DATA = (WindowSample, TelemetrySample, KernelCounts)  # registry.decode_event reads them


# ---------------------------------------------------------------- the report


class RunTelemetry(Record, frozen=True, kw_only=True):
    """What the device, CPUs and memory did during one run, in a few numbers."""

    samples: int = 0
    disks: list[str] = []
    disk_read_bytes_per_s: float | None = None
    disk_write_bytes_per_s: float | None = None
    disk_iops: float | None = None
    disk_busy_mean: float | None = None
    disk_busy_max: float | None = None
    cpu_user_pct_mean: float | None = None
    cpu_system_pct_mean: float | None = None
    cpu_iowait_pct_mean: float | None = None
    mem_dirty_bytes_max: int | None = None
    mem_writeback_bytes_max: int | None = None
    workers_read_bytes: int | None = None
    workers_write_bytes: int | None = None
    blkio_delay_s: float | None = None
    cpu_delay_s: float | None = None


class Generator(Record, frozen=True, kw_only=True):
    """Whether the run measured its generator (:func:`fsscope.analysis.generator.generator_bound`)."""

    cpu_bound: bool = False
    generator_bound: bool = False
    workers_cpu_bound_share: float | None = None
    workers_user_share: float | None = None
    workers_cpu_s: float | None = None
    workers_runqueue_s: float | None = None
    user_us_per_op: float | None = None
    device_busy: float | None = None
    criterion: str = ""


class Dip(Record, frozen=True, kw_only=True):
    """A slow Throughput-N window and what the kernel did in it."""

    window: int = 0
    t_s: list[float] = []
    ops_per_s: float | None = None
    below_median: float | None = None
    kernel: dict[str, int] = {}
    note: str = ""


class BenchRun(RunVariation, frozen=True, kw_only=True):
    """One run of the report: its variation numbers plus what ran and what the machine did."""

    populate: dict[str, Any] | None = None
    workers: int | None = None
    worker_loop: str | None = None
    cgroup: dict[str, Any] | None = None
    notes: list[str] = []
    telemetry: RunTelemetry = RunTelemetry()
    generator: Generator | None = None
    placement: Placement | None = None
    kernel_windows: KernelWindows | None = None
    dips: list[Dip] = []


class PartialRun(BenchRun, frozen=True, kw_only=True):
    """The run a cancel or a full file system stopped (left out of the variation numbers)."""

    run: int = 0


class PlacementVsThroughput(Record, frozen=True, kw_only=True):
    """The paper's Fig. 4 as numbers: where each run's dataset starts beside its throughput."""

    runs: int = 0
    first_byte_median: list[float] = []
    ops_per_s: list[float | None] = []
    pcc: float | None = None
    same_groups_every_run: bool = False


class TelemetryInfo(Record, frozen=True, kw_only=True):
    taskstats_available: bool | None = None
    delayacct: str | None = None
    columns: list[str] = []
    notes: list[str] = []


class Duration(Record, frozen=True, kw_only=True):
    """The run length: given, or calibrated (``--duration auto``)."""

    auto: bool = False
    chosen_s: float | None = None
    settled: bool | None = None
    cap_s: float | None = None
    criterion: str | None = None
    calibration_ops_per_s: list[float] | None = None


class Report(ReportRecord, frozen=True, kw_only=True):
    """The bench's report: the variation document over its completed runs plus what ran where."""

    personality: str = ""
    runs: list[BenchRun] = []
    variation: Variation = Variation()
    latency: dict[str, OpLatency] = {}
    flags: list[dict[str, Any]] = []  # a flag's own numbers differ per kind: kind, title, note, …
    placement: PlacementVsThroughput | None = None
    trace: dict[str, Any] | None = None
    run_id: str | None = None
    recipe: str | None = None
    fs: str | None = None
    target: dict[str, Any] = {}
    spec: Spec = Spec()
    workload: P.PersonalitySpec | None = None
    bin_s: float = 1.0
    runs_requested: int | None = None
    runs_completed: int | None = None
    cancelled: bool = False
    partial_run: PartialRun | None = None
    stopped_by: str | None = None
    telemetry: TelemetryInfo = TelemetryInfo()
    dirty_writeback: dict[str, Any] = {}
    duration: Duration = Duration()
    notes: list[str] = []
    writers: list[Writer] = []  # other processes' I/O on the measured device during the runs (as the probe's)
    writers_watched: str = ""   # how they were watched: what a writer must do to be named
