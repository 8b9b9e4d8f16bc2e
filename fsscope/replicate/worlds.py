"""Every judge tried on worlds without the paper's effect, with it, and with it reversed
(``fsscope replicate --self-test``).

For each scenario a generator draws data shaped like the scenario's own records -- its run
counts, sizes and noise, on a quiet and on a loaded machine -- in three worlds: ``null`` (the
effect absent), ``effect`` (the paper's effect size) and ``reversed`` (the effect the other way
round). The scenario's own judge (the same function ``fsscope replicate`` calls) decides each
draw, and :func:`self_test` reports per judge the false-agree rate on the null world, the power
(agree rate) on the effect world, the disagree rate on the reversed world, and the smallest run
count at which the power reaches :data:`POWER_TARGET`.

Targets: false agree <= :data:`FALSE_AGREE_TARGET`, power >= :data:`POWER_TARGET` at the
scenario's run count; where the power needs more runs, ``runs_for_80`` names how many.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from fsscope.records import Record

FALSE_AGREE_TARGET = 0.05
POWER_TARGET = 0.8
WORLDS = ("null", "effect", "reversed")
#: draws a world for a run count tried by a judge alone (``Group.more``): it is cheap, and its
#: power crosses 80 % between two of the counts (Mingardi loaded: 0.75 at 1,500, 0.87 at 2,000),
#: which 50 draws (sd 0.06) do not tell apart and 400 (sd 0.02) do
MORE_DRAWS = 400
#: rates are sums of 1/draws: 8 of 10 adds up to 0.7999999999999999, which is 80 %
_SUM_SLACK = 1e-9

#: (rng, world, runs, noise, mode) -> finding -> verdict: one draw judged
Verdicts = Callable[[np.random.Generator, str, int, str, str], dict[str, str]]


class JudgeCheck(Record, frozen=True, kw_only=True):
    """One judge on one noise level and scenario size, over ``trials`` draws per world."""

    scenario: str
    finding: str
    noise: str
    mode: str                  # full | quick: which of the scenario's sizes
    runs: int                  # the scenario's run count (repetitions, runs, treatments)
    false_agree: float
    power: float
    reversed_disagree: float
    runs_for_80: int | None    # the scenario's runs when its power is >= 0.8, else the smallest larger
                               # run count tried that reaches it (None: none tried did)
    runs_tried: list[int]
    trials: int
    null_trials: int = 0       # draws on the null world (the false-agree rate's), when more than ``trials``
    target_met: bool           # false agree within target and power reached at the scenario's size
    decides: str = ""          # where no run count tried reaches it: what would decide (as the verdict says)
    #: where no run count tried reaches it: the scenario's setting (other than its runs) tried at its
    #: runs that does, with false agree within target too, and the power there ("" and None: none
    #: tried, or none reached it)
    setting_for_80: str = ""
    setting_power: float | None = None
    setting_false_agree: float | None = None
    world: str                 # the worlds in words


class SelfTest(Record, frozen=True, kw_only=True):
    judges: list[JudgeCheck]
    seed: int
    trials: int
    elapsed_s: float


@dataclass(frozen=True)
class Group:
    """The judges one draw feeds (the findings a scenario judges from the same records)."""

    scenario: str
    findings: tuple[str, ...]
    modes: dict[str, int]                 # mode -> the scenario's run count
    noises: tuple[str, ...]
    candidates: tuple[int, ...]           # run counts tried for runs_for_80
    verdicts: Verdicts                    # (rng, world, runs, noise, mode) -> finding -> verdict
    world: str
    cost: int = 1                         # trials are divided by this (the probe's detector is slow)
    quick_differs: bool = True            # False: --quick measures what the full scenario does
    null_factor: int = 1                  # draws on the null world: this many times the others'
    #: finding -> what decides it where no run count tried reaches 80 % power (its verdict says so too)
    decides: tuple[tuple[str, str], ...] = ()
    #: (finding, larger run counts, verdicts judging only it): tried after ``candidates`` where those do
    #: not reach 80 %, with a judge cheap enough at thousands of runs (the others' are not)
    more: tuple[tuple[str, tuple[int, ...], Verdicts], ...] = ()
    #: (setting, in words): a scenario setting other than its run count, passed to ``verdicts`` as the
    #: mode and tried at the scenario's runs where no run count reaches 80 %
    settings: tuple[tuple[str, str], ...] = ()


# --- Aota & Kono: a probe's latency matrix ---------------------------------------------------

#: per call: sd of log latency, the share of calls a busy machine delays, and by how much (x)
PROBE_NOISE = {"quiet": (0.15, 0.002, (2.0, 5.0)), "loaded": (0.4, 0.02, (2.0, 20.0))}
PROBE_FILES = {"xfs": {"full": 1024, "quick": 1024},
               "ext4-ram": {"full": 1024, "quick": 600}, "btrfs-ram": {"full": 1024, "quick": 200}}


def probe_latency_ns(rng: np.random.Generator, runs: int, files: int, noise: str,
                     scale: dict[int, float] | None = None, step: tuple[int, float] | None = None) -> np.ndarray:
    """runs x files creat() latencies (ns): 50 µs x lognormal noise, a busy machine's delays,
    ``scale`` {file: x} slow (or fast) files in every run, ``step`` (file, x) a level from there on."""
    sd, share, (low, high) = PROBE_NOISE[noise]
    base = np.full(files, 50_000.0)
    for index, factor in (scale or {}).items():
        if index < files:
            base[index] *= factor
    if step is not None:
        base[step[0]:] *= step[1]
    latency = base * rng.lognormal(0.0, sd, size=(runs, files))
    delayed = rng.random((runs, files)) < share
    latency[delayed] *= rng.uniform(low, high, size=int(delayed.sum()))
    return latency.astype(np.int64)


def _probe_verdicts(key: str) -> Verdicts:
    def verdicts(rng: np.random.Generator, world: str, runs: int, noise: str, mode: str) -> dict[str, str]:
        from fsscope.analysis.outliers import analyze
        from fsscope.replicate import aota_kono as ak
        from fsscope.replicate.base import ProbeResult, ProbeRun, judge_index, judge_level_shift, judge_series

        files = PROBE_FILES[key][mode]
        ratio = ak.PAPER_RATIO
        scale: dict[int, float] = {}
        step = None
        predictions: list[dict] = []
        if key.startswith("xfs"):
            chunk = range(61, files, 64)
            predictions = [{"structure": "xfs-dir-shortform-to-block", "index": 22, "arithmetic": "6 + 15 x 22 = 336"},
                           {"structure": "xfs-inode-chunk-alloc", "index": 61, "stride": 64,
                            "arithmetic": "a chunk of 64 inodes every 64 files"}]
            if world == "effect":
                scale = {22: ratio["xfs-shortform-limit"], 0: ratio["xfs-first-call"]}
                scale |= {i: ratio["xfs-inode-chunk-series"] for i in chunk}
            elif world == "reversed":  # the slow file next door, the predicted ones fast
                scale = {22: 0.5, 24: ratio["xfs-shortform-limit"], 0: 0.5} | {i: 0.6 for i in chunk}
        elif key == "ext4-ram":
            predictions = [{"structure": "ext4-dir-htree-conversion", "index": 252, "arithmetic": "4,096 B full"}]
            if world == "effect":
                scale = {252: ratio["ext4-htree-start"]}
            elif world == "reversed":
                scale = {252: 0.5, 254: ratio["ext4-htree-start"]}
        else:
            from fsscope.explain.btrfs import BTRFS_LEVEL_SHIFT_TOLERANCE_FILES

            predictions = [{"structure": "btrfs-fs-tree-leaf-split", "index": 45, "arithmetic": "16,061 / 351 = 45",
                            "tolerance_files": BTRFS_LEVEL_SHIFT_TOLERANCE_FILES}]
            if world != "null":
                step = (45, ratio["btrfs-first-leaf-full"] ** (1 if world == "effect" else -1))
        latency = probe_latency_ns(rng, runs, files, noise, scale, step)
        report = analyze(latency).to_json() | {"predictions": predictions}
        result = ProbeResult(ProbeRun(key, "simulated", files, runs), report, latency, "")
        if key == "xfs":
            chunks = judge_series("c", result, structure="xfs-inode-chunk-alloc", paper=ak.CHUNK_PAPER,
                                  paper_says="").verdict
            return {"xfs-shortform-limit": judge_index("sf", result, structure="xfs-dir-shortform-to-block",
                                                       paper=22, paper_says="").verdict,
                    "xfs-inode-chunk-series-ram": chunks, "xfs-inode-chunk-series-disk": chunks,
                    "xfs-first-call": ak._first_call(result).verdict}
        if key == "ext4-ram":
            return {"ext4-htree-start": judge_index("h", result, structure="ext4-dir-htree-conversion", paper=253,
                                                    paper_says="").verdict}
        return {"btrfs-first-leaf-full": judge_level_shift("b", result, structure="btrfs-fs-tree-leaf-split",
                                                           paper=45, paper_says="").verdict}
    return verdicts


# --- Mingardi & Vieira: a sync-write sweep -----------------------------------------------------

#: sd of log latency per repetition and size (the issue measured 0.3 here; 0.7 when busy)
SWEEP_NOISE = {"quiet": 0.3, "loaded": 0.7}
#: the paper's shape: a per-write cost c and a bandwidth B with c x B = 1 MiB put latency's rise
#: at 512 KiB-1 MiB and throughput's plateau (90 % of B at 9 x c x B) at 4-8 MiB
CROSSOVER_BYTES = 1 << 20
#: the paper's small-buffer difference: 50,127 / 45,675 kB/s
XFS_AHEAD = 50127 / 45675


def sweep(rng: np.random.Generator, world: str, repetitions: int, noise: str, speed: float = 1.0
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """sizes, repetitions x sizes mean latency per write (s) and throughput (bytes/s).

    null: latency flat, throughput growing with the buffer and never saturating (the issue's
    null); effect: the paper's shape; reversed: throughput levels off by 128 KiB and latency
    rises only from 4 MiB (throughput no longer buffer / latency). ``speed`` scales throughput
    (and divides latency) for the small-buffer comparison."""
    from fsscope.replicate.mingardi import SIZES_BYTES

    sizes = np.array(SIZES_BYTES, dtype=np.float64)
    cost_s = 1e-3
    sd = SWEEP_NOISE[noise]
    shape = (repetitions, sizes.size)
    noise_lat = rng.normal(0.0, sd, shape)
    if world == "null":
        latency = np.full(sizes.size, cost_s)
        throughput, noise_tput = sizes / latency, -noise_lat
    elif world == "effect":
        latency = cost_s * (1 + sizes / CROSSOVER_BYTES)
        throughput, noise_tput = sizes / latency, -noise_lat
    else:
        latency = cost_s * (1 + (sizes / (4 << 20)) ** 2)  # a sharp rise, late: where a knee is unambiguous
        throughput, noise_tput = sizes / (cost_s * (1 + sizes / (16 << 10))), rng.normal(0.0, sd, shape)
    return sizes, latency / speed * np.exp(noise_lat), throughput * speed * np.exp(noise_tput)


def _mingardi_verdicts(rng: np.random.Generator, world: str, runs: int, noise: str, mode: str,
                       knees: bool = True) -> dict[str, str]:
    from fsscope.replicate import mingardi as m

    ahead = {"null": 1.0, "effect": XFS_AHEAD, "reversed": 1 / XFS_AHEAD}[world]
    out = {}
    columns = {}
    for fs, speed in (("xfs", ahead), ("ext4", 1.0)):
        sizes, latency, throughput = sweep(rng, world, runs, noise, speed)
        if knees:
            out[f"{fs}-latency-rises-before-throughput-saturates"] = m.judge_knees("k", sizes, latency, throughput,
                                                                                   rng=rng).verdict
        columns[fs] = throughput[:, list(sizes).index(m.SMALL_BUFFER_BYTES)]
    out["xfs-ahead-of-ext4-small-buffers"] = m.judge_small_buffers(columns["xfs"], columns["ext4"]).verdict
    return out


def _small_buffer_verdicts(rng: np.random.Generator, world: str, runs: int, noise: str, mode: str
                           ) -> dict[str, str]:
    """The same sweeps as :func:`_mingardi_verdicts`, only the 128 KiB comparison judged: the
    knees' bootstrap is what a sweep of thousands of repetitions cannot afford."""
    return _mingardi_verdicts(rng, world, runs, noise, mode, knees=False)


