"""The ager's planner: live files by (age, size, depth) cell, and every seeded choice.

It decides each operation and never touches the file system (see :mod:`fsscope.aging.ager`
for the method); the op loops in :mod:`fsscope.aging.session` (and ``native/ager.c``,
which mirrors it choice for choice) carry its choices out.
"""

from __future__ import annotations

import bisect
import math
import random

import numpy as np

from fsscope.aging import fit
from fsscope.aging.profile import Profile
from fsscope.format import format_bytes

NO_CHOICE = -math.inf  # the gap of a bucket that cannot be chosen


class Planner:
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
        assert chosen is not None  # a live file exists whenever one is deleted
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
