"""The ``age`` job: profile-driven aging on a target, with fresh-vs-aged fragmentation.

On a device, image or RAM target (the engine's ``ctx``):

1. **format** once (mkfs + mount), or with ``resume`` mount the kept image as it is (no
   mkfs), or with ``--from-snapshot`` restore the snapshot first;
2. **fresh**: the free-space histogram and the fragments of a large test file (written,
   mapped with FIEMAP, deleted) on the empty file system (:mod:`fsscope.layout.job`);
3. **age** it (:func:`fsscope.aging.ager.age`): progress events every ~0.5 s carry the
   ager's :class:`~fsscope.aging.session.AgerProgress` in their detail (phase, fullness, ops,
   ops_per_s, overwrites, p_values, convergence_ops, horizon_ops) plus an ``info`` line for
   progress bars; during the rapid phase
   ``done``/``total`` are fullness/target fullness, in the stable phase ops/planned horizon;
4. **aged**: the same two measurements on the aged file system (the test file is deleted
   again, so the aged tree is what the ager left);
5. unmount; with ``snapshot_path`` copy the aged image there (``cp --reflink=auto
   --sparse=always``; reflink or copy is recorded) so measurement jobs can restore it before
   every run (``--from-snapshot``). The image itself stays on disk, unmounted, for reuse.

The :class:`Report` is :meth:`AgingResult.to_json` plus ``fresh``, ``aged`` (each a
:class:`~fsscope.layout.records.Measurement`), ``snapshot``, ``target``/``recipe``/``fs``
and ``inodes_used`` of the aged fs. A resumed run reuses the
``fresh`` section of the last run that aged the same image (``fresh.from_run``). Cancel
(``ctx.cancelled``) stops the ager with the same summary; the aged measurement then skips
the test file and no snapshot is taken (resume later). ENOSPC is a normal stop.

A directory target (no file system of its own) is aged in a fresh subdirectory against
``capacity_bytes``, without fragmentation measurements or snapshots.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, ClassVar

import msgspec
from msgspec import Meta

from fsscope import store, trust
from fsscope.aging.ager import AgingError, AgingResult, AgingSpec, _check_spec, age, read_state
from fsscope.aging.profile import load_profile
from fsscope.aging.session import AgerProgress
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
from fsscope.layout.job import auto_test_file_bytes, measure_fragmentation, space_of
from fsscope.layout.records import Measurement, Restore, TargetInfo
from fsscope.records import Record, ReportRecord, SpecRecord, convert, force_setattr, typed
from fsscope.targets import image


class Spec(SpecRecord, frozen=True):
    """:class:`AgingSpec`'s fields (same names and meaning) plus what the job adds."""

    job: ClassVar[str] = "age"
    renamed: ClassVar[dict[str, str]] = {"jobs": "workers"}  # before it said what it counts

    profile: str = "small"                # shipped name or .toml path ("" with resume: as recorded)
    fullness: Annotated[float, Meta(gt=0, lt=1, description="fraction to fill (default: the profile's)")] \
        | None = None
    seed: Annotated[int, Meta(description="seed of every choice")] = 1
    max_seconds: Annotated[float, Meta(gt=0, description="stop after at most this long aging (this session)")] \
        | None = None
    confidence: Annotated[float, Meta(gt=0, lt=1, description="stop when every distribution's chi-squared "
                                                              "p-value is at least this")] | None = None
    max_overwrites: Annotated[float, Meta(gt=0, description="stop after writing this many times the capacity "
                                                            "(whole aging history)")] | None = None
    max_ops: int | None = None
    fallocate: Annotated[bool, Meta(description="allocate without writing data (faster; see below)")] = False
    # processes executing the operations (CLI --jobs)
    workers: Annotated[int, Meta(ge=1, description="worker processes")] = 1
    capacity_bytes: Annotated[int, Meta(ge=1, description="--dir targets: the capacity to fill")] | None = None
    fit_every: int | None = None
    resume: bool = False                  # continue the aging kept on the image (no mkfs)
    snapshot_path: str = ""               # copy the aged image here ("" = no snapshot)
    layout: bool = True                   # measure fresh and aged fragmentation
    test_file_bytes: Annotated[int, Meta(ge=4096, description="fragmentation test file size (default: a quarter "
                                                              "of the space aging leaves free, ≤256M)")] | None = None

    def aging_spec(self, profile: str | None = None) -> AgingSpec:
        names = {f.name for f in msgspec.structs.fields(AgingSpec)}
        data = {k: getattr(self, k) for k in names}
        if profile is not None:
            data["profile"] = profile
        return AgingSpec(**data)

    def __post_init__(self) -> None:
        """The checks that need no target: parameter ranges, and that the profile loads."""

        if not self.profile and not self.resume:
            raise AgingError("aging: profile: missing (a shipped name or a .toml path)")
        fullness = self.fullness
        if self.profile and fullness is None:
            fullness = load_profile(self.profile).fullness
        _check_spec(self.aging_spec(self.profile or "small"), fullness if fullness is not None else 0.5)
        if self.test_file_bytes is not None and self.test_file_bytes < 4096:
            raise AgingError(f"aging: test_file_bytes: must be >= 4096, got {self.test_file_bytes}")


