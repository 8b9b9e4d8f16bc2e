"""Sensitivity analysis of a treatments table (pure functions on numpy arrays).

The questions Chopper asked of its d-span table (anchors §2.5), answered the same way:

- **Factor prioritization**: each factor's first-order contribution to the variance of Y,
  ``S_i = V(E[Y | X_i]) / V(Y)``, estimated from the given samples by the variance of the
  per-level means (weighted by level counts) over the total variance -- Chopper's estimate --
  minus its sampling bias: with L levels the plain variance of level means overstates
  V(E[Y|X]) by (L - 1)/n x the within-level variance (a factor with one run per level would
  "explain" everything), so that term is subtracted (ANOVA's omega-squared correction).
  Where a factor has fewer than two runs per level on average the share is not estimated
  (NaN), nor an interaction with fewer than two runs per level pair. Pairwise
  interaction: ``V(E[Y | X_i, X_j]) / V(Y) - S_i - S_j``, corrected the same way.
  :func:`salib_first_order` gives SALib's RBD-FAST estimate on the same given samples, as a
  cross-check (both are tested against a function with known indices).
- **Factor mapping**: the tail is Y >= its q-quantile (q = 0.9 by default). Per level, the
  share of runs in the tail, and a one-sided binomial test of "this level puts runs in the
  tail more often than the overall share"; significant after a Bonferroni correction over
  all levels tested (alpha = 0.05).
- **Nondeterminism**: for treatments run twice (``--repeat 2``), the share whose Y changed,
  the CDF of |difference|, and the factor pairs (level combinations) where changes
  concentrate.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fsscope.analysis import scipy_stats

ALPHA = 0.05
#: A variance share is estimated only with at least this many runs per level (per level
#: pair for interactions) on average; below it the estimate is mostly its own noise.
MIN_RUNS_PER_LEVEL = 2


def _key(value):
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


def encode(factor_dicts: list[dict], names: list[str]) -> tuple[np.ndarray, list[list]]:
    """(n, k) int codes (index into each factor's sorted distinct levels) and those levels."""
    values = [sorted({fd[n] for fd in factor_dicts}, key=_key) for n in names]
    index = [{v: i for i, v in enumerate(vals)} for vals in values]
    codes = np.array([[index[j][fd[n]] for j, n in enumerate(names)] for fd in factor_dicts],
                     dtype=np.int64).reshape(len(factor_dicts), len(names))
    return codes, values


def _conditional_variance(groups: np.ndarray, y: np.ndarray) -> float:
    """V(E[Y | group]): variance of the group means weighted by group size, less its
    sampling bias (L - 1)/n x the within-group variance. NaN below two runs per group."""
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    n, levels = len(y), len(counts)
    if n < MIN_RUNS_PER_LEVEL * levels:  # the correction would be all noise
        return float("nan")
    means = np.bincount(inverse, weights=y) / counts
    between = float((counts * (means - y.mean()) ** 2).sum() / n)
    within = float(((y - means[inverse]) ** 2).sum() / (n - levels))
    return between - (levels - 1) / n * within


def first_order(codes: np.ndarray, y: npt.ArrayLike) -> np.ndarray:
    """S_i = V(E[Y|X_i]) / V(Y) per column of ``codes`` (0 where Y does not vary). The bias
    correction can go below 0 for a factor that does nothing; that is shown as 0."""
    y = np.asarray(y, dtype=float)
    var = y.var()
    if len(y) < 2 or var == 0:
        return np.zeros(codes.shape[1])
    return np.array([max(0.0, v) if np.isfinite(v) else v
                     for v in (_conditional_variance(codes[:, j], y) / var for j in range(codes.shape[1]))])


def first_order_chance(codes: np.ndarray, y: npt.ArrayLike, j: int, *, permutations: int = 499,
                       seed: int = 0) -> tuple[float, float]:
    """What chance alone gives column ``j``'s first-order share here, and how surely the
    measured one is above it: the runs' responses shuffled against the factor's levels
    ``permutations`` times (seeded). Returns (mean share under shuffling, one-sided permutation
    p). A k-level factor in n runs takes about (k - 1)/(n - 1) of the variance by chance before
    any correction; the shuffles give the same for this estimator and these level counts."""
    y = np.asarray(y, dtype=float)
    column = codes[:, [j]]
    observed = first_order(column, y)[0]
    rng = np.random.default_rng(seed)
    shuffled = np.array([first_order(column, rng.permutation(y))[0] for _ in range(permutations)])
    shuffled = np.where(np.isfinite(shuffled), shuffled, 0.0)
    return float(shuffled.mean()), float((1 + np.sum(shuffled >= observed)) / (1 + permutations))


def _pair_codes(codes: np.ndarray, i: int, j: int) -> np.ndarray:
    return codes[:, i] * (int(codes[:, j].max()) + 1) + codes[:, j]


def interactions(codes: np.ndarray, y: npt.ArrayLike) -> np.ndarray:
    """(k, k) symmetric matrix of pairwise interactions V(E[Y|Xi,Xj])/V(Y) - S_i - S_j."""
    y = np.asarray(y, dtype=float)
    k = codes.shape[1]
    out = np.zeros((k, k))
    var = y.var()
    if len(y) < 2 or var == 0:
        return out
    s = first_order(codes, y)
    for i, j in itertools.combinations(range(k), 2):
        out[i, j] = out[j, i] = _conditional_variance(_pair_codes(codes, i, j), y) / var - s[i] - s[j]
    return out


def top_interactions(codes: np.ndarray, y: npt.ArrayLike, n: int = 10) -> list[tuple[tuple[int, int], float]]:
    m = interactions(codes, y)
    pairs = [((i, j), float(m[i, j])) for i, j in itertools.combinations(range(codes.shape[1]), 2)
             if np.isfinite(m[i, j])]
    return sorted(pairs, key=lambda p: -p[1])[:n]


def salib_first_order(x_unit: np.ndarray, y: npt.ArrayLike, names: list[str], seed: int = 1) -> np.ndarray:
    """SALib's RBD-FAST first-order indices on given samples ``x_unit`` (n, k) in [0, 1]."""
    from SALib.analyze import rbd_fast

    problem = {"num_vars": len(names), "names": list(names), "bounds": [[0.0, 1.0]] * len(names)}
    result = rbd_fast.analyze(problem, np.asarray(x_unit, dtype=float), np.asarray(y, dtype=float),
                              print_to_console=False, seed=seed)
    return np.asarray(result["S1"], dtype=float)


def unit_positions(codes: np.ndarray, level_counts: list[int]) -> np.ndarray:
    """Level codes as the midpoints of their strata in [0, 1] (input for SALib)."""
    return (codes + 0.5) / np.asarray(level_counts, dtype=float)


@dataclass(frozen=True)
class TailMap:
    quantile: float
    threshold: float
    tail_share: float
    #: per factor: {level code: (tail share, runs, p value, significant)}
    levels: list[dict]


def factor_mapping(codes: np.ndarray, y: npt.ArrayLike, quantile: float = 0.9) -> TailMap:
    y = np.asarray(y, dtype=float)
    threshold = float(np.quantile(y, quantile))
    in_tail = y >= threshold
    overall = float(in_tail.mean())
    tests = sum(len(np.unique(codes[:, j])) for j in range(codes.shape[1]))
    levels = []
    for j in range(codes.shape[1]):
        per = {}
        for code in np.unique(codes[:, j]).tolist():
            mask = codes[:, j] == code
            n, hits = int(mask.sum()), int(in_tail[mask].sum())
            p = float(scipy_stats().binomtest(hits, n, overall, alternative="greater").pvalue) if 0 < overall < 1 else 1.0
            per[code] = (hits / n, n, p, bool(p < ALPHA / max(tests, 1)))
        levels.append(per)
    return TailMap(quantile, threshold, overall, levels)


def runs_to_decide_share(share: float, overall: float, alpha: float, most: int = 1_000_000) -> int | None:
    """Runs of a level at which a tail share ``share`` above the ``overall`` one would pass the
    one-sided binomial test at ``alpha`` (already corrected for the number of tests), if the
    share held; None when it is not above the overall share or needs more than ``most``."""
    if not 0 < overall < 1 or share <= overall:
        return None

    def decided(n: int) -> bool:
        return scipy_stats().binomtest(round(share * n), n, overall, alternative="greater").pvalue < alpha

    hi = 2
    while not decided(hi):
        hi *= 2
        if hi > most:
            return None
    lo = hi // 2
    while hi - lo > 1:  # the p value falls as n grows at a fixed share (up to rounding)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if decided(mid) else (mid, hi)
    return hi


def tail_heatmap(codes: np.ndarray, y: npt.ArrayLike, i: int, j: int, quantile: float = 0.9) -> np.ndarray:
    """(levels of i, levels of j) share of runs in the tail (NaN where no run)."""
    y = np.asarray(y, dtype=float)
    in_tail = y >= np.quantile(y, quantile)
    out = np.full((int(codes[:, i].max()) + 1, int(codes[:, j].max()) + 1), np.nan)
    for a, b in set(zip(codes[:, i].tolist(), codes[:, j].tolist())):
        mask = (codes[:, i] == a) & (codes[:, j] == b)
        out[a, b] = in_tail[mask].mean()
    return out


def ecdf(values: npt.ArrayLike, max_points: int = 200) -> list[list[float]]:
    """[[x, F(x)], ...] of the empirical CDF, at most ``max_points`` points."""
    v = np.sort(np.asarray(values, dtype=float))
    if len(v) == 0:
        return []
    f = np.arange(1, len(v) + 1) / len(v)
    keep = np.unique(np.linspace(0, len(v) - 1, min(max_points, len(v))).round().astype(int))
    return [[float(v[i]), float(f[i])] for i in keep]


def nondeterminism(runs: list[tuple], factors_by_key: dict, names: list[str], min_runs: int = 3) -> dict:
    """From (recipe, row, repeat, y) runs: pairs of repeats 0 and 1 of the same treatment,
    the share whose y changed, the CDF of |difference|, and where the changes concentrate
    (per factor pair, the level combination with the highest changed share, >= min_runs)."""
    by_key: dict = {}
    for recipe, row, repeat, y in runs:
        by_key.setdefault((recipe, row), {})[repeat] = y
    pairs = [(k, v[0], v[1]) for k, v in by_key.items() if 0 in v and 1 in v]
    if not pairs:
        return {"pairs": 0, "changed_share": None, "abs_diff_cdf": [], "concentrated": []}
    diffs = np.array([abs(b - a) for _, a, b in pairs], dtype=float)
    changed = diffs > 0
    share = float(changed.mean())
    codes, values = encode([factors_by_key[k] for k, _, _ in pairs], names)
    concentrated: list[dict] = []
    if share > 0:
        varied = [j for j in range(len(names)) if len(values[j]) > 1]  # a fixed factor explains nothing
        for i, j in itertools.combinations(varied, 2):
            best = None
            for a, b in set(zip(codes[:, i].tolist(), codes[:, j].tolist())):
                mask = (codes[:, i] == a) & (codes[:, j] == b)
                if mask.sum() >= min_runs:
                    s = float(changed[mask].mean())
                    if best is None or s > best[0]:
                        best = (s, int(mask.sum()), values[i][a], values[j][b])
            if best is not None and best[0] > share:
                concentrated.append({"factors": [names[i], names[j]], "levels": [best[2], best[3]],
                                     "changed_share": round(best[0], 4), "runs": best[1],
                                     "lift": round(best[0] / share, 3)})
        concentrated.sort(key=lambda d: (-d["lift"], -d["runs"]))
    return {"pairs": len(pairs), "changed_share": share, "abs_diff_cdf": ecdf(diffs),
            "median_abs_diff_bytes": float(np.median(diffs)), "concentrated": concentrated[:10]}


# --- notes in plain words -------------------------------------------------------------------

#: What a top factor usually means for the allocator (said only when it is the top factor).
MECHANISMS = {
    ("ext4", "FileSize"): "ext4's mballoc serves small requests (below mb_stream_req, 16 blocks = 64 KiB) "
                          "from a per-CPU locality-group preallocation shared by all small files, and "
                          "larger files from per-inode preallocation: file size switches the policy",
    ("ext4", "CPUCount"): "ext4's locality groups are per CPU, so where the writing thread runs decides "
                          "which preallocation a small file lands in (Chopper's scheduler dependency)",
    ("ext4", "Sync"): "closing and syncing between chunks discards ext4's per-inode preallocation, so a "
                      "later chunk is allocated afresh, often far away",
    ("ext4", "DirectorySpan"): "ext4's Orlov allocator spreads top-level directories over block groups, "
                               "so files in different directories start in different groups",
    ("xfs", "FileCount"): "xfs allocates a file's data near its directory's allocation group; two files "
                          "written chunk by chunk into the same AG, with an fsync or sync between chunks, "
                          "get their chunks allocated in turn, so each file's blocks alternate with the "
                          "other's and its d-span grows past its size",
    ("ext4", "FileCount"): "small files share ext4's per-CPU locality-group preallocation: two files written "
                           "chunk by chunk, with an fsync or sync between chunks, take their blocks from it "
                           "in turn, so each file's blocks alternate with the other's and its d-span grows "
                           "past its size",
    ("xfs", "DirectorySpan"): "xfs places new directories in different allocation groups and a file's data "
                              "near its directory's AG: the directory decides which AG (and how much free "
                              "space there) the file's chunks come from, and whether a second file shares it",
    ("ext4", "ChunkOrder"): "writing chunks out of order makes ext4 allocate each at a goal derived from "
                            "its logical offset; backward writes defeat delayed allocation's merging",
    ("ext4", "InternalDensity"): "sparse writes leave logical holes that ext4 may or may not keep "
                                 "physically, and overwrites reuse blocks",
    ("ext4", "FreeSpaceLayout"): "with fragmented free space no free extent holds the file, so its data "
                                 "is split across extents far apart",
    ("xfs", "FreeSpaceLayout"): "with fragmented free space xfs's by-size free-space tree finds no "
                                "extent large enough, so the file is split",
}


def notes(report: dict) -> list[str]:
    """Plain-word notes on the top factor, the tail levels and nondeterminism of a report:
    per file system (the paper ranks each on its own), and pooled only when there are several
    and the pooled ranking is worth saying."""
    fss = sorted({t["fs"] for t in report.get("treatments", [])})
    by_fs = report.get("by_fs") or {}
    if len(fss) == 1 and fss[0] in by_fs or not by_fs:
        out = _section_notes(report, fss[0] if len(fss) == 1 else "", "")
    else:
        out = _section_notes(report, "", f"Pooled over {' and '.join(fss)}: ")
        for fs in fss:
            out += _section_notes(by_fs[fs], fs, f"On {fs}: ")
    out += _all_files_note(report)
    return out


def _section_notes(part: dict, fs: str, prefix: str) -> list[str]:
    out = []
    every = part.get("prioritization") or []
    prio = [p for p in every if p["first_order"] is not None]
    if prio and prio[0]["first_order"] <= 0:
        out.append(f"{prefix}no factor explains any of the d-span's variance across {part['completed']} runs.")
    elif prio:
        top = prio[0]
        chance = ""
        if top.get("permutation_p") is not None:
            sure = top["permutation_p"] < ALPHA
            chance = (f"; chance alone gives a {top.get('levels', '?')}-level factor about "
                      f"{(top.get('chance') or 0) * 100:.0f}% here (permutation p = {top['permutation_p']:.2g}"
                      + ("" if sure else ": not above chance, more treatments would decide") + ")")
        out.append(f"{prefix}{top['factor']} drives the d-span most: it alone explains "
                   f"{top['first_order'] * 100:.0f}% of the variance across {part['completed']} runs"
                   + (f" (next: {prio[1]['factor']}, {prio[1]['first_order'] * 100:.0f}%)" if len(prio) > 1 else "")
                   + chance + ".")
        if fs and (fs, top["factor"]) in MECHANISMS:
            out.append(f"On {fs}: {MECHANISMS[(fs, top['factor'])]}.")
    unknown = [p for p in every if p["first_order"] is None]
    if unknown:
        out.append(f"{prefix}too few runs per level to estimate {', '.join(p['factor'] for p in unknown)} "
                   f"({', '.join(str(p.get('levels', '?')) for p in unknown)} levels): run more treatments "
                   "or fix those factors with --factor.")
    tail = part.get("tail") or {}
    hot = sorted((lv for lv in tail.get("levels", []) if lv["significant"]), key=lambda lv: -lv["tail_share"])
    share = tail.get("share")
    for lv in hot[:3]:
        ratio = lv["tail_share"] / share if share else math.inf
        out.append(f"{prefix}{lv['factor']} = {lv['level']}: {lv['tail_share'] * 100:.0f}% of its runs are in the "
                   f"d-span tail (>= P{tail['quantile'] * 100:.0f}), {ratio:.1f}x the overall share "
                   f"(p = {lv['p_value']:.2g}).")
    if prio and not hot:
        near = max((lv for lv in tail.get("levels", []) if lv.get("runs_to_decide")),
                   key=lambda lv: lv["tail_share"], default=None)
        decide = (f"the likeliest, {near['factor']} = {near['level']} ({near['tail_share'] * 100:.0f}% of "
                  f"{near['runs']} runs), would be decided with about {near['runs_to_decide']} runs of it"
                  if near else "more treatments would sharpen the test")
        out.append(f"{prefix}no factor level puts runs in the tail significantly more often than the others: "
                   f"inconclusive ({decide}).")
    nd = part.get("nondeterminism") or {}
    if nd.get("changed_share") is not None:
        line = (f"{prefix}repeating each treatment changed the d-span in {nd['changed_share'] * 100:.0f}% of "
                f"{nd['pairs']} pairs")
        if nd.get("concentrated"):
            c = nd["concentrated"][0]
            line += (f"; most where {c['factors'][0]} = {c['levels'][0]} and {c['factors'][1]} = "
                     f"{c['levels'][1]} ({c['changed_share'] * 100:.0f}% of {c['runs']})")
        out.append(line + ".")
    return [o[0].upper() + o[1:] for o in out]


def _all_files_note(report: dict) -> list[str]:
    """Where a treatment's files lie apart, say that the span over all of them is another metric."""
    apart = [t for t in report.get("treatments", [])
             if (t.get("dspan_all_files_bytes") or 0) > 2 * max(t.get("d_span_bytes") or 0, 1)]
    if not apart:
        return []
    return [f"In {len(apart)} of {len(report['treatments'])} treatments the files lie far apart: the span over "
            "all of a treatment's files (dspan_all_files_bytes) is more than twice its largest file's d-span. "
            "That is the distance between files (e.g. directories in different groups), not Chopper's "
            "d-span, which is per file."]