# --- Cao et al.: throughput per run ------------------------------------------------------------

#: the machine's run-to-run sd of throughput (relative): quiet, and busy
BENCH_NOISE = {"quiet": 0.01, "loaded": 0.05}
#: the file systems' own sd (relative), from the paper's relative ranges over 10 runs (range ~ 3.08 sd):
#: ext4 16.6 %, XFS under 5 %, ext4 with a null hash seed 1.1 %
EXT4_SD, XFS_SD, NULL_SEED_SD = 0.166 / 3.08, 0.05 / 3.08, 0.011 / 3.08


def _cao_verdicts(rng: np.random.Generator, world: str, runs: int, noise: str, mode: str) -> dict[str, str]:
    from fsscope.replicate.cao import judge_more_variable

    own = {"null": {"ext4": XFS_SD, "xfs": XFS_SD, "null-seed": XFS_SD},
           "effect": {"ext4": EXT4_SD, "xfs": XFS_SD, "null-seed": NULL_SEED_SD},
           "reversed": {"ext4": XFS_SD, "xfs": EXT4_SD, "null-seed": EXT4_SD}}[world] | {"baseline": 0.0}
    machine = BENCH_NOISE[noise]
    ops = {k: 1000.0 * np.exp(rng.normal(0.0, math.hypot(sd, machine), runs)) for k, sd in own.items()}
    return {"ext4-varies-more-than-xfs": judge_more_variable("v", ops["ext4"], ops["xfs"], ops["baseline"],
                                                             rng=rng).verdict,
            "null-hash-seed-reduces-ext4-variation": judge_more_variable("n", ops["ext4"], ops["null-seed"],
                                                                         ops["baseline"], rng=rng).verdict}