class FitResult(Record, frozen=True, kw_only=True):
    """One distribution's fit (:class:`fsscope.aging.fit.Fit`): per bucket its label, target
    and actual share and file count; chi-squared and its p-value (None: not judged)."""

    labels: list[str] = []
    target: list[float] = []
    actual: list[float | None] = []
    counts: list[int] = []
    chi2: float | None = None
    p_value: float | None = None


class Snapshot(Record, frozen=True, kw_only=True, omit_defaults=True):
    """The copy of the aged image measurement jobs restore (or why there is none)."""

    path: str = ""
    method: str | None = None
    size_bytes: int | None = None
    allocated_bytes: int | None = None
    seconds: float | None = None
    skipped: str | None = None


class Report(ReportRecord, frozen=True, kw_only=True):
    """The ``age`` job's report: :class:`AgingResult`'s fields, the fresh and aged
    fragmentation, where it ran and what stays on disk. A directory target has no
    fragmentation, target or snapshot (null)."""

    profile: str = ""
    seed: int | None = None
    ops: int = 0                    # over the whole aging history
    session_ops: int = 0
    elapsed_s: float = 0.0
    ops_per_s: float = 0.0          # this session
    fullness: float | None = None
    target_fullness: float | None = None
    stop_reason: str | None = None
    stop_note: str = ""
    op_log_sha256: str | None = None
    convergence_ops: int | None = None
    horizon_ops: int | None = None
    live_files: int = 0
    live_bytes: int = 0
    written_bytes: int = 0
    capacity_bytes: int | None = None
    overwrites: float = 0.0
    phase: str = ""
    fit: dict[str, FitResult] = {}
    workers: int = 1
    jobs: int | msgspec.UnsetType = msgspec.UNSET  # "workers" in records made before it said what it counts
    fallocate: bool = False
    resumed: bool = False
    foreign_files: int = 0
    op_loop: str = ""
    elapsed_total_s: float | None = None
    allocated_bytes: int | None = None                # --fallocate: allocated, not written
    allocated_capacity_turnover: float | None = None
    notes: list[str] = []
    fresh: Measurement | None = None
    aged: Measurement | None = None
    inodes_used: int | None = None
    recipe: str | None = None
    fs: str | None = None
    target: TargetInfo | None = None
    image: str | None = None
    restores: list[Restore] = []
    snapshot: Snapshot | None = None
    run_id: str | None = None

    def __post_init__(self) -> None:
        if self.jobs is not msgspec.UNSET:  # read as its name today
            force_setattr(self, "workers", self.jobs)
            force_setattr(self, "jobs", msgspec.UNSET)


