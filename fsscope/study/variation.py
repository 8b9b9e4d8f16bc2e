"""Configuration-space variation study (Cao et al., "On the Performance Variation in Modern
Storage Stacks", FAST'17): sampled storage-stack configurations, R runs each, how much they vary.

A space (``recipes/spaces/cao-*.toml``) lists the knobs of ext4, XFS and btrfs (block, inode
and node sizes, journal mode, AG count, data checksums/COW) and the shared ones (atime, I/O
scheduler, device); ``[settings]`` names the file systems, personalities, runs, run length, image size.
The study engine (:mod:`fsscope.study.plan`, :mod:`fsscope.study.execute`) samples N
configurations with a balanced LHS; every one runs on each file system (only that file
system's knobs apply) under each personality. One treatment = one configuration x one
personality: R runs, each on a freshly made file system in a loop image with the hygiene steps
(mkfs with inode tables written, hash seed nulled, populate, unmount + mount, drop caches). The
paper's device knob (HDD/SSD) is, here, where that image lives: ``ram`` (the RAM directory,
$FSSCOPE_RAM_DIR, default /dev/shm) or ``disk`` (the machine's disk: $FSSCOPE_DISK_DIR,
default /var/tmp -- on a Dask cluster, each worker's own).

A treatment's row keeps what the statistics need (per-run ops per 1-s bin, per-op latency
histograms, sparse), so the report is recomputed from ``treatments.ndjson`` alone.
"""

from __future__ import annotations

import math
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, cast

import msgspec
import numpy as np

from fsscope import paths
from fsscope.analysis.levels import knob_levels, pearson_with_p
from fsscope.analysis.variation.grid import N_BUCKETS
from fsscope.analysis.variation.metrics import ks_range, relative_range, relative_range_cdf, rsd
from fsscope.analysis.variation.stats import pearson
from fsscope.engine.events import DataRecord
from fsscope.errors import FsscopeError
from fsscope.layout.placement import Placement, dataset_placement
from fsscope.recipes import Recipe
from fsscope.records import Record, ReportRecord, SpecRecord, convert, plain
from fsscope.study import diskstate
from fsscope.study import space as spaces
from fsscope.study.credentials import check_scheduler
from fsscope.study.execute import (
    STUDY_GROUP_PREFIX,
    check_some_finished,
    cleanup_study_leftovers,
    order_rows,
    run_study,
)
from fsscope.study.plan import Ended, Failed, Failure, Plan, Treatment, check_plan, plan_or_resume
from fsscope.study.space import Level
from fsscope.targets import filesystem, identity, image
from fsscope.targets.journal import Journal, undo_group
from fsscope.units import parse_size_bytes
from fsscope.workloads import personalities as P

BIN_S = 1.0
MIB = 1 << 20
GIB = 1 << 30

# The paper's scale (Cao et al., Sec. 3 and Table 3): 10 runs per configuration and workload;
# Webserver and Fileserver run 800 s, Mailserver (varmail) 2,000 s; the file count is raised
# until the dataset is 2.5x the RAM (10 GB over 4 GB; Filebench's mean file sizes kept); the
# expert space of Table 2 sampled down to 107 configurations (here 36 LHS rows, each run on
# ext4, XFS and btrfs: 108). The RAM limit is the workers' memory cgroup (--mem-limit).
class PaperScale(Record, frozen=True, kw_only=True):
    space: str
    configurations: int
    runs: int
    durations_s: dict[str, float]
    mem_limit_bytes: int
    dataset_per_memory: float


PAPER = PaperScale(space="cao-expert", configurations=36, runs=10,
                   durations_s={"webserver": 800.0, "fileserver": 800.0, "varmail": 2000.0},
                   mem_limit_bytes=4 * GIB, dataset_per_memory=2.5)
