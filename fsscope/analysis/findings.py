"""What the analysis finds in a latency matrix (runs x files, int64 ns).

These records are the contract between ``fsscope.analysis`` (which finds them), the
``fsscope.explain`` rules (which match them to predicted structural thresholds) and the
consumers (CLI tables, JSON, TUI flags). Indices are file indices (0-based call order).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True, slots=True)
class Outlier:
    """A file index that is slow in at least ``runs_flagged`` of ``runs`` runs."""

    index: int
    runs_flagged: int
    runs: int
    median_ns: int
    typical_ns: int  # the runs' typical (median) latency the outlier is measured against

    @property
    def ratio(self) -> float:
        return self.median_ns / max(self.typical_ns, 1)


@dataclass(frozen=True, slots=True)
class Series:
    """Repeatable outliers at a constant stride: start, start+stride, ... (count of them).

    ``count`` spans the series (last = start + (count-1) * stride); ``missing`` of those
    terms were not flagged (the series tolerates a few gaps). ``chance``: how many chains
    this good randomly placed candidates would give (the statistic that decided it, below
    the search's alpha); ``members`` the indices that were slow.
    """

    start: int
    stride: int
    count: int
    missing: int = 0
    chance: float | None = field(default=None, compare=False)
    members: tuple[int, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class LevelShift:
    """A change point in the per-index median curve: the level changes at ``index``."""

    index: int
    before_ns: int
    after_ns: int


@dataclass(frozen=True, slots=True)
class LinearGrowth:
    """Latency growing linearly with the index inside [start, end)."""

    start: int
    end: int
    slope_ns_per_file: float
    r2: float


def to_dict(finding) -> dict:
    return {"kind": type(finding).__name__.lower(), **asdict(finding)}
