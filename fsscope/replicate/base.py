"""What every scenario shares: the finding record, the probe runs it drives through the
engine, and the verdict rules (a verdict is earned by a statistic, never a default).

A scenario module has ``NAME``, ``TITLE``, ``PAPER`` (citation), ``SETUP`` (the paper's
setup and what differs here, and why), ``NEEDS`` (finding id -> the run keys it needs),
``LESSON`` and ``CLAIMS`` (the scenario and each finding in plain words, for the TUI's Lab),
``runs(quick)`` (runs with ``key``, ``describe()``, ``cost_s()`` and ``execute(progress=)``:
a :class:`ProbeRun`, or a scenario's own) and ``judge(results, quick) -> list[Finding]``;
:func:`fsscope.replicate.run` does the rest.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import numpy as np

from fsscope import recipes
from fsscope.analysis.latency import median_curve_ns
from fsscope.analysis.outliers import local_ratio
from fsscope.engine import events as ev
from fsscope.engine import runner
from fsscope.engine.registry import spec_from_data
from fsscope.errors import FsscopeError
from fsscope.paths import disk_dir
from fsscope.records import Record
from fsscope.targets import TargetSpec

VERDICTS = ("agree", "disagree", "inconclusive")

#: A file is "not slow" when its median over the runs is below this multiple of the curve
#: around it: a structure the paper calls slow but that measures below it disagrees.
NOT_SLOW_RATIO = 1.15
#: A series counts as found whole when at least this share of its members are in it
#: (14 of 16 for the 64-file inode chunks in 1,024 files).
SERIES_MEMBER_SHARE = 0.875
#: Expected number of chance chains below which a series is real (the detector's alpha).
SERIES_ALPHA = 0.01


class Finding(Record, frozen=True, kw_only=False):
    """One headline finding of a paper, held to a measurement."""

    id: str
    paper: Any                # the paper's number (as the paper gives it)
    expected_today: Any       # the paper's own arithmetic on today's geometry
    measured: Any             # what fsscope measured
    verdict: str              # agree | disagree | inconclusive
    why: str                  # the statistic that decided it, in words
    statistic: dict[str, Any] = {}
    setup: str = ""           # which run(s) measured it

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")


class RunDone(Record, frozen=True, kw_only=True):
    """A run a scenario made: its setup in words and where it is recorded."""

    setup: str
    run_dir: str


class Result(Record, frozen=True, kw_only=True):
    """A scenario run and judged (``fsscope replicate``'s ``--json``, the Lab's table)."""

    scenario: str
    title: str
    paper: str
    quick: bool
    setup: list[str]
    runs: dict[str, RunDone]
    findings: list[Finding]


@dataclass(frozen=True)
class ProbeRun:
    """One probe job a scenario needs: ``key`` names it for the judge."""

    key: str
    recipe: str
    files: int
    runs: int
    medium: str = "ram"        # ram | disk (a sparse image file on this machine's disk)
    mkfs_opts: str = ""
    in_root: bool = True
    name_length: int = 7
    size_bytes: int = 512 * 2**20
    trace: str = "off"

    def describe(self) -> str:
        where = "root directory" if self.in_root else "fresh subdirectory"
        medium = "RAM image" if self.medium == "ram" else "disk image (a loop over a file on this machine's disk)"
        opts = f" {self.mkfs_opts}" if self.mkfs_opts else ""
        return (f"{self.recipe}{opts}, {self.files} creat() x {self.runs} runs, {self.name_length}-character "
                f"names, syncfs() of the file system before each (the paper: sync()), files in the {where}, {medium}")

    def execute(self, *, progress: Callable[[str], None] = lambda line: None) -> ProbeResult:
        return run_probe(self, progress=progress)

    def cost_s(self) -> float:
        """A rough cost estimate: mkfs per run plus a synced create per file."""
        per_call_s = 0.0004 if self.medium == "ram" else 0.004
        mkfs_s = 1.5 if self.medium == "ram" else 3.0
        return self.runs * (mkfs_s + self.files * per_call_s)


@dataclass
class JobResult:
    """What a scenario's job run left: the run as planned, its report, its run directory."""

    run: Any
    report: dict
    run_dir: str

    @classmethod
    def of(cls, run: Any, run_dir) -> Self:
        return cls(run, run_dir.report(), str(run_dir.path))


