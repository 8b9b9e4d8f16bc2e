"""What the aging view shows, as plain data (no Textual): the ager's progress (phase,
fullness against the target, ops/s, overwrites, the convergence bound), a series of each
distribution's fit p-value, the target-vs-actual histograms (size, depth, age) from the
report, the fresh-vs-aged fragmentation table and the stop reason with its note.
:class:`FragModel` is the ``frag`` job's report on its own."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from fsscope.aging import fit, load_profile
from fsscope.aging.job import FitResult, Report, Snapshot
from fsscope.aging.session import AgerProgress
from fsscope.engine import events
from fsscope.engine.events import Event, Progress
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
from fsscope.layout import job as frag_job
from fsscope.layout.records import Measurement
from fsscope.layout.summary import FRAG_ROWS, format_value, frag_table, summary_rows
from fsscope.records import Record, convert
from fsscope.tui.model import SPARK_POINTS, Flag, note_flags
from fsscope.tui.report_model import ReportModel, spec_of

DISTRIBUTIONS = ("size", "depth", "age")


@dataclass(frozen=True)
class FitHistogram:
    """One distribution: per bucket its label, target share and actual share."""

    name: str
    labels: tuple[str, ...]
    target: tuple[float, ...]
    actual: tuple[float | None, ...]
    p_value: float | None
    final: bool

    @classmethod
    def of(cls, name: str, fit: FitResult, final: bool) -> FitHistogram:
        target = tuple(fit.target)
        labels = tuple(fit.labels) + tuple(f"#{i}" for i in range(len(fit.labels), len(target)))
        actual = tuple(fit.actual[i] if i < len(fit.actual) else None for i in range(len(target)))
        return cls(name, labels[:len(target)], target, actual, fit.p_value, final)


def frag_rows(fresh: Measurement | None, aged: Measurement | None) -> list[tuple[str, str, str, str]]:
    """Rows of (what, fresh, aged, aged/fresh) for the measurements there are."""
    return frag_table(fresh, aged)


BLOCKS_GUESS = "block rounding, metadata or other files took the room"
"""Where the ager's note on a full file system starts guessing at blocks (fsscope.aging.ager)."""


class Asked(Record, frozen=True, kw_only=True):
    """What the view needs of an age spec, read without its checks (a recorded spec whose
    profile no longer loads still shows)."""

    profile: str = ""
    fallocate: bool = False
    fullness: float | None = None
    max_seconds: float | None = None
    max_ops: int | None = None


