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
"""

from __future__ import annotations

import bisect
import dataclasses
import errno as errno_mod
import hashlib
import json
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fsscope.aging import fit, native
from fsscope.aging.executor import FULL_ERRNOS, SKIPPED, FileOps, WorkerPool, data_pattern
from fsscope.aging.profile import AGING_STATE_FILE, Profile, load_profile, profile_from_dict
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
from fsscope.layout.freespace import syncfs
from fsscope.records import Record

STATE_FILE = AGING_STATE_FILE
STATE_VERSION = 1
FULLNESS_BAND = 0.05      # stable phase keeps live bytes within target * (1 ± band)
PROGRESS_EVERY_S = 0.5
CHECK_EVERY_OPS = 64      # how often the loop looks at the clock and the cancel flag
NATIVE_POLL_S = 0.05      # ... and how often the C loop returns to do so
NATIVE_CHUNK_OPS = 1 << 20  # ops per C call at most (the alive-by-born buffer grows ahead)
STATE_EVERY_S = 5.0
STATE_RESERVE_BYTES = 32 << 10  # state files are padded to this (RNG state ~7 KB)
NO_CHOICE = -math.inf  # the gap of a bucket that cannot be chosen


class AgingError(FsscopeError):
    """Bad aging parameters or a target that cannot be aged; the message says which."""


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


# ---------------------------------------------------------------- the planner


class _Planner:
    """Bookkeeping of live files by (age, size, depth) cell, and the seeded choices.

    A live file is a small list ``[age bucket, index in its cell, size bucket, depth
    bucket, born op, sibling, relative path]``; cells hold these records, so a delete
    (swap-remove) is O(1). The age bucket is relative to ``horizon_ops`` (see the module
    docstring); true ages come from ``alive_by_born`` (1 byte per op of the run).
    """

    def __init__(self, profile: Profile, *, seed: int, alloc_unit_bytes: int):
        self.profile = profile
        self.S = S = len(profile.size_bytes)
        self.D = D = len(profile.depths)
        self.B = len(profile.age_cutoffs)
        self.p = [float(x) for x in profile.size_fractions()]
        self.q = [float(x) for x in profile.depth_fractions()]
        self.g = [float(x) for x in profile.age_fractions()]
        self.r = [float(x) for x in profile.relative_age_cutoffs()]
        self.size_bytes = list(profile.size_bytes)
        unit = alloc_unit_bytes
        self.alloc_bytes = [-(-s // unit) * unit for s in profile.size_bytes]
        self.size_nz = [s for s in range(S) if self.p[s] > 0]
        self.depth_nz = [d for d in range(D) if self.q[d] > 0]
        # directory layout: files at depth k >= 1 spread over max(subdirs, 1) sibling
        # directories d1/.../d{k-1}/d{k}[.j]; depth-0 files live in the root
        self.n_sib: list[int] = []
        self.dir_prefix: list[list[str]] = []  # with a trailing "/" ("" for the root)
        for depth, subdirs in zip(profile.depths, profile.depth_subdirs):
            n_sib = 1 if depth == 0 else max(1, subdirs)
            spine = "".join(f"d{i}/" for i in range(1, depth))
            names = [f"d{depth}"] + [f"d{depth}.{j}" for j in range(1, n_sib)]
            self.n_sib.append(n_sib)
            self.dir_prefix.append([""] if depth == 0 else [f"{spine}{n}/" for n in names])
        self.rng = random.Random(seed)
        self.horizon_ops = 0
        self._reset_files()

    def _reset_files(self) -> None:
        S, D, B = self.S, self.D, self.B
        self.cells: list[list[list]] = [[] for _ in range(B * S * D)]
        self.size_count = [0] * S
        self.depth_count = [0] * D
        self.age_count = [0] * B
        self.as_count = [0] * (B * S)
        self.live_files = 0
        self.files_bytes = 0           # allocated bytes of live files (planner units)
        # 1 at index b while the file born at op b lives (1 byte per op): true relative
        # ages for the fit in O(ops) numpy work instead of a walk over the records
        self.alive_by_born = bytearray()

    # ---- bookkeeping

    def add_file(self, born: int, s: int, d: int, sib: int) -> list:
        """Register a new file; returns its record (its path is ``record[6]``)."""
        horizon = self.horizon_ops
        a = (min(bisect.bisect_left(self.r, (horizon - born) / horizon), self.B - 1)
             if horizon > 0 else self.B - 1)
        cell = self.cells[(a * self.S + s) * self.D + d]
        record = [a, len(cell), s, d, born, sib, f"{self.dir_prefix[d][sib]}{born}"]
        cell.append(record)
        alive = self.alive_by_born
        if born >= len(alive):
            alive.extend(bytes(born + 1 - len(alive) + 65536))
        alive[born] = 1
        self.size_count[s] += 1
        self.depth_count[d] += 1
        self.age_count[a] += 1
        self.as_count[a * self.S + s] += 1
        self.live_files += 1
        self.files_bytes += self.alloc_bytes[s]
        return record

    def remove_file(self, record: list) -> None:
        a, pos, s, d = record[0], record[1], record[2], record[3]
        cell = self.cells[(a * self.S + s) * self.D + d]
        last = cell.pop()
        if last is not record:
            cell[pos] = last
            last[1] = pos
        self.alive_by_born[record[4]] = 0
        self.size_count[s] -= 1
        self.depth_count[d] -= 1
        self.age_count[a] -= 1
        self.as_count[a * self.S + s] -= 1
        self.live_files -= 1
        self.files_bytes -= self.alloc_bytes[s]

    def live_records(self) -> list[list]:
        return [record for cell in self.cells for record in cell]

    def rebuild(self, files: list[tuple[int, int, int, int]]) -> None:
        """Replace the live set with ``files`` = (born, size bucket, depth bucket, sibling)."""
        self._reset_files()
        for born, s, d, sib in sorted(files):
            self.add_file(born, s, d, sib)

    def recut(self, horizon_ops: int) -> None:
        """Move the horizon: every live file gets its bucket anew."""
        files = [(r[4], r[2], r[3], r[5]) for r in self.live_records()]
        self.horizon_ops = horizon_ops
        self.rebuild(files)

    # ---- choices

    # The choices below are argmax scans over up to ~40 buckets, once to three times per
    # op: plain loops with locals (faster in CPython 3.11 than comprehensions + max/index).
    # Strict ">" keeps the lowest index on ties, so choices are deterministic.

    def deficit_size(self, room_bytes: float) -> int:
        """The size bucket furthest below its share that fits in ``room_bytes``; -1 if none."""
        n = self.live_files + 1
        p, count, alloc = self.p, self.size_count, self.alloc_bytes
        best, best_gap = -1, NO_CHOICE
        for s in self.size_nz:
            if alloc[s] <= room_bytes and p[s] * n - count[s] > best_gap:
                best, best_gap = s, p[s] * n - count[s]
        return best

    def deficit_depth(self) -> int:
        """The depth bucket furthest below its share."""
        n = self.live_files + 1
        q, count = self.q, self.depth_count
        best, best_gap = 0, NO_CHOICE
        for d in self.depth_nz:
            if q[d] * n - count[d] > best_gap:
                best, best_gap = d, q[d] * n - count[d]
        return best

    def victim(self) -> list:
        """Stable-phase delete: largest surplus age bucket, then size, then depth; random file."""
        n = self.live_files
        S, D = self.S, self.D
        g, age_count = self.g, self.age_count
        a, best_gap = -1, NO_CHOICE
        for i in range(self.B):
            c = age_count[i]
            if c and c - g[i] * n > best_gap:
                a, best_gap = i, c - g[i] * n
        base = a * S
        as_count, size_count, p = self.as_count, self.size_count, self.p
        s, best_gap = -1, NO_CHOICE
        for i in range(S):
            if as_count[base + i] and size_count[i] - p[i] * n > best_gap:
                s, best_gap = i, size_count[i] - p[i] * n
        base = (base + s) * D
        cells, depth_count, q = self.cells, self.depth_count, self.q
        chosen, best_gap = None, NO_CHOICE
        for i in range(D):
            cell = cells[base + i]
            if cell and depth_count[i] - q[i] * n > best_gap:
                chosen, best_gap = cell, depth_count[i] - q[i] * n
        return chosen[int(self.rng.random() * len(chosen))]

    # ---- fit

    def true_age_counts(self, now_ops: int) -> np.ndarray:
        """Live files per bucket of their true relative age ``(now - born) / now``."""
        view = np.frombuffer(self.alive_by_born, dtype=np.uint8)
        born = np.flatnonzero(view)
        del view  # release the buffer so the bytearray can grow again
        if now_ops <= 0 or len(born) == 0:
            return np.zeros(self.B, dtype=np.int64)
        index = fit.age_bucket_index(fit.relative_age(born, now_ops), np.array(self.r))
        return fit.bucket_counts(index, self.B)

    def fits(self, now_ops: int) -> dict[str, fit.Fit]:
        prof = self.profile
        return {
            "size": fit.chi2_fit(np.array(self.size_count), np.array(prof.size_weights),
                                 tuple(format_bytes(b) for b in prof.size_bytes)),
            "depth": fit.chi2_fit(np.array(self.depth_count), np.array(prof.depth_weights),
                                  tuple(f"d{d}" for d in prof.depths)),
            "age": fit.chi2_fit(self.true_age_counts(now_ops), np.array(prof.age_weights),
                                tuple(f"≤{c:g}" for c in prof.age_cutoffs)),
        }

    def dir_index(self) -> dict[str, tuple[int, int]]:
        """Relative directory path (no trailing slash) -> (depth bucket, sibling)."""
        return {prefix.rstrip("/"): (d, j) for d, prefixes in enumerate(self.dir_prefix)
                for j, prefix in enumerate(prefixes)}


def walk_aged_tree(root: Path, planner: _Planner
                   ) -> tuple[list[tuple[int, int, int, int]], int, int]:
    """The ager's files under ``root`` as (born, size bucket, depth bucket, sibling).

    Also returns how many other files there are (ignored) and the files' logical bytes.
    """
    index = planner.dir_index()
    bucket_bytes = np.array(planner.size_bytes)
    files: list[tuple[int, int, int, int]] = []
    sizes: list[int] = []
    foreign = 0
    root_str = str(root)
    for dir_path, _dir_names, file_names in os.walk(root_str):
        rel_dir = os.path.relpath(dir_path, root_str)
        rel_dir = "" if rel_dir == "." else rel_dir
        place = index.get(rel_dir)
        for name in file_names:
            if rel_dir == "" and name.startswith(STATE_FILE):
                continue
            if place is None or not name.isdigit():
                foreign += 1
                continue
            try:
                st = os.lstat(os.path.join(dir_path, name))
            except OSError:
                continue
            files.append((int(name), 0, place[0], place[1]))
            sizes.append(st.st_size)
    if files:
        buckets = fit.size_bucket_index(np.array(sizes), bucket_bytes)
        files = [(b, int(s), d, j) for (b, _, d, j), s in zip(files, buckets)]
    return files, foreign, int(sum(sizes))


# ---------------------------------------------------------------- state file


def state_path(root: Path) -> Path:
    return Path(root) / STATE_FILE


def read_state(root: Path) -> dict | None:
    """The saved aging state of ``root``, or None if it was never aged by fsscope."""
    path = state_path(root)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AgingError(f"{path}: unreadable aging state: {exc.strerror}") from None
    if not text.strip():
        return None  # only the reservation: the run died before its first save
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AgingError(f"{path}: unreadable aging state: {exc}") from None
    if data.get("version") != STATE_VERSION:
        raise AgingError(f"{path}: aging state version {data.get('version')!r} is not "
                         f"{STATE_VERSION}")
    return data


def _padded(text: str) -> bytes:
    data = text.encode()
    size = -(-(len(data) + 1) // STATE_RESERVE_BYTES) * STATE_RESERVE_BYTES
    return data + b" " * (size - len(data) - 1) + b"\n"


def _reserve_state_file(root: Path) -> None:
    """Allocate the state file before measuring, so a full file system still takes the last save."""
    path = state_path(root)
    if not path.exists():
        path.write_bytes(_padded(""))


def _write_state(root: Path, state: dict) -> str:
    """Save atomically (temp + rename); on a full file system overwrite the reserved blocks.

    Returns "" or why the state could not be saved (the tree stays the truth on resume).
    """
    path = state_path(root)
    data = _padded(json.dumps(state, separators=(",", ":")))
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return ""
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno not in FULL_ERRNOS:
            raise
    try:  # same size as before, so no new blocks on ext4/xfs/tmpfs
        fd = os.open(path, os.O_WRONLY)
        try:
            os.pwrite(fd, data, 0)
        finally:
            os.close(fd)
        return ""
    except OSError as exc:
        return f"the state file could not be updated ({exc.strerror})"


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


def _measure(root: Path) -> tuple[int, int, int]:
    """(total bytes, used bytes, fragment size) of the file system holding ``root``."""
    vfs = os.statvfs(root)
    return vfs.f_blocks * vfs.f_frsize, (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize, vfs.f_frsize


def _initial_horizon(spec: AgingSpec, convergence: int, ops: int, written_bytes: int,
                     capacity_bytes: int, mean_size_bytes: float) -> int:
    """Where to plan the fit: T, or later when an ops/overwrites limit says the run ends later."""
    horizon = max(convergence, ops + 1)
    if spec.max_ops is not None:
        horizon = max(horizon, spec.max_ops)
    if spec.max_overwrites is not None and mean_size_bytes > 0:
        # a stable op creates with probability 1/2; this guess only sets where the fit peaks
        left_bytes = spec.max_overwrites * capacity_bytes - written_bytes
        horizon = max(horizon, ops + int(left_bytes / (0.5 * mean_size_bytes)))
    return horizon


def age(root: Path, spec: AgingSpec, *,
        on_progress: Callable[[dict], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        resume: bool = False,
        op_log_path: Path | None = None,
        op_loop: str = "auto") -> AgingResult:
    """Age the tree at ``root`` (a mounted file system, or a directory with ``capacity_bytes``).

    ``on_progress`` gets about every 0.5 s: phase, fullness, ops, ops_per_s, overwrites,
    p_values {size, depth, age}, convergence_ops, horizon_ops, live_files, elapsed_s.
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
    return _Session(start, spec, on_progress, cancelled, op_log_path, op_loop).run()


