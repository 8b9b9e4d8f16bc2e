"""What the Check view shows, as plain data (no Textual): the audit's findings as they arrive,
the calibration runs' throughput and the runs-needed estimate after each run, and — when the
job ends — the report's ranked findings, figures and verdict."""

from __future__ import annotations

import math
from typing import Any

from fsscope.check.findings import Finding
from fsscope.check.job import CheckEvent, Report, Spec
from fsscope.check.verdict import Estimate
from fsscope.engine.events import Event
from fsscope.tui.report_model import ReportModel, spec_of

SEVERITY_ORDER = {"bad": 0, "warn": 1, "unknown": 2, "ok": 3}


class CheckModel(ReportModel[Report]):
    kind = "check"

    def __init__(self, spec: Spec | dict[str, Any] | None = None):
        super().__init__()
        self.precision = spec_of(Spec, spec).precision
        self.findings: list[Finding] = []
        self.run_ops_per_s: list[float] = []
        self.run_series: list[list[float]] = []
        self.runs_needed: list[int | None] = []   # after 2, 3, … runs (the live curve)
        self.estimate = Estimate()

    def feed(self, event: Event) -> bool:
        if not isinstance(event, CheckEvent):
            return False
        if event.finding is not None:
            self.findings.append(event.finding)
        run = event.calibration_run
        if run is not None:
            self.run_ops_per_s.append(run.ops_per_s or 0.0)
            self.run_series.append(list(run.series))
            self.estimate = event.estimate or Estimate()
            if len(self.run_ops_per_s) >= 2:
                self.runs_needed.append(self.estimate.runs_needed)
        self.version += 1
        return True

    def notes_of(self, report: Report) -> list[str]:
        return list(report.notes)

    def took(self, report: Report) -> None:
        self.findings = list(report.findings)
        cal = report.calibration
        if cal is not None:
            self.precision = cal.precision
            if not self.run_ops_per_s:
                self.run_ops_per_s = [r.ops_per_s or 0.0 for r in cal.runs]
            self.runs_needed = [h.runs_needed for h in cal.runs_needed_history]
            self.estimate = cal.estimate()

    def rows(self) -> list[Finding]:
        """Findings worst first (the report's order once it is in)."""
        if self.report is not None:
            return list(self.findings)
        return sorted(self.findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 4))

    @property
    def verdict(self) -> str | None:
        return self.report.verdict if self.report else None

    @property
    def headline(self) -> str:
        if self.report:
            return self.report.headline or self.report.verdict
        if self.run_ops_per_s:
            return f"calibrating: {len(self.run_ops_per_s)} run(s) done"
        return "auditing…" if not self.findings else "audit done; calibrating…"

    def _recommendations(self) -> list[tuple[str, str]]:
        """The calibration's recommendations, each as (a line, a few words for 80×24)."""
        est = self.estimate
        out = []
        if est.cv is not None and math.isfinite(est.cv):
            out.append((f"CV {est.cv:.1%} → runs needed for ±{self.precision:.0%} (95 %, Student-t): {est.runs_needed}",
                        f"runs {est.runs_needed if est.runs_needed is not None else '–'} (CV {est.cv:.1%})"))
        if est.duration_s_needed is not None:
            out.append((f"run length: ≥ {est.duration_s_needed:g} s (cumulative throughput settled)",
                        f"run length ≥ {est.duration_s_needed:g} s"))
        elif self.run_ops_per_s:
            out.append(("run length: not settled within the calibration runs", "run length not settled"))
        if est.window_s_needed is not None:
            out.append((f"Throughput-N window: {est.window_s_needed:g} s", f"window {est.window_s_needed:g} s"))
        return out

    def short_summary(self) -> list[str]:
        """:meth:`summary_lines` in a few words each, for one line at 80×24."""
        return [short for _, short in self._recommendations()]

    def summary_lines(self) -> list[str]:
        return [line for line, _ in self._recommendations()]
