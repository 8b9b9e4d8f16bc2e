"""A ``replay`` job's report, as the replay view shows it: per call type the replayed latency
distribution and throughput beside the captured one (plain Python: the recorded run's replay
and the tests use it)."""

from __future__ import annotations

from typing import Any

from fsscope.engine import events
from fsscope.engine.events import Event
from fsscope.format import visible
from fsscope.replay.records import PACE_WORDS, OpStats, Report, RunPlayed
from fsscope.tui.report_model import ReportModel

#: The per-call table's columns (key, heading), as `fsscope replay` prints them.
COLUMNS = (("op", "op"), ("calls", "calls"), ("p50", "p50 µs"), ("p99", "p99 µs"), ("rate", "calls/s"),
           ("mb", "MB/s"), ("slow", "slow"), ("cap50", "captured p50"), ("cap99", "captured p99"))


def _num(value: float | None, fmt: str = ",.1f") -> str:
    return "-" if value is None else format(value, fmt)


class ReplayModel(ReportModel[Report]):
    """The runs as they end (``played``: each run's calls per type), then the report."""

    kind = "replay"

    def __init__(self, spec: Any = None):
        super().__init__(spec)
        self.played: list[RunPlayed] = []

    def feed(self, event: Event) -> bool:
        if isinstance(event, RunPlayed):
            self.played.append(event)
            self.version += 1
            return True
        return False

    @classmethod
    def from_run(cls, run_dir: Any, spec: Any, report: Report | None) -> ReplayModel:
        """What the live view showed (the runs as they ended), then the report."""
        model = cls(spec)
        try:
            for event in events.read_run(run_dir, {RunPlayed.kind_name(): RunPlayed}):
                model.feed(event)
        except (OSError, ValueError):  # a torn or unreadable record: the report alone
            pass
        model.finish(report)
        return model

    def notes_of(self, report: Report) -> list[str]:
        # the log's notes quote names someone else chose: control characters made visible
        return [visible(n) for n in report.notes]

    def summary(self) -> str:
        r = self.report
        if r is None:
            if not self.played:
                return "replaying… (each run's calls per type when it ends; flags as they are found)"
            last = self.played[-1]
            return (f"run {last.run} of {last.runs} played: {last.played:,} calls in {last.elapsed_s:.2f} s "
                    f"(this run's calls below; slow calls and the captured latencies come with the report)")
        source = "an anonymized capture" if r.anonymized else visible(r.source or "a capture")
        pace = PACE_WORDS.get(r.pace, r.pace)
        runs = ", ".join(f"run {s.run}: {s.played:,} calls in {s.elapsed_s:.2f} s" for s in r.runs)
        text = (f"{source}: {r.calls:,} calls, {r.threads} thread(s), captured on {visible(r.captured_fs or '?')}, "
                f"replayed on {visible(r.fs)}{' from the aged snapshot ' + visible(r.snapshot) if r.snapshot else ''}"
                f" {pace}; starting tree {r.tree_entries:,} entries, {r.tree_bytes:,} bytes\n{runs}")
        failed = ", ".join(f"{o.failed:,} {o.op}" for o in r.ops if o.failed)
        if failed:
            text += f"\nfailed calls: {failed}"
        if r.causes:
            text += "\nslow calls' causes: " + ", ".join(f"{n:,} {visible(k)}" for k, n in r.causes.items())
        return text

    def series(self) -> tuple[str, list[float], list[float], list[float]]:
        """Per run as it ended: the call type with the most calls, its p50 and p99 µs per run,
        and every call's rate per run (calls/s) -- the sparklines beside the table."""
        counts: dict[str, int] = {}
        for p in self.played:
            for o in p.ops:
                counts[o.op] = counts.get(o.op, 0) + o.calls
        if not counts:
            return "", [], [], []
        op = max(counts, key=lambda name: counts[name])
        of_op = [next((o for o in p.ops if o.op == op), None) for p in self.played]
        return (op, [o.p50_us if o else 0.0 for o in of_op], [o.p99_us if o else 0.0 for o in of_op],
                [p.played / p.elapsed_s if p.elapsed_s else 0.0 for p in self.played])

    def rows(self) -> list[tuple[str, ...]]:
        """Per call type: the cells of :data:`COLUMNS`, over every run once the report is in,
        the last run's before (slow not judged yet: "…")."""
        ops: list[OpStats] = self.report.ops if self.report is not None else (
            self.played[-1].ops if self.played else [])
        judged = self.report is not None
        return [(o.op, f"{o.calls:,}", _num(o.p50_us), _num(o.p99_us), _num(o.calls_per_s, ",.0f"),
                 _num(o.mb_per_s, ".2f") if o.bytes else "-", f"{o.slow:,}" if judged else "…",
                 _num(o.captured_p50_us), _num(o.captured_p99_us)) for o in ops]
