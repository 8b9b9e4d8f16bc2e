"""Layout exploration (Chopper, He et al. FAST'15): the explore treatment and the explore job.

A treatment: take the base image of its disk state (built once per host, cached in the RAM
directory), clone it, attach and mount the clone, play the write pattern, read FIEMAP,
release the clone. The row says the d-span of each file; the treatment's response is the
largest of them, as Chopper defines it (the span over all of its files is kept as
``dspan_all_files_bytes``); extents, layout score, d-span / ideal, and where the time went
(state, clone, mount, play, sync, fiemap, release).

The job (``fsscope explore``, or the ``explore`` job in the TUI) makes the plan, saves it,
runs the treatments through :mod:`fsscope.study.execute` (LocalCluster or ``--scheduler``),
and reports the table with the sensitivity analysis of :mod:`fsscope.analysis.sensitivity`.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import numpy as np

from fsscope import paths, recipes
from fsscope.analysis import sensitivity
from fsscope.errors import FsscopeError
from fsscope.recipes import Recipe
from fsscope.records import Record, ReportRecord, SpecRecord, convert, plain
from fsscope.study import diskstate, player
from fsscope.study import space as spaces
from fsscope.study.credentials import check_scheduler
from fsscope.study.execute import (
    STUDY_GROUP_PREFIX,
    check_some_finished,
    cleanup_study_leftovers,
    order_rows,
    require_root,
    run_study,
)
from fsscope.study.plan import Ended, Failed, Failure, Plan, Treatment, check_plan, plan_or_resume
from fsscope.study.player import FileLayout
from fsscope.study.space import Level
from fsscope.study.table import save_table
from fsscope.targets import identity
from fsscope.targets.journal import Journal

METRICS = ("d_span_bytes", "extents", "layout_score", "d_span_ideal_ratio", "dspan_all_files_bytes",
           "layout_score_all_files")


class ExploreResult(Treatment, frozen=True, kw_only=True):
    """A finished treatment as the report lists it: its file system, where each file lies, the
    treatment's response (the largest per-file d-span; ``dspan_all_files_bytes`` spans all its
    files) and where the time went. A row recorded before the response was per file has no
    ``dspan_all_files_bytes`` (see :func:`per_file_response`)."""

    fs: str = ""
    files: list[FileLayout] = []
    d_span_bytes: int = 0
    extents: int = 0
    layout_score: float | None = None
    d_span_ideal_ratio: float | None = None
    dspan_all_files_bytes: int | None = None
    layout_score_all_files: float | None = None
    timing_s: dict[str, float] = {}
    host: str = ""


class ExploreRow(ExploreResult, frozen=True, kw_only=True):
    """A finished treatment's row in ``treatments.ndjson`` (also the worker's pid)."""

    pid: int | None = None

    def result(self) -> ExploreResult:
        return msgspec.convert(self, ExploreResult, from_attributes=True)


class TreatmentDone(Ended, frozen=True, kw_only=True, tag="treatment"):
    """A treatment's row as it arrives (the live view's d-span per treatment)."""

    recipe: str = ""
    factors: dict[str, Level] = {}
    d_span_bytes: float | None = None
    dspan_all_files_bytes: float | None = None


DATA = (TreatmentDone,)


class Prioritized(Record, frozen=True, kw_only=True):
    """A factor's first-order share of the d-span variance (None: too few runs per level)."""

    factor: str
    first_order: float | None = None
    first_order_salib_rbd_fast: float | None = None
    levels: int = 0
    #: what shuffling the runs against the factor's levels gives it (its chance share), and the
    #: one-sided permutation p of the measured share against it
    chance: float | None = None
    permutation_p: float | None = None


class Interaction(Record, frozen=True, kw_only=True):
    factors: list[str]
    interaction: float


class TailLevel(Record, frozen=True, kw_only=True):
    """How often a factor level put runs in the d-span tail; ``runs_to_decide`` only when
    undecided (the runs of it that would decide its share, if it held; None: no excess to
    decide), UNSET (no key) when decided."""

    factor: str
    level: Level
    tail_share: float
    runs: int
    p_value: float
    significant: bool
    runs_to_decide: int | None | msgspec.UnsetType = msgspec.UNSET