def progress_info(event: AgerProgress) -> str:
    """One line for a progress bar: phase, fullness, ops, ops/s, overwrites, p-values
    (size/depth/age), e.g. ``stable · 80.1% full · 123,456 ops · 25,010/s · 1.12× written ·
    p .93/.99/.51``."""
    p = event.p_values
    fits = "/".join("-" if p.get(name) is None else f"{p[name]:.2f}".lstrip("0")
                    for name in ("size", "depth", "age"))
    return (f"{event.phase} · {event.fullness:.1%} full · {event.ops:,} ops · "
            f"{event.ops_per_s:,.0f}/s · {event.overwrites:.2f}× written · p {fits}")


RAPID_SHARE = 0.25  # of the progress bar: the rapid phase (fill to the target fullness)


def progress_fraction(event: AgerProgress, goal: float, spec: Spec) -> tuple[float, str]:
    """How far the run is (0..1) and what that is based on. The run ends at the first of its
    stop conditions, so the fraction is the largest of: the time limit used, the operation
    limit used, and the work done (the rapid phase up to the target fullness, then the
    operations up to the convergence bound / planned fit point). Callers keep the maximum
    seen, so a fullness that swings or a horizon that moves never runs the bar backwards."""
    ops = float(event.ops)
    if event.phase == "rapid":
        work = RAPID_SHARE * min(1.0, event.fullness / goal) if goal > 0 else 0.0
        candidates = {"fullness": work}
    else:
        horizon = float(event.horizon_ops or 0)
        share = min(1.0, ops / horizon) if horizon > 0 else 0.0
        candidates = {"convergence bound": RAPID_SHARE + (1 - RAPID_SHARE) * share}
    if spec.max_seconds:
        candidates["time limit"] = min(1.0, event.elapsed_s / spec.max_seconds)
    if spec.max_ops:
        candidates["operation limit"] = min(1.0, ops / spec.max_ops)
    basis = max(candidates, key=candidates.__getitem__)
    return candidates[basis], basis


FULLNESS_TOLERANCE = 0.05  # points of capacity off the target before a finished run says so
POOR_FIT_P = 0.05           # without --confidence: a p-value below this is a poor fit


def outcome_notes(report: Report, confidence: float | None) -> list[str]:
    """What a finished run missed, in words: a fullness off its target, a distribution that
    does not fit the profile. Fullness is the share of the capacity in use as statvfs (df)
    counts it after a syncfs — the file system's own metadata and each file's last partial
    block included."""
    notes = []
    fullness, target = report.fullness, report.target_fullness
    if fullness is not None and target is not None and abs(fullness - target) > FULLNESS_TOLERANCE:
        side = "over" if fullness > target else "under"
        why = ("the file system held more than the target before aging (other files, "
               "metadata), or its metadata grew after the last synced reading the ager steers by"
               if side == "over" else "the run stopped before the rapid phase reached it")
        notes.append(f"fullness missed its target: {fullness:.1%} of the capacity is in use at the "
                     f"end, the target was {target:.0%} ({abs(fullness - target) * 100:.1f} points "
                     f"{side}): {why}")
    threshold = confidence if confidence is not None else POOR_FIT_P
    for name, fit in report.fit.items():
        p = fit.p_value
        if p is not None and p < threshold:
            notes.append(f"fit: the {name} distribution does not match the profile (chi-squared "
                         f"p = {p:.3f} < {threshold:g}): age longer (--max-minutes, --resume) "
                         "before trusting this image as aged")
    return notes


class ProgressBar:
    """The percentage a progress bar shows for a stream of ager events: the largest
    :func:`progress_fraction` seen so far (monotonic), with what it is based on."""

    def __init__(self, goal: float, spec: Spec):
        self.goal, self.spec, self.fraction = goal, spec, 0.0

    def update(self, event: AgerProgress) -> tuple[float, str]:
        fraction, basis = progress_fraction(event, self.goal, self.spec)
        self.fraction = max(self.fraction, fraction)
        return round(100 * self.fraction, 2), basis


