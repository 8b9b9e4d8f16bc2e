"""How long the probe analysis takes on big matrices, and how much memory it needs.

Times ``fsscope.analysis.outliers.analyze`` on synthetic probe matrices shaped like XFS
results (lognormal noise, file 0 and 22 slow, every 64th file slow, a level shift, a few
one-run spikes): 1,000,000 files x 1 run and 100,000 files x 10 runs. Reference in the same
process: a plain ``np.sort`` of the same matrix, so the ratio says how many sorts the
analysis costs on this machine. Prints seconds and the peak RSS of this process, and the load.
Its synthetic data has few series candidates; ``bench/probe_scale.py`` times the analysis on
real probe data (where ~8-20 % of the files are candidates), which is what #38's target is on.

    .venv/bin/python bench/analysis_scale.py [--smoke]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

from fsscope.analysis.outliers import analyze  # noqa: E402


def synthetic_probe_ns(runs: int, files: int, seed: int) -> np.ndarray:
    """An XFS-like latency matrix in int64 ns."""
    rng = np.random.default_rng(seed)
    latency_ns = 100_000.0 * rng.lognormal(0.0, 0.15, size=(runs, files))
    latency_ns[:, files // 3:] *= 1.4  # a level shift
    latency_ns[:, 0] *= 5.0
    latency_ns[:, 22] *= 50.0
    latency_ns[:, 63::64] *= 3.0  # inode chunk allocations
    spikes = rng.integers(0, files, size=(runs, max(files // 10_000, 3)))
    for run, run_spikes in enumerate(spikes):
        latency_ns[run, run_spikes] *= 8.0
    return latency_ns.astype(np.int64)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def bench(runs: int, files: int) -> None:
    latency_ns = synthetic_probe_ns(runs, files, seed=runs * files)
    rss_before_mib = peak_rss_mib()
    started = time.perf_counter()
    np.sort(latency_ns, axis=None)
    sort_s = time.perf_counter() - started
    started = time.perf_counter()
    result = analyze(latency_ns)
    analyze_s = time.perf_counter() - started
    print(
        f"{files:>9,} files x {runs:>2} runs: analyze {analyze_s:6.3f} s "
        f"(= {analyze_s / sort_s:5.1f} x np.sort of the matrix, {sort_s:.3f} s); "
        f"peak RSS {peak_rss_mib():7.1f} MiB (before {rss_before_mib:.1f} MiB, "
        f"matrix {latency_ns.nbytes / 2**20:.1f} MiB); "
        f"{len(result.outliers)} outliers, {len(result.series)} series, "
        f"{len(result.level_shifts)} level shifts, noise {result.noise_count}; {benchlib.load()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Target (#3): seconds, not minutes, at 1,000,000 x 1 and 100,000 x 10.")
    parser.add_argument("--smoke", action="store_true", help="seconds: 10,000 x 1 and 2,000 x 3")
    args = parser.parse_args()
    benchlib.start()
    analyze(synthetic_probe_ns(3, 2_000, seed=0))  # warm up imports and caches
    for runs, files in ((1, 10_000), (3, 2_000)) if args.smoke else ((1, 1_000_000), (10, 100_000)):
        bench(runs, files)


if __name__ == "__main__":
    main()