# --- Chopper: d-span per treatment -------------------------------------------------------------

def d_spans(rng: np.random.Generator, treatments: int, tail_share: float, scale: float = 1.0) -> np.ndarray:
    """Per treatment the largest file d-span (bytes): a body around 1 MiB (P90 ~2 MB, the
    paper's XFS) and a ``tail_share`` of treatments spread over GiBs (the paper's ext4)."""
    body = scale * (1 << 20) * rng.lognormal(0.0, 0.55, treatments)
    tail = (2 << 30) * rng.lognormal(0.0, 1.5, treatments)
    return np.where(rng.random(treatments) < tail_share, tail, body)


#: the tail shares: ext4's a third of the treatments (8/24 measured here), XFS's a few percent
EXT4_TAIL, XFS_TAIL = 0.3, 0.03


def _chopper_verdicts(rng: np.random.Generator, world: str, runs: int, noise: str, mode: str) -> dict[str, str]:
    from fsscope.replicate.chopper import judge_tail

    if world == "null":  # the null: ext4 twice XFS everywhere, no tail of its own
        ext4, xfs = d_spans(rng, runs, XFS_TAIL, 2.0), d_spans(rng, runs, XFS_TAIL)
    elif world == "effect":
        ext4, xfs = d_spans(rng, runs, EXT4_TAIL), d_spans(rng, runs, XFS_TAIL)
    else:
        ext4, xfs = d_spans(rng, runs, XFS_TAIL), d_spans(rng, runs, EXT4_TAIL)
    return {"ext4-tail-above-xfs": judge_tail(ext4, xfs).verdict}


# --- Geriatrix: fresh and aged layout ------------------------------------------------------------

