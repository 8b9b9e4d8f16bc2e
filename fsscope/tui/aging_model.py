"""What the aging view shows, as plain data (no Textual): the ager's progress (phase,
fullness against the target, ops/s, overwrites, the convergence bound), a series of each
distribution's fit p-value, the target-vs-actual histograms (size, depth, age) from the
report (or from an event that carries them), the fresh-vs-aged fragmentation table and the
stop reason with its note. :class:`FragModel` is the ``frag`` job's report on its own."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from fsscope.aging import load_profile
from fsscope.engine import events
from fsscope.engine.events import Event, Progress
from fsscope.format import format_bytes
from fsscope.layout.summary import FRAG_ROWS, format_value, frag_table, summary_rows
from fsscope.tui.model import SPARK_POINTS, Flag, note_flags, number
from fsscope.tui.report_model import ReportModel

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
    def from_json(cls, name: str, data: dict, final: bool) -> FitHistogram | None:
        if not isinstance(data, dict) or not isinstance(data.get("target"), list):
            return None
        target = tuple(number(x) or 0.0 for x in data["target"])
        labels = tuple(str(x) for x in data.get("labels") or ())
        labels = labels + tuple(f"#{i}" for i in range(len(labels), len(target)))
        actual_raw = data.get("actual") if isinstance(data.get("actual"), list) else []
        actual = tuple(number(actual_raw[i]) if i < len(actual_raw) else None for i in range(len(target)))
        return cls(name, labels[:len(target)], target, actual, number(data.get("p_value")), final)


def frag_rows(fresh: dict | None, aged: dict | None) -> list[tuple[str, str, str, str]]:
    """Rows of (what, fresh, aged, aged/fresh) for the measurements there are."""
    return frag_table(fresh, aged)


BLOCKS_GUESS = "block rounding, metadata or other files took the room"
"""Where the ager's note on a full file system starts guessing at blocks (fsscope.aging.ager)."""


