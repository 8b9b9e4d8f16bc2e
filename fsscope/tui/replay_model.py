"""A ``replay`` job's report, as the replay view shows it: per call type the replayed latency
distribution and throughput beside the captured one (plain Python: the recorded run's replay
and the tests use it)."""

from __future__ import annotations

from fsscope.format import visible
from fsscope.replay.records import Report
from fsscope.tui.report_model import ReportModel

#: The per-call table's columns (key, heading), as `fsscope replay` prints them.
COLUMNS = (("op", "op"), ("calls", "calls"), ("p50", "p50 µs"), ("p99", "p99 µs"), ("rate", "calls/s"),
           ("mb", "MB/s"), ("slow", "slow"), ("cap50", "captured p50"), ("cap99", "captured p99"))


def _num(value: float | None, fmt: str = ",.1f") -> str:
    return "-" if value is None else format(value, fmt)


class ReplayModel(ReportModel[Report]):
    kind = "replay"

    def notes_of(self, report: Report) -> list[str]:
        # the log's notes quote names someone else chose: control characters made visible
        return [visible(n) for n in report.notes]

    def summary(self) -> str:
        r = self.report
        if r is None:
            return "replaying… (the per-call table is shown when the job ends; progress and flags as it runs)"
        source = "an anonymized capture" if r.anonymized else visible(r.source or "a capture")
        pace = "as fast as possible" if r.pace == "asap" else "at the recorded pace"
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

    def rows(self) -> list[tuple[str, ...]]:
        """Per call type, over every run: the cells of :data:`COLUMNS`."""
        if self.report is None:
            return []
        return [(o.op, f"{o.calls:,}", _num(o.p50_us), _num(o.p99_us), _num(o.calls_per_s, ",.0f"),
                 _num(o.mb_per_s, ".2f") if o.bytes else "-", f"{o.slow:,}",
                 _num(o.captured_p50_us), _num(o.captured_p99_us)) for o in self.report.ops]