#: loaded: a time-bounded aging on a busy machine stops before its plan ends this often
AGING_UNFINISHED = {"quiet": 0.0, "loaded": 0.5}
#: the geriatrix setting that decides on a busy machine: an aging with no time bound, which ends
#: only when its plan does (``fsscope age`` without --max-minutes; the scenario names it)
NO_TIME_BOUND = "no-time-bound"


def _geriatrix_verdicts(rng: np.random.Generator, world: str, runs: int, noise: str, mode: str) -> dict[str, str]:
    from fsscope.replicate.geriatrix import judge_aged

    # the paper: largest free extent 1-2 GB -> ~100 MB (15x), a new file 763 fragments against a
    # handful fresh; null: aging leaves both as they were; reversed: the aged image is the tidier
    shrink, growth = {"null": (1.0, 1.0), "effect": (15.0, 150.0), "reversed": (1 / 3, 1 / 3)}[world]
    fresh = {"largest_free_extent_bytes": 128e6 * rng.lognormal(0, 0.3), "free_extents": int(rng.integers(4, 40)),
             "test_file_fragments": int(rng.integers(3, 8)), "test_file_bytes": 64 << 20}
    aged = {"largest_free_extent_bytes": fresh["largest_free_extent_bytes"] / shrink * rng.lognormal(0, 0.3),
            "free_extents": int(fresh["free_extents"] * shrink), "test_file_bytes": 64 << 20,
            "test_file_fragments": max(1, int(fresh["test_file_fragments"] * growth * rng.lognormal(0, 0.3)))}
    # without a time bound the aging stops only at its plan's end, however busy the machine (the
    # draw is still made, so both settings see the same layouts)
    stopped = rng.random() < AGING_UNFINISHED[noise]
    unfinished = "the aging stopped at its time bound" if stopped and mode != NO_TIME_BOUND else ""
    return {f.id: f.verdict for f in judge_aged(fresh, aged, unfinished)}


# --- The probe's own detectors: outliers, series, level shifts, ramps -----------------------------

#: the detectors' worlds: runs x 600 files (the probe's quick ext4 size); the effects at fixed places, apart
DETECTOR_FILES = 600
OUTLIER_AT, OUTLIER_X = 100, 3.0              # one file 3x (ext4's htree start is 8.5x, XFS's shortform 54x)
SERIES_FROM, SERIES_STRIDE, SERIES_X = 5, 21, 1.5  # a slab's new page every 21 objects: 1.5x, the faint kind
SHIFT_AT, SHIFT_X = 450, 1.3                  # btrfs' first leaf split: 1.3x from there on
RAMP_FROM, RAMP_TO, RAMP_X = 200, 350, 1.5    # latency rising 1.5x over 150 files, then back
FALL_FROM, FALL_TO = 20, 90                   # latency falling 1.5x over 70 files, then back
DETECTOR_NOISES = ("quiet", "loaded", "recorded")


def recorded_runs_ns(rng: np.random.Generator, runs: int, files: int) -> np.ndarray:
    """runs x files latencies drawn from the runs this probe recorded here (ext4 and XFS on RAM
    images at load ~20, tmpfs; each run's distribution as its 1,024 quantiles over its median,
    ``data/noise/probe_runs.npz``), one recording per draw, each run from one of its runs with
    the files in random order: the machine's real heavy tails without their places."""
    from fsscope.paths import DATA_DIR

    with np.load(DATA_DIR / "noise" / "probe_runs.npz") as recorded:
        quantiles = recorded[sorted(recorded.files)[int(rng.integers(len(recorded.files)))]].astype(np.float64)
    grid = np.linspace(0.0, 1.0, quantiles.shape[1])
    picks = rng.permutation(np.arange(runs) % quantiles.shape[0])
    return np.stack([np.interp(rng.random(files), grid, quantiles[p]) * 20_000.0 for p in picks])


def detector_latency_ns(rng: np.random.Generator, world: str, runs: int, noise: str) -> np.ndarray:
    """One draw: noise (``quiet``/``loaded`` simulated as for the scenarios, ``recorded`` as
    :func:`recorded_runs_ns`) and, in the effect world, every detector's effect at its place;
    reversed: each effect the other way (a fast file, fast series, a step down, a falling ramp)."""
    files = DETECTOR_FILES
    latency = (recorded_runs_ns(rng, runs, files) if noise == "recorded"
               else probe_latency_ns(rng, runs, files, noise).astype(np.float64))
    if world != "null":
        sign = 1 if world == "effect" else -1
        shape = np.ones(files)
        shape[OUTLIER_AT] *= OUTLIER_X ** sign
        shape[SERIES_FROM::SERIES_STRIDE] *= SERIES_X ** sign
        shape[SHIFT_AT:] *= SHIFT_X ** sign
        shape[RAMP_FROM:RAMP_TO] *= np.linspace(1.0, RAMP_X, RAMP_TO - RAMP_FROM) ** sign
        shape[FALL_FROM:FALL_TO] *= np.linspace(1.0, RAMP_X, FALL_TO - FALL_FROM) ** -sign
        latency *= shape
    return np.maximum(latency, 1).astype(np.int64)


