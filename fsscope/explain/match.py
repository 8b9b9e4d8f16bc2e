"""Match measured flags (fsscope.analysis.findings) to predicted structural changes.

A flag matches a prediction only where the arithmetic puts it, within a tolerance that has a
reason (:attr:`Prediction.tolerance_files` / ``tolerance_why``):

- exact (0 files) for deterministic thresholds verified on disk: the first call, XFS
  short-form → block → leaf → node, XFS inode-chunk and data-block series, ext4 first
  block full → htree. A flag one file away is some other cause, and is reported as such.
- a window for hash-dependent events (ext4's first htree leaf split): the bounds come from
  the split arithmetic, nothing is added.
- +-2 files for the btrfs leaf split (level shift): the split can fall into the sync after
  the call, and a change point is estimated to +-1 file.
- overlap for linear growth: a fitted range's ends are fuzzy (and a fit may cut one scan
  range into pieces), the structure's are not, so the measured range must lie mostly
  (>= 75 %) inside the predicted one.

A flag with no matching rule is "repeatable, unexplained" — never given a made-up reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fsscope.analysis.findings import LevelShift, LinearGrowth, Outlier, Series
from fsscope.explain.prediction import Prediction
from fsscope.format import format_ns

#: Format conversions after which the per-call cost changes (a level shift may sit there).
FORMAT_CHANGES = frozenset({"xfs-dir-shortform-to-block", "xfs-dir-block-to-leaf",
                            "xfs-dir-leaf-to-node", "ext4-dir-htree-conversion"})

#: Linear growth: share of the measured range that must lie inside the predicted one.
LINEAR_MEASURED_INSIDE = 0.75

UNEXPLAINED = "repeatable, unexplained"


@dataclass(frozen=True)
class Explanation:
    """One measured flag with the prediction that explains it (or None)."""

    finding: Any
    prediction: Prediction | None
    predicted_index: int | None
    structure: str | None  # None: repeatable, unexplained
    note: str
    #: other predictions that match equally well (two structures changing in the same call)
    also: tuple[Prediction, ...] = ()

    @property
    def index(self) -> int:
        return finding_index(self.finding)

    @property
    def explained(self) -> bool:
        return self.prediction is not None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "predicted_index": self.predicted_index,
                "structure": self.structure, "note": self.note}


def finding_index(finding: Any) -> int:
    """The file index a finding is reported at (series: start; linear: range start)."""
    if isinstance(finding, Series):
        return finding.start
    if isinstance(finding, LinearGrowth):
        return finding.start
    return int(finding.index)


def explain(findings: Iterable[Any], predictions: list[Prediction], *,
            tolerance: int | Mapping[str, int] | None = None) -> list[Explanation]:
    """One :class:`Explanation` per finding, in the findings' order.

    ``tolerance`` overrides the predictions' own tolerance (files): an int for every exact
    prediction, or {kind: files} per prediction kind ("outlier", "series", "level_shift").
    """
    return [_explain_one(f, predictions, tolerance) for f in findings]


def unobserved(predictions: list[Prediction], explanations: list[Explanation]) -> list[Prediction]:
    """Predictions no finding matched (predicted but not measured as repeatable)."""
    used = {id(e.prediction) for e in explanations if e.prediction is not None}
    return [p for p in predictions if id(p) not in used]


def _tol(p: Prediction, tolerance: int | Mapping[str, int] | None) -> int:
    if tolerance is None:
        return p.tolerance_files
    if isinstance(tolerance, Mapping):
        return int(tolerance.get(p.kind, p.tolerance_files))
    return int(tolerance)


def _explain_one(finding: Any, predictions: list[Prediction],
                 tolerance: int | Mapping[str, int] | None) -> Explanation:
    hits: list[tuple[tuple[int, int, int], Prediction, int | None, str]] = []
    for p in predictions:
        hit = _match(finding, p, _tol(p, tolerance))
        if hit is None:
            continue
        distance, predicted, how = hit
        # rank: exact before window, unconditional before conditional, then distance
        hits.append(((0 if p.exact else 1, 1 if p.condition else 0, distance), p, predicted, how))
    if not hits:
        return Explanation(finding, None, None, None,
                           _unexplained_note(finding, predictions))
    hits.sort(key=lambda h: h[0])
    rank, p, predicted, how = hits[0]
    also = tuple(h[1] for h in hits[1:] if h[0] == rank and h[1].structure != p.structure)
    note = _note(finding, p, predicted, how)
    for other in also:
        note += (f" The same call also changes another structure — {other.structure}: "
                 f"{other.note} Why here: {other.arithmetic}.")
    return Explanation(finding, p, predicted, p.structure, note, also)


def _match(f: Any, p: Prediction, tol: int) -> tuple[int, int | None, str] | None:
    """(distance, predicted index, how it matched) or None."""
    if isinstance(f, Outlier):
        return _match_index(f.index, p, tol, allow_series=True,
                            kinds=("outlier", "series", "level_shift"))
    if isinstance(f, LevelShift):
        found = _match_index(f.index, p, tol, allow_series=False, kinds=("level_shift",))
        if found is None and p.structure in FORMAT_CHANGES and p.exact:
            found = _match_index(f.index, p, tol, allow_series=False, kinds=("outlier",))
            if found is not None:
                found = (found[0], found[1], "level changes after the format change")
        return found
    if isinstance(f, Series):
        return _match_series(f, p, tol)
    if isinstance(f, LinearGrowth):
        return _match_linear(f, p)
    return None


def _match_index(i: int, p: Prediction, tol: int, *, allow_series: bool,
                 kinds: tuple[str, ...]) -> tuple[int, int | None, str] | None:
    if p.kind not in kinds:
        return None
    if p.kind == "series":
        if not allow_series or p.index is None or not p.stride or p.count <= 0:
            return None
        k = round((i - p.index) / p.stride)
        k = min(max(k, 0), p.count - 1)
        member = p.index + k * p.stride
        return (abs(i - member), member, f"member {k + 1} of the series") \
            if abs(i - member) <= tol else None
    if p.index is not None:
        if abs(i - p.index) > tol:
            return None
        how = "exact" if i == p.index else f"{i - p.index:+d} files, within the tolerance"
        return (abs(i - p.index), p.index, how)
    if p.index_low is not None and p.index_high is not None and p.index_low - tol <= i <= p.index_high + tol:
        return (0, None, f"inside the predicted window {p.index_low}..{p.index_high}")
    return None


def _match_series(f: Series, p: Prediction, tol: int) -> tuple[int, int | None, str] | None:
    if p.kind != "series" or p.index is None or p.stride != f.stride:
        return None
    offset = f.start - p.index
    if offset < -tol:
        return None
    k = max(0, round(offset / p.stride))
    member = p.index + k * p.stride
    if abs(f.start - member) > tol:
        return None
    how = "same stride, same start" if k == 0 else f"same stride, starts at member {k + 1}"
    return (abs(f.start - member), member, how)


def _match_linear(f: LinearGrowth, p: Prediction) -> tuple[int, int | None, str] | None:
    if p.kind != "linear" or p.index is None or p.end is None:
        return None
    overlap = min(f.end, p.end) - max(f.start, p.index)
    measured = max(1, f.end - f.start)
    if overlap <= 0:
        return None
    inside = overlap / measured
    if inside < LINEAR_MEASURED_INSIDE:
        return None
    return (abs(f.start - p.index) + abs(f.end - p.end), p.index,
            f"{inside:.0%} of the measured range inside the predicted {p.index}..{p.end - 1}")


def _measured(f: Any) -> str:
    if isinstance(f, Outlier):
        return (f"Measured: file {f.index} slow in {f.runs_flagged}/{f.runs} runs, median "
                f"{format_ns(f.median_ns)} vs typical {format_ns(f.typical_ns)} ({f.ratio:.1f}x).")
    if isinstance(f, LevelShift):
        return (f"Measured: level {format_ns(f.before_ns)} before file {f.index}, "
                f"{format_ns(f.after_ns)} after ({f.after_ns / max(f.before_ns, 1):.2f}x).")
    if isinstance(f, Series):
        return f"Measured: {f.count} slow files every {f.stride} from file {f.start}."
    if isinstance(f, LinearGrowth):
        return (f"Measured: files {f.start}..{f.end - 1} {'grow' if f.slope_ns_per_file >= 0 else 'fall'} "
                f"{abs(f.slope_ns_per_file):.0f} ns per file (r2 {f.r2:.2f}).")
    return f"Measured: {f!r}."


def _note(f: Any, p: Prediction, predicted: int | None, how: str) -> str:
    parts = [p.note, f"Why here: {p.arithmetic}.", _measured(f), f"Match: {how}."]
    if p.condition:
        parts.append(f"Assumes: {p.condition}.")
    return " ".join(parts)


def _unexplained_note(f: Any, predictions: list[Prediction]) -> str:
    i = finding_index(f)
    kind = type(f).__name__
    nearest = ""
    candidates = [(abs(j - i), j, p.structure) for p in predictions for j in p.indices()]
    if candidates:
        _, j, structure = min(candidates)
        nearest = f" The nearest prediction is {structure} at file {j}."
    scope = ""
    if predictions:
        scope = f" for {predictions[0].fs} {predictions[0].op}"
    return (f"{UNEXPLAINED}: {kind.lower()} at file {i}; no rule{scope} predicts a structural "
            f"change here, so fsscope gives no reason.{nearest} {_measured(f)}")