@dataclass
class _Start:
    """Where a session starts: a fresh target, or the state a resumed one left."""

    root: Path
    profile: Profile
    seed: int
    fullness: float
    capacity_given: int | None    # None: statvfs mode (the root is a mount point)
    fallocate: bool
    resumed: bool
    planner: _Planner
    capacity_bytes: int
    used_bytes: int               # statvfs used at start (0 in directory mode)
    ops: int
    phase: str
    live_files_k: int | None
    written_bytes: int
    segments: list
    foreign: int


def _open_session(root: Path, spec: AgingSpec, resume: bool) -> _Start:
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
    _reserve_state_file(root)  # before measuring, so the plan counts its blocks
    if capacity_given is None:
        capacity_bytes, used_bytes, unit_bytes = _measure(root)
    else:
        capacity_bytes, used_bytes, unit_bytes = int(capacity_given), 0, 1

    planner = _Planner(profile, seed=seed, alloc_unit_bytes=unit_bytes)
    start = _Start(root=root, profile=profile, seed=seed, fullness=fullness,
                   capacity_given=capacity_given, fallocate=fallocate, resumed=resume,
                   planner=planner, capacity_bytes=capacity_bytes, used_bytes=used_bytes,
                   ops=0, phase="rapid", live_files_k=None, written_bytes=0, segments=[],
                   foreign=0)
    if resume:
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


