"""The latency probe's panel: the op it times, how many files, how many runs, name length."""

from __future__ import annotations

from fsscope.tui.widgets.job_params import JobParams


class ProbeParams(JobParams):
    FIELDS = ("op", "files", "runs", "name_length", "sync_before", "trace")
    HINTS = {
        "op": "the syscall timed once per file: creat, mkdir, unlink, stat, rename…",
        "files": "files per run (file index = column of the heatmap)",
        "runs": "repetitions on a fresh file system (rows of the heatmap)",
        "name_length": "digits per file name: longer names fill directory blocks sooner",
        "sync_before": "each: syncfs of the measured file system before every call, so calls do not share dirty state",
        "trace": "kernel events per flag (root): attribute = one extra traced run, all = every run, off",
    }
