"""The hygiene-ladder panel: the personality, runs per step, run length, the steps (the
paper's baseline, no_lazy, umount, alloc, cumulative). It runs on the recipe picked above, on
RAM images of its own."""

from __future__ import annotations

from fsscope.tui.widgets.job_params import JobParams


class LadderParams(JobParams):
    FIELDS = ("personality", "runs", "duration_s", "nfiles", "image_size_bytes", "steps", "seed")
    NAME_FIELDS = ("steps",)
    LABELS = {"duration_s": "run length s", "nfiles": "files", "image_size_bytes": "image size"}
    DEFAULTS = {"runs": 3, "duration_s": 5.0}
    SIZE_FIELDS = ("image_size_bytes",)
    HINTS = {
        "personality": "fileserver, varmail or webserver",
        "runs": "runs per step; the relative range is taken across them",
        "steps": "cumulative: baseline,no_lazy,umount,alloc",
        "image_size_bytes": "each run's RAM image (sparse)",
    }