def settled_outliers(latency: np.ndarray, runs: int) -> tuple[list, int]:
    """The outliers as the probe flags them: its sequential test run by run over ``latency``'s
    rows (at least ``runs``, up to all of them: the probe's cap), adding runs while a
    candidate is undecided, an outlier nothing predicted confirmed only by later runs; and the
    runs it used."""
    from fsscope.analysis.outliers import BASELINE_BLOCK_FILES, DEFAULT_OUTLIER_FACTOR, analyze, repeatable_outliers
    from fsscope.analysis.sequential import Settling

    settling = Settling(runs, latency.shape[0])
    wait_ns = np.zeros_like(latency)
    settings = {"block_files": BASELINE_BLOCK_FILES, "outlier_factor": DEFAULT_OUTLIER_FACTOR, "shift_min_ratio": 1.2}
    for run in range(1, latency.shape[0]):  # the probe analyses from its second run on
        if settling.done:
            break
        # all the sequential test reads of an analysis: the 80 % rule's outliers (the probe's
        # analysis splits them by chance into outliers and inconclusive ones; it takes both)
        outliers, _ = repeatable_outliers(latency[:run + 1], alpha=None)
        settling.after_run(run, SimpleNamespace(outliers=outliers, settings=settings), latency[:run + 1],
                           wait_ns[:run + 1])
    final = analyze(latency[:settling.runs_seen], null_worlds=0)
    return list(settling.settled(final).outliers), settling.runs_seen


def detector_verdicts(analysis, world: str) -> dict[str, str]:
    """Per detector: "agree" when it flags (the effect, at its place, in the effect world; anything
    at all in the null world: a false flag), "disagree" when it flags the reversed effect at its
    place, else "inconclusive"."""
    def verdict(found_here: bool, found_reversed: bool, anything: bool) -> str:
        if world == "null":
            return "agree" if anything else "inconclusive"
        return "agree" if found_here else "disagree" if found_reversed else "inconclusive"

    def outlier_verdict(outliers: list) -> str:
        return verdict(any(o.index == OUTLIER_AT for o in outliers), False, bool(outliers))

    members = set(range(SERIES_FROM, DETECTOR_FILES, SERIES_STRIDE))
    series_here = any(s.stride == SERIES_STRIDE and 2 * len(members & set(s.members)) >= len(members)
                      for s in analysis.series)
    shift_at = [s for s in analysis.level_shifts if abs(s.index - SHIFT_AT) <= 16]
    def ramps_in(start: int, end: int) -> list:
        return [g for g in analysis.linear_growth if min(g.end, end) - max(g.start, start) >= (end - start) / 2]

    ramp_in, fall_in = ramps_in(RAMP_FROM, RAMP_TO), ramps_in(FALL_FROM, FALL_TO)
    return {"outlier": outlier_verdict(list(analysis.outliers)),
            "periodic-series": verdict(series_here, False, bool(analysis.series)),
            "level-shift": verdict(any(s.after_ns > s.before_ns for s in shift_at),
                                   any(s.after_ns < s.before_ns for s in shift_at), bool(analysis.level_shifts)),
            "linear-growth": verdict(any(g.slope_ns_per_file > 0 for g in ramp_in),
                                     any(g.slope_ns_per_file < 0 for g in ramp_in),
                                     any(g.slope_ns_per_file > 0 for g in analysis.linear_growth)),
            # the same detector on a falling ramp: a false flag is any falling one on the null world
            "linear-decrease": verdict(any(g.slope_ns_per_file < 0 for g in fall_in),
                                       any(g.slope_ns_per_file > 0 for g in fall_in),
                                       any(g.slope_ns_per_file < 0 for g in analysis.linear_growth))}


def _detector_verdicts(rng: np.random.Generator, world: str, runs: int, noise: str, mode: str) -> dict[str, str]:
    from fsscope.analysis.outliers import analyze

    # The null world is analysed as the probe's final analysis is (shifts and ramps held to the
    # permuted worlds too); an effect world's shifts and ramps are not, since 19 segmentations a
    # draw would make the suite's self-test minutes longer: the gate can only take a finding
    # back, at most 5 % of the time on worlds without it, so their power is an upper bound.
    from fsscope.workloads.probe import DEFAULT_RUN_CAP_FACTOR

    latency = detector_latency_ns(rng, world, runs * DEFAULT_RUN_CAP_FACTOR, noise)  # the probe's cap of runs
    verdicts = detector_verdicts(analyze(latency[:runs], gate_levels=world == "null"), world)
    # the outliers a probe flags are the sequential test's: it adds runs (up to its cap) while
    # one is undecided, and confirms an unpredicted one only by runs after it was noticed
    outliers, _ = settled_outliers(latency, runs)
    verdicts["outlier-sequential"] = detector_verdicts(SimpleNamespace(
        outliers=outliers, series=(), level_shifts=(), linear_growth=()), world)["outlier"]
    return verdicts


# --- The hygiene ladder's steps and the bench's variation flags ------------------------------------

#: the paper's ladder, first step to last: relative range over 10 runs 47 % -> 2 % (sd = range / 3.08)
LADDER_FROM_SD, LADDER_TO_SD = 0.47 / 3.08, 0.02 / 3.08


