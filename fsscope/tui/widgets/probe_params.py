"""The latency probe's panel: the op it times, how many files, how many runs, name length."""

from __future__ import annotations

from textual.widgets import Input, Static

from fsscope.tui.widgets.job_params import JobParams

RUNS_HINT = "repetitions on a fresh file system (rows of the heatmap)"


class ProbeParams(JobParams):
    FIELDS = ("op", "files", "runs", "name_length", "sync_before", "trace")
    HINTS = {
        "op": "the syscall timed once per file: creat, mkdir, unlink, stat, rename…",
        "files": "files per run (file index = column of the heatmap)",
        "runs": RUNS_HINT,
        "name_length": "digits per file name: longer names fill directory blocks sooner",
        "sync_before": "each: syncfs of the measured file system before every call, so calls do not share dirty state",
        "trace": "kernel events per flag (root): attribute = one extra traced run, all = every run, off",
    }

    def on_mount(self) -> None:
        self._say_runs(str(self.values.get("runs", "")))

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == self._param_id("runs"):
            self._say_runs(event.value)

    def _say_runs(self, text: str) -> None:
        """The runs asked for and the most the probe may add until every candidate file is
        decided (8 runs for 5 asked looked like a miscount on the live row and in compare)."""
        try:
            runs = int(text)
            cap = self.spec_type(runs=runs, max_runs=self.values.get("max_runs")).run_cap
        except (TypeError, ValueError):
            return
        more = f": {runs} runs, up to {cap} until every candidate file is decided" if cap > runs else ""
        self.query_one(f"#hint-{self.job}-runs", Static).update(RUNS_HINT + more)