class Tail(Record, frozen=True, kw_only=True):
    quantile: float = 0.9
    threshold_bytes: float | None = None
    share: float | None = None
    levels: list[TailLevel] = []


class Concentration(Record, frozen=True, kw_only=True):
    """Where the repeats' changes concentrate: a factor pair's level combination."""

    factors: list[str]
    levels: list[Level]
    changed_share: float
    runs: int
    lift: float


class Nondeterminism(Record, frozen=True, kw_only=True):
    """Repeats 0 and 1 of the same treatment: how many pairs, the share that changed."""

    pairs: int = 0
    changed_share: float | None = None
    abs_diff_cdf: list[list[float]] = []
    median_abs_diff_bytes: float | None = None
    concentrated: list[Concentration] = []


class Analysis(Record, frozen=True, kw_only=True):
    """Prioritization, interactions, the tail and nondeterminism of some rows: pooled, or one
    file system's (``by_fs``)."""

    completed: int = 0
    prioritization: list[Prioritized] = []
    interactions: list[Interaction] = []
    tail: Tail = msgspec.field(default_factory=Tail)
    nondeterminism: Nondeterminism = msgspec.field(default_factory=Nondeterminism)


class Report(ReportRecord, frozen=True, kw_only=True):
    """The explore report. The pooled analysis sits at the top level (the issue's keys), the
    same per file system under ``by_fs``; :attr:`pooled` gives it as one :class:`Analysis`."""

    study_dir: str = ""
    space: str = ""
    seed: int = 0
    recipes: list[str] = []
    repeat: int = 1
    planned: int = 0
    completed: int = 0
    failed: list[Failure] = []
    treatments: list[ExploreResult] = []
    response: str = ""
    elapsed_s: float | None = None
    treatments_per_min: float | None = None
    # the pooled Analysis' fields (a record has one base with fields)
    prioritization: list[Prioritized] = []
    interactions: list[Interaction] = []
    tail: Tail = msgspec.field(default_factory=Tail)
    nondeterminism: Nondeterminism = msgspec.field(default_factory=Nondeterminism)
    by_fs: dict[str, Analysis] = {}
    d_span_cdf: dict[str, list[list[float]]] = {}
    dspan_all_files_cdf: dict[str, list[list[float]]] = {}
    time_per_treatment_s: dict[str, float] = {}
    notes: list[str] = []

    @property
    def pooled(self) -> Analysis:
        return Analysis(completed=self.completed, prioritization=self.prioritization,
                        interactions=self.interactions, tail=self.tail, nondeterminism=self.nondeterminism)


@dataclass(frozen=True)
class ExploreTreatment:
    """The explore treatment, picklable to Dask workers (they import it from fsscope).

    ``hold_path``: while that file exists, a treatment waits after playing, with its clone
    still mounted -- lets a test kill a worker mid-treatment. Empty in real studies."""

    recipes: dict[str, dict]  # name -> plain(Recipe), so remote workers use the driver's recipes
    settings: dict[str, Any] = field(default_factory=dict)
    cache_name: str = "fsscope-study-cache"
    hold_path: str = ""

    def cache_dir(self) -> Path:
        """This study's disk states on this host: a private directory (see
        :func:`diskstate.private_dir`) whose name no other user can guess."""
        return paths.ram_dir() / self.cache_name

    def __call__(self, treatment: Treatment) -> ExploreRow:
        cleanup_study_leftovers()  # a worker killed before us on this host
        recipe = Recipe.from_dict(self.recipes[treatment.recipe])
        f = player.DEFAULTS | treatment.factors
        state = diskstate.DiskState(recipe, int(f["DiskSize"]), float(f["UsedRatio"]), int(f["FreeSpaceLayout"]))
        t0 = time.monotonic()
        base = diskstate.base_image(state, self.cache_dir())
        timing = {"state_s": time.monotonic() - t0}
        with diskstate.clone(base, recipe, timing) as mnt:
            measured, played = player.play(mnt, f, self.settings)
            while self.hold_path and os.path.exists(self.hold_path):
                time.sleep(0.05)
        timing |= played
        return ExploreRow(**msgspec.structs.asdict(treatment), fs=recipe.fs, **measured,
                          host=socket.gethostname(), pid=os.getpid(),
                          timing_s={k: round(v, 6) for k, v in timing.items()})

    def drop_cache(self) -> None:
        """Remove this study's base images on this host (run on every worker at the end)."""
        shutil.rmtree(self.cache_dir(), ignore_errors=True)


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "explore"

    space: str = "small"
    factors: tuple[str, ...] = ()  # level overrides, "NAME=L1,L2"
    treatments: int = 24
    seed: int = 1
    recipes: tuple[str, ...] = ("ext4-default",)
    repeat: int = 1
    workers: int = 2
    scheduler: str = ""
    security: str = ""                   # --security FILE: the TLS credentials for the scheduler
    insecure_scheduler: bool = False     # a plain tcp:// scheduler, said out loud
    resume: str = ""  # a study run directory to continue
    tail_quantile: float = 0.9
    hold_path: str = ""


