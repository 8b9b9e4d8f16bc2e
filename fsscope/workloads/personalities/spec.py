"""What a personality run is: its op types, Filebench's defaults, the frozen spec."""

from __future__ import annotations

import os
from typing import Any

from fsscope.errors import FsscopeError
from fsscope.records import Record
from fsscope.workloads import PERSONALITIES

# Op types per personality, in the order they appear in the flowop sequence.
OPS: dict[str, tuple[str, ...]] = {
    "fileserver": ("create", "write", "close", "open", "append", "read", "delete", "stat"),
    "webserver": ("open", "read", "close", "append"),
    "varmail": ("delete", "create", "append", "fsync", "close", "open", "read"),
}

# Filebench defaults (anchors §3.1): files, mean size, dir width, threads, prealloc %.
_FILEBENCH = {
    "fileserver": dict(nfiles=10_000, mean_file_size_bytes=128 << 10, dir_width=20, threads=50, prealloc_pct=80),
    "webserver": dict(nfiles=1_000, mean_file_size_bytes=16 << 10, dir_width=20, threads=100, prealloc_pct=100),
    "varmail": dict(nfiles=1_000, mean_file_size_bytes=16 << 10, dir_width=1_000_000, threads=16, prealloc_pct=80),
}

MANIFEST_NAME = ".fsscope-fileset-{name}.npz"
LOG_DIR = "logfiles"


class PersonalitySpec(Record, frozen=True, kw_only=False):
    """Everything that defines a personality run. Sizes in bytes, times in seconds."""

    name: str
    nfiles: int
    mean_file_size_bytes: int
    dir_width: int
    workers: int
    duration_s: float = 60.0
    io_size_bytes: int = 1 << 20
    append_size_bytes: int = 16 << 10     # appendfilerand: uniform 1..append_size_bytes
    gamma_shape: float = 1.5
    prealloc_pct: int = 80
    reads_per_iteration: int = 10         # webserver: whole-file reads per log append
    log_limit_bytes: int | None = None    # webserver: truncate the log past this size (None: never)
    seed: int = 0
    bin_s: float = 1.0                    # granularity of completion counts
    latency_window_s: float = 10.0        # granularity of stored latency histograms

    def __post_init__(self) -> None:
        def bad(field_name: str, why: str) -> FsscopeError:
            return FsscopeError(f"{self.name} spec: {field_name} {why}")
        if self.name not in PERSONALITIES:
            raise FsscopeError(f"unknown personality {self.name!r} (choose from {', '.join(PERSONALITIES)})")
        if self.workers < 1:
            raise bad("workers", f"must be >= 1, got {self.workers}")
        if self.nfiles < 1:
            raise bad("nfiles", f"must be >= 1, got {self.nfiles}")
        if self.name != "webserver" and self.nfiles < 2 * self.workers:
            raise bad("nfiles", f"must be at least 2 per worker ({2 * self.workers}), got {self.nfiles}")
        for name in ("mean_file_size_bytes", "dir_width", "io_size_bytes", "append_size_bytes"):
            if getattr(self, name) < 1:
                raise bad(name, f"must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.prealloc_pct <= 100:
            raise bad("prealloc_pct", f"must be 0..100, got {self.prealloc_pct}")
        if self.log_limit_bytes is not None and self.log_limit_bytes < self.append_size_bytes:
            raise bad("log_limit_bytes", f"must be at least append_size_bytes ({self.append_size_bytes})")
        if self.duration_s <= 0 or self.bin_s <= 0:
            raise bad("duration_s/bin_s", "must be positive")
        ratio = self.latency_window_s / self.bin_s
        if ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
            raise bad("latency_window_s", f"must be a multiple of bin_s={self.bin_s}")

    @property
    def op_names(self) -> tuple[str, ...]:
        return OPS[self.name]

    @property
    def fileset_bytes(self) -> int:
        return self.nfiles * self.mean_file_size_bytes


def default_spec(name: str, capacity_bytes: int | None = None, cpu_count: int | None = None,
                 **overrides: Any) -> PersonalitySpec:
    """Filebench's defaults scaled to fit: the file set takes at most a quarter of
    ``capacity_bytes`` (files grow by appends, and the file system needs room), with at least
    50 files; workers default to min(Filebench's thread count, 4 per CPU), since workers
    beyond that only queue for the CPU on a fast device."""
    if name not in _FILEBENCH:
        raise FsscopeError(f"unknown personality {name!r} (choose from {', '.join(PERSONALITIES)})")
    base = dict(_FILEBENCH[name])
    threads = base.pop("threads")
    cpus = cpu_count or os.cpu_count() or 1
    base["workers"] = max(1, min(threads, 4 * cpus))
    mean = overrides.get("mean_file_size_bytes", base["mean_file_size_bytes"])
    if "fileset_bytes" in overrides:
        base["nfiles"] = max(1, int(overrides.pop("fileset_bytes")) // mean)
    elif capacity_bytes:
        base["nfiles"] = int(max(50, min(base["nfiles"], capacity_bytes // 4 // mean)))
    if name == "webserver" and capacity_bytes:
        base["log_limit_bytes"] = max(capacity_bytes // 4, base.get("append_size_bytes", 16 << 10))
    base.update(overrides)
    if name != "webserver":
        base["nfiles"] = max(base["nfiles"], 2 * base["workers"])
    return PersonalitySpec(name=name, **base)


