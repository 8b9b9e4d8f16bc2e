"""The synchronous-write sweep's records: its spec, the point it streams and its report
(apart from the job, so the TUI's model and the CLI read them without the job's imports)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from msgspec import Meta

from fsscope.engine.events import DataRecord
from fsscope.errors import FsscopeError
from fsscope.records import Record, ReportRecord, SpecRecord
from fsscope.targets import ReportTarget
from fsscope.units import list_items, parse_size_bytes
from fsscope.workloads import syncwrite as sw

_DEFAULTS = sw.SyncWriteSpec()
Mode = Literal["osync", "odsync", "fsync", "fdatasync", "direct+osync", "direct+odsync", "direct+fdatasync"]


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "syncwrite"
    parsers: ClassVar[dict[str, Callable[[Any], Any]]] = {"buffer_sizes_bytes": lambda v: size_list(v)}

    buffer_sizes_bytes: Annotated[tuple[int, ...], Meta(
        description="buffer sizes (default 4K..16M, doubling)")] = _DEFAULTS.buffer_sizes_bytes
    file_size_bytes: Annotated[int, Meta(ge=1, description="size of the new file each point writes (the "
                                                           "paper's 16M)")] = _DEFAULTS.file_size_bytes
    mode: Annotated[Mode, Meta(description="how each write is made durable (osync = O_SYNC)")] = "osync"
    repeats: Annotated[int, Meta(ge=1, description=f"repetitions, each a new file per size (the paper's "
                                                   f"{sw.DEFAULT_REPEATS})")] = _DEFAULTS.repeats
    min_writes: Annotated[int, Meta(ge=1, description="writes per point at the least (large buffers "
                                                      "still get this many)")] = _DEFAULTS.min_writes
    # per point; None: bounded by file_size_bytes only
    duration_s: Annotated[float, Meta(gt=0, description="also stop each point after S seconds (for slow "
                                                        "devices and small buffers)")] | None = None
    seed: Annotated[int, Meta(description="seed of each repetition's size order")] = _DEFAULTS.seed
    preallocate: Annotated[bool, Meta(
        description="preallocating each new file (fallocate, as fio does by default, and logs such as etcd's "
                    "WAL): the paper's way appends to a fresh, unallocated file, as its iozone did")] \
        = _DEFAULTS.preallocate
    # Off by default: the tracer's own work shifts µs-scale latencies.
    trace: Annotated[bool, Meta(
        description="trace the kernel (root): per write, the block requests, bytes, cache flushes and journal "
                    "commits that reached the device inside it (off by default: tracing shifts µs "
                    "latencies)")] = False

    def __post_init__(self) -> None:
        if self.duration_s is not None and not self.duration_s > 0:
            raise FsscopeError(f"syncwrite: duration_s must be positive, got {self.duration_s!r}")
        if not isinstance(self.trace, bool):
            raise FsscopeError(f"syncwrite: trace must be true or false, not {self.trace!r}")
        self.sweep_spec()  # the workload's own checks (mode, sizes, counts)

    def sweep_spec(self) -> sw.SyncWriteSpec:
        return sw.SyncWriteSpec(buffer_sizes_bytes=self.buffer_sizes_bytes, file_size_bytes=self.file_size_bytes,
                                mode=self.mode, repeats=self.repeats, min_writes=self.min_writes, seed=self.seed,
                                preallocate=self.preallocate)



class IoSummary(Record, frozen=True, kw_only=True):
    """What reached the device inside a set of measured writes (traced runs)."""

    requests: int = 0
    bytes: int = 0
    flush: int = 0
    fua: int = 0
    commits: int = 0
    writes: int = 0
    requests_per_write: float | None = None
    bytes_per_write: float | None = None
    flush_per_write: float | None = None
    fua_per_write: float | None = None
    commits_per_write: float | None = None


class KernelRow(IoSummary, frozen=True, kw_only=True):
    """Per buffer size; ``device_bytes_per_byte``: device bytes per byte the application wrote."""

    buffer_bytes: int = 0
    device_bytes_per_byte: float | None = None


class Point(Record, frozen=True, kw_only=True, omit_defaults=True):
    """One measured point (a repetition's file of one buffer size); None: not measured (cut by
    a kill). ``kernel`` only in a traced run."""

    buffer_bytes: int
    repeat: int
    order: int
    writes: int
    bytes_written: int | None
    elapsed_s: float | None
    ended: bool
    bytes_per_s: float | None
    mean_ns: float | None
    p50_ns: float | None
    p99_ns: float | None
    kernel: IoSummary | None = None


class PointSample(DataRecord, frozen=True, kw_only=True, tag="samples"):
    """A point as it ends (live)."""

    point: Point


DATA = (PointSample,)  # the sweep's own event kind (registry.decode_event reads it)


class SizeFigures(Record, frozen=True, kw_only=True):
    """One buffer size over its repetitions (:class:`fsscope.analysis.efficiency.SizeStats`;
    None where it has no value); throughput in bytes/s, ``ratio`` bytes/s per s of latency."""

    buffer_bytes: int
    repeats: int = 0
    writes: int = 0
    throughput_mean: float | None = None
    throughput_sd: float | None = None
    throughput_ci95: float | None = None
    latency_mean_ns: float | None = None
    latency_sd_ns: float | None = None
    latency_ci95_ns: float | None = None
    latency_p50_ns: float | None = None
    latency_p99_ns: float | None = None
    ratio: float | None = None
    throughput_runs: list[float | None] = []
    latency_mean_runs_ns: list[float | None] = []


class Knee(Record, frozen=True, kw_only=True):
    """A knee with how often a bootstrap over the repetitions finds it at the same size."""

    buffer_bytes: int | None = None
    agreement: float | None = None
    low_bytes: int | None = None
    high_bytes: int | None = None
    resamples: int = 0
    note: str = ""


class Knees(Record, frozen=True, kw_only=True):
    latency_rise_bytes: int | None = None
    throughput_saturation_bytes: int | None = None
    latency_rise: Knee | None = None
    throughput_saturation: Knee | None = None


class FileSetup(Record, frozen=True, kw_only=True):
    preallocate: bool = True
    as_paper: bool = False
    note: str = ""


class Flag(Record, frozen=True, kw_only=True):
    kind: str = ""
    title: str = ""
    note: str = ""


class Choice(Record, frozen=True, kw_only=True):
    """A goal (--target-throughput / --max-latency) and the buffer that meets it (None: none)."""

    target_throughput: float | None = None
    max_latency_ns: float | None = None
    buffer_bytes: int | None = None
    note: str = ""


class SizeTest(Record, frozen=True, kw_only=True):
    """Two recipes at one buffer size: Welch's t-test on the repetitions' throughput (the
    verdict names the faster one only at p < ``alpha``)."""

    a: str
    b: str
    buffer_bytes: int
    p: float | None = None
    t: float | None = None
    df: float | None = None
    mean_a: float | None = None
    mean_b: float | None = None
    verdict: str = ""
    alpha: float = 0.001


class Report(ReportRecord, frozen=True, kw_only=True):
    """The sweep's report. ``partial``: rebuilt from a killed run's arrays; ``choices``: the
    goals the command line gave, added by ``fsscope syncwrite``."""

    throughput_unit: str = "bytes/s"
    sizes: list[SizeFigures] = []
    knees: Knees = Knees()
    phases: dict[str, list[int]] = {}
    recommended_bytes: int | None = None
    recommendation: str = ""
    best_ratio_buffer_bytes: int | None = None
    raw_points: list[Point] = []
    point_columns: list[str] = []
    writes_measured: int = 0
    trace: dict[str, Any] = {}
    kernel_by_size: list[KernelRow] = []
    run_id: str = ""
    mode: str = ""
    recipe: str | None = None
    fs: str | None = None
    target: ReportTarget | None = None
    spec: Spec | None = None
    file_setup: FileSetup | None = None
    points_completed: int = 0
    points_requested: int = 0
    cancelled: bool = False
    stopped: str | None = None
    partial: bool = False
    flags: list[Flag] = []
    notes: list[str] = []
    choices: list[Choice] = []

    @property
    def where(self) -> str:
        return self.recipe or self.fs or "?"


def size_list(value: Any) -> tuple[int, ...]:
    """Buffer sizes from JSON (list or number) or text such as "4K,64K,1M" or "(4096, 8192)"."""
    if isinstance(value, str):
        parts = list_items(value)
        try:
            return tuple(parse_size_bytes(p) for p in parts)
        except FsscopeError:
            raise FsscopeError(f"syncwrite: buffer sizes must be sizes such as 4K,64K,1M, not {value!r}") from None
    if isinstance(value, int):
        return (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) for v in value):
        raise FsscopeError(f"syncwrite: buffer_sizes_bytes must be a list of byte counts, not {value!r}")
    return tuple(value)


