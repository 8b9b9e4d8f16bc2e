"""The telemetry matrix a bench run records (``run{r}_telemetry.npy``: float64, one row per
~1-s sample, disks summed), its columns by name, and the rates every view derives from
counter deltas (device IOPS and bytes/s, CPU busy %), in one place."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

TELEMETRY_COLUMNS = ("t_s", "disk_read_bytes", "disk_write_bytes", "disk_read_ops", "disk_write_ops",
                     "disk_busy_ms", "cpu_user_pct", "cpu_system_pct", "cpu_iowait_pct", "cpu_idle_pct",
                     "mem_available_bytes", "mem_cached_bytes", "mem_dirty_bytes", "mem_writeback_bytes",
                     "proc_read_bytes", "proc_write_bytes", "blkio_delay_ns", "cpu_delay_ns")


def telemetry_matrix(samples: Sequence[Any]) -> np.ndarray:
    """The matrix of a sampler's samples (attributes named as the columns; per-disk ones summed)."""
    cols = []
    for name in TELEMETRY_COLUMNS:
        value = np.asarray(getattr(samples, name), dtype=np.float64)
        cols.append(value.sum(axis=1) if value.ndim == 2 else value)
    if not cols or cols[0].size == 0:
        return np.zeros((0, len(TELEMETRY_COLUMNS)))
    return np.column_stack(cols)


def named_columns(m: np.ndarray) -> dict[str, np.ndarray]:
    """The matrix's columns by name (a recorded matrix may be narrower than today's)."""
    return {name: m[:, i] for i, name in enumerate(TELEMETRY_COLUMNS[:m.shape[1]])}


def device_rates(dt_s, ops, nbytes):
    """(IOPS, bytes/s) from counter deltas over ``dt_s``; floats or arrays alike."""
    return ops / dt_s, nbytes / dt_s


def cpu_busy_pct(idle_pct):
    """CPU busy % from idle % (a missing idle share counts as 0 % busy); floats or arrays."""
    return np.nan_to_num(100.0 - np.asarray(idle_pct, dtype=np.float64), nan=0.0)