MAX_DIR_DEPTH = 12  # a binary tree: 2^13 - 1 directories made per treatment


def check_settings(settings: dict[str, Any], where: str) -> None:
    """The explore [settings] (a binary directory tree's depth, where DirectorySpan starts) in
    range: a depth of 40 would make 2^41 directories per treatment."""
    depth = settings.get("dir_depth", 4)
    for key, hi in (("dir_depth", MAX_DIR_DEPTH), ("start_level", depth)):
        value = settings.get(key, 2 if key == "start_level" else 4)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= hi:
            raise FsscopeError(f"{where}: settings.{key}: expected a whole number in 0..{hi}, got {value!r}")


def make_plan(spec: Spec) -> Plan:
    space = spaces.load(spec.space, player.EXPLORE_SCHEMA)
    check_settings(space.settings, space.source or space.name)
    if spec.factors:
        space = space.with_levels(spaces.parse_overrides(list(spec.factors)), player.EXPLORE_SCHEMA)
    for name in spec.recipes:
        recipes.load(name)  # a bad name fails here, before the plan is saved
    return Plan.make(space, spec.treatments, spec.seed, tuple(spec.recipes), spec.repeat)


def run(ctx: Any, spec: Spec) -> Report:
    """The explore job: plan (or resume), run, save the table, analyse."""
    study_dir, plan = plan_or_resume(ctx, spec.resume, lambda: make_plan(spec))
    treatment = ExploreTreatment({name: plain(recipes.load(name)) for name in plan.recipes},
                                 dict(plan.space.settings),
                                 f"fsscope-study-{Path(study_dir).name}-{uuid.uuid4().hex}",  # unguessable
                                 spec.hold_path)
    total = len(plan.treatments())
    ctx.phase(f"explore: {total} treatments on {', '.join(plan.recipes)}")
    t0 = time.monotonic()

    def on_row(row: ExploreRow | Failed, done: int, total: int) -> None:
        ctx.emit(treatment_done(row))
        rate = done / max(time.monotonic() - t0, 1e-9)
        ctx.progress(done, total, unit="treatments", info=f"{rate * 60:.0f}/min")

    # This host's disk-state cache goes with the job: dropped at the end, and by the journal
    # (owner: this process) if the job is killed. Remote hosts drop theirs at the end.
    journal = Journal()
    cache_entry = journal.record("workdir", f"{STUDY_GROUP_PREFIX}cache-{uuid.uuid4().hex[:8]}",
                                 path=str(treatment.cache_dir()))
    # made now, so the journal names it by identity (cleanup removes no directory it cannot name)
    diskstate.private_dir(treatment.cache_dir())
    journal.complete(cache_entry, ident=identity.path_id(treatment.cache_dir()))
    try:
        rows = run_study(plan, treatment, study_dir, ExploreRow, workers=spec.workers, scheduler=spec.scheduler,
                         security=spec.security, insecure=spec.insecure_scheduler,
                         on_row=on_row, cancelled=lambda: ctx.cancelled, teardown=treatment.drop_cache)
    finally:
        treatment.drop_cache()
        journal.forget(cache_entry)
    rows = [r if isinstance(r, Failed) else per_file_response(r) for r in order_rows(plan, rows)]
    save_table(plan, rows, study_dir)
    if Path(study_dir) != ctx.run_dir.path:
        save_table(plan, rows, ctx.run_dir.path)
    out = report(plan, rows, study_dir=str(study_dir), quantile=spec.tail_quantile,
                 elapsed_s=time.monotonic() - t0)
    ctx.run_dir.write_report(plain(out))  # kept, with each treatment's error, when the check below fails
    check_some_finished(rows)
    return out


