"""The jobs fsscope can run. Each is a module exposing:

    Spec: a frozen dataclass              the job's parameters (from_dict/to_dict optional)
    run(ctx: JobContext, spec) -> dict    does the work in the job child, returns the report
    record_bytes(spec) -> int             optional: bytes of arrays it will write to the run
                                          record (checked against free space before it starts)

Modules are imported only when a job is used, so listing jobs stays cheap.
"""

from __future__ import annotations

import dataclasses
import importlib
from types import ModuleType

from fsscope.errors import FsscopeError
from fsscope.specs import checked_fields

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
    "frag": ("fsscope.layout.job", "free-space extent histogram and a large test file's fragments (fresh or --from-snapshot)"),
}


def load(name: str) -> ModuleType:
    if name not in JOBS:
        raise FsscopeError(f"unknown job '{name}' (known: {', '.join(JOBS)})")
    return importlib.import_module(JOBS[name][0])


def spec_from_dict(module: ModuleType, data: dict):
    spec_type = module.Spec
    if hasattr(spec_type, "from_dict"):
        return spec_type.from_dict(data)
    return spec_type(**checked_fields(spec_type, data, module.__name__.rsplit(".", 1)[-1]))


def spec_to_dict(spec) -> dict:
    return spec.to_dict() if hasattr(spec, "to_dict") else dataclasses.asdict(spec)
