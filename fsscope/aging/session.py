"""One aging session: the op loop (in Python, or in C through ``native``), its checks between
ops, fullness control, the op log and the state saves. :mod:`fsscope.aging.ager` opens a
session (fresh or resumed) and sums it up.
"""

from __future__ import annotations

import bisect
import errno as errno_mod
import hashlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

import numpy as np

from fsscope.aging import fit, native
from fsscope.aging.executor import SKIPPED, FileOps, WorkerPool, data_pattern
from fsscope.aging.planner import Planner
from fsscope.aging.profile import Profile
from fsscope.aging.state import STATE_VERSION, write_state
from fsscope.aging.tree import measure, walk_aged_tree
from fsscope.layout.freespace import syncfs
from fsscope.records import Record

if TYPE_CHECKING:
    from fsscope.aging.ager import AgingSpec

FULLNESS_BAND = 0.05      # stable phase keeps live bytes within target * (1 ± band)
PROGRESS_EVERY_S = 0.5
CHECK_EVERY_OPS = 64      # how often the loop looks at the clock and the cancel flag
NATIVE_POLL_S = 0.05      # ... and how often the C loop returns to do so
NATIVE_CHUNK_OPS = 1 << 20  # ops per C call at most (the alive-by-born buffer grows ahead)
STATE_EVERY_S = 5.0
SETTLE_GAP = 0.005  # of the capacity: the rapid phase stops settling when this close to its target


@dataclass
class Start:
    """Where a session starts: a fresh target, or the state a resumed one left."""

    root: Path
    profile: Profile
    seed: int
    fullness: float
    capacity_given: int | None    # None: statvfs mode (the root is a mount point)
    fallocate: bool
    resumed: bool
    planner: Planner
    capacity_bytes: int
    used_bytes: int               # statvfs used at start (0 in directory mode)
    ops: int
    phase: str
    live_files_k: int | None
    written_bytes: int
    segments: list
    foreign: int


def initial_horizon(spec: AgingSpec, convergence: int, ops: int, written_bytes: int,
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


class AgerProgress(Record, frozen=True, kw_only=True):
    """What the ager says about every ``PROGRESS_EVERY_S``: its phase, fullness against the
    capacity, operations (and per second this session), capacity written, each distribution's
    fit p-value (size/depth/age; None before it can be judged), the convergence bound, the op
    count the age distribution is planned to fit at, live files, seconds this session. An
    ``age`` job's Progress event carries these fields in its ``detail`` (:meth:`of` reads one)."""

    phase: str = ""
    fullness: float = 0.0
    ops: int = 0
    ops_per_s: float = 0.0
    overwrites: float = 0.0
    p_values: dict[str, float | None] = {}
    convergence_ops: int | None = None
    horizon_ops: int | None = None
    live_files: int = 0
    elapsed_s: float = 0.0


class Session:
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

    def __init__(self, start: Start, spec: AgingSpec, on_progress: Callable[[AgerProgress], None] | None,
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
        self.log_file: BinaryIO | None = None
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
        return measure(self.root)[1]

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
        return write_state(self.root, {
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

    def progress_event(self, now_s: float) -> AgerProgress:
        elapsed = now_s - self.t0
        fits = self.planner.fits(self.ops)
        return AgerProgress(
            phase=self.phase, fullness=round(self.live_bytes() / self.capacity_bytes, 6), ops=self.ops,
            ops_per_s=round((self.ops - self.ops_start) / elapsed, 1) if elapsed > 0 else 0.0,
            overwrites=self.written_bytes / self.capacity_bytes,
            p_values={name: f.p_value for name, f in fits.items()},
            convergence_ops=self.convergence, horizon_ops=self.planner.horizon_ops or None,
            live_files=self.planner.live_files, elapsed_s=round(elapsed, 3))

    # ---- phases

    def _initial_horizon(self, convergence: int) -> int:
        return initial_horizon(self.spec, convergence, self.ops, self.written_bytes,
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
            self.stop_reason, self.stop_note = "ops", f"reached max_ops = {self.spec.max_ops:,} operations"
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
        if not self.any_stop and self.convergence is not None and ops >= self.convergence:
            self.stop_reason = "convergence_bound"
            self.stop_note = (f"reached the convergence bound T = {self.convergence:,} ops "
                              f"(K = {self.live_files_k:,} live files; no other stop "
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
                self.stop_note = (f"stopped at the planned fit point (op {ops:,}) as the "
                                  f"next one (op {2 * ops:,}) would not be reached within "
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
            if not self.any_stop and self.convergence is not None:
                at = min(at, self.convergence)
        return at

    # ---- the run

    def run(self) -> None:
        """Carry out ops until a stop condition; every planned op has finished on return."""
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

    def start_native(self, pattern: bytes) -> None:
        """The op loop in C when asked for and it builds; ``op_loop`` then says which runs."""
        if self.op_loop == "python":
            self.op_loop = "python (asked for)"
            return
        lib, why = native.library()
        if lib is None:
            self.op_loop = f"python ({why})"
            return
        assert self.file_ops is not None  # made before the loop starts
        self.native = native.Loop(lib, self.planner, root_fd=self.file_ops.root_fd,
                                  fallocate=self.start.fallocate, pattern=pattern)
        self.op_loop = "native"

    def native_loop(self) -> None:
        """:meth:`loop` with the ops between two events carried out in C: the same choices
        from the same seeded stream, so the same op log. Python keeps every check (at the same
        op counts; the clock's at least every NATIVE_POLL_S), the op log's hash and the state."""
        loop = self.native
        assert loop is not None  # start_native made it
        run, max_seconds = loop.run, self.spec.max_seconds
        end_s = math.inf if max_seconds is None else self.t0 + max_seconds
        next_event: float = self.ops
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
                err, rel = loop.error()
                if status == native.FAILED:
                    raise OSError(err, os.strerror(err), os.path.join(self.root, rel))
                self.full_errno, self.full_path = err, rel
                return

    def loop(self) -> None:
        """Plan and carry out ops until a stop condition. The hot path (~10^4 ops/s) keeps
        the planner's methods in locals."""
        planner, pool = self.planner, self.pool
        file_ops = cast(FileOps, self.file_ops)  # None only with a worker pool, which then does the I/O
        rng_random = planner.rng.random
        add_file, remove_file = planner.add_file, planner.remove_file
        deficit_depth, victim, n_sib = planner.deficit_depth, planner.victim, planner.n_sib
        size_bytes_of, unlink = planner.size_bytes, os.unlink
        root_fd = file_ops.root_fd if file_ops is not None else -1
        jobs = self.spec.workers
        log_lines, log_pending = self.log_lines, self.log_pending
        next_event: float = self.ops  # the op at which the checks run next
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