XFS_BYTES_PER_AG = 128 * MIB  # mkfs.xfs: the 64 MiB log must fit in one AG
XFS_MIN_INODE = 512  # v5 (CRC) XFS; the paper's 256 needs the deprecated -m crc=0


def _int(v: Any, where: str) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        raise FsscopeError(f"{where}: expected a whole number, got {v!r}") from None


def _one_of(*choices: str) -> Callable[[Any, str], Level]:
    def check(v: Any, where: str) -> str:
        if v not in choices:
            raise FsscopeError(f"{where}: {v!r} is not one of {', '.join(choices)}")
        return v
    return check


SCHEMA: spaces.Schema = {
    "ext4_block_size": _int, "ext4_inode_size": _int,
    "ext4_journal": _one_of("ordered", "writeback", "journal"),
    "xfs_block_size": _int, "xfs_inode_size": _int, "xfs_agcount": _int,
    "btrfs_node_size": _int, "btrfs_data": _one_of("default", "nodatacow", "nodatasum"),
    "atime": _one_of("relatime", "noatime", "strictatime"),
    "scheduler": _one_of("none", "mq-deadline", "bfq", "kyber"),
    "device": _one_of("ram", "disk"),
}
SHARED_KNOBS = ("atime", "scheduler", "device")
FILE_SYSTEMS = ("ext4", "xfs", "btrfs")


# ---------------------------------------------------------------------------------------------
# The records: a treatment's row (treatments.ndjson), its events, the report
# ---------------------------------------------------------------------------------------------

class Settings(Record, frozen=True, kw_only=True, omit_defaults=True):
    """A plan's [settings] as the study runs them (the space's, the command line's over them;
    checked by :func:`check_settings`); a setting not given is left out."""

    file_systems: list[str] | None = None
    personalities: list[str] | None = None
    runs: int | None = None
    duration_s: float | None = None
    durations_s: dict[str, float] | None = None   # per personality (--paper)
    image_size: str | int | None = None
    nfiles: int | None = None
    nfiles_per_personality: dict[str, int] | None = None
    workers: int | None = None
    seed: int | None = None
    mem_limit_bytes: int | None = None
    paper: bool | None = None

    @property
    def image_bytes(self) -> int:
        return parse_size_bytes(str(self.image_size or "1G"), "image_size")

    def duration_of(self, personality: str) -> float:
        """A personality's run length: its own (--paper: 800 s or 2,000 s) or the study's."""
        return float((self.durations_s or {}).get(personality, self.duration_s or 5))

    def nfiles_of(self, personality: str) -> int | None:
        return (self.nfiles_per_personality or {}).get(personality) or self.nfiles


def settings_of(plan: Plan) -> Settings:
    return convert(plan.space.settings, Settings, "variation settings")


class Run(Record, frozen=True, kw_only=True):
    """One run of a treatment: throughput, ops per 1-s bin, sparse per-op latency histograms
    ([[bucket, count], ...] on the grid of :mod:`fsscope.analysis.variation`)."""

    ops_per_s: float
    elapsed_s: float = 0.0
    counts_per_bin: list[int] = []
    op_names: list[str] = []
    latency_hist: list[list[list[int]]] = []
    populate_s: float = 0.0
    image: str = ""                      # where it lived (removed after the run)
    cgroup: dict[str, Any] | None = None  # the workers' memory cgroup (with a memory limit)
    placement: Placement | None = None
    timing_s: dict[str, float] = {}


class VariationRow(Treatment, frozen=True, kw_only=True):
    """A configuration x personality's row: the knobs that really applied and its R runs."""

    fs: str = ""
    personality: str = ""
    knobs: dict[str, Level] = {}
    mkfs_opts: list[str] = []
    mount_opts: list[str] = []
    runs: list[Run] = []
    host: str = ""


class TreatmentDone(Ended, frozen=True, kw_only=True, tag="treatment"):
    """A treatment as it ends (the log): its relative range."""

    personality: str = ""
    knobs: dict[str, Level] = {}
    relative_range: float | None = None


