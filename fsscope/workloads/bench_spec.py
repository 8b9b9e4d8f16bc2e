"""What a bench is told: its :class:`Spec`, and the workload it scales from it."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from msgspec import Meta

from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
from fsscope.records import SpecRecord, force_setattr
from fsscope.workloads import personalities as P

BIN_S = 1.0


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "bench"
    parsers: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "window_sizes_s": lambda value: number_list(value, "window_sizes_s")}

    personality: Annotated[Literal["fileserver", "webserver", "varmail"],
                           Meta(description="the workload")] = "fileserver"
    runs: Annotated[int, Meta(ge=1, description="runs, each on a freshly formatted file system (the paper "
                                                "used 10+)")] = 3
    duration_s: Annotated[float, Meta(gt=0, description="measured seconds per run (with duration_auto: the "
                                                        "longest run the calibration may choose)")] = 30.0
    workers: Annotated[int, Meta(
        ge=1, description="workers (default min(Filebench's threads, 4 per CPU)); threads over one process per "
                          "CPU, like Filebench's threads (a process each where the C loops cannot be built)")] \
        | None = None
    nfiles: Annotated[int, Meta(ge=1, description="files in the file set (default Filebench's, scaled to a "
                                                  "quarter of the target)")] | None = None
    mean_file_size_bytes: Annotated[int, Meta(ge=1, description="mean file size, gamma-distributed (default 128K "
                                                                "fileserver, 16K others)")] | None = None
    mem_limit_bytes: Annotated[int, Meta(ge=1, description="memory cgroup limit for the workers (page cache "
                                                           "included), e.g. 512M")] | None = None
    # () = automatic: 10 s, or the whole run if shorter
    window_sizes_s: Annotated[tuple[float, ...], Meta(
        description="Throughput-N windows in seconds (default 10, or the run length if shorter); no longer than "
                    "the run")] = ()
    threshold: Annotated[float, Meta(ge=0, le=10, description="relative range above which runs count as "
                                                              "unstable (0.1 = 10 %)")] = 0.10
    seed: Annotated[int, Meta(description="seed of file sizes and op choices")] = 1
    fresh_fs: Annotated[bool, Meta(description="a freshly formatted file system per run (without: one file "
                                               "system for all runs, repopulated per run)")] = True
    duration_auto: Annotated[bool, Meta(description="a calibration run first, until the cumulative throughput "
                                                    "settles; duration_s is then the cap")] = False
    trace: Annotated[bool, Meta(
        description="kernel events per window through tracefs (root): journal commits, writeback starts and bytes "
                    "written per Throughput-N window, and every dip annotated with them (untraced with a note "
                    "when tracing is not possible)")] = True

    def __post_init__(self) -> None:
        if self.personality not in P.PERSONALITIES:
            raise FsscopeError(f"bench: unknown personality {self.personality!r} "
                               f"(choose from {', '.join(P.PERSONALITIES)})")
        if not isinstance(self.runs, int) or self.runs < 1:
            raise FsscopeError(f"bench: runs must be a whole number >= 1, got {self.runs!r}")
        if not self.duration_s > 0:
            raise FsscopeError(f"bench: duration_s must be positive, got {self.duration_s!r}")
        for name in ("workers", "nfiles", "mean_file_size_bytes", "mem_limit_bytes"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise FsscopeError(f"bench: {name} must be a whole number >= 1, got {value!r}")
        windows = tuple(self.window_sizes_s) or (float(max(1, min(10, math.floor(self.duration_s)))),)
        for w in windows:
            if not w > 0 or abs(w / BIN_S - round(w / BIN_S)) > 1e-9:
                raise FsscopeError(f"bench: window size {w!r} must be a positive whole number of seconds")
            if w > self.duration_s:
                raise FsscopeError(f"bench: a Throughput-{w:g} window does not fit in a {self.duration_s:g} s "
                                   f"run: pick windows no longer than the run (--window), or longer runs")
        force_setattr(self, "window_sizes_s", windows)
        if not isinstance(self.trace, bool):
            raise FsscopeError(f"bench: trace must be true or false, not {self.trace!r}")
        if not 0 <= self.threshold <= 10:
            raise FsscopeError(f"bench: threshold is a fraction (0.1 = 10 %), got {self.threshold!r}")



def number_list(value: Any, name: str) -> tuple[float, ...]:
    """A list of numbers from JSON (list or number) or from text such as "10, 30" or "(10,)"."""
    if isinstance(value, str):
        parts = [p for p in value.strip().strip("()[]").replace(",", " ").split() if p]
        try:
            value = [float(p) for p in parts]
        except ValueError:
            raise FsscopeError(f"bench: {name} must be numbers such as 10,30, not {value!r}") from None
    if isinstance(value, (int, float)):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, (int, float)) for v in value):
        raise FsscopeError(f"bench: {name} must be a list of numbers, not {value!r}")
    return tuple(int(v) if float(v).is_integer() else float(v) for v in value)


def personality_spec(spec: Spec, capacity_bytes: int | None, cpu_count: int | None = None) -> P.PersonalitySpec:
    """The workload the bench runs: Filebench defaults scaled to the capacity, with overrides;
    refused (one line) when its workers cannot live under --mem-limit or its file set cannot
    fit the target, since such a run measures nothing."""
    overrides: dict[str, Any] = {"duration_s": float(spec.duration_s), "seed": spec.seed, "bin_s": BIN_S}
    for ours, theirs in (("workers", "workers"), ("nfiles", "nfiles"),
                         ("mean_file_size_bytes", "mean_file_size_bytes")):
        if getattr(spec, ours) is not None:
            overrides[theirs] = getattr(spec, ours)
    # latency histograms per window: the smallest Throughput-N window that fits the run
    overrides["latency_window_s"] = float(min(spec.window_sizes_s))
    pspec = P.default_spec(spec.personality, capacity_bytes=capacity_bytes, cpu_count=cpu_count, **overrides)
    if spec.mem_limit_bytes is not None:
        # each worker's two io_size buffers (8 workers: OOM kills under 4 MiB in all, none at 16 MiB)
        need = pspec.workers * 2 * pspec.io_size_bytes
        if spec.mem_limit_bytes < need:
            raise FsscopeError(
                f"bench: --mem-limit {format_bytes(spec.mem_limit_bytes)} is below the minimum "
                f"{format_bytes(need)}: each of the {pspec.workers} workers needs about "
                f"{format_bytes(need // pspec.workers)} of its own (two {format_bytes(pspec.io_size_bytes)} I/O "
                "buffers) before any page cache, or the OOM killer ends it and nothing is measured")
    populated = pspec.fileset_bytes * pspec.prealloc_pct // 100
    if capacity_bytes and populated > capacity_bytes * 0.8:
        raise FsscopeError(
            f"bench: the file set ({pspec.nfiles:,} files of mean {format_bytes(pspec.mean_file_size_bytes)}, "
            f"{format_bytes(populated)} populated) does not fit the target's {format_bytes(capacity_bytes)} "
            "with room to run: use fewer --files, a smaller --mean-file-size or a larger --size")
    return pspec
