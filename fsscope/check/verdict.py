"""Fit / caution / unfit from the audit's findings and the calibration, in plain words."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fsscope.check.findings import BLOCKING, Finding, rank

EXIT_STATUS = {"fit": 0, "caution": 1, "unfit": 2}
MANY_RUNS = 30          # more runs than this needed: caution (Cao et al. used 10)
TOO_MANY_RUNS = 100     # more than this: the setup is too noisy to benchmark at this precision


@dataclass(frozen=True)
class Verdict:
    verdict: str            # fit | caution | unfit
    headline: str           # one line
    fix_first: tuple[str, ...]  # ranked: what to do, most effect first

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "headline": self.headline, "fix_first": list(self.fix_first)}


def _fix_line(f: Finding) -> str:
    return f"[{f.id}] {f.title}" + (f" — fix: {f.fix}" if f.fix else "")


def decide(findings: list[Finding], calibration: dict[str, Any] | None) -> Verdict:
    """``calibration`` is the report's calibration dict (None when it was skipped)."""
    ranked = sorted(findings, key=rank)
    bad = [f for f in ranked if f.severity == "bad"]
    # device traffic no user process is behind (a fresh fs's first seconds) is not another tenant
    blocking = [f for f in bad if f.id in BLOCKING and not (f.id == "other-io" and f.values.get("kernel_only"))]
    fixes = [_fix_line(f) for f in bad]
    cal_blocking, cal_problems = _calibration_problems(calibration) if calibration is not None else (None, [])
    n = calibration.get("runs_needed") if calibration is not None else None
    t = (max([x for x in (calibration.get("duration_s_needed"), calibration.get("window_s_needed")) if x] or [0])
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


def _calibration_problems(calibration: dict[str, Any]) -> tuple[str | None, list[str]]:
    """(what makes the calibration unfit, or None; what calls for caution)."""
    problems: list[str] = []
    blocking = None
    done = len(calibration.get("runs") or [])
    n = calibration.get("runs_needed")
    cv = calibration.get("cv")
    prec = f"±{(calibration.get('precision') or 0.05) * 100:g} %"
    if done < 2:
        blocking = f"calibration finished {done} run(s): no run-to-run variation measured (raise --budget)"
    elif n is not None and n > TOO_MANY_RUNS:
        blocking = (f"runs vary too much: CV {cv:.1%} would need {n} runs for {prec} "
                    "— find the noise first (the findings above, or a quieter machine)")
    elif n is not None and n > MANY_RUNS:
        problems.append(f"CV {cv:.1%}: {n} runs needed for {prec} (lower the noise, or accept a wider interval)")
    if not blocking and calibration.get("duration_s_needed") is None:
        problems.append(f"cumulative throughput did not settle within the {calibration.get('run_s') or 0:g}-s "
                        "calibration runs: run longer (--budget) to find the run length")
    return blocking, problems
