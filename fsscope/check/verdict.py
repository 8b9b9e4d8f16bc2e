"""Fit / caution / unfit from the audit's findings and the calibration, in plain words; the
calibration's figures as the check's report holds them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from fsscope.check.findings import BLOCKING, Finding, rank
from fsscope.records import Record

EXIT_STATUS = {"fit": 0, "caution": 1, "unfit": 2}
MANY_RUNS = 30          # more runs than this needed: caution (Cao et al. used 10)
TOO_MANY_RUNS = 100     # more than this: the setup is too noisy to benchmark at this precision


class CalibrationRunFigures(Record, frozen=True, kw_only=True):
    """One calibration run: cumulative throughput, its length, when it settled (None: never)."""

    ops_per_s: float | None = None
    elapsed_s: float | None = None
    stable_after_s: float | None = None


class HistoryEntry(Record, frozen=True, kw_only=True):
    after_runs: int = 0
    cv: float | None = None
    runs_needed: int | None = None


class WindowPoint(Record, frozen=True, kw_only=True):
    window_s: float = 0.0
    median_relative_range: float | None = None


class Workload(Record, frozen=True, kw_only=True):
    """The personality the calibration ran, as sized for the budget."""

    personality: str = ""
    nfiles: int | None = None
    workers: int | None = None
    mean_file_size_bytes: float | None = None
    duration_s: float | None = None
    runs: int | None = None


class Estimate(Record, frozen=True, kw_only=True):
    """What the runs so far say (also sent after each calibration run)."""

    cv: float | None = None
    runs_needed: int | None = None
    duration_s_needed: float | None = None
    window_s_needed: float | None = None


class Calibration(Estimate, frozen=True, kw_only=True):
    """The report's calibration: the runs, their CV and what follows from it (None where the
    runs do not tell; precision and confidence are fractions)."""

    personality: str = ""
    runs: list[CalibrationRunFigures] = []
    cv_upper: float | None = None
    relative_range: float | None = None
    precision: float = 0.05
    confidence: float = 0.95
    runs_needed_normal: int | None = None
    runs_needed_method: str = ""
    runs_needed_history: list[HistoryEntry] = []
    ci_halfwidth_now: float | None = None
    window_curve: list[WindowPoint] = []
    criterion: str = ""
    window_criterion: str = ""
    run_s: float = 0.0
    workload: Workload | None = None

    def estimate(self) -> Estimate:
        return Estimate(cv=self.cv, runs_needed=self.runs_needed, duration_s_needed=self.duration_s_needed,
                        window_s_needed=self.window_s_needed)


@dataclass(frozen=True)
class Verdict:
    verdict: str            # fit | caution | unfit
    headline: str           # one line
    fix_first: tuple[str, ...]  # ranked: what to do, most effect first


def _fix_line(f: Finding) -> str:
    return f"[{f.id}] {f.title}" + (f" — fix: {f.fix}" if f.fix else "")


def decide(findings: list[Finding], calibration: Calibration | None) -> Verdict:
    """``calibration``: None when it was skipped."""
    ranked = sorted(findings, key=rank)
    bad = [f for f in ranked if f.severity == "bad"]
    # device traffic no user process is behind (a fresh fs's first seconds) is not another tenant
    blocking = [f for f in bad if f.id in BLOCKING and not (f.id == "other-io" and f.values.get("kernel_only"))]
    fixes = [_fix_line(f) for f in bad]
    cal_blocking, cal_problems = _calibration_problems(calibration) if calibration is not None else (None, [])
    n = calibration.runs_needed if calibration is not None else None
    t = (max([x for x in (calibration.duration_s_needed, calibration.window_s_needed) if x] or [0.0])
         if calibration is not None else None)
    if blocking or cal_blocking:
        what = blocking[0].title if blocking else cal_blocking
        items = fixes + ([cal_blocking] if cal_blocking else [])
        return Verdict("unfit", f"unfit: {what}", tuple(items))
    if bad or cal_problems:
        items = fixes + cal_problems
        return Verdict("caution", f"caution: fix first — {items[0]}", tuple(items))
    warns = tuple(_fix_line(f) for f in ranked if f.severity == "warn")
    if n is None:
        return Verdict("fit", "fit: no bad findings (calibration skipped: no runs-needed figure)", warns)
    length = math.ceil(t) if t else None
    return Verdict("fit", f"fit: benchmark with ≥ {n} runs" + (f" of ≥ {length} s each" if length else ""), warns)


def _calibration_problems(calibration: Calibration) -> tuple[str | None, list[str]]:
    """(what makes the calibration unfit, or None; what calls for caution)."""
    problems: list[str] = []
    blocking = None
    done = len(calibration.runs)
    n = calibration.runs_needed
    cv = calibration.cv or 0.0
    prec = f"±{calibration.precision * 100:g} %"
    if done < 2:
        blocking = f"calibration finished {done} run(s): no run-to-run variation measured (raise --budget)"
    elif n is not None and n > TOO_MANY_RUNS:
        blocking = (f"runs vary too much: CV {cv:.1%} would need {n} runs for {prec} "
                    "— find the noise first (the findings above, or a quieter machine)")
    elif n is not None and n > MANY_RUNS:
        problems.append(f"CV {cv:.1%}: {n} runs needed for {prec} (lower the noise, or accept a wider interval)")
    if not blocking and calibration.duration_s_needed is None:
        problems.append(f"cumulative throughput did not settle within the {calibration.run_s:g}-s "
                        "calibration runs: run longer (--budget) to find the run length")
    return blocking, problems