class AgingModel(ReportModel[Report]):
    """An ``age`` job's progress and report; ``version`` changes on every change."""

    kind = "age"

    def __init__(self, spec: Any = None):
        super().__init__()
        asked = spec_of(Asked, spec)
        self.profile = asked.profile
        self.fallocate = asked.fallocate  # blocks allocated, not written
        self.target_fullness = asked.fullness
        self.max_seconds, self.max_ops = asked.max_seconds, asked.max_ops
        self.age_shape: tuple[np.ndarray, np.ndarray] | None = None  # the profile's age weights, cutoffs
        if self.profile:
            try:
                loaded = load_profile(self.profile)
                if self.target_fullness is None:
                    self.target_fullness = float(loaded.fullness)
                self.age_shape = (np.array(loaded.age_weights), np.array(loaded.age_cutoffs))
            except Exception:  # noqa: BLE001 - a profile that does not load: the report says
                pass
        self.rapid_start: AgerProgress | None = None  # the first rapid reading: the phase's pace from there
        self.latest: AgerProgress | None = None
        self.p_series: dict[str, deque[float]] = {n: deque(maxlen=SPARK_POINTS) for n in DISTRIBUTIONS}
        self.ops_per_s: deque[float] = deque(maxlen=SPARK_POINTS)
        self.events = 0

    # -- feeding -----------------------------------------------------------------------------
    def feed(self, event: Event) -> bool:
        """A progress event of the ager (its detail: an :class:`AgerProgress`); others: False."""
        if not isinstance(event, Progress) or "p_values" not in event.detail:
            return False
        try:
            progress = self.latest = convert(event.detail, AgerProgress, "age progress")
        except FsscopeError:
            return False
        if progress.phase == "rapid" and self.rapid_start is None:
            self.rapid_start = progress
        for name in DISTRIBUTIONS:
            value = progress.p_values.get(name)
            if value is not None:
                self.p_series[name].append(value)
        self.ops_per_s.append(progress.ops_per_s)
        self.events += 1
        self.version += 1
        return True

    def notes_of(self, report: Report) -> list[str]:
        return list(report.notes)

    def took(self, report: Report) -> None:
        if report.target_fullness is not None:
            self.target_fullness = report.target_fullness
        self.profile = report.profile or self.profile
        if not self.p_series["size"]:  # nothing streamed (a replay without events): one point
            for name in DISTRIBUTIONS:
                fit = report.fit.get(name)
                if fit is not None and fit.p_value is not None:
                    self.p_series[name].append(fit.p_value)

    @classmethod
    def from_run(cls, run_dir, spec: Any, report: Report | None) -> AgingModel:
        model = cls(spec)
        try:
            for event in events.read_run(run_dir):
                model.feed(event)
        except (OSError, ValueError):
            pass
        model.finish(report)
        return model

    # -- reading: the report's numbers once there is one, else the latest progress event's ----
    @property
    def now(self) -> Report | AgerProgress | None:
        return self.report or self.latest

    @property
    def phase(self) -> str:
        if self.report is not None:
            return f"done ({self.report.phase})"
        return self.latest.phase if self.latest and self.latest.phase else "waiting"

    def remaining_s(self) -> float | None:
        """Seconds of aging left: the operations still expected at the measured ops/s. In the
        rapid phase those are the rest of it (scaled from the fullness gained so far) and then
        the stable phase up to the convergence bound the ager will plan for the live files the
        rapid phase will leave; in the stable phase, up to its planned fit point. One estimate
        across the phases (the bar's fixed share for the rapid phase made it jump when that
        ended). None while nothing can be said."""
        if self.report is not None:
            return 0.0
        now = self.latest
        if now is None or now.ops_per_s <= 0:
            return None
        total: float
        if now.phase == "rapid":
            first, goal = self.rapid_start or now, self.target_fullness
            if goal is None or now.fullness <= first.fullness:
                return None
            scale = max(0.0, goal - now.fullness) / (now.fullness - first.fullness)
            rapid_end_ops = now.ops + (now.ops - first.ops) * scale
            live_end = now.live_files + (now.live_files - first.live_files) * scale
            bound = (fit.convergence_ops(int(live_end), *self.age_shape) if self.age_shape is not None
                     else rapid_end_ops)
            total = max(float(bound), rapid_end_ops + 1)
        else:
            total = float(now.horizon_ops or now.convergence_ops or 0)
            if not total:
                return None
        if self.max_ops:
            total = min(total, self.max_ops)
        left = max(0.0, total - now.ops) / now.ops_per_s
        if self.max_seconds:
            left = min(left, max(0.0, self.max_seconds - now.elapsed_s))
        return left

    @property
    def fullness(self) -> float | None:
        return self.now.fullness if self.now else None

    @property
    def ops(self) -> int | None:
        return self.now.ops if self.now else None

    @property
    def rate(self) -> float | None:
        """Operations per second (this session)."""
        return self.now.ops_per_s if self.now else None

    @property
    def turnover(self) -> float | None:
        """The capacity written (allocated, with --fallocate), in capacities."""
        if self.report is not None and self.fallocate:
            return self.report.allocated_capacity_turnover
        return self.now.overwrites if self.now else None

    @property
    def convergence_ops(self) -> int | None:
        return self.now.convergence_ops if self.now else None

    @property
    def horizon_ops(self) -> int | None:
        return self.now.horizon_ops if self.now else None

    @property
    def live_files(self) -> int | None:
        return self.now.live_files if self.now else None

    @property
    def snapshot(self) -> Snapshot | None:
        return self.report.snapshot if self.report else None

    def p_value(self, name: str) -> float | None:
        series = self.p_series[name]
        hist = self.fits().get(name)
        if hist is not None and hist.final:
            return hist.p_value
        return series[-1] if series else None

    def fits(self) -> dict[str, FitHistogram]:
        """Target vs actual per distribution, from the report."""
        fits = self.report.fit if self.report is not None else {}
        return {name: FitHistogram.of(name, fits[name], final=True) for name in DISTRIBUTIONS if name in fits}

    @property
    def stop_reason(self) -> str | None:
        return self.report.stop_reason if self.report and self.report.stop_reason else None

    @property
    def stop_note(self) -> str:
        """Why it stopped. When the job found the file system out of inodes, that is the cause:
        the ager's general guess for a full file system (block rounding… lower the fullness)
        would contradict the out-of-inodes flag beside it."""
        note = self.report.stop_note if self.report else ""
        inodes = next((n for n in self.notes if n.startswith("out of inodes")), None)
        if inodes and BLOCKS_GUESS in note:
            note = note[: note.index(BLOCKS_GUESS)] + inodes + "."
        return note

    def frag_rows(self) -> list[tuple[str, str, str, str]]:
        if self.report is None or not (self.report.fresh or self.report.aged):
            return []
        return frag_rows(self.report.fresh, self.report.aged)

    def frag_errors(self) -> list[str]:
        if self.report is None:
            return []
        return [f"{section}: {error}" for section, m in (("fresh", self.report.fresh), ("aged", self.report.aged))
                if m is not None for _, error in m.errors()]

    def final_flags(self) -> list[Flag] | None:
        """The stop reason as a flag (its note: why it stopped), plus the report's notes."""
        if self.report is None or not self.stop_reason:
            return None
        flags = [Flag(title=f"stopped: {self.stop_reason}", note=self.stop_note or "(no note)",
                      kind="stop", indices=(),
                      finding=events.Finding(flag="stop", fields={"stop_reason": self.stop_reason}))]
        return flags + note_flags(self.notes)


class FragModel(ReportModel[frag_job.Report]):
    """A ``frag`` job's report: the free-space histogram and the test file."""

    kind = "frag"

    def notes_of(self, report: frag_job.Report) -> list[str]:
        return list(report.free_space.notes) if report.free_space else []

    def histogram(self) -> list[tuple[str, int, int]]:
        """(bucket label, free extents, free bytes) per bucket of the free-space grid."""
        hist = self.report.free_space if self.report else None
        return [(format_bytes(lo), n, free) for lo, n, free in hist.buckets()] if hist else []

    def rows(self) -> list[tuple[str, str]]:
        s = summary_rows(self.report)
        return [(label, format_value(s.get(key), kind)) for label, key, kind in FRAG_ROWS]