@dataclass
class ProbeResult:
    run: ProbeRun
    report: dict
    latency_ns: np.ndarray     # runs x files, as measured
    run_dir: str

    @property
    def ratio(self) -> np.ndarray:
        """Per file: its median over the runs / the median curve around it."""
        return local_ratio(median_curve_ns(self.latency_ns))

    def prediction(self, structure: str) -> dict | None:
        return next((p for p in self.report.get("predictions") or [] if p["structure"] == structure), None)

    def outlier(self, index: int) -> dict | None:
        return next((o for o in self.report.get("outliers") or [] if o["index"] == index), None)


@contextmanager
def private_image(name: str):
    """A path for an image made for one run, in a directory made for it alone on this machine's
    disk (never a guessable name in a shared /var/tmp); the directory goes afterwards."""
    image_dir = Path(tempfile.mkdtemp(prefix="fsscope-replicate-", dir=disk_dir()))
    try:
        yield image_dir / f"{name}.img"
    finally:
        shutil.rmtree(image_dir, ignore_errors=True)


def run_engine_job(run: Any, job: str, spec: dict[str, Any], target: TargetSpec, recipe, *,
                   progress: Callable[[str], None] = lambda line: None):
    """Run scenario run ``run``'s job headless through the engine (as ``fsscope run`` does),
    ``spec`` as its data, and return its run directory once it ended ok; a job that did not is
    an error naming its record."""
    handle = runner.start(job, spec_from_data(job, spec), target, recipe)
    progress(f"{run.key}: {run.describe()} ({handle.run_dir.path})")
    for event in handle.records():
        if isinstance(event, ev.Phase):
            progress(f"{run.key}: {event.name}")
    status = handle.run_dir.status()
    if status != "ok":
        raise FsscopeError(f"{job} for {run.key} ended {status}: "
                           f"{handle.run_dir.info().error or 'see ' + str(handle.run_dir.path)}")
    return handle.run_dir


def run_probe(probe: ProbeRun, *, progress: Callable[[str], None] = lambda line: None) -> ProbeResult:
    """Run one probe job headless through the engine, as ``fsscope probe`` does."""
    # the paper's fixed number of runs (no runs added to decide), each call after a sync of the
    # measured file system: the papers' sync() is the same on a quiet machine, and on a busy one
    # it would wait on every other file system's writeback
    spec = {"op": "creat", "files": probe.files, "runs": probe.runs, "name_length": probe.name_length,
            "trace": probe.trace, "in_root": probe.in_root, "max_runs": probe.runs, "sync_scope": "fs"}
    recipe = recipes.load(probe.recipe).with_extra(probe.mkfs_opts, "")
    with ExitStack() as stack:
        if probe.medium == "disk":
            image = stack.enter_context(private_image(probe.key))
            target = TargetSpec("image", str(image), probe.size_bytes)
        else:
            target = TargetSpec("ram", size_bytes=probe.size_bytes)
        run_dir = run_engine_job(probe, "probe", spec, target, recipe, progress=progress)
    latency = np.load(run_dir.path / "latency_ns.npy")
    return ProbeResult(probe, run_dir.report(), latency, str(run_dir.path))


# --- verdicts ----------------------------------------------------------------------------