def _ladder_verdicts(rng: np.random.Generator, world: str, runs: int, noise: str, mode: str) -> dict[str, str]:
    """One step of the ladder against the one before (``stats.range_change``): agree when its
    spread fell beyond the runs' noise, disagree when it rose. null: both steps the machine's
    noise alone; effect: the paper's fall (the steps the paper's first and last); reversed: a rise."""
    from fsscope.analysis.variation.stats import range_change

    machine = BENCH_NOISE[noise]
    own = {"null": (0.0, 0.0), "effect": (LADDER_FROM_SD, LADDER_TO_SD),
           "reversed": (LADDER_TO_SD, LADDER_FROM_SD)}[world]
    before, after = (1000.0 * np.exp(rng.normal(0.0, math.hypot(sd, machine), runs)) for sd in own)
    change = range_change(before.tolist(), after.tolist()).verdict
    return {"ladder-step-fell": "agree" if change == "fell" else "disagree" if change == "rose" else "inconclusive"}


#: the bench's Throughput-N windows: ops/s per window, sd of a window's throughput (relative)
WINDOW_NOISE = {"quiet": 0.03, "loaded": 0.10}
PERIOD_WINDOWS, DIP_X = 3, 0.7     # writeback every 3 windows (30 s at 10 s windows): 30 % dips
WARMUP_WINDOWS, WARMUP_X = 2, 0.5  # the first two windows at half the steady throughput


def _variation_flag_verdicts(rng: np.random.Generator, world: str, runs: int, noise: str, mode: str
                             ) -> dict[str, str]:
    """The bench's ``variation`` flag on ``runs`` runs' ops/s, held to the claim it makes: the
    spread measured here (the machine's included) is above the threshold's. null: a spread of
    exactly the threshold's (the boundary of the claim, whatever the machine: a loaded machine's
    own 5 % is above it, and a flag there is true); effect: ext4's own 5.4 % beside the machine's.
    Whether a spread is the file system's is the Cao judge's claim, with its baseline (no reversed
    effect: an inconclusive flag or none is not a disagree)."""
    from fsscope.analysis.variation.temporal import RANGE_SDS_10, flag_variation

    threshold = 0.10
    sd = math.hypot(EXT4_SD, BENCH_NOISE[noise]) if world == "effect" else threshold / RANGE_SDS_10
    flag = flag_variation((1000.0 * np.exp(rng.normal(0.0, sd, runs))).tolist(), threshold)
    above = flag is not None and flag.details["verdict"] == "above"
    return {"variation-flag": "agree" if above and world != "reversed" else "inconclusive"}


def _window_verdicts(rng: np.random.Generator, world: str, runs: int, noise: str, mode: str) -> dict[str, str]:
    """The bench's ``periodic`` and ``warmup`` flags on a run's Throughput-N series of ``runs``
    windows (effect: dips every 3 windows, a slow start; reversed: spikes, an early peak)."""
    from fsscope.analysis.variation.temporal import detect_periodic, detect_warmup

    sd = WINDOW_NOISE[noise]
    series = 1000.0 * np.exp(rng.normal(0.0, sd, runs))
    periodic_series, warm_series = series.copy(), series.copy()
    if world != "null":
        sign = 1 if world == "effect" else -1
        periodic_series[PERIOD_WINDOWS - 1::PERIOD_WINDOWS] *= DIP_X ** sign
        warm_series[:WARMUP_WINDOWS] *= WARMUP_X ** sign
    periodic = detect_periodic(periodic_series, 10.0)
    warm = detect_warmup(warm_series, 10.0)
    at_period = periodic is not None and periodic.details["lag_windows"] == PERIOD_WINDOWS

    def flagged(found: bool, other: bool, anything: bool) -> str:
        if world == "null":
            return "agree" if anything else "inconclusive"
        return "agree" if found else "disagree" if other else "inconclusive"

    return {"periodic-dips": flagged(at_period and periodic.details["shape"] == "dips",  # type: ignore[union-attr]
                                     at_period and periodic.details["shape"] == "spikes",  # type: ignore[union-attr]
                                     periodic is not None),
            "warmup": flagged(warm is not None and warm.details["direction"] == "ramp-up",
                              warm is not None and warm.details["direction"] == "initial-peak", warm is not None)}


