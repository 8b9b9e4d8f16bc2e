"""What the Check view shows, as plain data (no Textual): the audit's findings as they arrive,
the calibration runs' throughput and the runs-needed estimate after each run, and — when the
job ends — the report's ranked findings, figures and verdict."""

from __future__ import annotations

import math
from typing import Any

from fsscope.engine.events import Data, Event
from fsscope.tui.report_model import FromReport

SEVERITY_ORDER = {"bad": 0, "warn": 1, "unknown": 2, "ok": 3}


class CheckModel(FromReport):
    kind = "check"

    def __init__(self, spec: dict | None = None):
        spec = spec or {}
        self.precision = float(spec.get("precision") or 0.05)
        self.findings: list[dict[str, Any]] = []
        self.run_ops_per_s: list[float] = []
        self.run_series: list[list[float]] = []
        self.runs_needed: list[int | None] = []   # after 2, 3, … runs (the live curve)
        self.estimate: dict[str, Any] = {}
        self.report: dict | None = None
        self.notes: list[str] = []
        self.telemetry: list[tuple[float, float, float]] = []
        self.version = 0

    def feed(self, event: Event) -> bool:
        if not isinstance(event, Data) or event.kind != "check":
            return False
        if isinstance(event.fields.get("finding"), dict):
            self.findings.append(event.fields["finding"])
        run = event.fields.get("calibration_run")
        if isinstance(run, dict):
            self.run_ops_per_s.append(float(run.get("ops_per_s") or 0.0))
            self.run_series.append([float(x) for x in run.get("series") or []])
            self.estimate = dict(event.fields.get("estimate") or {})
            if len(self.run_ops_per_s) >= 2:
                self.runs_needed.append(self.estimate.get("runs_needed"))
        self.version += 1
        return True

    def finish(self, report: dict | None) -> None:
        if isinstance(report, dict) and isinstance(report.get("findings"), list):
            self.report = report
            self.findings = [f for f in report["findings"] if isinstance(f, dict)]
            cal = report.get("calibration") or {}
            if cal:
                self.precision = float(cal.get("precision") or self.precision)
                if not self.run_ops_per_s:
                    self.run_ops_per_s = [float(r.get("ops_per_s") or 0.0) for r in cal.get("runs") or []]
                self.runs_needed = [h.get("runs_needed") for h in cal.get("runs_needed_history") or []]
                self.estimate = {k: cal.get(k) for k in ("cv", "runs_needed", "duration_s_needed", "window_s_needed")}
            self.notes = [str(n) for n in report.get("notes") or []]
        self.version += 1

    def rows(self) -> list[dict[str, Any]]:
        """Findings worst first (the report's order once it is in)."""
        if self.report is not None:
            return list(self.findings)
        return sorted(self.findings, key=lambda f: SEVERITY_ORDER.get(f.get("severity"), 4))

    @property
    def verdict(self) -> str | None:
        return self.report.get("verdict") if self.report else None

    @property
    def headline(self) -> str:
        if self.report:
            return str(self.report.get("headline") or self.report.get("verdict"))
        if self.run_ops_per_s:
            return f"calibrating: {len(self.run_ops_per_s)} run(s) done"
        return "auditing…" if not self.findings else "audit done; calibrating…"

    def summary_lines(self) -> list[str]:
        est = self.estimate
        out = []
        cv = est.get("cv")
        if cv is not None and math.isfinite(cv):
            out.append(f"CV {cv:.1%} → runs needed for ±{self.precision:.0%} (95 %, Student-t): {est.get('runs_needed')}")
        if est.get("duration_s_needed") is not None:
            out.append(f"run length: ≥ {est['duration_s_needed']:g} s (cumulative throughput settled)")
        elif self.run_ops_per_s:
            out.append("run length: not settled within the calibration runs")
        if est.get("window_s_needed") is not None:
            out.append(f"Throughput-N window: {est['window_s_needed']:g} s")
        return out
