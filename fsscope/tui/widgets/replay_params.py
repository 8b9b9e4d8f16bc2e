"""The replay's panel: which op log (``fsscope watch --capture LOG``), how many runs, at what
pace. The target and the recipe are Setup's; the log is read whole when Start is pressed, so a
truncated or corrupted one is refused there in one line, as the CLI refuses it."""

from __future__ import annotations

import os

from fsscope.tui.widgets.job_params import JobParams


class ReplayParams(JobParams):
    FIELDS = ("log", "runs", "pace", "trace")
    LABELS = {"log": "op log"}
    HINTS = {
        "log": "a path written by 'fsscope watch --capture LOG'; replayed with Setup's recipe "
               "(several recipes: one plan each, or 'fsscope replay --recipes a,b')",
        "runs": "each on a freshly made file system (2+ for a Welch test in Compare)",
        "pace": "asap: each call as soon as what it waits for returned · recorded: its think time first (asleep, "
                "then working, as captured) · wall: its whole think time",
        "trace": "under watch's tracing (root): kernel-timed calls, format changes, causes",
    }

    def spec_dict(self) -> dict:
        out = super().spec_dict()
        if out.get("log"):
            from fsscope import oplog

            # the child is started elsewhere: an absolute path, and the whole log read now,
            # so a log that is not whole is one line at Setup, nothing formatted
            out["log"] = os.path.abspath(os.path.expanduser(out["log"]))
            oplog.read(out["log"])
        return out