def run(ctx, spec: Spec) -> Report:
    target: Any = getattr(ctx, "target", None)
    dir_target = target is None or target.spec.kind == "dir"
    if spec.resume and dir_target:
        raise AgingError("aging: resume needs an --image or --device target: a directory target's "
                         "work directory is removed after each run")
    t0 = time.monotonic()
    fresh = aged = None
    with _filesystem(ctx, spec) as fs:
        is_dir = fs.found is not None  # a --dir target: a subdirectory of a file system in use
        if is_dir and spec.capacity_bytes is None:
            raise AgingError("aging: capacity_bytes: a directory target has no file system of "
                             "its own; give the capacity to fill (e.g. --capacity 1G)")
        root = Path(fs.workdir)
        measure = spec.layout and not is_dir
        profile = spec.profile
        if spec.resume and not profile:
            state = read_state(root)
            profile = state["profile"]["name"] if state else "small"
        goal = spec.fullness if spec.fullness is not None else _profile_fullness(profile, root, spec.resume)
        test_bytes = spec.test_file_bytes
        if measure:
            if test_bytes is None:  # one size for fresh and aged: a quarter of what aging leaves free
                test_bytes = auto_test_file_bytes(space_of(root)["total_bytes"] * (1 - goal))
            if spec.resume:
                fresh = _previous_fresh(ctx)
            elif read_state(root) is None:
                ctx.phase("fresh: free space + test file")
                fresh = measure_fragmentation(fs, test_bytes)
        result = _age(ctx, spec, root, profile, goal)
        notes = _enospc_notes(root, result) if result.stop_reason == "enospc" and not is_dir else []
        if measure:
            aged = _measure_aged(ctx, fs, test_bytes)
    report = _report(result, notes, spec, time.monotonic() - t0)
    if dir_target:
        return report
    return msgspec.structs.replace(
        report, fresh=fresh, aged=aged, inodes_used=aged.space.inodes_used if aged and aged.space else None,
        recipe=ctx.recipe.name if ctx.recipe is not None else None,
        fs=ctx.recipe.fs if ctx.recipe is not None else None, target=TargetInfo.of(target.spec),
        image=str(target.image_path) if target.image_path else None,
        restores=typed(target.restores, list[Restore]), snapshot=_snapshot(ctx, spec, target),
        run_id=ctx.run_dir.id)


def _age(ctx, spec: Spec, root: Path, profile: str, goal: float) -> AgingResult:
    """Age the tree at ``root``: a phase event when the ager's phase changes, a progress event
    (the bar's percentage and the ager's numbers in its detail) whenever the ager reports."""
    phase = {"name": ""}
    bar = ProgressBar(goal, spec)

    def on_progress(event: AgerProgress) -> None:
        if event.phase != phase["name"]:
            phase["name"] = event.phase
            ctx.phase(f"aging: {event.phase}")
        percent, basis = bar.update(event)
        ctx.progress(percent, 100, unit="%", info=f"{progress_info(event)} · progress by {basis}",
                     progress_basis=basis, **msgspec.structs.asdict(event))

    ctx.phase("aging")
    return age(root, spec.aging_spec(profile), on_progress=on_progress,
               cancelled=lambda: ctx.cancelled, resume=spec.resume)


def _measure_aged(ctx, fs, test_bytes: int | None) -> Measurement:
    """The aged measurement. The histogram must be what the snapshot, and every run restored
    from it, starts with. So the test file comes first (its name can split a full htree leaf
    of the directory: one block more), then a remount (ext4 holds inode and locality-group
    preallocations as used blocks until unmount, up to ~1 MiB here), then the histogram."""
    test = Measurement(test_file_error="skipped: the run was cancelled")
    target: Any = getattr(ctx, "target", None)
    if not ctx.cancelled:
        ctx.phase("aged: test file")
        test = measure_fragmentation(fs, test_bytes, free_space=False)
        if target is not None:
            ctx.phase("aged: remount (release preallocations)")
            target.remount()
    ctx.phase("aged: free space")
    free = measure_fragmentation(fs, test_bytes, test_file=False)
    return msgspec.structs.replace(free, test_file=test.test_file, test_file_error=test.test_file_error,
                                   test_file_bytes=test.test_file_bytes)