def treatment_done(row: ExploreRow | Failed) -> TreatmentDone:
    """The live event of a row."""
    if isinstance(row, Failed):
        return TreatmentDone(id=row.id, recipe=row.recipe, factors=row.factors, error=row.error)
    return TreatmentDone(id=row.id, recipe=row.recipe, fs=row.fs, factors=row.factors, d_span_bytes=row.d_span_bytes,
                         dspan_all_files_bytes=row.dspan_all_files_bytes)


def report(plan: Plan, rows: list[ExploreRow | Failed], *, study_dir: str = "", quantile: float = 0.9,
           elapsed_s: float | None = None) -> Report:
    """The explore report: the issue's keys (treatments, prioritization, tail,
    nondeterminism) pooled over every file system, the same per file system under ``by_fs``
    (the paper ranks each file system on its own: pooled, one file system's tail can hide
    another's), and more (per-fs CDFs, notes, timing)."""
    ok = [per_file_response(r) for r in rows if isinstance(r, ExploreRow)]
    names = list(plan.space.names)
    out = Report(
        study_dir=study_dir, space=plan.space.name, seed=plan.seed, recipes=list(plan.recipes),
        repeat=plan.repeat, planned=len(plan.treatments()), completed=len(ok),
        failed=[Failure(id=r.id, error=r.error) for r in rows if isinstance(r, Failed)],
        treatments=[r.result() for r in ok],
        response="d_span_bytes: the largest d-span of a treatment's files (Chopper's d-span is per "
                 "file); dspan_all_files_bytes spans all of them together",
        elapsed_s=None if elapsed_s is None else round(elapsed_s, 3),
        treatments_per_min=None if elapsed_s is None else round(len(ok) / max(elapsed_s, 1e-9) * 60, 2))
    pooled = _analyse(ok, names, quantile)
    out = msgspec.structs.replace(out, prioritization=pooled.prioritization, interactions=pooled.interactions,
                                  tail=pooled.tail, nondeterminism=pooled.nondeterminism)
    if not ok:
        return msgspec.structs.replace(out, notes=["no treatment finished"])
    fss = sorted({r.fs for r in ok})
    timing = [r.timing_s for r in ok]
    keys = sorted({k for t in timing for k in t})
    out = msgspec.structs.replace(
        out, by_fs={fs: _analyse([r for r in ok if r.fs == fs], names, quantile) for fs in fss},
        d_span_cdf={fs: sensitivity.ecdf([r.d_span_bytes for r in ok if r.fs == fs]) for fs in fss},
        dspan_all_files_cdf={fs: sensitivity.ecdf([r.dspan_all_files_bytes or 0 for r in ok if r.fs == fs])
                             for fs in fss},
        time_per_treatment_s={k: round(float(np.mean([t.get(k, 0.0) for t in timing])), 4) for k in keys})
    return msgspec.structs.replace(out, notes=sensitivity.notes(plain(out)))


def per_file_response(row: ExploreRow) -> ExploreRow:
    """A row with Chopper's per-file d-span as its response. Rows recorded before the
    response was per file (their ``d_span_bytes`` spanned all files) are recomputed from
    their per-file metrics, so resuming an older study reports the paper's metric too."""
    if row.dspan_all_files_bytes is not None or not row.files:
        return row
    return msgspec.structs.replace(row, dspan_all_files_bytes=row.d_span_bytes,
                                   layout_score_all_files=row.layout_score, **player.worst_file(row.files))


