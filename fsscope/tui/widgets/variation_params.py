"""The variation-study panel: the configuration space, how many configurations, the file
systems and personalities, runs and run length. Small first-try defaults (two ext4
configurations under varmail, 3 runs of 5 s: a few minutes); the paper ran 10 runs of 800 s."""

from __future__ import annotations

from fsscope.tui.widgets.job_params import JobParams


class VariationParams(JobParams):
    FIELDS = ("space", "configurations", "file_systems", "personalities", "runs", "duration_s", "nfiles",
              "workers", "scheduler", "security", "threshold", "seed")
    NAME_FIELDS = ("file_systems", "personalities")
    LABELS = {"configurations": "configs", "file_systems": "file systems", "personalities": "workloads",
              "duration_s": "run length s", "nfiles": "files"}
    DEFAULTS = {"configurations": 2, "file_systems": ("ext4",), "personalities": ("varmail",), "runs": 3,
                "duration_s": 5.0, "nfiles": 200}
    HINTS = {
        "space": "a shipped space or a .toml path (cao-small; cao-expert = the paper's Table 2)",
        "configurations": "LHS sample size; each runs on every file system under every workload",
        "file_systems": "ext4,xfs,btrfs (only each one's own knobs apply)",
        "personalities": "fileserver,varmail,webserver",
        "runs": "runs per configuration and workload, each on a fresh file system",
        "nfiles": "files in each workload's file set (0 = the personality's default)",
        "workers": "local worker processes (1: side-by-side treatments perturb each other)",
        "scheduler": "tls://HOST:8786 runs on that Dask cluster's workers (empty: here)",
        "security": "for tls://: a TOML naming the CA, cert and key (ca, cert, key; see README)",
        "threshold": "flag configurations whose relative range exceeds this",
    }
