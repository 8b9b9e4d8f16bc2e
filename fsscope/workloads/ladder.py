"""The hygiene ladder (Cao et al., FAST'17, Sec. 4): how each preparation step narrows the
run-to-run variation of one configuration. ``fsscope bench --ladder``.

Steps, cumulative, each R runs of the personality on the job's target (a RAM image by default,
or ``--image`` / ``--device``: every step formats, restores and measures there):

  baseline  mkfs as the recipe says (ext4: lazy inode-table/journal init), populate, sync,
            drop caches, measure.
  no_lazy   + ext4 inode tables and journal written at mkfs (-E lazy_itable_init=0,
            lazy_journal_init=0): no ext4lazyinit thread writes behind the measurement.
  umount    + unmount and mount again after populating (cold cache, clean journal).
  alloc     + the dataset populated ONCE (on a no_lazy fs, then unmounted) and its device's
            bytes kept as a sparse image in the RAM directory (its checksum is the report's
            ``dataset_sha256``); every run puts those exact bytes back onto the target's device
            (``image.write_onto_device``, as ``--from-snapshot`` does on a device: on a loop
            device a discard and the non-zero blocks only) -- no re-population, so runs differ
            only in what the workload does. (On a large real --device it writes the whole
            device each run: use a small partition.)

The steps' runs are interleaved (run 1 of every step, then run 2 of every step, ...), so a
shared machine's drifting load does not favour one step.

Each run records ``image_sha256`` -- the checksum of the target device's bytes when the
measured run starts (the fs synced; for umount/alloc it is unmounted at that moment, so the
bytes are settled) --,
the mkfs command actually run and the superblock's mount count (ext4), so a test can see
each step change what it claims. Every image, loop and mount is journalled (owner: the job).
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from fsscope import paths, tools
from fsscope.analysis.variation.metrics import relative_range, rsd
from fsscope.analysis.variation.stats import ladder_verdict
from fsscope.errors import FsscopeError
from fsscope.recipes import Recipe
from fsscope.records import Record, ReportRecord, SpecRecord, plain, typed
from fsscope.targets import filesystem, image
from fsscope.targets.journal import Journal, undo_group
from fsscope.workloads import personalities as P

STEPS = ("baseline", "no_lazy", "umount", "alloc")
BIN_S = 1.0


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "ladder"

    personality: str = "fileserver"
    runs: int = 3
    duration_s: float = 10.0
    nfiles: int | None = None
    workers: int | None = None
    image_size_bytes: int = 1 << 30
    seed: int = 1
    steps: tuple[str, ...] = STEPS

    def __post_init__(self) -> None:
        if self.personality not in P.PERSONALITIES:
            raise FsscopeError(f"ladder: unknown personality {self.personality!r}")
        bad = [s for s in self.steps if s not in STEPS]
        if bad:
            raise FsscopeError(f"ladder: unknown step {bad[0]!r} (steps: {', '.join(STEPS)})")



class StepProgress(Record, frozen=True, kw_only=True):
    """What the ladder's Progress events carry beside the count (spread in their ``detail``):
    the step a run just measured and its ops/s, for the TUI's ladder view."""

    step: str
    ops_per_s: float


class LadderRun(Record, frozen=True, kw_only=True):
    """One measured run of a step, with the evidence that the step did what it claims."""

    step: str = ""
    round: int = 0
    restore: str | None = None  # alloc: how the dataset image went back onto the device
    image_sha256: str | None = None  # the device's bytes as the measured run starts
    mount_count: int | None = None  # ext4's superblock mount count
    mkfs_argv: list[str] = []
    device: str | None = None
    ops_per_s: float | None = None
    elapsed_s: float = 0.0
    counts_per_bin: list[int] = []
    cancelled: bool = False


class StepChange(Record, frozen=True, kw_only=True):
    """How a step's relative range compares with the step before it (a permutation test)."""

    step: str = ""  # the step before
    p: float | None = None
    grew: bool | None = None
    note: str = ""
    verdict: str | None = None
    p_fell: float | None = None
    runs_to_decide: int | None = None


class LadderStep(Record, frozen=True, kw_only=True):
    step: str = ""
    relative_range: float | None = None
    rsd: float | None = None
    mean_ops_per_s: float | None = None
    runs: list[LadderRun] = []
    vs_previous: StepChange | None = None


