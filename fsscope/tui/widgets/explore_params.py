"""The explore panel: the factor space, how many treatments, on which recipes. Small
first-try defaults (the small space, 24 treatments)."""

from __future__ import annotations

from fsscope.tui.widgets.job_params import JobParams


class ExploreParams(JobParams):
    FIELDS = ("space", "treatments", "recipes", "repeat", "workers", "seed")
    NAME_FIELDS = ("recipes",)
    LABELS = {"treatments": "treatments"}
    HINTS = {
        "space": "a shipped space or a .toml path (small, chopper = the paper's Table 1)",
        "treatments": "LHS plan size; every level of every factor equally often",
        "recipes": "the plan runs on each, e.g. ext4-default,xfs-default",
        "repeat": "2 = run each treatment twice (nondeterminism)",
        "workers": "worker processes here (each clones its own disk state)",
    }