def _analyse(ok: list[ExploreRow], names: list[str], quantile: float) -> Analysis:
    """Prioritization, interactions, the tail and nondeterminism of some rows (all, or one
    file system's)."""
    if not ok:
        return Analysis(tail=Tail(quantile=quantile))
    codes, values = sensitivity.encode([r.factors for r in ok], names)
    y = np.array([r.d_span_bytes for r in ok], dtype=float)
    first = sensitivity.first_order(codes, y)
    cross = _rbd_fast(codes, values, y, names)
    chance: list[tuple[float, float] | None] = [sensitivity.first_order_chance(codes, y, j)
                                                if np.isfinite(first[j]) else None for j in range(len(names))]
    prioritization = sorted(
        (Prioritized(factor=n, first_order=round(float(first[j]), 6) if np.isfinite(first[j]) else None,
                     first_order_salib_rbd_fast=cross[j], levels=len(values[j]),
                     chance=None if (c := chance[j]) is None else round(c[0], 6),
                     permutation_p=None if c is None else c[1])
         for j, n in enumerate(names)),
        key=lambda p: -p.first_order if p.first_order is not None else math.inf)
    interactions = [Interaction(factors=[names[i], names[j]], interaction=round(v, 6))
                    for (i, j), v in sensitivity.top_interactions(codes, y, 10)]
    tail = sensitivity.factor_mapping(codes, y, quantile)
    alpha = sensitivity.ALPHA / max(sum(len(lv) for lv in tail.levels), 1)  # Bonferroni, as the test

    def level(j: int, code: int, share: float, n: int, p: float, sig: bool) -> TailLevel:
        # undecided: the runs of this level that would decide its share, if it held
        decide = msgspec.UNSET if sig else sensitivity.runs_to_decide_share(share, tail.tail_share, alpha)
        return TailLevel(factor=names[j], level=values[j][code], tail_share=round(share, 6), runs=n,
                         p_value=p, significant=sig, runs_to_decide=decide)

    levels = [level(j, code, *entry) for j in range(len(names)) for code, entry in sorted(tail.levels[j].items())]
    nondeterminism = sensitivity.nondeterminism(
        [(r.recipe, r.row, r.repeat, r.d_span_bytes) for r in ok], {(r.recipe, r.row): r.factors for r in ok}, names)
    return Analysis(completed=len(ok), prioritization=prioritization, interactions=interactions,
                    tail=Tail(quantile=quantile, threshold_bytes=tail.threshold, share=tail.tail_share, levels=levels),
                    nondeterminism=convert(nondeterminism, Nondeterminism))


def _rbd_fast(codes: np.ndarray, values: list[list[Any]], y: np.ndarray, names: list[str]) -> list[float | None]:
    """SALib's RBD-FAST first-order estimate per factor, as a cross-check (it reads levels as
    ordered positions, which suits sizes and ratios more than orders or bitmaps)."""
    if len(y) < 2 * len(names) or float(np.var(y)) == 0.0:
        return [None] * len(names)
    try:
        s = sensitivity.salib_first_order(
            sensitivity.unit_positions(codes, [len(v) for v in values]), y, names)
    except Exception:  # noqa: BLE001 - a cross-check must never lose the report
        return [None] * len(names)
    return [round(float(v), 6) if np.isfinite(v) else None for v in s]


def check_spec(spec: Spec) -> None:
    """Refuse a bad spec before a run record exists (the CLI calls it)."""
    check_scheduler(spec.scheduler, spec.security, spec.insecure_scheduler)
    require_root("explore", spec.scheduler)
    check_plan(spec.resume, spec.workers, lambda: make_plan(spec), check_settings)
    if not 0 < spec.tail_quantile < 1:
        raise FsscopeError(f"--tail-quantile must be between 0 and 1, got {spec.tail_quantile}")