SETTLE_GAP = 0.005  # of the capacity: the rapid phase stops settling when this close to its target


class _Session:
    """One aging session: the op loop and its state (counters, the op log, the executor).

    Fullness control (statvfs mode): the planner counts the live files' allocated bytes
    (rounded to the fragment size); the file system's own growth (inodes, directories,
    extent trees) is ``base_used_bytes``, the statvfs used bytes the files do not explain.
    A plain statvfs reading runs ahead of the truth while writes are dirty (delayed
    allocation reserves worst-case metadata: +25 % of the files' bytes on xfs here) and
    frees are not committed, so ``base_used_bytes`` is corrected only from *settled*
    readings (syncfs, then statvfs): in the rapid phase each time half the remaining way
    to the target is covered (so the steps shrink as the target nears), in the stable phase
    at each planned fit point, and for the final fullness.
    """

    def __init__(self, start: _Start, spec: AgingSpec, on_progress: Callable[[dict], None] | None,
                 cancelled: Callable[[], bool] | None, op_log_path: Path | None, op_loop: str = "auto"):
        self.start, self.spec = start, spec
        self.root, self.planner, self.profile = start.root, start.planner, start.profile
        self.on_progress, self.cancelled = on_progress, cancelled
        self.statvfs_mode = start.capacity_given is None
        self.capacity_bytes = capacity = start.capacity_bytes
        self.base_used_bytes = start.used_bytes - self.planner.files_bytes if self.statvfs_mode else 0
        self.target_bytes = target = start.fullness * capacity
        band = FULLNESS_BAND * target
        self.ceiling_bytes, self.floor_bytes = min(target + band, capacity), target - band
        self.settle_at_bytes = self._next_settle(self.live_bytes()) if self.statvfs_mode else math.inf
        self.mean_size_bytes = self.profile.mean_size_bytes()
        self.age_weights = np.array(self.profile.age_weights)
        self.age_cutoffs = np.array(self.profile.age_cutoffs)
        self.ops_start = self.ops = start.ops
        self.phase, self.live_files_k, self.written_bytes = start.phase, start.live_files_k, start.written_bytes
        self.convergence = (fit.convergence_ops(self.live_files_k, self.age_weights, self.age_cutoffs)
                            if self.live_files_k else None)
        self.any_stop = any(x is not None for x in (spec.max_seconds, spec.confidence,
                                                    spec.max_overwrites, spec.max_ops))
        self.max_ops = spec.max_ops if spec.max_ops is not None else math.inf
        self.max_written = (spec.max_overwrites * capacity if spec.max_overwrites is not None
                            else math.inf)
        if self.phase == "stable":
            # new stop conditions may move the planned fit point; re-cut if it moved
            horizon = max(self.planner.horizon_ops, self._initial_horizon(self.convergence or 0))
            if horizon != self.planner.horizon_ops:
                self.planner.recut(horizon)
        self.fit_every = spec.fit_every or max(32, min(10_000, (self.live_files_k or 1000) // 8))
        self.next_fit_check = self.ops + self.fit_every if self.phase == "stable" else math.inf
        self.hasher = hashlib.sha256()
        self.op_log_path = op_log_path
        self.log_file = None
        self.log_lines: list[str] = []
        self.log_pending: list[tuple[int, str]] = []  # parallel mode: lines waiting for their op
        self.failed_create_bytes = 0
        self.pool: WorkerPool | None = None
        self.file_ops: FileOps | None = None
        self.op_loop = op_loop
        self.native: native.Loop | None = None
        self.stop_reason = self.stop_note = ""
        self.full_errno, self.full_path = 0, ""
        self.t0 = self.state_saved_at = time.monotonic()
        self.progress_at = self.t0 - PROGRESS_EVERY_S  # the first report comes straight away

    # ---- fullness

    def live_bytes(self) -> int:
        """Used bytes as the plan counts them: the files plus the last settled rest."""
        return self.base_used_bytes + self.planner.files_bytes

    def _next_settle(self, live: float) -> float:
        gap = self.target_bytes - live
        return live + gap / 2 if gap > SETTLE_GAP * self.capacity_bytes else math.inf

    def _settled_used_bytes(self) -> int:
        """statvfs used bytes once every op so far has reached the file system and been synced."""
        if self.pool is not None:
            self.pool.drain()
        syncfs(str(self.root))
        return _measure(self.root)[1]

    def settle(self) -> None:
        """Correct the rest (metadata, foreign files) from a settled reading."""
        self.base_used_bytes = self._settled_used_bytes() - self.planner.files_bytes

    def final_fullness(self) -> float:
        if self.statvfs_mode:
            return self._settled_used_bytes() / self.capacity_bytes if self.capacity_bytes else 0.0
        return self.planner.files_bytes / self.capacity_bytes

    # ---- the op log and the state file

    def write_log(self, chunk: bytes | memoryview) -> None:
        self.hasher.update(chunk)
        if self.log_file is not None:
            self.log_file.write(chunk)

    def flush_log(self, lines: list[str]) -> None:
        if lines:
            self.write_log("".join(lines).encode())

    def flush_resolved(self, next_seq: int, final: bool = False) -> None:
        pool = self.pool
        if pool is None:
            self.flush_log(self.log_lines)
            self.log_lines.clear()
            return
        limit = next_seq if final else pool.resolved_before(next_seq)
        cut = bisect.bisect_left(self.log_pending, (limit, ""))
        done = []
        for seq, line in self.log_pending[:cut]:
            if seq not in pool.failures:
                done.append(line)
            elif line.startswith("c "):
                self.failed_create_bytes += int(line.rsplit(" ", 1)[1])
        self.flush_log(done)
        del self.log_pending[:cut]

    def save_state(self, reason: str = "") -> str:
        start, rng = self.start, self.planner.rng.getstate()
        return _write_state(self.root, {
            "version": STATE_VERSION, "profile": self.profile.to_dict(), "seed": start.seed,
            "fullness": start.fullness, "capacity_bytes": start.capacity_given,
            "fallocate": start.fallocate, "ops": self.ops, "phase": self.phase,
            "k_live_files": self.live_files_k, "convergence_ops": self.convergence,
            "horizon_ops": self.planner.horizon_ops, "written_bytes": self.written_bytes,
            "rng_state": [rng[0], list(rng[1]), rng[2]],
            "segments": start.segments + [{"ops_from": self.ops_start, "ops_to": self.ops,
                                           "stop_reason": reason or "running",
                                           "op_log_sha256": self.hasher.hexdigest()}],
        })

    def progress_event(self, now_s: float) -> dict:
        elapsed = now_s - self.t0
        fits = self.planner.fits(self.ops)
        return {
            "phase": self.phase, "fullness": round(self.live_bytes() / self.capacity_bytes, 6),
            "ops": self.ops,
            "ops_per_s": round((self.ops - self.ops_start) / elapsed, 1) if elapsed > 0 else 0.0,
            "overwrites": self.written_bytes / self.capacity_bytes,
            "p_values": {name: f.p_value for name, f in fits.items()},
            "convergence_ops": self.convergence, "horizon_ops": self.planner.horizon_ops or None,
            "live_files": self.planner.live_files, "elapsed_s": round(elapsed, 3),
        }

    # ---- phases

    def _initial_horizon(self, convergence: int) -> int:
        return _initial_horizon(self.spec, convergence, self.ops, self.written_bytes,
                                self.capacity_bytes, self.mean_size_bytes)

    def rapid_choice(self, live: int) -> int:
        """The size bucket of the next create; -1 when the rapid phase is over (then the
        stable phase has begun). The end is decided on a settled reading when it is near."""
        if live >= self.settle_at_bytes:
            live = self.rapid_settle()
        s = self.planner.deficit_size(self.capacity_bytes - live)
        if live < self.target_bytes and s >= 0:
            return s
        self.enter_stable()  # full enough (or nothing fits any more)
        return -1

    def rapid_settle(self) -> int:
        """Correct the plan from a settled reading and set the next settle point; the live bytes."""
        self.settle()
        live = self.live_bytes()
        self.settle_at_bytes = self._next_settle(live)
        return live

    def recut(self, horizon_ops: int) -> None:
        """Re-cut the age buckets at ``horizon_ops`` (the C loop's live files come back first)."""
        if self.native is not None:
            self.native.pull_cells(self.planner)
        self.planner.recut(horizon_ops)
        if self.native is not None:
            self.native.push(self.planner)

    def enter_stable(self) -> None:
        self.phase = "stable"
        self.live_files_k = self.planner.live_files
        self.convergence = fit.convergence_ops(self.live_files_k, self.age_weights, self.age_cutoffs)
        self.recut(self._initial_horizon(self.convergence))
        self.next_fit_check = self.ops + self.fit_every
        if self.on_progress is not None:
            self.on_progress(self.progress_event(time.monotonic()))

    def stable_choice(self, live: int) -> tuple[bool, int]:
        """(create?, size bucket) of the next stable-phase op; (False, -1) with stop_reason
        set when nothing fits at all."""
        planner = self.planner
        create = planner.rng.random() < 0.5
        if not create and (live < self.floor_bytes or planner.live_files == 0):
            create = True
        s = -1
        if create:
            s = planner.deficit_size(self.ceiling_bytes - live)
            if s < 0:
                if planner.live_files == 0:
                    self.stop_no_room()
                create = False
        return create, s

    def stop_no_room(self) -> None:
        self.stop_reason = "no_room"
        self.stop_note = "no file of the profile fits in the space left"

    # ---- checks between ops

    def stop_by_limits(self) -> bool:
        """The op and overwrite limits (exact op counts, so the stop point is deterministic)."""
        if self.ops >= self.max_ops:
            self.stop_reason, self.stop_note = "ops", f"reached max_ops = {self.spec.max_ops} operations"
            return True
        if self.written_bytes >= self.max_written:
            self.stop_reason = "overwrites"
            self.stop_note = (f"wrote {self.written_bytes / self.capacity_bytes:.3f}x the capacity "
                              f"(max_overwrites = {self.spec.max_overwrites})")
            return True
        return False

    def stop_by_fit(self) -> bool:
        """Stable phase: the convergence bound, the confidence test, the time left at a
        planned fit point; past that point, plan the fit for twice as long a history."""
        spec, ops, planner = self.spec, self.ops, self.planner
        if not self.any_stop and ops >= self.convergence:
            self.stop_reason = "convergence_bound"
            self.stop_note = (f"reached the convergence bound T = {self.convergence} ops "
                              f"(K = {self.live_files_k} live files; no other stop "
                              "condition given)")
            return True
        at_horizon = ops >= planner.horizon_ops
        if spec.confidence is not None and (ops >= self.next_fit_check or at_horizon):
            self.next_fit_check = ops + self.fit_every
            worst = min((f.p_value if f.p_value is not None else 0.0)
                        for f in planner.fits(ops).values())
            if worst >= spec.confidence:
                self.stop_reason = "confidence"
                self.stop_note = (f"every distribution fits the profile with "
                                  f"chi-squared p >= {spec.confidence} (lowest {worst:.3f})")
                return True
        if at_horizon and spec.max_seconds is not None and ops > self.ops_start:
            # the fit peaks here; stop unless the next peak fits in the time left
            elapsed = time.monotonic() - self.t0
            left_s = spec.max_seconds - elapsed
            if ops / ((ops - self.ops_start) / elapsed) > left_s:
                self.stop_reason = "time"
                self.stop_note = (f"stopped at the planned fit point (op {ops}) as the "
                                  f"next one (op {2 * ops}) would not be reached within "
                                  f"the time limit of {spec.max_seconds:g} s")
                return True
        if at_horizon:  # run on: plan the fit for twice as long a history
            self.recut(2 * planner.horizon_ops)
            if self.statvfs_mode:
                self.settle()
        return False

    def stop_by_clock(self) -> bool:
        """Every CHECK_EVERY_OPS ops: cancel, the time limit, worker failures; progress
        events and state saves when due."""
        now_s = time.monotonic()
        if self.cancelled is not None and self.cancelled():
            self.stop_reason, self.stop_note = "cancelled", "cancelled by the caller"
            return True
        if self.spec.max_seconds is not None and now_s - self.t0 >= self.spec.max_seconds:
            self.stop_reason = "time"
            self.stop_note = f"time limit of {self.spec.max_seconds:g} s reached"
            return True
        if self.pool is not None:
            self.pool.poll()
            if self.pool.failures:
                return True  # a worker hit a full file system; handled after draining
        self.flush_resolved(self.ops)
        if self.on_progress is not None and now_s - self.progress_at >= PROGRESS_EVERY_S:
            self.progress_at = now_s
            self.on_progress(self.progress_event(now_s))
        if now_s - self.state_saved_at >= STATE_EVERY_S:
            self.state_saved_at = now_s
            self.save_state()
        return False

    def next_check_op(self, clock: bool = True) -> float:
        """The next op at which the checks run: the op-count events, and with ``clock`` the
        next multiple of CHECK_EVERY_OPS (the C loop watches the clock itself)."""
        ops = self.ops
        at = min(ops - ops % CHECK_EVERY_OPS + CHECK_EVERY_OPS if clock else math.inf, self.max_ops)
        if self.phase == "stable":
            at = min(at, self.planner.horizon_ops)
            if self.spec.confidence is not None:  # only then are fit points checked
                at = min(at, self.next_fit_check)
            if not self.any_stop:
                at = min(at, self.convergence)
        return at

    # ---- the run

    def run(self) -> AgingResult:
        try:
            self.log_file = open(self.op_log_path, "wb") if self.op_log_path is not None else None
            self.save_state()
            if self.spec.workers > 1:
                self.pool = WorkerPool(self.root, self.spec.workers, fallocate=self.start.fallocate,
                                       pattern_seed=self.start.seed)
                self.op_loop = f"python ({self.spec.workers} worker processes)"
            else:
                pattern = data_pattern(self.start.seed)
                self.file_ops = FileOps(self.root, fallocate=self.start.fallocate, pattern=pattern)
                self.start_native(pattern)
            if self.native is not None:
                self.native_loop()
            else:
                self.loop()
            self.drain()
        finally:
            if self.native is not None:
                self.native.pull_cells(self.planner)
                self.native.close()
                self.native = None
            if self.pool is not None:
                self.pool.close()
            if self.file_ops is not None:
                self.file_ops.close()
            if self.log_file is not None:
                self.log_file.close()
            self.pool = self.file_ops = None  # every op has finished (drained)
        return self.result()

    def start_native(self, pattern: bytes) -> None:
        """The op loop in C when asked for and it builds; ``op_loop`` then says which runs."""
        if self.op_loop == "python":
            self.op_loop = "python (asked for)"
            return
        lib, why = native.library()
        if lib is None:
            self.op_loop = f"python ({why})"
            return
        self.native = native.Loop(lib, self.planner, root_fd=self.file_ops.root_fd,
                                  fallocate=self.start.fallocate, pattern=pattern)
        self.op_loop = "native"

    def native_loop(self) -> None:
        """:meth:`loop` with the ops between two events carried out in C: the same choices
        from the same seeded stream, so the same op log. Python keeps every check (at the same
        op counts; the clock's at least every NATIVE_POLL_S), the op log's hash and the state."""
        run, max_seconds = self.native.run, self.spec.max_seconds
        end_s = math.inf if max_seconds is None else self.t0 + max_seconds
        next_event = self.ops
        while True:
            if self.ops >= next_event:
                if self.stop_by_limits() or (self.phase == "stable" and self.stop_by_fit()):
                    return
                next_event = self.next_check_op(clock=False)
            if self.stop_by_clock():  # at every return: a cancel is seen within NATIVE_POLL_S
                return
            edge_s = min(time.monotonic() + NATIVE_POLL_S, end_s)
            status, log = run(self, int(min(next_event, self.ops + NATIVE_CHUNK_OPS)), edge_s)
            self.write_log(log)
            if self.written_bytes >= self.max_written:
                next_event = self.ops
            if status == native.SETTLE:
                self.rapid_settle()
            elif status == native.RAPID_OVER:
                self.enter_stable()
                next_event = self.ops  # the stable phase's checks start now
            elif status == native.NO_ROOM:
                self.stop_no_room()
                return
            elif status in (native.FULL, native.FAILED):
                err, rel = self.native.error()
                if status == native.FAILED:
                    raise OSError(err, os.strerror(err), os.path.join(self.root, rel))
                self.full_errno, self.full_path = err, rel
                return

    def loop(self) -> None:
        """Plan and carry out ops until a stop condition. The hot path (~10^4 ops/s) keeps
        the planner's methods in locals."""
        planner, pool, file_ops = self.planner, self.pool, self.file_ops
        rng_random = planner.rng.random
        add_file, remove_file = planner.add_file, planner.remove_file
        deficit_depth, victim, n_sib = planner.deficit_depth, planner.victim, planner.n_sib
        size_bytes_of, unlink = planner.size_bytes, os.unlink
        root_fd = file_ops.root_fd if file_ops is not None else -1
        jobs = self.spec.workers
        log_lines, log_pending = self.log_lines, self.log_pending
        next_event = self.ops  # the op at which the checks run next
        while True:
            ops = self.ops
            if ops >= next_event:
                if self.stop_by_limits() or (self.phase == "stable" and self.stop_by_fit()) \
                        or (ops % CHECK_EVERY_OPS == 0 and self.stop_by_clock()):
                    return
                next_event = self.next_check_op()

            # ---- plan one operation
            live = self.base_used_bytes + planner.files_bytes
            create = True
            if self.phase == "rapid":
                s = self.rapid_choice(live)
                if s < 0:
                    next_event = ops  # the stable phase's checks start now
                    continue
            else:
                create, s = self.stable_choice(live)
                if self.stop_reason:
                    return

            # ---- carry it out
            if create:
                d = deficit_depth()
                record = add_file(ops, s, d, int(rng_random() * n_sib[d]) if n_sib[d] > 1 else 0)
                rel = record[6]
                size = size_bytes_of[s]
                if pool is None:
                    err = file_ops.create(rel, size)
                    if err:
                        remove_file(record)
                        self.full_errno, self.full_path = err, rel
                        return
                    log_lines.append(f"c {rel} {size}\n")
                else:
                    pool.submit(ops % jobs, ops, "c", rel, size)
                    log_pending.append((ops, f"c {rel} {size}\n"))
                self.written_bytes += size
                if self.written_bytes >= self.max_written:
                    next_event = ops + 1
            else:
                record = victim()
                remove_file(record)
                rel = record[6]
                if pool is None:
                    unlink(rel, dir_fd=root_fd)
                    log_lines.append(f"d {rel}\n")
                else:
                    pool.submit(record[4] % jobs, ops, "d", rel, 0)
                    log_pending.append((ops, f"d {rel}\n"))
            self.ops = ops + 1
            if len(log_lines) >= 4096:
                self.flush_resolved(self.ops)

    def drain(self) -> None:
        """Let every planned op finish; a full file system becomes the stop reason."""
        pool = self.pool
        if pool is not None:
            pool.drain()
            if pool.failures:
                errs = [e for e in pool.failures.values() if e != SKIPPED]
                self.full_errno = errs[0] if errs else errno_mod.ENOSPC
                # some planned ops did not happen: the tree, not the plan, is the truth now
                files, _, _ = walk_aged_tree(self.root, self.planner)
                self.planner.rebuild(files)
            self.flush_resolved(self.ops, final=True)
            self.written_bytes -= self.failed_create_bytes
        else:
            self.flush_resolved(self.ops)
        if self.full_errno:
            self.stop_reason = "enospc"
            name = errno_mod.errorcode.get(self.full_errno, str(self.full_errno))
            where = f" creating {self.full_path}" if self.full_path else ""
            self.stop_note = (f"the file system ran out of space ({name}){where} at "
                              f"{self.final_fullness():.1%} full (target {self.start.fullness:.0%}): "
                              "block rounding, metadata or other files took the room the plan "
                              "counted on. The tree is consistent (the failed create was undone); "
                              "lower the fullness, or free space and resume.")

    def result(self) -> AgingResult:
        planner, start = self.planner, self.start
        elapsed_s = time.monotonic() - self.t0
        stop_note = self.stop_note
        if self.phase == "stable" and self.ops < planner.horizon_ops and self.stop_reason != "confidence":
            stop_note += (f"; the age distribution was planned to fit at op {planner.horizon_ops} "
                          f"(the paper's bound T = {self.convergence}), so it has not converged yet")
        elif self.phase == "rapid":
            stop_note += "; still in the rapid phase (target fullness not reached)"
        problem = self.save_state(self.stop_reason)
        if problem:
            stop_note = f"{stop_note} ({problem})"
        session_ops = self.ops - self.ops_start
        return AgingResult(
            profile=self.profile.name, seed=start.seed, ops=self.ops, session_ops=session_ops,
            elapsed_s=elapsed_s, ops_per_s=session_ops / elapsed_s if elapsed_s > 0 else 0.0,
            fullness=self.final_fullness(), target_fullness=start.fullness,
            stop_reason=self.stop_reason, stop_note=stop_note, op_log_sha256=self.hasher.hexdigest(),
            convergence_ops=self.convergence, horizon_ops=planner.horizon_ops or None,
            live_files=planner.live_files,
            live_bytes=sum(planner.size_bytes[s] * c for s, c in enumerate(planner.size_count)),
            written_bytes=self.written_bytes, capacity_bytes=self.capacity_bytes,
            overwrites=self.written_bytes / self.capacity_bytes, phase=self.phase,
            fit=planner.fits(self.ops), workers=self.spec.workers, fallocate=start.fallocate,
            resumed=start.resumed, foreign_files=start.foreign, op_loop=self.op_loop,
        )
