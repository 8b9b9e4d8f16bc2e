"""The periodic-series search as it was before it was vectorised: the reference the fast one
in :mod:`fsscope.analysis.outliers` must agree with, finding for finding (tests compare them on
random and recorded candidate sets; ``bench/probe_scale.py`` times both in one run).

Kept verbatim apart from this docstring and its imports: per round it rebuilds a Python list
of every index's strides for every candidate stride (``_available``) and walks every chain in
Python (``_best_chain``) -- O(rounds x strides x candidates) Python steps, seconds at 30,000
files and minutes at 100,000. Use :func:`fsscope.analysis.outliers.periodic_series`.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fsscope.analysis.findings import Series
from fsscope.analysis.outliers import _chance_log_expectation, _sparsest_part


def periodic_series(
    indices: ArrayLike,
    *,
    min_count: int = 3,
    n_files: int | None = None,
    max_gap: int = 2,
    min_fill: float = 0.5,
    alpha: float = 0.01,
    max_strides: int = 32,
    neighbours: int = 6,
) -> list[Series]:
    """Outlier indices at a constant stride, each run reported once as a :class:`Series`.

    Candidate strides are the most frequent differences between each index and its next
    ``neighbours`` indices (so interleaved extras and missing members do not hide the
    stride). For each stride (most frequent first), indices of equal residue form chains that
    may skip up to ``max_gap`` consecutive members; a chain is kept if it has at least
    ``min_count`` members, fills at least ``min_fill`` of its span, and would be expected
    fewer than ``alpha`` times if the same number of outliers were scattered at random over
    ``n_files`` (default: last index + 1). Members of a kept chain are not reused, so a
    64-series is not reported again as a 128-series. ``count`` is the span in terms
    (last = start + (count-1) x stride); ``missing`` how many of those were not flagged.
    """
    unique_indices = np.unique(np.asarray(indices, dtype=np.int64).ravel())
    unique_indices = unique_indices[unique_indices >= 0]
    index_count = unique_indices.size
    if index_count < max(min_count, 2):
        return []
    n_files = max(int(n_files or 0), int(unique_indices[-1]) + 1)
    log_alpha = math.log(alpha)

    # Enough neighbours that a period of a fifth of the files spans them at this density (dense
    # candidates put many between two members of a long-stride series), within a bound.
    reach = min(max(neighbours, math.ceil(index_count / 5)), 64)

    taken: list[list[int]] = [[] for _ in range(index_count)]  # strides of the series holding each
    found: list[Series] = []
    # The least likely chain first, then again over the indices it left: a 64-series with two
    # members missing is not cut into two 128-series because 128 is the commoner difference.
    # An index stays available to strides that are no multiple or divisor of its series' (a
    # weak 16-file period must not hide XFS's directory blocks every 168 files), but a chain
    # made mostly of other series' members is no period of its own.
    # Once a series is accepted its members are explained: the chance of the next chain is
    # judged against the density of the candidates it leaves.
    while (best := _best_chain(unique_indices, taken,
                               _candidate_strides(unique_indices, taken, reach, max_strides),
                               min_count=min_count,
                               max_gap=max_gap, min_fill=min_fill,
                               density=(density := _unexplained_density(taken, n_files)),
                               n_files=n_files)) is not None and best[0] < log_alpha:
        log_chance, stride, chain = _sparsest_part(unique_indices, *best, density=density,
                                                   n_files=n_files, log_alpha=log_alpha)
        chain = _extended(unique_indices, _available(taken, stride), chain, stride, max_gap)
        present, span = chain.size, int((unique_indices[chain[-1]] - unique_indices[chain[0]]) // stride) + 1
        log_chance = min(log_chance, _chance_log_expectation(present, span, density, n_files))
        found.append(Series(start=int(unique_indices[chain[0]]), stride=stride, count=span,
                            missing=span - present, chance=float(f"{math.exp(log_chance):.3g}"),
                            members=tuple(int(i) for i in unique_indices[chain])))
        for position in chain.tolist():
            taken[position].append(stride)
    found.sort(key=lambda series: (series.start, series.stride))
    return found


def _candidate_strides(indices: NDArray[np.int64], taken: list[list[int]], reach: int,
                       max_strides: int) -> NDArray[np.int64]:
    """The most frequent differences between each index and its next ``reach`` indices, leaving
    out pairs that accepted series already explain (both ends taken): their harmonics would
    crowd out a period of its own."""
    free = np.array([not strides for strides in taken], dtype=bool)
    parts = []
    for k in range(1, min(reach, indices.size - 1) + 1):
        open_pair = free[k:] | free[:-k]
        parts.append((indices[k:] - indices[:-k])[open_pair])
    if not parts:
        return np.array([], dtype=np.int64)
    strides, counts = np.unique(np.concatenate(parts), return_counts=True)
    useful = (counts >= 2) & (strides >= 2)  # a stride of 1 is a slow stretch, not a period
    strides, counts = strides[useful], counts[useful]
    return strides[np.lexsort((strides, -counts))][:max_strides]


def _unexplained_density(taken: list[list[int]], n_files: int) -> float:
    """Share of the files that are candidates outside every accepted series."""
    explained = sum(1 for strides in taken if strides)
    return (len(taken) - explained) / max(n_files - explained, 1)


def _available(taken: list[list[int]], stride: int) -> NDArray[np.bool_]:
    """Indices a chain of ``stride`` may use: in no series of a multiple or divisor of it."""
    return np.array([not any(stride % t == 0 or t % stride == 0 for t in strides) for strides in taken],
                    dtype=bool)


def _best_chain(indices: NDArray[np.int64], taken: list[list[int]], strides: NDArray[np.int64],
                *, min_count: int, max_gap: int, min_fill: float, density: float, n_files: int
                ) -> tuple[float, int, NDArray[np.int64]] | None:
    """The chain of available indices least likely by chance: (log expectation, stride,
    positions into ``indices``), or None when no chain qualifies."""
    best = None
    for stride in strides.tolist():
        positions_all = np.flatnonzero(_available(taken, stride))
        if positions_all.size < min_count:
            continue
        members = indices[positions_all]
        residue, term = members % stride, members // stride
        order = np.lexsort((term, residue))
        residue, term, positions = residue[order], term[order], positions_all[order]
        breaks = np.flatnonzero((np.diff(residue) != 0) | (np.diff(term) > max_gap + 1)) + 1
        for start, end in zip(np.concatenate([[0], breaks]).tolist(),
                              np.concatenate([breaks, [residue.size]]).tolist()):
            present = end - start
            terms = int(term[end - 1] - term[start]) + 1
            if present < min_count or present < min_fill * terms:
                continue
            if sum(1 for p in positions[start:end].tolist() if taken[p]) * 2 > present:
                continue  # mostly another series' members: no evidence of a period of its own
            log_chance = _chance_log_expectation(present, terms, density, n_files)
            if best is None or log_chance < best[0]:
                best = (log_chance, int(stride), positions[start:end])
    return best


def _extended(indices: NDArray[np.int64], available: NDArray[np.bool_], chain: NDArray[np.int64],
              stride: int, max_gap: int) -> NDArray[np.int64]:
    """The chain with the available indices that continue it at its stride on either side
    (skipping up to ``max_gap`` terms): members a coarser chain search had left out."""
    position = {int(v): p for p, v in enumerate(indices.tolist()) if available[p]}
    members = [int(p) for p in chain]
    for direction in (-1, 1):
        end = int(indices[members[0] if direction < 0 else members[-1]])
        while True:
            step = next((k for k in range(1, max_gap + 2)
                         if position.get(end + direction * k * stride) is not None
                         and position[end + direction * k * stride] not in members), None)
            if step is None:
                break
            end += direction * step * stride
            members.append(position[end])
    return np.array(sorted(members, key=lambda p: int(indices[p])), dtype=np.int64)