class RowDone(DataRecord, frozen=True, kw_only=True, tag="variation_row"):
    """A finished treatment's whole row, for the live view's figures (not logged: the study's
    treatments.ndjson holds it)."""

    row: VariationRow


DATA = (TreatmentDone, RowDone)


class RunSummary(Record, frozen=True, kw_only=True):
    ops_per_s: float
    elapsed_s: float = 0.0
    timing_s: dict[str, float] = {}
    placement: Placement | None = None


class ConfigurationStats(Record, frozen=True, kw_only=True):
    """One configuration x personality: runs' ops/s, relative range, K-S range per op (the
    largest over ops is the configuration's ``ks_range``), and Fig. 4's placement PCC."""

    id: str
    configuration: str = ""
    fs: str = ""
    row: int = 0
    knobs: dict[str, Level] = {}
    personality: str = ""
    runs: list[RunSummary] = []
    mean_ops_per_s: float = 0.0
    relative_range: float | None = None
    rsd: float | None = None
    ks_range: float | None = None
    ks_range_per_op: dict[str, float | None] = {}
    placement_pcc: float | None = None


class Pcc(Record, frozen=True, kw_only=True):
    r: float | None = None
    p: float | None = None
    configurations: int = 0


class Flagged(Record, frozen=True, kw_only=True):
    id: str
    fs: str = ""
    personality: str = ""
    relative_range: float | None = None
    knobs: dict[str, Level] = {}


class FlaggedLevel(Record, frozen=True, kw_only=True):
    """A knob level with a flagged configuration; ``shared``: every flagged configuration of
    its file system has it (where the knob varied)."""

    fs: str
    knob: str
    level: Level
    flagged: int
    configurations: int
    flagged_share: float
    shared: bool


class TimeShare(Record, frozen=True, kw_only=True):
    prepare: float | None = None
    measure: float | None = None


class Report(ReportRecord, frozen=True, kw_only=True):
    """The variation study's report (recomputed from ``treatments.ndjson`` alone).
    ``settings``: the space's [settings] as the study ran them (runs, duration_s, …)."""

    study_dir: str = ""
    space: str = ""
    seed: int = 0
    settings: Settings = msgspec.field(default_factory=Settings)
    planned: int = 0
    completed: int = 0
    failed: list[Failure] = []
    threshold: float = 0.10
    configurations: list[ConfigurationStats] = []
    relative_range_cdf: dict[str, list[list[float]]] = {}
    pcc: Pcc = msgspec.field(default_factory=Pcc)
    flagged: list[Flagged] = []
    flagged_levels: list[FlaggedLevel] = []
    time_share: TimeShare = msgspec.field(default_factory=TimeShare)
    elapsed_s: float | None = None
    configurations_per_hour: float | None = None


