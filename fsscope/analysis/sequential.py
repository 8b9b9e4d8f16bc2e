"""Deciding candidate files slow or typical with as many runs as the noise requires.

A *candidate* is a file index the probe must settle: a structural change the geometry
predicts there (known before any run), or a repeatable outlier nothing predicted (noticed in
the runs so far). Per run, a candidate is *slow* when its latency exceeds ``factor`` x its
local typical latency (the outlier scan's bar); calls the machine disturbed are not measured
(NaN, see :func:`fsscope.analysis.outliers.mask_disturbed`) and do not vote.

The statistic is Wald's sequential probability ratio test per candidate, run by run:

    H1 (structural): slow with probability ``p1`` in every run;
    H0 (typical):    slow with probability p0_r, the share of the other files slow in run r
                     (the run's own noise: a loaded run has a higher p0 and each of its slow
                     votes counts for less);

    log-LR += log(p1 / p0_r) for a slow vote, log((1 - p1) / (1 - p0_r)) for a typical one.

It stops at the first crossing of log((1 - beta) / alpha) (slow) or log(beta / (1 - alpha))
(typical). A file slow in some runs only -- too often for noise, too rarely for structure
(when the run's noise is near its share of slow votes the ratio wanders) -- is decided
*intermittent* (once it was slow at all) as soon as its slow votes are too few for a repeatable file
(P(at most that many | slow in ``p_repeatable`` of runs) < ``alpha_intermittent``, the
outlier analysis's 80 % rule); it is not repeatable either. A predicted index is tested from the first run (the prediction came first); a
noticed outlier only on the runs after the one that made it repeatable, since the runs that
selected it cannot also confirm it.

A predicted *level shift* (btrfs' first leaf split) is a candidate too: a run votes "shift"
when the median of the files after the cut is ``shift_min_ratio`` x the median of those
before it (within the prediction's tolerance), and p0_r is how often this run steps that far
at cuts away from every candidate. On a busy machine a burst of load flattens the step in a
run or two and moves the median curve the segmentation reads; the vote outvotes it with
more runs, and a shift decided so is reported even where the curve's segmentation missed
it. Pure functions on numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import NDArray

from fsscope.analysis.findings import LevelShift
from fsscope.analysis.latency import nanmedian_last_axis
from fsscope.analysis.outliers import (
    DEFAULT_OUTLIER_FACTOR,
    Knobs,
    RunningAnalysis,
    analyze,
)

#: P(slow in a run) of a structural file: "slow in (nearly) every run".
P_STRUCTURAL = 0.9
#: The least share of runs a repeatable file is slow in (outliers.DEFAULT_MIN_FRACTION).
P_REPEATABLE = 0.8
#: How sure "slow too rarely to be repeatable" must be: a file slow in half the runs is
#: called intermittent after about 9 votes instead of wandering to the cap.
ALPHA_INTERMITTENT = 0.05
#: Error rates of each decision (a probe decides a handful of candidates). On a quiet run
#: (p0 ~ 1 %) two slow votes decide "slow" and three typical ones "typical"; the noisier a
#: run, the more votes it takes.
ALPHA = 0.01
BETA = 0.01
#: Bounds on a run's noise rate: a quiet run still leaves room for chance, and a run where
#: half the files look slow carries (almost) no vote.
P_NOISE_MIN, P_NOISE_MAX = 1e-3, 0.5


@dataclass(frozen=True)
class Candidate:
    index: int
    source: str        # the predicted structure, or "outlier"
    first_run: int     # the first run that votes (0 for a prediction)
    kind: str = "outlier"  # or "shift": a predicted level shift, voted on by the step at it
    tolerance: int = 0     # a shift's cut may fall this many files either side of ``index``


@dataclass(frozen=True)
class Decision:
    index: int
    source: str
    verdict: str       # "slow" | "typical" | "intermittent" | "undecided"
    slow_votes: int
    votes: int         # runs that voted (measured and undisturbed, from first_run on)
    llr: float         # log-likelihood ratio when decided (or after the last run)
    decided_at_run: int | None  # 0-based run whose vote decided it

    def to_json(self) -> dict:
        return asdict(self) | {"llr": round(self.llr, 2)}


def noise_rate(slow: NDArray[np.bool_], measured: NDArray[np.bool_], exclude: list[int]) -> NDArray[np.float64]:
    """Per run: the share of measured files (candidates excluded) that were slow."""
    keep = np.ones(slow.shape[1], dtype=bool)
    keep[[i for i in exclude if 0 <= i < slow.shape[1]]] = False
    counts = measured[:, keep].sum(axis=1)
    rate = np.divide(slow[:, keep].sum(axis=1), counts, out=np.full(len(counts), P_NOISE_MAX), where=counts > 0)
    return np.clip(rate, P_NOISE_MIN, P_NOISE_MAX)


def decide(latency: NDArray[np.float64], baseline_ns: NDArray[np.float64], candidates: list[Candidate], *,
           factor: float, p1: float = P_STRUCTURAL, p_repeatable: float = P_REPEATABLE, alpha: float = ALPHA,
           beta: float = BETA, alpha_intermittent: float = ALPHA_INTERMITTENT) -> list[Decision]:
    """One decision per candidate from ``latency`` (runs x files, NaN: not voting) against
    ``baseline_ns`` (the same shape: each file's local typical latency in its run)."""
    measured = ~np.isnan(latency)
    with np.errstate(invalid="ignore"):
        slow = latency > factor * baseline_ns
    p0 = noise_rate(slow, measured, [c.index for c in candidates])
    return [_sprt(c, slow[:, c.index] if 0 <= c.index < latency.shape[1] else None,
                  measured[:, c.index] if 0 <= c.index < latency.shape[1] else None, p0,
                  p1=p1, p_repeatable=p_repeatable, alpha=alpha, beta=beta, alpha_intermittent=alpha_intermittent)
            for c in candidates]


def decide_running(running: RunningAnalysis, latency_ns: NDArray, wait_ns: NDArray | None,
                   candidates: list[Candidate]) -> list[Decision]:
    """:func:`decide` from a :class:`RunningAnalysis`' state: its per-run counts of slow and
    measured calls give each run's noise, and only the candidates' own files are read back."""
    inside = np.array(sorted({c.index for c in candidates if 0 <= c.index < running.files}), dtype=np.int64)
    latency, baseline_ns = running.masked_columns(latency_ns, wait_ns, inside)
    measured = ~np.isnan(latency)
    with np.errstate(invalid="ignore"):
        slow = latency > running.knobs.factor * baseline_ns
    counts = np.asarray(running.measured_calls) - measured.sum(axis=1)  # candidates excluded
    slow_counts = np.asarray(running.slow_calls) - slow.sum(axis=1)
    p0 = np.clip(np.divide(slow_counts, counts, out=np.full(len(counts), P_NOISE_MAX), where=counts > 0),
                 P_NOISE_MIN, P_NOISE_MAX)
    column = {int(i): k for k, i in enumerate(inside.tolist())}
    return [_sprt(c, slow[:, column[c.index]] if c.index in column else None,
                  measured[:, column[c.index]] if c.index in column else None, p0,
                  p1=P_STRUCTURAL, p_repeatable=P_REPEATABLE, alpha=ALPHA, beta=BETA,
                  alpha_intermittent=ALPHA_INTERMITTENT)
            for c in candidates]


def _sprt(c: Candidate, slow: NDArray[np.bool_] | None, measured: NDArray[np.bool_] | None,
          p0: NDArray[np.float64], *, p1: float, p_repeatable: float, alpha: float, beta: float,
          alpha_intermittent: float) -> Decision:
    """Wald's test of one candidate over its per-run votes (``slow``, where ``measured``)."""
    slow_step, typical_step = np.log(p1 / p0), np.log((1 - p1) / (1 - p0))
    upper, lower = bounds(alpha, beta)
    llr, votes, slow_votes, verdict, at = 0.0, 0, 0, "undecided", None
    if slow is not None and measured is not None:
        for r in range(c.first_run, slow.shape[0]):
            if not measured[r]:
                continue
            votes += 1
            is_slow = bool(slow[r])
            slow_votes += is_slow
            llr += float(slow_step[r] if is_slow else typical_step[r])
            if llr >= upper or llr <= lower:
                verdict, at = ("slow" if llr >= upper else "typical"), r
                break
            if slow_votes and binom_cdf(slow_votes, votes, p_repeatable) < alpha_intermittent:
                verdict, at = "intermittent", r
                break
    return Decision(c.index, c.source, verdict, slow_votes, votes, llr, at)


#: A predicted level shift is judged per run on the medians of this many files either side
#: of the cut (fewer near the ends): a median of 8 ignores a disturbed call or two.
SHIFT_WINDOW_FILES = 8
#: The run's noise for a shift: steps measured at up to this many cuts spread over the files.
SHIFT_NOISE_CUTS = 4096


def _window_log_median(latency: NDArray[np.float64], lo: int, hi: int) -> NDArray[np.float64]:
    """Per run, log of the median of files [lo, hi) (NaN with fewer than 3 measured)."""
    window = latency[:, lo:hi]
    enough = np.sum(~np.isnan(window), axis=1) >= min(3, max(hi - lo, 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(enough, np.log(np.maximum(nanmedian_last_axis(window), 1.0)), np.nan)


def shift_steps(latency: NDArray[np.float64], cut: int, window: int = SHIFT_WINDOW_FILES) -> NDArray[np.float64]:
    """Per run, the log step of the level at ``cut``: the median of the ``window`` files from
    it on over the median of the ``window`` before it (fewer at the ends; NaN: not measured)."""
    width = min(window, cut, latency.shape[1] - cut)
    if width < 1:
        return np.full(latency.shape[0], np.nan)
    return _window_log_median(latency, cut, cut + width) - _window_log_median(latency, cut - width, cut)


def _shift_votes(latency: NDArray[np.float64], c: Candidate, min_log: float) -> tuple[NDArray, NDArray]:
    """Per run: (stepped up by >= ``min_log`` at some cut within the tolerance, could tell)."""
    steps = np.stack([shift_steps(latency, cut) for cut in range(max(1, c.index - c.tolerance),
                                                                  min(latency.shape[1] - 1, c.index + c.tolerance) + 1)])
    measured = np.any(~np.isnan(steps), axis=0)
    with np.errstate(invalid="ignore"):
        return np.nanmax(np.where(np.isnan(steps), -np.inf, steps), axis=0) >= min_log, measured


def shift_noise_rate(latency: NDArray[np.float64], candidates: list[Candidate], tolerance: int,
                     min_log: float, window: int = SHIFT_WINDOW_FILES) -> NDArray[np.float64]:
    """Per run: the share of cuts away from the candidates where the level steps up by
    ``min_log`` within ``tolerance`` files -- how often this run's noise alone votes "shift"."""
    runs, files = latency.shape
    lo, hi = window + tolerance, files - window - tolerance
    cuts = np.arange(lo, hi) if hi > lo else np.array([], dtype=np.int64)
    for c in candidates:  # a structure's own step (or a slow file) is not the noise
        cuts = cuts[np.abs(cuts - c.index) > window + tolerance + c.tolerance]
    if cuts.size > SHIFT_NOISE_CUTS:
        cuts = cuts[np.linspace(0, cuts.size - 1, SHIFT_NOISE_CUTS).astype(np.int64)]
    if cuts.size == 0:
        return np.full(runs, P_NOISE_MAX)
    windows = np.lib.stride_tricks.sliding_window_view(latency, window, axis=1)  # runs x starts x window
    best = np.full((runs, cuts.size), -np.inf)
    told = np.zeros((runs, cuts.size), dtype=bool)
    for offset in range(-tolerance, tolerance + 1):
        at = cuts + offset
        with np.errstate(divide="ignore", invalid="ignore"):
            after, before = (np.log(np.maximum(nanmedian_last_axis(windows[:, starts]), 1.0))
                             for starts in (at, at - window))
        step = after - before
        told |= ~np.isnan(step)
        best = np.fmax(best, step)
    counts = told.sum(axis=1)
    rate = np.divide(((best >= min_log) & told).sum(axis=1), counts, out=np.full(runs, P_NOISE_MAX),
                     where=counts > 0)
    return np.clip(rate, P_NOISE_MIN, P_NOISE_MAX)


def decide_shifts(latency: NDArray[np.float64], candidates: list[Candidate], *, min_ratio: float,
                  **sprt) -> list[Decision]:
    """One decision per predicted level shift: in each run, does the level step up by at
    least ``min_ratio`` at the predicted cut (within its tolerance)? The run's own noise is
    how often it steps so far elsewhere (:func:`shift_noise_rate`)."""
    if not candidates:
        return []
    min_log = math.log(min_ratio)
    out = []
    for c in candidates:
        p0 = shift_noise_rate(latency, candidates, c.tolerance, min_log)
        slow, measured = _shift_votes(latency, c, min_log)
        out.append(_sprt(c, slow, measured, p0, **({"p1": P_STRUCTURAL, "p_repeatable": P_REPEATABLE,
                                                    "alpha": ALPHA, "beta": BETA,
                                                    "alpha_intermittent": ALPHA_INTERMITTENT} | sprt)))
    return out


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p) (n is a number of runs: small)."""
    return sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k + 1))


def bounds(alpha: float = ALPHA, beta: float = BETA) -> tuple[float, float]:
    """The log-LR at which a candidate is decided slow, and typical."""
    return math.log((1 - beta) / alpha), math.log(beta / (1 - alpha))


def _field(prediction, name: str):
    return prediction.get(name) if isinstance(prediction, dict) else getattr(prediction, name, None)


def _best_cut(log_curve: NDArray[np.float64], index: int, tolerance: int) -> int:
    """The cut within ``tolerance`` of ``index`` that best splits the curve around it (files
    up to :data:`SHIFT_WINDOW_FILES` beyond) into two levels: the least absolute deviation
    from each side's median."""
    lo = max(0, index - tolerance - SHIFT_WINDOW_FILES)
    hi = min(log_curve.size, index + tolerance + SHIFT_WINDOW_FILES)

    def misfit(cut: int) -> float:
        left, right = log_curve[lo:cut], log_curve[cut:hi]
        return float(np.nansum(np.abs(left - np.nanmedian(left))) + np.nansum(np.abs(right - np.nanmedian(right))))

    return min(range(max(lo + 1, index - tolerance), min(hi - 1, index + tolerance) + 1), key=misfit)


class Settling:
    """The sequential decisions of one probe, run by run.

    ``predict`` adds the geometry's exact single-file predictions as candidates; each
    ``after_run`` adds the repeatable outliers noticed so far and re-decides every candidate;
    ``done`` says whether another run is needed; ``settled`` makes an analysis's outliers agree
    with the decisions. With ``cap == runs_min`` nothing is added and ``settled`` changes
    nothing: a fixed number of runs, as before.
    """

    def __init__(self, runs_min: int, cap: int):
        self.runs_min, self.cap = runs_min, cap
        self.candidates: dict[int, Candidate] = {}
        self.decisions: list[Decision] = []
        self.runs_seen = 0
        self.running: RunningAnalysis | None = None  # the analysis carried from run to run
        self.matrices: tuple[NDArray, NDArray | None] | None = None  # the runs so far (latency, wait)
        self.last_analysis = None

    def _running(self, knobs: Knobs) -> RunningAnalysis:
        if self.running is None or self.running.knobs != knobs:
            self.running = RunningAnalysis(knobs, capacity_runs=self.cap)
        return self.running

    def analyze(self, latency_ns: NDArray, wait_ns: NDArray | None = None):
        """:func:`analyze` of the runs so far (``latency_ns``' rows, the probe's run arrays as
        they grow), made incrementally: the runs analysed before are not read again whole. Not
        held to the null worlds: :meth:`final_analysis` is."""
        return self._running(Knobs()).update(latency_ns, wait_ns, null_worlds=0)

    @property
    def sequential(self) -> bool:
        return self.cap > self.runs_min

    def predict(self, predictions: list, files: int) -> None:
        for p in predictions:
            index = _field(p, "index")
            if index is None or not 0 <= index < files or index in self.candidates:
                continue
            if _field(p, "kind") == "outlier" and _field(p, "index_low") is None:
                self.candidates[index] = Candidate(int(index), str(_field(p, "structure")), 0)
            elif _field(p, "kind") == "level_shift" and 0 < index < files - 1:
                self.candidates[index] = Candidate(int(index), str(_field(p, "structure")), 0, "shift",
                                                   int(_field(p, "tolerance_files") or 0))

    def after_run(self, run: int, analysis, latency_ns: NDArray, wait_ns: NDArray) -> None:
        self.runs_seen = run + 1
        self.last_analysis = analysis  # of runs 0..run: the report's too when no run is left out
        # the 80 % rule's outliers, beyond chance or not: the test's own votes decide them
        for outlier in (*analysis.outliers, *getattr(analysis, "inconclusive_outliers", ())):
            if outlier.index not in self.candidates:
                self.candidates[outlier.index] = Candidate(outlier.index, "outlier", run + 1)
        running = self._running(Knobs(factor=analysis.settings["outlier_factor"],
                                      block_files=analysis.settings["block_files"]))
        self.matrices = running.extend(latency_ns, wait_ns)  # the runs not folded in yet
        ordered = sorted(self.candidates.values(), key=lambda c: c.index)
        shifts = [c for c in ordered if c.kind == "shift"]
        self.decisions = sorted(
            decide_running(running, *self.matrices, [c for c in ordered if c.kind == "outlier"])
            + (decide_shifts(self._dense(), shifts, min_ratio=analysis.settings["shift_min_ratio"])
               if shifts else []),
            key=lambda d: d.index)

    def _dense(self) -> NDArray[np.float64]:
        """The masked runs so far as one float matrix (NaN: not voting): only what a predicted
        level shift's vote reads (windows spread over every file), not the outliers'."""
        assert self.running is not None and self.matrices is not None
        files = np.arange(self.running.files)
        return self.running.masked_columns(*self.matrices, files)[0]

    def final_analysis(self, latency_ns: NDArray, wait_ns: NDArray, rows: list[int]):
        """The analysis of ``rows`` of the matrices: the one made after the last run when it
        covered exactly these rows (a probe's analysis is not cheap at a million files), else
        made now, its series, shifts and ramps held to the permuted null worlds
        (``analysis.nullgate``; the probe's analyses after each run are not: 19 more series
        searches and segmentations a run are too dear at a million files)."""
        last = self.last_analysis
        if (last is not None and rows == list(range(self.runs_seen))
                and "level_shifts" in last.null_gate.get("gated", [])):
            return last
        if rows == list(range(self.runs_seen)) and self.running is not None and self.running.runs == len(rows):
            # every run is folded in already: the analysis again from the state, gated
            return self.running.update(latency_ns[:len(rows)], wait_ns[:len(rows)], gate_levels=True)
        return analyze(latency_ns[rows], wait_ns=wait_ns[rows], gate_levels=True)

    @property
    def undecided(self) -> list[Decision]:
        return [d for d in self.decisions if d.verdict == "undecided"]

    @property
    def done(self) -> bool:
        """No more runs needed: every candidate decided (after the first ``runs_min``)."""
        return self.sequential and self.runs_seen >= self.runs_min and not self.undecided

    def settled(self, analysis):
        """``analysis`` with its outliers as decided: a candidate decided typical or intermittent is no
        outlier, an outlier nothing predicted must be confirmed by runs made after it was
        noticed, and a predicted file decided slow is one even below the 80 %-of-runs rule."""
        if not self.sequential or self.running is None or self.matrices is None:
            return analysis
        from dataclasses import replace


        verdict = {d.index: d for d in self.decisions if self.candidates[d.index].kind == "outlier"}
        kept = [o for o in analysis.outliers if o.index in verdict and (
            verdict[o.index].verdict == "slow"
            or (verdict[o.index].verdict == "undecided" and verdict[o.index].source != "outlier"))]
        have = {o.index for o in kept}
        wanted = {d.index for d in self.decisions if d.verdict == "slow" and d.index not in have}
        if wanted:  # as repeatable_outliers(min_runs=1) reports them
            indices = np.array(sorted(i for i in wanted if 0 <= i < self.running.files), dtype=np.int64)
            kept += self.running.outliers_at(*self.matrices, indices, factor=DEFAULT_OUTLIER_FACTOR,
                                             needed=np.ones(indices.size, dtype=np.int64))
        have |= wanted  # what the test decided is not inconclusive any more
        unsure = tuple(o for o in analysis.inconclusive_outliers
                       if o.index not in have and verdict.get(o.index) is not None
                       and verdict[o.index].verdict == "undecided")
        return replace(analysis, outliers=tuple(sorted(kept, key=lambda o: o.index)), inconclusive_outliers=unsure,
                       level_shifts=self._settled_shifts(analysis))

    def _settled_shifts(self, analysis) -> tuple:
        """The analysis' level shifts, plus each predicted shift decided up-stepping run by run
        that the median curve's segmentation missed (a loaded run or two can flatten a median
        of five): at the cut within the tolerance that best splits the per-file medians around
        it into two levels (least absolute deviation from each side's median). Each run is
        taken relative to its own median first: a run slowed whole by load keeps its step but
        would blur the levels of a median of a few runs."""

        shifts = list(analysis.level_shifts)
        log_curve = None
        for d in self.decisions:
            c = self.candidates[d.index]
            if c.kind != "shift" or d.verdict != "slow" or any(
                    abs(s.index - c.index) <= c.tolerance for s in shifts):
                continue
            if log_curve is None:
                latency = self._dense()
                files = latency.shape[1]
                with np.errstate(divide="ignore", invalid="ignore"):
                    log_latency = np.log(np.maximum(latency, 1.0))
                run_level = nanmedian_last_axis(log_latency)
                log_curve = nanmedian_last_axis((log_latency - run_level[:, None]).T) + float(np.nanmedian(run_level))
            cut = _best_cut(log_curve, c.index, c.tolerance)
            width = min(SHIFT_WINDOW_FILES, cut, files - cut)
            before, after = (float(np.exp(np.nanmedian(log_curve[k:k + width]))) for k in (cut - width, cut))
            shifts.append(LevelShift(index=cut, before_ns=int(round(before)), after_ns=int(round(after))))
        return tuple(sorted(shifts, key=lambda s: s.index))

    def to_json(self, interrupted: bool = False) -> dict:
        upper, lower = bounds()
        used, undecided = self.runs_seen, self.undecided
        if interrupted:
            why = f"stopped after {used} runs (cancelled, or a call failed) before the decisions were complete"
        elif not self.sequential:
            why = (f"a fixed {used} runs (--max-runs equals --runs); "
                   f"{len(undecided)} of {len(self.decisions)} candidates undecided by then")
        elif not undecided:
            extra = used - self.runs_min
            why = (f"every candidate ({len(self.decisions)}) decided after {used} runs"
                   + (f": {extra} more than the first {self.runs_min}, for the noisy votes" if extra > 0 else ""))
        else:
            why = (f"the cap of {self.cap} runs was reached with {len(undecided)} candidate(s) undecided "
                   f"(files {', '.join(str(d.index) for d in undecided[:8])}): the noise left them in between")
        return {"sequential": self.sequential, "runs_min": self.runs_min, "run_cap": self.cap,
                "runs_used": used, "why": why,
                "statistic": (f"SPRT per candidate: slow with p={P_STRUCTURAL} vs the run's own share of slow "
                              f"files; decided slow at log-LR >= {upper:.1f}, typical at <= {lower:.1f}"),
                "candidates": [d.to_json() for d in self.decisions]}