def _report(result: AgingResult, notes: list[str], spec: Spec, elapsed_total_s: float) -> Report:
    data: dict[str, Any] = result.to_json() | {"elapsed_total_s": round(elapsed_total_s, 3)}
    if result.fallocate:
        # blocks were allocated, not written: count them apart, so no one reads "260× written"
        data |= {"allocated_bytes": data["written_bytes"], "written_bytes": 0,
                 "allocated_capacity_turnover": data["overwrites"], "overwrites": 0.0}
    report = typed(data, Report, "age report")
    return msgspec.structs.replace(report, notes=notes + outcome_notes(report, spec.confidence))


@contextmanager
def _filesystem(ctx, spec: Spec):
    """The file system to age: fresh (or restored from a snapshot), or the kept one (resume)."""
    target: Any = getattr(ctx, "target", None)
    if not spec.resume or target.spec.snapshot:
        with ctx.fresh_fs() as fs:
            yield fs
        return
    ctx.phase("mount the kept image (no mkfs)")
    fs = target.mount_existing()
    try:
        yield fs
    finally:
        target.unmount()


def _enospc_notes(root: Path, result: AgingResult) -> list[str]:
    """Why the file system was full: out of inodes is a different story from out of blocks."""
    vfs = os.statvfs(root)
    if vfs.f_files and vfs.f_ffree <= max(16, vfs.f_files // 1000):
        mean = format_bytes(result.live_bytes / result.live_files) if result.live_files else "?"
        return [f"out of inodes, not blocks: {vfs.f_files - vfs.f_ffree:,} of {vfs.f_files:,} in use. "
                f"The profile's files (mean {mean}) are smaller than the space mkfs set aside per inode; "
                "give it more inodes (ext4: --mkfs-opts '-i 4096') or use a file system that allocates "
                "inodes as needed (xfs, btrfs)"]
    return []


def _profile_fullness(profile: str, root: Path, resume: bool) -> float:
    if resume:
        state = read_state(root)
        if state is not None:
            return float(state["fullness"])

    return load_profile(profile).fullness


def _previous_fresh(ctx) -> Measurement | None:
    """The fresh measurement of the newest earlier run that aged this image (or snapshot)."""

    spec = ctx.target.spec
    for run in reversed(store.list_runs(ctx.run_dir.path.parent)):
        if run.id == ctx.run_dir.id or run.problem() or run.manifest().get("job") != "age":
            continue  # another run, or a record that cannot be read (store.RunDir.problem)
        try:
            report = convert(run.report() or {}, Report)
        except FsscopeError:
            continue
        if report.fresh is None:
            continue
        earlier, snap = report.target or TargetInfo(), report.snapshot or Snapshot()
        same_image = spec.kind != "ram" and earlier.path == spec.path and earlier.kind == spec.kind
        from_snapshot = spec.snapshot and snap.path == spec.snapshot
        if same_image or from_snapshot:
            return msgspec.structs.replace(report.fresh, from_run=run.id)
    return None


def _snapshot(ctx, spec: Spec, target) -> Snapshot | None:
    """Copy the unmounted aged image to ``spec.snapshot_path`` (atomically: temp + rename)."""
    if not spec.snapshot_path:
        return None
    dest = Path(spec.snapshot_path)
    if ctx.cancelled:
        return Snapshot(path=str(dest), skipped="the run was cancelled: resume it, then snapshot")

    source = target.image_path or Path(target.device)
    ctx.phase(f"snapshot → {dest}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    trust.output_place(dest, "--snapshot")  # checked again now: nowhere another user could swap it
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.partial")
    t0 = time.monotonic()
    fd = image.new_file(tmp)  # O_EXCL: never a file or link someone else put there
    try:
        method = image.copy_image(source, Path(image.fd_path(fd)))  # into that file, not its name
        os.replace(tmp, dest)
    finally:
        os.close(fd)
        tmp.unlink(missing_ok=True)
    image.mark(dest)  # fsscope's own: a later age may replace it without --yes-destroy
    st = os.stat(dest)
    return Snapshot(path=str(dest), method=method, size_bytes=st.st_size, allocated_bytes=st.st_blocks * 512,
                    seconds=round(time.monotonic() - t0, 3))