def configure(fs: str, factors: dict[str, Level], image_bytes: int) -> tuple[Recipe, dict[str, Level]]:
    """The recipe of one configuration on ``fs`` and the knobs it really applies (levels
    capped to what mkfs accepts on this image, so the table says what ran)."""
    prep = {"no_lazy_init": fs == "ext4", "null_hash_seed": fs == "ext4", "drop_caches": True,
            "remount_after_populate": True, "atime": factors.get("atime", "relatime")}
    knobs = {k: factors[k] for k in factors if k.startswith(fs + "_") or k in SHARED_KNOBS}
    mkfs: list[str] = []
    mount: list[str] = []
    if fs == "ext4":
        block = int(knobs.get("ext4_block_size", 4096))
        inode = min(int(knobs.get("ext4_inode_size", 256)), block)
        knobs["ext4_inode_size"] = inode
        mkfs = ["-b", str(block), "-I", str(inode)]
        mount = [f"data={knobs.get('ext4_journal', 'ordered')}"]
    elif fs == "xfs":
        block = int(knobs.get("xfs_block_size", 4096))
        inode = max(XFS_MIN_INODE, min(int(knobs.get("xfs_inode_size", 512)), block // 2))
        ags = max(1, min(int(knobs.get("xfs_agcount", 4)), image_bytes // XFS_BYTES_PER_AG))
        knobs |= {"xfs_inode_size": inode, "xfs_agcount": ags}
        mkfs = ["-b", f"size={block}", "-i", f"size={inode}", "-d", f"agcount={ags}"]
    elif fs == "btrfs":
        mkfs = ["-n", str(int(knobs.get("btrfs_node_size", 16384)))]
        data = str(knobs.get("btrfs_data", "default"))
        mount = [] if data == "default" else [data]
    else:
        raise FsscopeError(f"study variation: file system {fs!r} has no knobs here (use {', '.join(FILE_SYSTEMS)})")
    recipe = Recipe(name=f"{fs}-variation", fs=fs, mkfs_opts=tuple(mkfs), mount_opts=tuple(mount))
    return recipe.with_prep(**prep), knobs


def _source_of(mnt: Path) -> str:
    mount = identity.top_mount(str(mnt))
    if mount is None:
        raise FsscopeError(f"{mnt}: not mounted")
    return mount.source


def _set_scheduler(dev: str, wanted: str) -> None:
    """The I/O scheduler of this run's own loop device (detached after the run: nothing to
    put back)."""
    queue = filesystem.scheduler_queue(dev)
    if queue is None:
        return
    active, offered = filesystem.read_scheduler(queue)
    if wanted not in offered:
        raise FsscopeError(f"{dev}: I/O scheduler '{wanted}' not offered (has: {', '.join(offered)})")
    if active != wanted:
        queue.write_text(wanted)


def run_once(recipe: Recipe, knobs: dict[str, Level], pspec: P.PersonalitySpec, image_bytes: int, seed: int,
             mem_limit_bytes: int | None = None) -> Run:
    """One run: fresh fs on a loop image (in RAM, or on disk for ``device = "disk"``),
    populate, hygiene, measure. Everything journalled."""
    journal, group = Journal(), STUDY_GROUP_PREFIX + uuid.uuid4().hex[:10]
    where = paths.disk_dir() if knobs.get("device") == "disk" else paths.ram_dir()
    img = where / f"fsscope-{group}.img"
    timing: dict[str, float] = {}
    try:
        t = time.monotonic()
        os.close(image.create_image(img, image_bytes, journal=journal, group=group))
        with diskstate.mounted_image(img, recipe, journal, group, make_fs=True, timing=timing) as mnt:
            dev = _source_of(mnt)
            scheduler = knobs.get("scheduler")
            if scheduler:
                _set_scheduler(dev, str(scheduler))
            populated = P.populate(mnt, pspec, seed=seed, evict_cache=True)
            filesystem.umount(str(mnt))  # hygiene: a cold cache and a clean journal
            filesystem.mount(recipe, dev, str(mnt))
            filesystem.drop_caches()
            # Fig. 4: where this run's dataset landed (block groups / AGs), before it runs
            placement = dataset_placement(P.fileset_paths(mnt, pspec), recipe.fs, dev, str(mnt))
            timing["prepare_s"] = time.monotonic() - t
            t = time.monotonic()
            result = P.run(mnt, pspec, P.RunOptions(mem_limit_bytes=mem_limit_bytes))
            timing["measure_s"] = time.monotonic() - t
    finally:
        undo_group(journal, group)
    hist = np.asarray(result.latency_hist)
    return Run(ops_per_s=result.ops_per_s, elapsed_s=result.elapsed_s,
               counts_per_bin=np.asarray(result.counts).sum(axis=0).astype(int).tolist(),
               op_names=list(result.op_names),
               latency_hist=[np.column_stack([np.nonzero(h)[0], h[np.nonzero(h)[0]]]).tolist() for h in hist],
               populate_s=round(populated.elapsed_s, 3), image=str(img), cgroup=result.cgroup,
               placement=placement, timing_s={k: round(v, 4) for k, v in timing.items()})


@dataclass(frozen=True)
class VariationTreatment:
    """A configuration x personality, R runs. Picklable to Dask workers."""

    settings: Settings = field(default_factory=Settings)

    def __call__(self, treatment: Treatment) -> VariationRow:
        cleanup_study_leftovers()
        fs, personality = treatment.recipe.split(":", 1)
        s = self.settings
        image_bytes = s.image_bytes
        recipe, knobs = configure(fs, treatment.factors, image_bytes)
        duration_s = s.duration_of(personality)
        seed = 1 if s.seed is None else s.seed
        overrides: dict[str, Any] = {"duration_s": duration_s, "seed": seed,
                                     "bin_s": BIN_S, "latency_window_s": float(min(duration_s, 10))}
        if nfiles := s.nfiles_of(personality):
            overrides["nfiles"] = nfiles
        if s.workers:
            overrides["workers"] = s.workers
        pspec = P.default_spec(personality, capacity_bytes=image_bytes, **overrides)
        runs = [run_once(recipe, knobs, pspec, image_bytes, seed, s.mem_limit_bytes or None)
                for _ in range(s.runs or 3)]
        return VariationRow(**msgspec.structs.asdict(treatment), fs=fs, personality=personality, knobs=knobs,
                            mkfs_opts=list(recipe.mkfs_opts), mount_opts=list(recipe.effective_mount_opts()),
                            runs=runs, host=socket.gethostname())


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "variation"

    space: str = "cao-small"
    factors: tuple[str, ...] = ()
    configurations: int = 12
    seed: int = 1
    file_systems: tuple[str, ...] = ()   # () = the space's settings
    personalities: tuple[str, ...] = ()
    runs: int = 0                        # 0 = the space's settings
    duration_s: float = 0.0
    image_size: str = ""
    nfiles: int = 0
    workers: int = 1
    scheduler: str = ""
    security: str = ""                   # --security FILE: the TLS credentials for the scheduler
    insecure_scheduler: bool = False     # a plain tcp:// scheduler, said out loud
    resume: str = ""
    threshold: float = 0.10
    window_sizes_s: tuple[float, ...] = ()
    mem_limit_bytes: int = 0             # workers' memory cgroup (0: none; --paper: 4 GiB)
    paper: bool = False                  # the paper's runs, run lengths and dataset scale (PAPER)



def make_plan(spec: Spec) -> Plan:
    space = spaces.load(spec.space, SCHEMA)
    if spec.factors:
        space = space.with_levels(spaces.parse_overrides(list(spec.factors)), SCHEMA)
    check_settings(dict(space.settings), space.source or space.name)
    s: dict[str, Any] = dict(space.settings)
    for key in ("runs", "duration_s", "image_size", "nfiles"):
        if getattr(spec, key):
            s[key] = getattr(spec, key)
    s["seed"] = spec.seed
    if spec.mem_limit_bytes:
        s["mem_limit_bytes"] = spec.mem_limit_bytes
    if spec.paper:
        s |= paper_settings(spec)
    fss = list(spec.file_systems or s.get("file_systems", ["ext4"]))
    pers = list(spec.personalities or s.get("personalities", ["fileserver"]))
    for fs in fss:
        if fs not in FILE_SYSTEMS:
            raise FsscopeError(f"--file-systems: {fs!r} is not one of {', '.join(FILE_SYSTEMS)}")
        filesystem.check_supported(Recipe(name=fs, fs=fs))
    for p in pers:
        if p not in P.PERSONALITIES:
            raise FsscopeError(f"--personalities: {p!r} is not one of {', '.join(P.PERSONALITIES)}")
    s |= {"file_systems": fss, "personalities": pers}
    parse_size_bytes(str(s.get("image_size", "1G")), "image_size")
    space = spaces.Space(space.name, space.factors, space.description, s, space.source)
    # the engine's "recipe" axis is file system x personality: every sampled configuration
    # runs on each file system under each personality
    return Plan.make(space, spec.configurations, spec.seed, tuple(f"{fs}:{p}" for fs in fss for p in pers), 1)


# [settings] numbers a space may set, with the range that makes sense (a space is a file
# another hand may have written: 1e18 runs or a NaN duration must be one line, not a hang).
SETTING_RANGES = {"runs": (int, 1, 10_000), "duration_s": (float, 0.1, 86_400.0), "nfiles": (int, 1, 10_000_000),
                  "workers": (int, 1, 4096), "seed": (int, -2**63, 2**63 - 1), "mem_limit_bytes": (int, 1, 2**50)}
PER_PERSONALITY = {"durations_s": "duration_s", "nfiles_per_personality": "nfiles"}


def check_settings(settings: dict[str, Any], where: str) -> None:
    """Refuse a [settings] value outside its range, in one line naming it."""
    def check(key: str, value: Any, kind_key: str) -> None:
        kind, lo, hi = SETTING_RANGES[kind_key]
        ok_type = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
        if not ok_type or not lo <= value <= hi:
            what = "a whole number" if kind is int else "a number"
            raise FsscopeError(f"{where}: settings.{key}: expected {what} in {lo:,}..{hi:,}, got {value!r}")

    for key, value in settings.items():
        if key in SETTING_RANGES:
            check(key, value, key)
        elif key in PER_PERSONALITY:
            if not isinstance(value, dict):
                raise FsscopeError(f"{where}: settings.{key}: expected a table of personality = value")
            for personality, v in value.items():
                check(f"{key}.{personality}", v, PER_PERSONALITY[key])
        elif key in ("file_systems", "personalities") and not (
                isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise FsscopeError(f"{where}: settings.{key}: expected a list of names, got {value!r}")


def paper_settings(spec: Spec) -> dict[str, Any]:
    """The settings --paper sets; options given explicitly (runs, duration, files, image size,
    memory limit) keep their values."""
    mem = spec.mem_limit_bytes or PAPER.mem_limit_bytes
    out: dict[str, Any] = {"runs": spec.runs or PAPER.runs, "mem_limit_bytes": mem, "paper": True}
    if not spec.duration_s:
        out["durations_s"] = dict(PAPER.durations_s)
        out["duration_s"] = min(PAPER.durations_s.values())
    dataset_bytes = int(PAPER.dataset_per_memory * mem)
    if not spec.nfiles:
        out["nfiles_per_personality"] = {p: math.ceil(dataset_bytes / P.default_spec(p).mean_file_size_bytes)
                                         for p in P.PERSONALITIES}
    if not spec.image_size:
        # room for the dataset twice over (appends grow files; XFS and btrfs need headroom)
        out["image_size"] = f"{math.ceil(2 * dataset_bytes / GIB)}G"
    return out


class Cost(Record, frozen=True, kw_only=True):
    """What a plan will take (printed before it starts)."""

    treatments: int
    configurations: int
    runs: int
    measure_s: float
    populate_bytes: int
    image_bytes: int
    mem_limit_bytes: int | None = None


def cost(plan: Plan) -> Cost:
    """What a plan will take: treatments, runs, measured seconds (exact: the run lengths) and
    the bytes every run populates (its preparation; mkfs, remount and restore come on top)."""
    s = settings_of(plan)
    runs = s.runs or 3
    measure_s = populate_bytes = 0.0
    treatments = plan.treatments()
    for t in treatments:
        personality = t.recipe.split(":", 1)[1]
        nfiles = s.nfiles_of(personality)
        pspec = P.default_spec(personality, capacity_bytes=s.image_bytes, **({"nfiles": nfiles} if nfiles else {}))
        measure_s += runs * s.duration_of(personality)
        populate_bytes += runs * pspec.fileset_bytes * pspec.prealloc_pct / 100
    return Cost(treatments=len(treatments), configurations=plan.n, runs=runs * len(treatments), measure_s=measure_s,
                populate_bytes=int(populate_bytes), image_bytes=s.image_bytes, mem_limit_bytes=s.mem_limit_bytes)


def run(ctx: Any, spec: Spec) -> Report:
    """The variation job: plan (or resume), run the treatments, report."""
    study_dir, plan = plan_or_resume(ctx, spec.resume, lambda: make_plan(spec))
    settings = settings_of(plan)
    ctx.phase(f"variation: {plan.n} configurations x {', '.join(plan.recipes)}, {settings.runs} runs each")
    t0 = time.monotonic()

    def on_row(row: VariationRow | Failed, done: int, total: int) -> None:
        if isinstance(row, Failed):
            ctx.emit(TreatmentDone(id=row.id, error=row.error))
        else:
            ops = [r.ops_per_s for r in row.runs]
            ctx.emit(TreatmentDone(id=row.id, fs=row.fs, personality=row.personality, knobs=row.knobs,
                                   relative_range=relative_range(ops) if ops else None))
            ctx.emit(RowDone(row=row))  # the whole row, for the TUI's figures (not logged)
        ctx.progress(done, total, unit="treatments")

    rows = run_study(plan, VariationTreatment(settings), study_dir, VariationRow, workers=spec.workers,
                     scheduler=spec.scheduler, security=spec.security, insecure=spec.insecure_scheduler,
                     on_row=on_row, cancelled=lambda: ctx.cancelled)
    rows = order_rows(plan, rows)
    out = report(plan, rows, threshold=spec.threshold, windows=spec.window_sizes_s,
                 study_dir=str(study_dir), elapsed_s=time.monotonic() - t0)
    ctx.run_dir.write_report(plain(out))  # kept, with each treatment's error, when the check below fails
    check_some_finished(rows)
    return out


# ---------------------------------------------------------------------------------------------
# The report: pure functions of the rows
# ---------------------------------------------------------------------------------------------

def dense_hist(sparse: list[list[int]]) -> np.ndarray:
    out = np.zeros(N_BUCKETS, dtype=np.int64)
    if sparse:
        a = np.asarray(sparse, dtype=np.int64)
        out[a[:, 0]] = a[:, 1]
    return out


def configuration_stats(row: VariationRow) -> ConfigurationStats:
    """One configuration x personality: runs' ops/s, relative range, K-S range per op (the
    largest over ops is the configuration's ``ks_range``)."""
    runs = row.runs
    ops = [r.ops_per_s for r in runs]
    ks_per_op: dict[str, float | None] = {}
    if len(runs) > 1:
        for i, op in enumerate(runs[0].op_names):
            ks = ks_range([dense_hist(r.latency_hist[i]) for r in runs])
            ks_per_op[op] = None if np.isnan(ks) else ks
    finite = [v for v in ks_per_op.values() if v is not None]
    rr = relative_range(ops)
    # Fig. 4: did the runs whose dataset started further into the device run slower?
    placed = [(r.placement.first_byte_median, r.ops_per_s) for r in runs
              if r.placement is not None and r.placement.available and r.placement.first_byte_median is not None]
    placement_r = pearson([x for x, _ in placed], [y for _, y in placed]) if placed else math.nan
    return ConfigurationStats(
        id=row.id, configuration=f"{row.fs}-{row.row}", fs=row.fs, row=row.row, knobs=row.knobs,
        personality=row.personality,
        runs=[RunSummary(ops_per_s=r.ops_per_s, elapsed_s=r.elapsed_s, timing_s=r.timing_s, placement=r.placement)
              for r in runs],
        mean_ops_per_s=float(np.mean(ops)), relative_range=None if np.isnan(rr) else rr,
        rsd=None if len(ops) < 2 else rsd(ops), ks_range=max(finite) if finite else None,
        ks_range_per_op=ks_per_op, placement_pcc=None if math.isnan(placement_r) else placement_r)


def shared_levels(configs: list[ConfigurationStats], flagged_ids: set[str]) -> list[FlaggedLevel]:
    """Factor mapping of the flagged configurations: per knob level with a flagged
    configuration, the share flagged; levels every flagged configuration of a file system
    shares (where the knob varied) are marked ``shared``."""
    table = knob_levels([(c.fs, c.knobs, c.relative_range, c.id in flagged_ids) for c in configs])
    return [FlaggedLevel(fs=lv.fs, knob=lv.knob, level=cast(Level, lv.level), flagged=lv.flagged,
                         configurations=lv.configurations, flagged_share=lv.flagged / lv.configurations,
                         shared=lv.shared) for lv in table if lv.flagged]


def report(plan: Plan, rows: Sequence[VariationRow | Failed], *, threshold: float = 0.10,
           windows: Sequence[float] = (), study_dir: str = "", elapsed_s: float | None = None) -> Report:
    ok = [r for r in rows if isinstance(r, VariationRow) and r.runs]
    configs = [configuration_stats(r) for r in ok]
    settings = settings_of(plan)
    duration = settings.duration_s or 5.0
    windows = tuple(windows) or tuple(w for w in (1, 2, 5, 10) if w <= duration)
    counts = [[np.asarray(run.counts_per_bin, dtype=np.float64) for run in r.runs] for r in ok]
    cdf = relative_range_cdf(counts, BIN_S, windows)
    flagged_ids = {c.id for c in configs if (c.relative_range or 0) > threshold}
    return Report(
        study_dir=study_dir, space=plan.space.name, seed=plan.seed, settings=settings,
        planned=len(plan.treatments()), completed=len(ok),
        failed=[Failure(id=r.id, error=r.error if isinstance(r, Failed) else None) for r in rows if r not in ok],
        threshold=threshold, configurations=configs,
        relative_range_cdf={f"{w:g}": np.column_stack(cdf[w]).tolist() if cdf[w][0].size else [] for w in windows},
        pcc=_latency_throughput_pcc(configs),
        flagged=[Flagged(id=c.id, fs=c.fs, personality=c.personality, relative_range=c.relative_range, knobs=c.knobs)
                 for c in configs if c.id in flagged_ids],
        flagged_levels=shared_levels(configs, flagged_ids), time_share=_time_share(ok),
        elapsed_s=None if elapsed_s is None else round(elapsed_s, 2),
        configurations_per_hour=None if elapsed_s is None else round(len(ok) / max(elapsed_s, 1e-9) * 3600, 1))


def _latency_throughput_pcc(configs: list[ConfigurationStats]) -> Pcc:
    """Pearson's r (and p) between the configurations' throughput relative range and latency
    K-S range, over those that have both (None below 3, or when either is constant)."""
    pairs = [(c.relative_range, c.ks_range) for c in configs if c.relative_range is not None and c.ks_range is not None]
    r, p = pearson_with_p([a for a, _ in pairs], [b for _, b in pairs])
    return Pcc(r=r, p=p, configurations=len(pairs))


def _time_share(ok: list[VariationRow]) -> TimeShare:
    """The share of the runs' time spent preparing (mkfs, populate…) and measuring."""
    timing = [run.timing_s for r in ok for run in r.runs]
    prep = sum(t.get("prepare_s", 0) for t in timing)
    meas = sum(t.get("measure_s", 0) for t in timing)
    if not prep + meas:
        return TimeShare()
    return TimeShare(prepare=prep / (prep + meas), measure=meas / (prep + meas))


def check_spec(spec: Spec) -> None:
    check_scheduler(spec.scheduler, spec.security, spec.insecure_scheduler)
    check_plan(spec.resume, spec.workers, lambda: make_plan(spec), check_settings)