class Report(ReportRecord, frozen=True, kw_only=True):
    """The ladder: per step its runs and their relative range, and the verdict against the paper."""

    ladder: list[LadderStep] = []
    paper_direction: bool | None = None  # True / False only when the test decides it
    paper_comparison: dict[str, Any] = {}  # verdict (agree | disagree | inconclusive), why, runs to decide it
    verdict: str = ""
    personality: str = ""
    recipe: str | None = None
    fs: str | None = None
    dataset_sha256: str | None = None
    target: dict[str, Any] = {}
    spec: Spec = Spec()
    workload: P.PersonalitySpec | None = None
    monotone: bool | None = None
    order: str = "interleaved"
    elapsed_s: float | None = None


def step_ops(ladder: list[LadderStep]) -> list[tuple[str, list[float]]]:
    """(step, its completed runs' ops/s) of a report's ``ladder`` rows, in ladder order."""
    return [(s.step, [float(r.ops_per_s) for r in s.runs if not r.cancelled and r.ops_per_s is not None])
            for s in ladder]


def sha256_file(path: Path, chunk: int = 4 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def mount_count(device: str) -> int | None:
    """ext4's superblock mount count (dumpe2fs -h); None elsewhere."""
    try:
        text = tools.run("dumpe2fs", "-h", device)
    except Exception:  # noqa: BLE001 - not ext*, or no e2fsprogs: the fact is just absent
        return None
    for line in text.splitlines():
        if line.startswith("Mount count:"):
            return int(line.split(":", 1)[1])
    return None


def step_recipe(recipe: Recipe, step: str) -> Recipe:
    """The recipe of a step: the hygiene up to and including it, nothing more."""
    rank = STEPS.index(step)
    return recipe.with_prep(no_lazy_init=recipe.fs == "ext4" and rank >= 1, remount_after_populate=rank >= 2,
                            drop_caches=True, null_hash_seed=False)


class _Commands:
    """The external commands run while it is active (the mkfs argv is the evidence)."""

    def __init__(self):
        self.argv: list[tuple[str, ...]] = []

    def __enter__(self):
        tools.listeners.append(self._add)
        return self

    def __exit__(self, *exc):
        tools.listeners.remove(self._add)

    def _add(self, rec) -> None:
        self.argv.append(rec.argv)

    def mkfs(self) -> list[str]:
        return next((list(a) for a in self.argv if a and a[0].startswith("mkfs")), [])


def _capacity_bytes(target) -> int:
    """Room of the target: the image's size, or the device's."""
    if target.spec.kind != "device":
        return target.spec.size_bytes
    fd = os.open(target.device, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def sha256_device(device: str) -> str:
    """Checksum of every byte of a block device (a loop device reads its image's bytes)."""
    return sha256_file(Path(device))


@contextmanager
def _recipe(target, recipe: Recipe):
    """The job's target formats and mounts with ``recipe`` meanwhile (each step has its own
    hygiene; the target -- RAM image, --image or --device -- stays the same)."""
    saved, target.recipe = target.recipe, recipe
    try:
        yield
    finally:
        target.recipe = saved


def populate_snapshot(target, pspec: P.PersonalitySpec, dest: Path, seed: int) -> dict:
    """The alloc step's dataset image: mkfs (no_lazy) on the target, populate once, unmount,
    and copy the target's bytes to ``dest`` (sparse: zeros take no room)."""
    mounted = target.format_and_mount()
    populated = P.populate(mounted.workdir, pspec, seed=seed, evict_cache=True)
    os.sync()
    target.unmount()
    tools.run("dd", f"if={target.device}", f"of={dest}", "bs=4M", "conv=sparse,fsync", "status=none")
    return {"files": populated.files, "bytes_written": populated.bytes_written}


def one_run(target, step: str, pspec: P.PersonalitySpec, seed: int, snapshot: Path, cancelled) -> dict:
    """One measured run of ``step`` on the job's target (its recipe already the step's)."""
    facts: dict = {"step": step}
    recipe = target.recipe
    try:
        with _Commands() as cmds:
            if step == "alloc":
                facts["restore"] = image.write_onto_device(snapshot, target.device)  # no re-population
                facts["image_sha256"] = sha256_device(target.device)  # the restored bytes, before any mount
                mounted = target.mount_existing()
            else:
                mounted = target.format_and_mount()
                P.populate(mounted.workdir, pspec, seed=seed, evict_cache=True)
                if recipe.prep.remount_after_populate:
                    target.unmount()
                    facts["image_sha256"] = sha256_device(target.device)
                    mounted = target.mount_existing()
                else:
                    os.sync()
                    facts["image_sha256"] = sha256_device(target.device)
            filesystem.drop_caches()
            facts["mount_count"] = mount_count(target.device) if recipe.fs == "ext4" else None
            facts["mkfs_argv"] = cmds.mkfs()
            facts["device"] = target.device
            result = P.run(mounted.workdir, pspec, P.RunOptions(cancelled=cancelled))
    finally:
        target.unmount()
    return facts | {"ops_per_s": result.ops_per_s, "elapsed_s": result.elapsed_s,
                    "counts_per_bin": result.counts.sum(axis=0).tolist(), "cancelled": result.cancelled}


def run(ctx, spec: Spec) -> Report:
    recipe, target = ctx.recipe, ctx.target
    if recipe is None or recipe.fs in ("tmpfs",) or target.spec.kind == "dir":
        raise FsscopeError("--ladder needs a file-system recipe fsscope formats (e.g. --recipe ext4-default) "
                           "on a target it formats (--ram, --image or --device)")
    overrides: dict[str, Any] = {"duration_s": float(spec.duration_s), "seed": spec.seed, "bin_s": BIN_S,
                 "latency_window_s": float(min(spec.duration_s, 10))}
    overrides |= {k: getattr(spec, k) for k in ("nfiles", "workers") if getattr(spec, k)}
    pspec = P.default_spec(spec.personality, capacity_bytes=_capacity_bytes(target), **overrides)
    journal, keep = Journal(), "ladder-snap-" + uuid.uuid4().hex[:8]
    snapshot = paths.ram_dir() / f"fsscope-{keep}.img"
    os.close(image.new_journalled(snapshot, journal, keep))  # the kept dataset image goes with the job
    runs: dict[str, list[dict]] = {step: [] for step in spec.steps}
    total, done = len(spec.steps) * spec.runs, 0
    dataset_sha256 = None
    t0 = time.monotonic()
    try:
        if "alloc" in spec.steps:
            with _recipe(target, step_recipe(recipe, "alloc")):
                ctx.phase("alloc: populating the dataset once")
                populate_snapshot(target, pspec, snapshot, spec.seed)
                dataset_sha256 = sha256_file(snapshot)  # what every alloc run must start from
        # Rounds: run r of every step, then run r + 1 of every step. On a shared machine the
        # load drifts; interleaved, the drift hits every step alike instead of whichever step
        # happened to run while a neighbour's job did.
        for r in range(spec.runs):
            for step in spec.steps:
                if ctx.cancelled:
                    break
                ctx.phase(f"{step}: run {r + 1} of {spec.runs}")
                with _recipe(target, step_recipe(recipe, step)):
                    facts = one_run(target, step, pspec, spec.seed, snapshot, lambda: ctx.cancelled)
                runs[step].append(facts | {"round": r})
                done += 1
                ctx.progress(done, total, unit="runs", info=f"{step} {facts['ops_per_s']:,.0f} ops/s",
                             **plain(StepProgress(step=step, ops_per_s=facts["ops_per_s"])))
    finally:
        undo_group(journal, keep)
    ops_of = [(step, [float(r["ops_per_s"]) for r in step_runs if not r["cancelled"]]) for step, step_runs in runs.items()]
    by_step: dict[str, dict[str, Any]] = {step: {"step": step, "relative_range": relative_range(ops) if ops else None,
                      "rsd": rsd(ops) if len(ops) > 1 else None,
                      "mean_ops_per_s": sum(ops) / len(ops) if ops else None, "runs": runs[step]}
               for step, ops in ops_of}
    verdict = ladder_verdict(ops_of)
    for prev, step, change in verdict.changes:
        by_step[step]["vs_previous"] = {"step": prev, "p": change.p, "grew": change.grew, "note": change.note,
                                        "verdict": change.verdict, "p_fell": change.p_fell,
                                        "runs_to_decide": change.runs_to_decide}
    # paper_direction: True / False only when the test decides it (None: undecided);
    # paper_comparison: agree | disagree | inconclusive, why, and the runs that would decide it
    return typed(plain({"ladder": list(by_step.values()), "paper_direction": verdict.paper_direction,
                  "paper_comparison": verdict.paper, "verdict": verdict.text,
                  "personality": spec.personality,
                  "recipe": recipe.name, "fs": recipe.fs,
                  "dataset_sha256": dataset_sha256,
                  "target": plain(target.spec) | {"describe": target.spec.describe()},
                  "spec": plain(spec), "workload": plain(pspec),
                  "monotone": verdict.monotone, "order": "interleaved",
                  "elapsed_s": round(time.monotonic() - t0, 2)}), Report)
