"""The sync-write sweep's panel: how writes are made durable, the buffer sizes, and how much
each point writes. Small first-try defaults: three sizes, 4 MiB or 3 s per point, 5 repetitions
(the CLI's --quick; the paper used 30)."""

from __future__ import annotations

from fsscope.tui.widgets.job_params import JobParams


class SyncWriteParams(JobParams):
    FIELDS = ("mode", "buffer_sizes_bytes", "file_size_bytes", "duration_s", "repeats", "trace")
    DEFAULTS = {"buffer_sizes_bytes": (4096, 65536, 1 << 20), "file_size_bytes": 4 << 20,
                "duration_s": 3.0, "repeats": 5}
    SIZE_FIELDS = ("buffer_sizes_bytes", "file_size_bytes")
    LIST_FIELDS = ("buffer_sizes_bytes",)
    LABELS = {"buffer_sizes_bytes": "buffers", "file_size_bytes": "per point", "duration_s": "seconds max"}
    HINTS = {
        "mode": "osync = O_SYNC, odsync = O_DSYNC, fsync / fdatasync after each write; direct+… adds O_DIRECT",
        "buffer_sizes_bytes": "bytes per write, e.g. 4K,64K,1M",
        "file_size_bytes": "bytes written per point (one point per size and repeat)",
        "duration_s": "also end a point after this long (empty: no limit)",
        "repeats": "repetitions: each writes every size once, in a seeded random order (30 in the paper)",
        "trace": "kernel events (root): per write, the device requests, bytes, flushes and journal commits",
    }
