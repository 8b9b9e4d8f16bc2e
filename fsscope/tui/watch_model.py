"""A ``watch`` job as its view shows it (plain Python: replay and tests use it): while it
watches, how long, how many tasks and how much the kernel recorded (``WatchProgress``); when it
ends, the report's tables -- the CLI's per-operation latencies and the slowest calls with why.
The calls are decoded when the watch ends, so the tables come then."""

from __future__ import annotations

from fsscope.engine.events import Event
from fsscope.format import spark, visible
from fsscope.tui.report_model import ReportModel
from fsscope.watch.records import OpSummary, Report, WatchProgress


def text(name: str | None, missing: str = "(not named)") -> str:
    """A watched task's path or command: its control characters visible (the view shows it as
    text, never markup)."""
    return missing if name is None else visible(name)


class WatchModel(ReportModel[Report]):
    kind = "watch"

    def __init__(self, spec=None):
        super().__init__(spec)
        self.elapsed_s: list[float] = []
        self.events_kib_per_s: list[float] = []  # what the kernel recorded per second, live
        self.tasks: int = 0
        self._last: tuple[float, int] | None = None

    def feed(self, event: Event) -> bool:
        if not isinstance(event, WatchProgress):
            return False
        if self._last is not None and event.elapsed_s > self._last[0]:
            rate = (event.raw_bytes - self._last[1]) / 1024 / (event.elapsed_s - self._last[0])
            self.events_kib_per_s.append(round(max(rate, 0.0), 1))
        self._last = (event.elapsed_s, event.raw_bytes)
        self.elapsed_s.append(event.elapsed_s)
        self.tasks = event.tasks
        self.version += 1
        return True

    def notes_of(self, report: Report) -> list[str]:
        return [visible(n) for n in report.notes]

    def summary(self) -> str:
        r = self.report
        if r is None:
            if not self.elapsed_s:
                return "attaching… (the calls are decoded and shown when the watch ends)"
            kib = self._last[1] // 1024 if self._last else 0
            return (f"watching for {self.elapsed_s[-1]:.0f} s: {self.tasks} task(s), {kib:,} KiB of kernel "
                    f"events recorded (decoded and shown when the watch ends)")
        line = (f"{text(r.watched)}: {r.calls:,} file-system calls in {r.duration_s:.1f} s on {text(r.fs)} "
                f"{text(r.device or '')} (tree {text(r.tree)})")
        if r.exit_status is not None:
            line += f"; the command exited with status {r.exit_status}"
        slow = (f"{r.slow_total} slow call(s) (causes: " + ", ".join(f"{n} {k}" for k, n in r.causes.items()) + ")"
                if r.slow_total else "no call was slow against its own kind on its file or directory")
        return (f"{line}\n{slow}; {len(r.format_changes)} directory format change(s), {len(r.repeats)} "
                f"repeat(s); events lost by the ring buffer: {r.lost_total}")

    def op_rows(self) -> list[tuple[str, ...]]:
        """The CLI's calls table (op, calls, p50/p99/max µs, slow, bytes, not named) with each
        op's p50 and p99 over the watch's windows as sparklines (log scale, one scale for both)."""
        if self.report is None:
            return []
        out: list[tuple[str, ...]] = []
        for o in self.report.ops:
            finite = [v for v in o.p50_us_by_window + o.p99_us_by_window if v is not None]
            lo, hi = (min(finite), max(finite)) if finite else (None, None)
            out.append((o.op, f"{o.calls:,}", f"{o.p50_us:,.1f}", f"{o.p99_us:,.1f}", f"{o.max_us:,.1f}",
                        f"{o.slow:,}", f"{o.bytes:,}", f"{o.unnamed:,}",
                        spark(o.p50_us_by_window, lo, hi, log=True), spark(o.p99_us_by_window, lo, hi, log=True)))
        return out

    def busiest(self) -> OpSummary | None:
        """The op with the most calls (the sparkline panel's latency rows)."""
        ops = self.report.ops if self.report is not None else []
        return max(ops, key=lambda o: o.calls) if ops else None

    def calls_per_s(self) -> list[float]:
        """Every watched call per second, window by window: the watch's throughput."""
        r = self.report
        if r is None or not r.ops or not r.window_s:
            return []
        windows = max(len(o.calls_by_window) for o in r.ops)
        return [sum(o.calls_by_window[w] for o in r.ops if w < len(o.calls_by_window)) / r.window_s
                for w in range(windows)]

    def slow_rows(self) -> list[tuple[str, ...]]:
        """The slowest calls: at s, thread, op, µs, baseline, file or directory, why."""
        if self.report is None:
            return []
        out: list[tuple[str, ...]] = []
        for s in self.report.slow:
            where = text(s.file) if s.file else text(s.dir) + ("/" if s.dir else "")
            out.append((f"{s.start_s:.3f}", f"{s.tid} {visible(s.comm)}", s.op, f"{s.duration_us:,.0f}",
                        f"{s.baseline_us:,.0f}" + ("" if s.local_baseline else " (op)"), where,
                        "; ".join(visible(c.text) for c in s.causes)))
        return out