GROUPS: tuple[Group, ...] = (
    Group("aota-kono", ("xfs-shortform-limit", "xfs-inode-chunk-series-ram", "xfs-inode-chunk-series-disk",
                        "xfs-first-call"),
          {"full": 10, "quick": 10}, ("quiet", "loaded"), (3, 5, 10, 20), _probe_verdicts("xfs"),
          "1,024 creat() per run, 50 µs x lognormal; effect: file 22 54x, every 64th from 61 2.4x, file 0 3.4x "
          "(the paper's); reversed: the slow file at 24, the predicted ones 0.5-0.6x (the RAM and the disk "
          "probe's chunk series judged on the same draw: the noise levels stand for both)", cost=5,
          quick_differs=False),
    Group("aota-kono", ("ext4-htree-start",), {"full": 10, "quick": 5}, ("quiet", "loaded"), (3, 5, 10, 20),
          _probe_verdicts("ext4-ram"), "1,024 (quick 600) creat(); effect: file 252 8.5x; reversed: 254 slow, "
          "252 0.5x", cost=5),
    Group("aota-kono", ("btrfs-first-leaf-full",), {"full": 10, "quick": 5}, ("quiet", "loaded"), (3, 5, 10, 20),
          _probe_verdicts("btrfs-ram"), "1,024 (quick 200) creat(); effect: a 1.3x step up from file 45; "
          "reversed: a step down", cost=5),
    Group("mingardi", ("xfs-latency-rises-before-throughput-saturates",
                       "ext4-latency-rises-before-throughput-saturates", "xfs-ahead-of-ext4-small-buffers"),
          {"full": 30, "quick": 10}, ("quiet", "loaded"), (5, 10, 20, 30, 50, 100, 300), _mingardi_verdicts,
          "13 sizes 4 KiB-16 MiB; null: flat latency, no saturation, XFS = ext4; effect: per-write cost x "
          "bandwidth = 1 MiB, XFS 1.10x ext4; reversed: throughput flat from 128 KiB, latency rising from "
          "4 MiB, ext4 ahead",
          decides=(("xfs-ahead-of-ext4-small-buffers",
                    "more repetitions than tried: its verdict names the count the measured spread needs and says "
                    "it cannot decide at this size"),),
          more=(("xfs-ahead-of-ext4-small-buffers", (500, 1000, 1500, 2000, 3000), _small_buffer_verdicts),)),
    Group("cao", ("ext4-varies-more-than-xfs", "null-hash-seed-reduces-ext4-variation"), {"full": 10, "quick": 5},
          ("quiet", "loaded"), (5, 10, 15, 20, 30, 50, 100, 200, 300), _cao_verdicts,
          "throughput per run, machine sd 1 % (quiet) / 5 % (loaded) beside each file system's own: effect "
          "ext4 5.4 %, XFS 1.6 %, null seed 0.4 % (the paper's ranges), the baseline none; null: all 1.6 %; "
          "reversed: XFS and the null seed 5.4 %",
          decides=tuple((f, "a quieter machine: its verdict says machine noise dominates, and the runs a variance "
                            "test would need at least") for f in ("ext4-varies-more-than-xfs",
                                                                  "null-hash-seed-reduces-ext4-variation"))),
    Group("chopper", ("ext4-tail-above-xfs",), {"full": 400, "quick": 24}, ("any",), (10, 24, 50, 100, 400),
          _chopper_verdicts, "d-span per treatment, a body around 1 MiB; effect: 30 % of ext4's treatments in a "
                             "GiB tail, 3 % of XFS's; null: ext4 twice XFS, no tail of its own; reversed: the "
                             "tail on XFS (machine load does not move a d-span)"),
    Group("geriatrix", ("free-space-fragmented", "new-file-fragmented"), {"full": 1, "quick": 1},
          ("quiet", "loaded"), (1,), _geriatrix_verdicts,
          "one aging: effect the paper's 15x smaller largest free extent and 150x the fragments; null: "
          "unchanged; reversed: tidier; loaded: half the time-bounded agings stop before their plan ends "
          "(runs: the scenario's one aging, which more runs would not finish; the setting tried instead: "
          "no time bound)",
          quick_differs=False,
          decides=tuple((f, "an aging run to its end (no time bound, or a quieter machine): an unfinished one is "
                            "inconclusive whatever it measures, and its verdict says so")
                        for f in ("free-space-fragmented", "new-file-fragmented")),
          settings=((NO_TIME_BOUND, "the aging without a time bound (it stops only at its plan's end)"),)),
    Group("probe", ("outlier", "outlier-sequential", "periodic-series", "level-shift", "linear-growth",
                    "linear-decrease"), {"full": 10, "quick": 5},
          DETECTOR_NOISES, (3, 5, 10, 20), _detector_verdicts,
          "the probe's own detectors on 600 files; noise simulated (quiet, loaded) or drawn from runs recorded "
          "here; effect: file 100 3x, every 21st from 5 1.5x, 1.3x from file 450, a 1.5x ramp over 200-350, "
          "a 1.5x fall over 20-90 "
          "(outlier: the analysis of the scenario's runs; outlier-sequential: the probe's flags, its sequential "
          "test adding runs up to 3x); "
          "false flag: any flag of the kind on the null world (three times the draws: a rate near 5 % needs "
          "them); reversed: each effect the other way", cost=5, null_factor=3),
    Group("ladder", ("ladder-step-fell",), {"full": 10, "quick": 3}, ("quiet", "loaded"), (3, 5, 10, 20),
          _ladder_verdicts, "one hygiene step against the one before, throughput per run: null both the machine's "
                            "noise alone (sd 1 % / 5 %); effect the paper's fall from 47 % to 2 % relative range; "
                            "reversed a rise (the ladder runs 3 per step by default)", cost=2),
    Group("variation", ("variation-flag",), {"full": 10, "quick": 3}, ("quiet", "loaded"), (3, 5, 10, 20),
          _variation_flag_verdicts, "the bench's variation flag (spread above a 10 % relative range's, sd "
          "3.25 %, by a chi-square test) on the runs' ops/s (3: the bench's default; 10: the paper's): null a "
          "spread of exactly the threshold's, machine included (the loaded machine's own 5 % is above it: "
          "that spread is the flag's to report; whose it is, the Cao judge's with its baseline), effect "
          "ext4's own 5.4 % beside the machine's (sd 1 % / 5 %)", null_factor=3),
    Group("variation", ("periodic-dips", "warmup"), {"full": 12, "quick": 3}, ("quiet", "loaded"),
          (3, 6, 12, 30), _window_verdicts,
          "the bench's periodic and warm-up flags on a run's Throughput-10 series of the row's windows (3: "
          "the default 30 s run; 12: 120 s), window sd 3 % / 10 %; effect 30 % dips every 3 windows and a "
          "first 20 s at half speed; reversed spikes and an early peak", null_factor=3),
)