def judge_index(finding_id: str, result: ProbeResult, *, structure: str, paper: int, paper_says: str,
                paper_ratio: float | None = None) -> Finding:
    """A structure the paper finds slow at one file: agree when today's arithmetic puts it at
    an index that is a repeatable outlier; disagree when that file is not slow (its median
    under :data:`NOT_SLOW_RATIO` x its neighbours) or the arithmetic is missing; else
    inconclusive. The verdict is on the position; the magnitude stands beside it (its median
    ratio against the paper's ``paper_ratio``, and in how many runs it was the slowest call)."""
    p = result.prediction(structure)
    setup = result.run.describe()
    if p is None or p.get("index") is None:
        return Finding(finding_id, paper, None, None, "disagree",
                       f"fsscope's geometry rules predict no {structure} here, where the paper found "
                       f"one ({paper_says})", setup=setup)
    expected = int(p["index"])
    ratio = float(result.ratio[expected]) if expected < result.latency_ns.shape[1] else math.nan
    outlier = result.outlier(expected)
    near = [o["index"] for o in result.report.get("outliers") or [] if 0 < abs(o["index"] - expected) <= 3]
    runs = result.latency_ns.shape[0]
    worst = (int(np.sum(np.argmax(result.latency_ns, axis=1) == expected))
             if expected < result.latency_ns.shape[1] else 0)
    statistic = {"index": expected, "median_ratio": round(ratio, 2),
                 "runs_flagged": outlier["runs_flagged"] if outlier else 0, "runs": runs,
                 "runs_slowest_call": worst, "paper_ratio": paper_ratio}
    arithmetic = f"today's arithmetic: {p['arithmetic']}"
    vs_paper = "" if expected == paper else f" (the paper's {paper} differs: {paper_says})"
    if outlier is not None:
        magnitude = (f"; position agrees, {ratio:.1f}x here, {paper_ratio:g}x in the paper" if paper_ratio else "")
        return Finding(finding_id, paper, expected, expected, "agree",
                       f"file {expected} is slow in {outlier['runs_flagged']}/{outlier['runs']} runs, its "
                       f"median {ratio:.1f}x its neighbours' and the slowest call in {worst}/{runs} runs — where "
                       f"the paper's arithmetic puts it for today's geometry{vs_paper}{magnitude}. {arithmetic}",
                       statistic, setup)
    if ratio < NOT_SLOW_RATIO or near:
        where = f"; the slow file is {near[0]}" if near else ""
        return Finding(finding_id, paper, expected, near[0] if near else None, "disagree",
                       f"file {expected} is not a repeatable outlier (median {ratio:.2f}x its "
                       f"neighbours, below {NOT_SLOW_RATIO}x){where}. {arithmetic}", statistic, setup)
    return Finding(finding_id, paper, expected, None, "inconclusive",
                   f"file {expected} is slower than its neighbours in the median ({ratio:.2f}x) but "
                   f"not in enough runs to call it repeatable; more runs would decide. {arithmetic}",
                   statistic, setup)


def judge_series(finding_id: str, result: ProbeResult, *, structure: str, paper: dict,
                 paper_says: str) -> Finding:
    """A periodic structure: agree when the detector reports a series at the predicted stride
    holding at least :data:`SERIES_MEMBER_SHARE` of the predicted members with a chance
    statistic below :data:`SERIES_ALPHA`; disagree when the predicted members are not slow
    (their median ratio under :data:`NOT_SLOW_RATIO`); else inconclusive."""
    p = result.prediction(structure)
    setup = result.run.describe()
    if p is None or p.get("index") is None or not p.get("stride"):
        return Finding(finding_id, paper, None, None, "disagree",
                       f"fsscope's geometry rules predict no {structure} here ({paper_says})", setup=setup)
    files = result.latency_ns.shape[1]
    members = [i for i in range(int(p["index"]), files, int(p["stride"]))]
    expected = {"start": int(p["index"]), "stride": int(p["stride"]), "members": len(members)}
    ratios = result.ratio[members]
    found = [s for s in result.report.get("series") or [] if s["stride"] == p["stride"]]
    best = max(found, key=lambda s: len(set(s.get("members") or []) & set(members)), default=None)
    hit = sorted(set(best.get("members") or []) & set(members)) if best else []
    chance = best.get("chance") if best else None
    statistic = {"members_found": len(hit), "members_expected": len(members),
                 "chance": chance, "member_median_ratios": [round(float(r), 2) for r in ratios],
                 "runs": result.latency_ns.shape[0]}
    measured = ({"start": best["start"], "stride": best["stride"], "members": len(hit)} if best else None)
    vs_paper = ("" if expected["start"] == paper.get("start") else
                f" (the paper's start {paper.get('start')} differs: {paper_says})")
    ratio_text = f"members' medians {float(np.min(ratios)):.2f}–{float(np.max(ratios)):.2f}x their neighbours"
    need = math.ceil(SERIES_MEMBER_SHARE * len(members))
    if best and len(hit) >= need and chance is not None and chance < SERIES_ALPHA:
        return Finding(finding_id, paper, expected, measured, "agree",
                       f"series every {p['stride']} from {best['start']}: {len(hit)} of {len(members)} "
                       f"predicted members (>= {need}), chance {chance:.2g} < {SERIES_ALPHA}; "
                       f"{ratio_text}{vs_paper}. Today's arithmetic: {p['arithmetic']}", statistic, setup)
    if float(np.median(ratios)) < NOT_SLOW_RATIO:
        return Finding(finding_id, paper, expected, measured, "disagree",
                       f"the predicted members are not slow: median of their ratios "
                       f"{float(np.median(ratios)):.2f}x < {NOT_SLOW_RATIO}x ({ratio_text})", statistic, setup)
    return Finding(finding_id, paper, expected, measured, "inconclusive",
                   f"{len(hit)} of {len(members)} members reported (need {need} with chance < "
                   f"{SERIES_ALPHA}); {ratio_text}: more runs would decide", statistic, setup)


