"""What the compare screen shows for two recorded runs that are not probe-shaped: the
sections of ``fsscope compare`` (rows with B/A ratios, from ``fsscope.analysis.compare.compare_reports``)
plus, for bench, a Throughput-N band summary and the Welch verdict on ops/s (a job's verdict is
the one its descriptor's ``compare_verdict`` names). No Textual here."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fsscope.analysis.compare import Row, Section, row
from fsscope.analysis.variation.report import Band
from fsscope.analysis.variation.temporal import compare_recipes
from fsscope.engine import jobs, registry
from fsscope.errors import FsscopeError
from fsscope.records import Record, convert, report_part
from fsscope.store.manifest import Manifest
from fsscope.targets import TargetSpec
from fsscope.workloads.bench_records import Report as BenchReport


@dataclass
class Side:
    id: str
    job: str
    status: str
    recipe: str = "-"
    fs: str = "-"
    target: str = "?"
    personality: str = ""
    report: Any = None  # the job's report record (a dict for a job not typed yet)


@dataclass
class Comparison:
    message: str                       # the one-line verdict (or why there is nothing to compare)
    winner: str | None = None          # "A" / "B" when significant
    sections: list[Section] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def side_of(run, job: str, status: str) -> Side:
    """Describe a ``RunDir`` (recipe, fs, target, personality) and load its report."""
    m = run.info()
    report = registry.report_from_data(m.job, run.report())
    try:
        asked = convert(m.spec or {}, _Asked)
    except FsscopeError:  # a recorded spec that does not read: no personality to name
        asked = _Asked()
    personality = str(report_part(report, "personality") or asked.personality)
    return Side(id=run.id, job=job, status=status, recipe=m.recipe_name or "-",
                fs=(m.recipe.fs if m.recipe is not None else "") or "-",
                # named as the live screen and the runs table name it ("RAM image (…)", not "ram")
                target=TargetSpec.describe_recorded(m.target_spec),
                personality=personality, report=report)


class _Asked(Record, frozen=True, kw_only=True):
    """What a side's description needs of its recorded spec (a bench's personality)."""

    personality: str = ""


def where_of(manifest: Manifest, *, snapshot: bool = True) -> str:
    """The run's target as "kind path" (and the snapshot it was restored from); "?" when the
    manifest recorded none that reads."""
    try:
        target = convert(manifest.target_spec, TargetSpec, "the recorded target")
    except FsscopeError:
        return "?"
    where = f"{target.kind} {target.path}".strip()
    return where + (f" from snapshot {target.snapshot}" if snapshot and target.snapshot else "")


def _ops_per_s(report: BenchReport) -> list[float]:
    return [float(run.ops_per_s) for run in report.runs
            if run.ops_per_s is not None and math.isfinite(run.ops_per_s)]


def _window_series(report: BenchReport, key: str) -> list[np.ndarray]:
    return [np.asarray([math.nan if v is None else v for v in run.windows.get(key) or []], dtype=np.float64)
            for run in report.runs]


def _band_stats(band: Band) -> tuple[int, float | None, float | None, float | None, float | None]:
    """(windows, mean of the mean band, lowest min, highest max, median relative range)."""
    def finite(values: list[float | None]) -> np.ndarray:
        x = np.asarray([v for v in values if v is not None], dtype=np.float64)
        return x[np.isfinite(x)]

    mean, lo, hi, rr = finite(band.mean), finite(band.min), finite(band.max), finite(band.relative_range)
    return (len(band.mean), float(mean.mean()) if mean.size else None, float(lo.min()) if lo.size else None,
            float(hi.max()) if hi.size else None, float(np.median(rr)) if rr.size else None)


def _band_rows(a: BenchReport, b: BenchReport) -> list[Row]:
    """Throughput-N bands, summarised per window size shared by both runs."""
    wa, wb = a.variation.windows, b.variation.windows
    rows = []
    for key in sorted(set(wa) & set(wb), key=float):
        sa, sb = _band_stats(wa[key]), _band_stats(wb[key])
        label = f"T-{key}"
        rows += [row(f"{label} windows", sa[0], sb[0], "int"),
                 row(f"{label} mean ops/s", sa[1], sb[1], "num"),
                 row(f"{label} lowest min", sa[2], sb[2], "num"),
                 row(f"{label} highest max", sa[3], sb[3], "num"),
                 row(f"{label} median rel. range", sa[4], sb[4], "pct")]
    return rows


def compare(a: Side, b: Side) -> Comparison:
    if a.job != b.job:
        return Comparison(f"Cannot compare a {a.job} run with a {b.job} run: mark two runs of the same job.")
    missing = [s for s in (a, b) if s.report is None]
    if missing:
        s = missing[0]
        return Comparison(f"Run {s.id} has no report (status {s.status}): nothing to compare.")
    sections = registry.compare_reports(a.job, a.report, b.report)
    verdict = jobs.JOBS[a.job].compare_verdict if a.job in jobs.JOBS else ""
    if verdict:
        return jobs.resolve(verdict)(a, b, sections)
    return Comparison(f"{a.job} runs compared: B / A for every figure.", sections=sections)


def bench_verdict(a: Side, b: Side, sections: list[Section]) -> Comparison:
    """Welch's t-test on the runs' ops/s (a winner only where significant), with the
    Throughput-N bands of both runs summarised."""
    ra, rb = a.report, b.report
    if not isinstance(ra, BenchReport) or not isinstance(rb, BenchReport):
        return Comparison("bench runs compared: B / A for every figure.", sections=sections)
    windows = ra.variation.windows
    key = sorted(windows, key=float)[0] if windows else None
    tn_a = _window_series(ra, key) if key else []
    tn_b = _window_series(rb, key) if key else []
    verdict, flag = compare_recipes(_ops_per_s(ra), _ops_per_s(rb), tn_a, tn_b,
                                    float(key) if key else 10.0, labels=("A", "B"))
    bands = _band_rows(ra, rb)
    if bands:
        sections.insert(1, Section(title="Throughput-N bands across runs", rows=bands))
    if verdict.winner is not None:
        win = a if verdict.winner == "A" else b
        lead = (max(verdict.mean_a, verdict.mean_b) / min(verdict.mean_a, verdict.mean_b)
                if min(verdict.mean_a, verdict.mean_b) > 0 else math.nan)
        message = (f"Winner: {verdict.winner} ({win.recipe}, {win.personality}) at {lead:.2f}× the ops/s — "
                   f"{verdict.note}")
    else:
        message = f"No winner: {verdict.note}"
    notes = [flag.note] if flag is not None else []
    return Comparison(message, winner=verdict.winner, sections=sections, notes=notes)


def syncwrite_verdict(_a: Side, _b: Side, sections: list[Section]) -> Comparison:
    """How many buffer sizes each side wins on throughput (Welch, p < 0.001)."""
    verdicts = [r.a for sec in sections for r in sec.rows if r.metric.endswith("verdict (p < 0.001)")]
    if not verdicts:
        return Comparison("syncwrite runs compared: B / A for every figure (no sizes in common for a t-test).",
                          sections=sections)
    a, b = verdicts.count("A faster"), verdicts.count("B faster")
    return Comparison(f"Throughput per buffer size (Welch, p < 0.001): A faster at {a}, B faster at {b}, "
                      f"no significant difference at {len(verdicts) - a - b} of {len(verdicts)} sizes.",
                      sections=sections)


def replay_verdict(_a: Side, _b: Side, sections: list[Section]) -> Comparison:
    """How many call types each side is faster at (the Welch rows of ``replay.compare.sections``)."""
    verdicts = [str(r.a) for sec in sections for r in sec.rows if r.metric.endswith(" verdict")]
    if not verdicts:
        return Comparison("replay runs compared: B / A for every figure (no call type in common for a t-test).",
                          sections=sections)
    counts = {k: sum(v.startswith(k) for v in verdicts) for k in ("A faster", "B faster", "not significant", "inconclusive")}
    return Comparison(f"Call types (Welch on the runs' mean latency): A faster at {counts['A faster']}, B faster at "
                      f"{counts['B faster']}, no significant difference at {counts['not significant']}, inconclusive "
                      f"(too few runs) at {counts['inconclusive']} of {len(verdicts)}.", sections=sections)