#: the scenarios the self-test tries, in its order
SCENARIOS_TRIED = tuple(dict.fromkeys(g.scenario for g in GROUPS))


def _rates(group: Group, rng: np.random.Generator, runs: int, noise: str, mode: str, trials: int,
           worlds: tuple[str, ...] = WORLDS) -> dict[str, dict[str, dict[str, float]]]:
    """finding -> world -> verdict -> share of ``trials`` draws."""
    counts: dict[str, dict[str, dict[str, float]]] = {
        f: {w: {"agree": 0, "disagree": 0, "inconclusive": 0} for w in worlds} for f in group.findings}
    for world in worlds:
        draws = trials * (group.null_factor if world == "null" else 1)
        for _ in range(draws):
            for finding, verdict in group.verdicts(rng, world, runs, noise, mode).items():
                counts[finding][world][verdict] += 1 / draws
    return counts


def self_test(*, trials: int = 100, seed: int = 0, modes: tuple[str, ...] = ("full", "quick"),
              scenarios: tuple[str, ...] = (), noises: tuple[str, ...] = (),
              progress: Callable[[str], None] = lambda line: None) -> SelfTest:
    """Every group's judges (of ``scenarios``, else all) on every noise level (of ``noises``,
    else all) and scenario size (a quick size the same as the full one is tried once)."""
    started = time.monotonic()
    out: list[JudgeCheck] = []
    for g_index, group in enumerate(GROUPS):
        if scenarios and group.scenario not in scenarios:
            continue
        n = max(10, trials // group.cost)
        sizes = {mode: runs for mode, runs in group.modes.items() if mode in modes}
        if "full" in sizes and not group.quick_differs:
            sizes.pop("quick", None)
        for n_index, noise in enumerate(group.noises):
            if noises and noise not in noises:
                continue
            for mode, runs in sizes.items():
                rng = np.random.default_rng([seed, g_index, n_index, runs])
                progress(f"{group.scenario}: {', '.join(group.findings)} ({noise}, {mode}: {runs} runs)")
                rates = _rates(group, rng, runs, noise, mode, n)
                found = {f: (runs if rates[f]["effect"]["agree"] >= POWER_TARGET - _SUM_SLACK else None)
                         for f in group.findings}
                tried = [runs]

                # the smallest run count tried that reaches the target, upwards from the scenario's own
                for count in sorted(c for c in group.candidates if c > runs):
                    want = [f for f in group.findings if found[f] is None]
                    if not want:
                        break
                    more = _rates(group, rng, count, noise, mode, max(10, n // 2), ("effect",))
                    tried.append(count)
                    for f in want:
                        if more[f]["effect"]["agree"] >= POWER_TARGET - _SUM_SLACK:
                            found[f] = count
                # the findings whose judge alone is cheap enough: further run counts, then settings
                alone_tried: dict[str, list[int]] = {}  # those counts, on that finding's row only
                for finding, counts, verdicts in group.more:
                    for count in counts:
                        if found[finding] is not None or count <= max(tried):
                            continue
                        alone = Group(group.scenario, (finding,), group.modes, group.noises, (), verdicts, group.world)
                        alone_tried.setdefault(finding, []).append(count)
                        if _rates(alone, rng, count, noise, mode, max(n, MORE_DRAWS), ("effect",)
                                  )[finding]["effect"]["agree"] \
                                >= POWER_TARGET - _SUM_SLACK:
                            found[finding] = count
                setting: dict[str, tuple[str, float, float]] = {}
                for name, _words in group.settings:
                    want = [f for f in group.findings if found[f] is None and f not in setting]
                    if not want:
                        break
                    # the setting is held to both targets: it may not buy its power with false agrees
                    there = _rates(group, rng, runs, noise, name, n, ("null", "effect"))
                    for f in want:
                        if (there[f]["effect"]["agree"] >= POWER_TARGET - _SUM_SLACK
                                and there[f]["null"]["agree"] <= FALSE_AGREE_TARGET + _SUM_SLACK):
                            setting[f] = (name, round(there[f]["effect"]["agree"], 3),
                                          round(there[f]["null"]["agree"], 3))
                for f in group.findings:
                    false_agree, power = rates[f]["null"]["agree"], rates[f]["effect"]["agree"]
                    out.append(JudgeCheck(
                        scenario=group.scenario, finding=f, noise=noise, mode=mode, runs=runs,
                        false_agree=round(false_agree, 3), power=round(power, 3),
                        reversed_disagree=round(rates[f]["reversed"]["disagree"], 3), runs_for_80=found[f],
                        runs_tried=sorted(tried + alone_tried.get(f, [])), trials=n,
                        null_trials=n * group.null_factor if group.null_factor > 1 else 0,
                        target_met=bool(false_agree <= FALSE_AGREE_TARGET + _SUM_SLACK
                                        and power >= POWER_TARGET - _SUM_SLACK),
                        world=group.world, decides="" if found[f] is not None else dict(group.decides).get(f, ""),
                        setting_for_80=setting[f][0] if f in setting else "",
                        setting_power=setting[f][1] if f in setting else None,
                        setting_false_agree=setting[f][2] if f in setting else None))
    return SelfTest(judges=out, seed=seed, trials=trials, elapsed_s=round(time.monotonic() - started, 1))
