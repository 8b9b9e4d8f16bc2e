"""Tracing for the latency probe: which runs are traced, and the kernel evidence per flag.

``--trace off|attribute|all`` (ProbeSpec.trace):

- ``attribute`` (default): the measured runs stay untraced -- their latencies carry no
  observer effect -- and one extra run, on a fresh file system like the others, is traced to
  attribute the flags. Its latencies are kept apart (``trace_latency_ns``).
- ``all``: every measured run is traced (``N/N runs`` evidence; bench/trace_overhead.py
  measures what it costs).
- ``off``: nothing is traced.

Without root or tracefs the probe says why once and runs untraced.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

from fsscope.errors import FsscopeError
from fsscope.trace import attribute
from fsscope.trace.decode import EVENT_DTYPE
from fsscope.trace.session import TraceResult, Tracer
from fsscope.trace.tracefs import unavailable_reason

MODES = ("off", "attribute", "all")


def finding_indices(finding) -> list[int]:
    """The call indices a finding stands for (a series: every member)."""
    if hasattr(finding, "stride"):
        return [finding.start + k * finding.stride for k in range(finding.count)]
    if hasattr(finding, "index"):
        return [int(finding.index)]
    return [int(finding.start)]


class ProbeTrace:
    """Collects the traced runs of one probe job and turns them into report fields."""

    def __init__(self, ctx, mode: str, op: str):
        self.ctx = ctx
        self.mode = mode
        self.op = op
        self.pid = os.getpid()
        self.reason = unavailable_reason() if mode != "off" else "tracing off (--trace off)"
        if mode != "off" and self.reason:
            ctx.emit("log", line=f"kernel tracing off: {self.reason}; the probe runs untraced")
        self.results: list[tuple[int, TraceResult]] = []
        self.rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def active(self) -> bool:
        return self.mode != "off" and not self.reason

    @contextmanager
    def run(self, fs, run: int, latency_row: np.ndarray, start_row: np.ndarray) -> Iterator[None]:
        """Trace the body (one measured run) when tracing is active."""
        if not self.active:
            yield
            return
        raw_dir = Path(self.ctx.run_dir.path) / f"trace-raw-{run}"
        tracer = Tracer(raw_dir, fs=fs.fs, job="probe", pid=self.pid, device=fs.device,
                        avoid_cpu=next(iter(os.sched_getaffinity(0))),
                        journal=getattr(self.ctx.target, "journal", None))
        try:
            tracer.__enter__()
        except FsscopeError as exc:
            self.reason = str(exc)
            self.ctx.emit("log", line=f"kernel tracing off: {exc}; the probe runs untraced")
            yield
            return
        failed = True
        try:
            yield
            failed = False
        finally:
            try:
                tracer.__exit__(RuntimeError if failed else None, None, None)
            except FsscopeError as exc:  # the measurement stands; only its trace is lost
                self.ctx.emit("log", line=f"trace of run {run + 1} lost: {exc}")
        if tracer.result is not None:
            result = tracer.result
            result.events["run"] = run
            self.results.append((run, result))
            self.rows[run] = (latency_row, start_row)
            if result.missing:
                self.ctx.emit("log", line="trace: not on this kernel: " + ", ".join(result.missing))
            if result.lost:
                self.ctx.emit("log", line=f"trace of run {run + 1}: {result.overrun} overrun, "
                                          f"{result.dropped} dropped events -- the record is incomplete")

    def attribute(self, report: dict, findings: list, flags: list[dict]) -> None:
        """Add the kernel's side to the report: per flag, structural events, the
        prediction/kernel/latency table, causes of one-off noise, and the event arrays."""
        report["trace"] = {"mode": self.mode, "active": bool(self.results), "reason": self.reason}
        if not self.results:
            return
        names = self.results[0][1].names
        events = np.concatenate([r.events for _, r in self.results]) if self.results else np.zeros(0, EVENT_DTYPE)
        comms: dict[int, str] = {}
        for _, r in self.results:
            comms.update(r.comms)
        self.ctx.run_dir.save_array("trace_events", events)
        runs = []
        for run, result in self.results:
            latency_row, start_row = self.rows[run]
            runs.append(attribute.attribute_run(result.events, names, np.asarray(start_row),
                                                np.asarray(latency_row), pid=self.pid, run=run, comms=comms))
        flagged: set[int] = set()
        for finding in findings:
            if not hasattr(finding, "slope_ns_per_file"):
                flagged.update(finding_indices(finding))
        for flag, finding in zip(flags, findings):
            kernel = attribute.kernel_evidence(runs, finding_indices(finding))
            flag["kernel"] = kernel
            sentence = attribute.evidence_sentence(kernel, self.op)
            if sentence:
                flag["note"] = f"{flag.get('note', '')} {sentence}.".strip()
        structural = attribute.structural_events(runs, flagged)
        enabled = self.results[0][1].enabled
        report["structural_events"] = structural
        report["structures"] = attribute.structure_table(report.get("predictions", []), structural,
                                                         flagged, enabled)
        report["noise"] = attribute.noise(runs, flagged)
        first = self.results[0][1]
        report["trace"] |= {
            "runs_traced": [run for run, _ in self.results], "event_names": names,
            "comms": {str(k): v for k, v in comms.items()}, "pid": self.pid,
            "enabled": enabled, "missing": first.missing, "filter_errors": first.filter_errors,
            "events": int(len(events)),
            "overrun": sum(r.overrun for _, r in self.results),
            "dropped": sum(r.dropped for _, r in self.results),
            "complete": all(not r.lost for _, r in self.results),
            "events_per_s": round(max(r.events_per_s for _, r in self.results), 1)}
