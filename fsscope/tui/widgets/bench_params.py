"""The bench's panel: which personality, how many runs of how long, workers, a memory limit
and the Throughput-N windows. Small first-try defaults: 3 runs of 10 s."""

from __future__ import annotations

from fsscope.tui.widgets.job_params import JobParams


class BenchParams(JobParams):
    FIELDS = ("personality", "runs", "duration_s", "workers", "mem_limit_bytes", "window_sizes_s", "trace")
    DEFAULTS = {"runs": 3, "duration_s": 10.0, "window_sizes_s": (5,)}
    SIZE_FIELDS = ("mem_limit_bytes",)
    LIST_FIELDS = ("window_sizes_s",)
    LABELS = {"duration_s": "seconds", "mem_limit_bytes": "mem limit", "window_sizes_s": "windows (s)"}
    HINTS = {
        "personality": "fileserver: whole files · webserver: reads + a log · varmail: fsync-heavy mail",
        "runs": "each on a freshly formatted file system (papers use 10+)",
        "duration_s": "measured per run",
        "workers": "processes (empty: Filebench's, at most 4 per CPU)",
        "mem_limit_bytes": "e.g. 512M: a memory cgroup, so the page cache cannot hold the file set",
        "window_sizes_s": "Throughput-N windows, e.g. 5 or 5,10",
        "trace": "kernel events per window (root): journal commits, writeback, bytes written",
    }