def judge_level_shift(finding_id: str, result: ProbeResult, *, structure: str, paper: int,
                      paper_says: str, paper_ratio: float | None = None) -> Finding:
    """A step UP in latency after a structure fills: agree when a level shift up is within the
    rule's tolerance of the predicted file, disagree when the level steps down there or shifts
    elsewhere and not there, inconclusive when no shift is found. The step's size stands
    beside the paper's (``paper_ratio``, after / before)."""
    p = result.prediction(structure)
    setup = result.run.describe()
    if p is None or p.get("index") is None:
        return Finding(finding_id, paper, None, None, "disagree",
                       f"fsscope's geometry rules predict no {structure} here ({paper_says})", setup=setup)
    expected, tolerance = int(p["index"]), int(p.get("tolerance_files") or 0)
    shifts = result.report.get("level_shifts") or []
    near = [s for s in shifts if abs(s["index"] - expected) <= tolerance]
    statistic = {"tolerance_files": tolerance, "paper_ratio": paper_ratio,
                 "shifts": [(s["index"], round(s["after_ns"] / max(s["before_ns"], 1), 2)) for s in shifts]}
    text = f"today's arithmetic: {p['arithmetic']}"
    size = f"; {paper_ratio:g}x in the paper" if paper_ratio else ""
    up = [s for s in near if s["after_ns"] > s["before_ns"]]
    if up:
        s = up[0]
        step = s["after_ns"] / max(s["before_ns"], 1)
        return Finding(finding_id, paper, expected, s["index"], "agree",
                       f"latency steps up {s['before_ns'] / 1e3:.1f} → {s['after_ns'] / 1e3:.1f} µs ({step:.2f}x here"
                       f"{size}) at file {s['index']}, within ±{tolerance} of {expected} (a shift must repeat run by "
                       f"run). {text}", statistic, setup)
    if near:
        s = near[0]
        return Finding(finding_id, paper, expected, s["index"], "disagree",
                       f"latency steps DOWN {s['before_ns'] / 1e3:.1f} → {s['after_ns'] / 1e3:.1f} µs at file "
                       f"{s['index']}: the paper's step is up (a second leaf to write). {text}", statistic, setup)
    if shifts:
        return Finding(finding_id, paper, expected, shifts[0]["index"], "disagree",
                       f"the level shifts at {[s['index'] for s in shifts]}, not within ±{tolerance} of "
                       f"{expected}. {text}", statistic, setup)
    return Finding(finding_id, paper, expected, None, "inconclusive",
                   f"no level shift repeats run by run; more runs (or a quieter machine) would decide. {text}",
                   statistic, setup)
