"""What the explore view shows, as plain data (no Textual): the treatments so far (file
system, factors, d-span), the d-span CDF per file system, each factor's share of the d-span
variance and the tail share per factor level -- pooled and per file system (the paper ranks
each file system on its own) --, and a tail heatmap for the two top factors.
Live rows fill it as treatments finish; the report replaces the estimates when the job ends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fsscope.analysis import sensitivity
from fsscope.engine.events import Event
from fsscope.study.explore import Analysis, Nondeterminism, Report, Spec, TreatmentDone
from fsscope.study.space import Level
from fsscope.tui.model import Flag, note_flags
from fsscope.tui.report_model import ReportModel, spec_of

MIN_ROWS = 8  # fewer runs than this: no shares yet



@dataclass(frozen=True)
class Row:
    """A finished treatment as the view plots it."""

    fs: str
    factors: dict[str, Level]
    d_span_bytes: float


class ExploreModel(ReportModel[Report]):
    kind = "explore"

    def __init__(self, spec: Spec | dict[str, Any] | None = None):
        super().__init__()
        self.spec = spec_of(Spec, spec)
        self.rows: list[Row] = []
        self.failed = 0
        self.quantile = self.spec.tail_quantile
        self.pair_index = 0  # which factor pair the heatmap shows

    def feed(self, event: Event) -> bool:
        if not isinstance(event, TreatmentDone):
            return False
        if event.error or event.d_span_bytes is None:
            self.failed += 1
        else:
            self.rows.append(Row(event.fs, dict(event.factors), float(event.d_span_bytes)))
        self.version += 1
        return True

    def notes_of(self, report: Report) -> list[str]:
        return list(report.notes)

    def took(self, report: Report) -> None:
        self.quantile = report.tail.quantile or self.quantile
        if not self.rows:  # a replay without events: the report's treatments
            self.rows = [Row(t.fs, dict(t.factors), float(t.d_span_bytes)) for t in report.treatments]

    def _part(self, fs: str | None) -> Analysis | None:
        """The report's analysis, pooled or of one file system (None before the report)."""
        if self.report is None:
            return None
        return self.report.pooled if fs is None else self.report.by_fs.get(fs)

    def final_flags(self) -> list[Flag] | None:
        """The study's conclusions (which factor drives the d-span, …) as flags with notes."""
        return note_flags(self.notes) if self.report is not None else None

    # -- what the view draws ------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return list(self.rows[0].factors) if self.rows else []

    def _encoded(self) -> tuple[np.ndarray, list[list[Any]], np.ndarray]:
        codes, values = sensitivity.encode([r.factors for r in self.rows], self.names)
        return codes, values, np.array([r.d_span_bytes for r in self.rows])

    def quantiles(self, points: int = 24) -> dict[str, list[float]]:
        """Per file system, the d-span at ``points`` evenly spaced quantiles (the CDF turned
        on its side: a rising line)."""
        out = {}
        for fs in sorted({r.fs for r in self.rows}):
            y = np.array([r.d_span_bytes for r in self.rows if r.fs == fs])
            out[fs] = [float(v) for v in np.quantile(y, np.linspace(0, 1, points))]
        return out

    def file_systems(self) -> list[str]:
        return sorted({r.fs for r in self.rows})

    def shares(self, fs: str | None = None) -> list[tuple[str, float | None]]:
        """(factor, first-order share), largest first, pooled or of one file system: the
        report's, else estimated live."""
        part = self._part(fs)
        if part is not None and part.prioritization:
            return [(p.factor, p.first_order) for p in part.prioritization]
        rows = self.rows if fs is None else [r for r in self.rows if r.fs == fs]
        if len(rows) < MIN_ROWS:
            return []
        codes, _ = sensitivity.encode([r.factors for r in rows], self.names)
        s = sensitivity.first_order(codes, np.array([r.d_span_bytes for r in rows]))
        pairs = [(n, None if not np.isfinite(v) else float(v)) for n, v in zip(self.names, s)]
        return sorted(pairs, key=lambda p: -(p[1] if p[1] is not None else -1.0))

    def tail_levels(self, fs: str | None = None) -> list[tuple[str, list[tuple[object, float, bool]]]]:
        """Per factor: (level, share of its runs in the tail, significant), pooled or of one
        file system (its own tail threshold)."""
        rows = self.rows if fs is None else [r for r in self.rows if r.fs == fs]
        if len(rows) < MIN_ROWS:
            return []
        codes, values = sensitivity.encode([r.factors for r in rows], self.names)
        tail = sensitivity.factor_mapping(codes, np.array([r.d_span_bytes for r in rows]), self.quantile)
        return [(name, [(values[j][c], share, sig) for c, (share, _, _, sig) in sorted(tail.levels[j].items())])
                for j, name in enumerate(self.names)]

    def changed_share(self, fs: str | None = None) -> tuple[float, int] | None:
        """(share of repeated treatments whose d-span changed, pairs), pooled or of one file
        system; from the report (None before it, or without --repeat 2)."""
        part = self._part(fs)
        nd = part.nondeterminism if part is not None else Nondeterminism()
        return None if nd.changed_share is None else (nd.changed_share, nd.pairs)

    def pairs(self) -> list[tuple[str, str]]:
        """Factor pairs among the four with the largest shares, the top pair first."""
        top = [n for n, s in self.shares() if s is not None][:4]
        return [(a, b) for k, a in enumerate(top) for b in top[k + 1:]]

    def next_pair(self) -> None:
        """Show the next factor pair's heatmap (the view's ``p`` key)."""
        self.pair_index += 1
        self.version += 1

    def pair_heatmap(self) -> tuple[str, str, list[Any], list[Any], np.ndarray] | None:
        """Tail share for the chosen factor pair (the top two until ``next_pair``):
        (name i, name j, levels i, levels j, matrix)."""
        pairs = self.pairs()
        if not pairs:
            return None
        a, b = pairs[self.pair_index % len(pairs)]
        codes, values, y = self._encoded()
        i, j = self.names.index(a), self.names.index(b)
        return a, b, values[i], values[j], sensitivity.tail_heatmap(codes, y, i, j, self.quantile)
