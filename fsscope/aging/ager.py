"""Profile-driven file-system aging (the Geriatrix method of Kadekodi et al., ATC 2018).

One seeded *planner* decides every operation; an executor (this process, or ``workers``
worker processes) only carries them out. So the same seed, profile and empty file
system give the same operation sequence, whose sha256 is kept in the result — unlike
Geriatrix, every random choice follows the seed, and parallel aging does not change the
sequence (only the interleaving on disk, hence placement, may differ).

Method:

- **Rapid phase**: creates only until the target fullness; size and depth buckets pick the
  largest deficit (Geriatrix draws sizes at random here; with heavy-tailed profiles on
  small targets that makes ``K`` swing and the age fit miss). ``K`` = live files at the end.
- **Stable phase**: a fair coin between create and delete. A create picks the size and
  depth bucket with the largest deficit (sizes that do not fit under the ceiling are
  skipped); a delete picks the age bucket with the largest surplus, then within it the
  size and the depth bucket with the largest surplus, then a random file of that cell.
  Deviation from Geriatrix: live bytes are held within ±5% of the target (a delete below
  the floor becomes a create and a create that fits nowhere becomes a delete), where
  Geriatrix lets them random-walk up to the disk size.
- **Time** is the operation count: a file created by op ``b`` has the true relative age
  ``(now - b) / now`` (as the fit reports it). Deletes steer bucket counts relative to a
  *horizon* H, the op count at which the tree is planned to fit — the paper's T at
  first, as Geriatrix cuts its buckets from T. When the run goes on past H the buckets
  are re-cut for 2H (and every file moves to its new bucket), so the fit peaks at T, 2T,
  4T...; an ops or overwrites limit moves H to where the run will end. (Holding the fit
  at *every* op is impossible for most profiles: a deleted old file cannot come back.)
- **Convergence bound** T (:func:`fsscope.aging.fit.convergence_ops`) is computed at the
  end of the rapid phase and reported; it is the stop condition when no other is given.
- **Stop conditions** (any): ``max_seconds`` (this session), ``confidence`` (every
  distribution's chi-squared p-value >= it, on the true current ages; checked every
  ``fit_every`` ops and at each horizon, on exact op counts, so the stop point is
  deterministic — Geriatrix's ``-c`` test never fired), ``max_overwrites`` and ``max_ops``
  (totals over the whole aging history), cancel, ENOSPC (a clean stop: the failed create
  is undone, the tree and the result agree).

Fullness: with ``capacity_bytes`` None the root must be a mount point and fullness is
``os.statvfs`` used/total *once settled* (after syncfs), what ``df`` shows later. The run
steers on its own accounting (live files' bytes rounded to the fragment size, plus the rest
of the used bytes), corrected from settled readings: in the rapid phase each time half the
remaining way to the target is covered, at each planned fit point, and at the end. A plain
statvfs reading mid-run runs far ahead (xfs counts worst-case delayed-allocation metadata
reservations of dirty files as used, +25 % of their bytes here; frees wait for the journal
or inode inactivation): steering or reporting on it made a 50 % run end at 84 % "full".
With ``capacity_bytes`` (a plain directory) fullness is the logical bytes of the aged files
over that capacity.

Write modes: by default every byte is written (a seeded incompressible pattern) with
plain buffered writes, like a real workload: delayed allocation, writeback and the page
cache take part — so a file created and deleted before writeback (~30 s on ext4/xfs)
never reaches the block allocator at all, and short runs age the on-disk layout less than
their op count suggests. ``fallocate=True`` only reserves blocks (``posix_fallocate``,
like Geriatrix): every create allocates at once, so every op exercises the allocator;
no data is copied or written back (much faster for large files; for small files on ext4
it can be slower, as each allocation is journalled). The block *counts* are the same,
but extents stay "unwritten" (ext4/xfs read them as zeros without I/O), delayed
allocation and extent merging at writeback are skipped, and btrfs/f2fs copy-on-write or
log-structured layouts are not exercised as by data writes.

State: ``<root>/.fsscope-aging.json`` (profile, seed, fullness, capacity, write mode, op
count, phase, K, T, horizon, written bytes, RNG state, per-session op-log hashes; padded
to 32 KiB and allocated before fullness is measured, so the last save still fits on a
full file system) is rewritten at every stop and every few seconds. The live-file set is
not stored: resume rebuilds it from the tree (file names are the op that created them,
directories encode depth, sizes give the bucket), so the tree is always the truth — after
a crash too, when the RNG stream restarts from the last save. A resumed run continues
the seeded stream, but its cells are rebuilt in creation order, so its op sequence is not
the one an uninterrupted run would have produced (each session's op-log hash is kept).
The state file lives in the aged root so it travels with an image; walks skip it.

Code: this module is the entry (the spec, opening a fresh or resumed session, the result);
``planner`` decides every op, ``session`` runs the op loop and its checks, ``state`` keeps
the state file, ``tree`` walks the aged tree and measures its file system.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fsscope.aging import fit
from fsscope.aging.errors import AgingError
from fsscope.aging.planner import Planner
from fsscope.aging.profile import Profile, load_profile, profile_from_dict
from fsscope.aging.session import AgerProgress, Session, Start
from fsscope.aging.state import STATE_FILE, read_state, reserve_state_file, state_path
from fsscope.aging.tree import measure, walk_aged_tree
from fsscope.records import Record

__all__ = ["STATE_FILE", "AgingError", "AgingResult", "AgingSpec", "age", "read_state"]


class AgingSpec(Record, frozen=True):
    """What to age and when to stop. ``profile`` is a Profile, a shipped name or a path."""

    profile: Profile | str
    fullness: float | None = None         # None: the profile's default fullness
    seed: int = 1
    max_seconds: float | None = None      # this session's wall time
    confidence: float | None = None       # stop when every fit p-value >= this, in (0, 1)
    max_overwrites: float | None = None   # total written bytes / capacity, whole history
    max_ops: int | None = None            # total operations, whole history
    fallocate: bool = False
    workers: int = 1                      # processes that execute the operations (CLI --jobs)
    capacity_bytes: int | None = None     # plain directory target: the capacity to fill
    fit_every: int | None = None          # ops between confidence checks (default from K)


@dataclass(frozen=True)
class AgingResult:
    """What an aging session did and how well the tree fits, target against actual."""

    profile: str
    seed: int
    ops: int                  # total operations over the aging history
    session_ops: int
    elapsed_s: float
    ops_per_s: float          # this session
    fullness: float           # measured (statvfs) or accounted (directory target)
    target_fullness: float
    stop_reason: str          # time|confidence|overwrites|ops|convergence_bound|cancelled
                              # |enospc|no_room
    stop_note: str
    op_log_sha256: str        # of this session's op log
    convergence_ops: int | None   # the paper's bound T (after the rapid phase)
    horizon_ops: int | None       # op count the age distribution was last planned to fit at
    live_files: int
    live_bytes: int
    written_bytes: int        # created bytes over the history (the overwrite numerator)
    capacity_bytes: int
    overwrites: float
    phase: str
    fit: dict[str, fit.Fit]
    workers: int
    fallocate: bool
    resumed: bool
    foreign_files: int = 0    # files in the root the ager does not own (ignored)
    op_loop: str = "python"   # "native": the op loop in C ran (native/ager.c); else "python (why)"

    def to_json(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "fit"}
        data["fit"] = {name: f.to_json() for name, f in self.fit.items()}
        data["ops_per_s"] = round(self.ops_per_s, 1)
        data["elapsed_s"] = round(self.elapsed_s, 3)
        return data


# ---------------------------------------------------------------- the run


def _resolve_profile(profile: Profile | str) -> Profile:
    return profile if isinstance(profile, Profile) else load_profile(profile)


def _check_spec(spec: AgingSpec, fullness: float) -> None:
    def bad(field_name: str, problem: str) -> AgingError:
        return AgingError(f"aging: {field_name}: {problem}")

    if not 0.0 < fullness < 1.0:
        raise bad("fullness", f"must be in (0, 1), got {fullness!r}")
    if spec.confidence is not None and not 0.0 < spec.confidence < 1.0:
        raise bad("confidence", f"must be in (0, 1), got {spec.confidence!r}")
    for name in ("max_seconds", "max_overwrites"):
        value = getattr(spec, name)
        if value is not None and not value > 0:
            raise bad(name, f"must be > 0, got {value!r}")
    if spec.max_ops is not None and spec.max_ops < 1:
        raise bad("max_ops", f"must be >= 1, got {spec.max_ops!r}")
    if not isinstance(spec.workers, int) or spec.workers < 1:
        raise bad("workers", f"must be an integer >= 1, got {spec.workers!r}")
    if spec.capacity_bytes is not None and spec.capacity_bytes <= 0:
        raise bad("capacity_bytes", f"must be > 0, got {spec.capacity_bytes!r}")
    if spec.fit_every is not None and spec.fit_every < 1:
        raise bad("fit_every", f"must be >= 1, got {spec.fit_every!r}")


def age(root: Path, spec: AgingSpec, *,
        on_progress: Callable[[AgerProgress], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        resume: bool = False,
        op_log_path: Path | None = None,
        op_loop: str = "auto") -> AgingResult:
    """Age the tree at ``root`` (a mounted file system, or a directory with ``capacity_bytes``).

    ``on_progress`` gets an :class:`AgerProgress` about every 0.5 s: phase, fullness, ops,
    ops_per_s, overwrites, p_values {size, depth, age}, convergence_ops, horizon_ops,
    live_files, elapsed_s.
    ``cancelled()`` returning True stops cleanly with the same summary. ``resume``
    continues the aging recorded in ``root``'s state file (its profile, seed, fullness,
    capacity and write mode) with this spec's stop conditions and workers. ``op_log_path``
    also writes the op log (``c <path> <bytes>`` / ``d <path>`` lines: exactly the hashed
    bytes) for replay. ``op_loop``: "auto" runs the op loop in C (native/ager.c) when it can
    be built and the session has one executor, "python" the reference loop; both make the same
    op log.
    """
    if op_loop not in ("auto", "python"):
        raise AgingError(f"aging: op_loop: 'auto' or 'python', got {op_loop!r}")
    start = _open_session(Path(root), spec, resume)
    session = Session(start, spec, on_progress, cancelled, op_log_path, op_loop)
    session.run()
    return _result(session)


def _open_session(root: Path, spec: AgingSpec, resume: bool) -> Start:
    """Check the target and the spec; read the state to resume, or start afresh."""
    if not root.is_dir():
        raise AgingError(f"aging: {root}: not a directory")
    state = read_state(root)
    if resume:
        if state is None:
            raise AgingError(f"aging: {root}: nothing to resume (no {STATE_FILE})")
        profile = profile_from_dict(state["profile"], where=f"{state_path(root)}: profile")
        if not (isinstance(spec.profile, str) and spec.profile.replace("_", "-") == profile.name):
            given = _resolve_profile(spec.profile)
            if dataclasses.replace(given, fullness=profile.fullness) != profile:
                raise AgingError(f"aging: profile: {root} was aged with profile "
                                 f"'{profile.name}', not '{given.name}'")
        seed, fullness = int(state["seed"]), float(state["fullness"])
        if spec.fullness is not None and spec.fullness != fullness:
            raise AgingError(f"aging: fullness: a resumed run keeps the fullness it started "
                             f"with ({fullness:g}), not {spec.fullness:g}")
        capacity_given = state["capacity_bytes"]
        fallocate = bool(state["fallocate"])
    else:
        if state is not None:
            raise AgingError(f"aging: {root}: already aged by fsscope ({state['ops']} ops); "
                             "resume it or use an empty target")
        profile = _resolve_profile(spec.profile)
        seed = int(spec.seed)
        fullness = float(spec.fullness if spec.fullness is not None else profile.fullness)
        capacity_given = spec.capacity_bytes
        fallocate = spec.fallocate
    _check_spec(spec, fullness)
    profile = dataclasses.replace(profile, source="")

    if capacity_given is None and not os.path.ismount(root):
        raise AgingError(f"aging: {root}: not a mount point; give capacity_bytes to age a "
                         "plain directory")
    reserve_state_file(root)  # before measuring, so the plan counts its blocks
    if capacity_given is None:
        capacity_bytes, used_bytes, unit_bytes = measure(root)
    else:
        capacity_bytes, used_bytes, unit_bytes = int(capacity_given), 0, 1

    planner = Planner(profile, seed=seed, alloc_unit_bytes=unit_bytes)
    start = Start(root=root, profile=profile, seed=seed, fullness=fullness,
                   capacity_given=capacity_given, fallocate=fallocate, resumed=resume,
                   planner=planner, capacity_bytes=capacity_bytes, used_bytes=used_bytes,
                   ops=0, phase="rapid", live_files_k=None, written_bytes=0, segments=[],
                   foreign=0)
    if resume:
        assert state is not None  # read and checked in _open_session
        files, start.foreign, _ = walk_aged_tree(root, planner)
        max_born = max((f[0] for f in files), default=-1)
        start.ops = max(int(state["ops"]), max_born + 1)
        planner.horizon_ops = int(state.get("horizon_ops") or 0)
        planner.rebuild(files)
        rng_state = state["rng_state"]
        planner.rng.setstate((rng_state[0], tuple(rng_state[1]), rng_state[2]))
        start.phase = state["phase"]
        start.live_files_k = state.get("k_live_files")
        start.written_bytes = int(state["written_bytes"])
        start.segments = list(state["segments"])
    else:
        start.foreign = sum(1 for e in os.scandir(root) if e.is_file() and e.name != STATE_FILE)
    return start


def _result(session: Session) -> AgingResult:
    """What the session did, once it has stopped (its last state save is made here)."""
    planner, start = session.planner, session.start
    elapsed_s = time.monotonic() - session.t0
    stop_note = session.stop_note
    if session.phase == "stable" and session.ops < planner.horizon_ops and session.stop_reason != "confidence":
        bound = "–" if session.convergence is None else f"{session.convergence:,}"
        stop_note += (f"; the age distribution was planned to fit at op {planner.horizon_ops:,} "
                      f"(the paper's bound T = {bound}), so it has not converged yet")
    elif session.phase == "rapid":
        stop_note += "; still in the rapid phase (target fullness not reached)"
    problem = session.save_state(session.stop_reason)
    if problem:
        stop_note = f"{stop_note} ({problem})"
    session_ops = session.ops - session.ops_start
    return AgingResult(
        profile=session.profile.name, seed=start.seed, ops=session.ops, session_ops=session_ops,
        elapsed_s=elapsed_s, ops_per_s=session_ops / elapsed_s if elapsed_s > 0 else 0.0,
        fullness=session.final_fullness(), target_fullness=start.fullness,
        stop_reason=session.stop_reason, stop_note=stop_note, op_log_sha256=session.hasher.hexdigest(),
        convergence_ops=session.convergence, horizon_ops=planner.horizon_ops or None,
        live_files=planner.live_files,
        live_bytes=sum(planner.size_bytes[s] * c for s, c in enumerate(planner.size_count)),
        written_bytes=session.written_bytes, capacity_bytes=session.capacity_bytes,
        overwrites=session.written_bytes / session.capacity_bytes, phase=session.phase,
        fit=planner.fits(session.ops), workers=session.spec.workers, fallocate=start.fallocate,
        resumed=start.resumed, foreign_files=start.foreign, op_loop=session.op_loop,
    )
