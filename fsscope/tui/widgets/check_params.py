"""The pre-benchmark check's panel: the calibration's workload and precision, the time it may
take, and the dataset the benchmark will touch. First-try default: the --quick minute."""

from __future__ import annotations

from fsscope.tui.widgets.job_params import JobParams


class CheckParams(JobParams):
    FIELDS = ("personality", "precision", "budget_s", "dataset_bytes", "runs", "sample_s", "calibrate")
    DEFAULTS = {"budget_s": 60.0, "sample_s": 2.0}
    SIZE_FIELDS = ("dataset_bytes",)
    LABELS = {"budget_s": "budget s", "dataset_bytes": "dataset", "sample_s": "watch s"}
    HINTS = {
        "personality": "workload of the short calibration runs",
        "precision": "wanted 95 % CI half-width as a fraction of the mean (0.05 = ±5 %)",
        "budget_s": "audit + calibration in all (60 ≈ --quick)",
        "dataset_bytes": "what your benchmark will touch, e.g. 40G (empty: not judged)",
        "runs": "calibration runs (empty: from the budget)",
        "sample_s": "how long the audit watches the device for other I/O",
    }