class AgingModel:
    """An ``age`` job's progress and report; ``version`` changes on every change."""

    kind = "age"

    def __init__(self, spec: dict | None = None):
        spec = spec or {}
        self.profile = str(spec.get("profile") or "")
        self.fallocate = bool(spec.get("fallocate"))  # blocks allocated, not written
        self.target_fullness = number(spec.get("fullness"))
        if self.target_fullness is None and self.profile:
            try:
                self.target_fullness = float(load_profile(self.profile).fullness)
            except Exception:  # noqa: BLE001 - a profile that does not load: the report says
                self.target_fullness = None
        self.latest: dict = {}
        self.p_series: dict[str, deque[float]] = {n: deque(maxlen=SPARK_POINTS) for n in DISTRIBUTIONS}
        self.ops_per_s: deque[float] = deque(maxlen=SPARK_POINTS)
        self.live_fits: dict[str, FitHistogram] = {}
        self.report: dict | None = None
        self.notes: list[str] = []
        self.events = 0
        self.version = 0
        self.telemetry: list[tuple[float, float, float]] = []

    # -- feeding -----------------------------------------------------------------------------
    def feed(self, event: Event) -> bool:
        """A progress event of the ager (its detail has ``phase`` and ``p_values``); others: False."""
        if not isinstance(event, Progress) or "p_values" not in event.detail:
            return False
        fields = self.latest = dict(event.detail)
        p_values = fields.get("p_values") or {}
        for name in DISTRIBUTIONS:
            value = number(p_values.get(name)) if isinstance(p_values, dict) else None
            if value is not None:
                self.p_series[name].append(value)
        rate = number(fields.get("ops_per_s"))
        if rate is not None:
            self.ops_per_s.append(rate)
        fits = fields.get("fit")  # actual fractions, if the ager sends them
        if isinstance(fits, dict):
            for name in DISTRIBUTIONS:
                hist = FitHistogram.from_json(name, fits.get(name), final=False)
                if hist is not None:
                    self.live_fits[name] = hist
        self.events += 1
        self.version += 1
        return True

    def finish(self, report: dict | None) -> None:
        if isinstance(report, dict) and ("fit" in report or "stop_reason" in report):
            self.report = report
            self.notes = [str(n) for n in report.get("notes") or []]
            target = number(report.get("target_fullness"))
            if target is not None:
                self.target_fullness = target
            self.profile = str(report.get("profile") or self.profile)
            if not self.p_series["size"]:  # nothing streamed (a replay without events): one point
                fit = report.get("fit") or {}
                for name in DISTRIBUTIONS:
                    value = number((fit.get(name) or {}).get("p_value"))
                    if value is not None:
                        self.p_series[name].append(value)
        self.version += 1

    @classmethod
    def from_run(cls, run_dir, spec: dict, report: dict | None) -> AgingModel:
        model = cls(spec)
        try:
            for event in events.read_run(run_dir):
                model.feed(event)
        except (OSError, ValueError):
            pass
        model.finish(report)
        return model

    # -- reading -----------------------------------------------------------------------------
    def value(self, key: str) -> Any:
        """The report's value once there is one, else the latest progress event's."""
        if self.report is not None and self.report.get(key) is not None:
            return self.report.get(key)
        return self.latest.get(key)

    @property
    def phase(self) -> str:
        if self.report is not None:
            return f"done ({self.report.get('phase', '')})"
        return str(self.latest.get("phase") or "waiting")

    @property
    def fullness(self) -> float | None:
        return number(self.value("fullness"))

    def p_value(self, name: str) -> float | None:
        series = self.p_series[name]
        hist = self.fits().get(name)
        if hist is not None and hist.final:
            return hist.p_value
        return series[-1] if series else None

    def fits(self) -> dict[str, FitHistogram]:
        """Target vs actual per distribution: the report's, else any live ones."""
        if self.report is not None and isinstance(self.report.get("fit"), dict):
            out = {}
            for name in DISTRIBUTIONS:
                hist = FitHistogram.from_json(name, self.report["fit"].get(name), final=True)
                if hist is not None:
                    out[name] = hist
            return out
        return dict(self.live_fits)

    @property
    def stop_reason(self) -> str | None:
        return str(self.report.get("stop_reason")) if self.report and self.report.get("stop_reason") else None

    @property
    def stop_note(self) -> str:
        """Why it stopped. When the job found the file system out of inodes, that is the cause:
        the ager's general guess for a full file system (block rounding… lower the fullness)
        would contradict the out-of-inodes flag beside it."""
        note = str((self.report or {}).get("stop_note") or "")
        inodes = next((n for n in self.notes if n.startswith("out of inodes")), None)
        if inodes and BLOCKS_GUESS in note:
            note = note[: note.index(BLOCKS_GUESS)] + inodes + "."
        return note

    def frag_rows(self) -> list[tuple[str, str, str, str]]:
        if self.report is None or not (self.report.get("fresh") or self.report.get("aged")):
            return []
        return frag_rows(self.report.get("fresh"), self.report.get("aged"))

    def frag_errors(self) -> list[str]:
        out = []
        for section in ("fresh", "aged"):
            m = (self.report or {}).get(section) or {}
            for key in ("free_space_error", "test_file_error"):
                if m.get(key):
                    out.append(f"{section}: {m[key]}")
        return out

    def final_flags(self) -> list[Flag] | None:
        """The stop reason as a flag (its note: why it stopped), plus the report's notes."""
        if self.report is None or not self.stop_reason:
            return None
        flags = [Flag(title=f"stopped: {self.stop_reason}", note=self.stop_note or "(no note)",
                      kind="stop", indices=(),
                      finding=events.Finding(flag="stop", fields={"stop_reason": self.stop_reason}))]
        return flags + note_flags(self.notes)


class FragModel(ReportModel):
    """A ``frag`` job's report: the free-space histogram and the test file."""

    kind = "frag"

    def notes_of(self, report: dict) -> list[str]:
        return [str(n) for n in ((report.get("free_space") or {}).get("notes") or [])]

    def histogram(self) -> list[tuple[str, int, int]]:
        """(bucket label, free extents, free bytes) per bucket of the free-space grid."""
        hist = (self.report or {}).get("free_space") or {}
        lower = hist.get("bucket_lower_bytes") or []
        counts = hist.get("bucket_extent_counts") or []
        free = hist.get("bucket_free_bytes") or []
        return [(format_bytes(lo), int(c), int(b)) for lo, c, b in zip(lower, counts, free)]

    def rows(self) -> list[tuple[str, str]]:
        s = summary_rows(self.report)
        return [(label, format_value(s.get(key), kind)) for label, key, kind in FRAG_ROWS]
