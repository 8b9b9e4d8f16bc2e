"""The vectorised periodic-series search against the old one it replaced
(``fsscope.analysis.outliers_reference``), finding for finding: on random candidate sets with
and without planted series, and on real probes recorded by the engine
(``tests/fixtures/probe_matrices``: XFS and ext4 on RAM images, a tmpfs directory)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fsscope.analysis import outliers, outliers_reference, sequential

FIXTURES = Path(__file__).parent / "fixtures" / "probe_matrices"


def _recorded(name: str) -> tuple[np.ndarray, np.ndarray]:
    with np.load(FIXTURES / f"{name}.npz") as data:
        return data["latency_ns"].astype(np.int64), data["wait_ns"].astype(np.int64)


def _candidates(seed: int) -> tuple[list[int], int, dict]:
    """Scattered candidates at a density of 1-20 % plus up to three planted series with gaps."""
    rng = np.random.default_rng(seed)
    n_files = int(rng.integers(300, 4000))
    chosen = set(np.flatnonzero(rng.random(n_files) < rng.choice([0.01, 0.05, 0.1, 0.2])).tolist())
    for _ in range(int(rng.integers(0, 4))):
        stride = int(rng.integers(2, 200))
        members = np.arange(int(rng.integers(0, stride)), n_files, stride)
        members = members[rng.random(members.size) < rng.uniform(0.6, 1.0)][: int(rng.integers(3, 40))]
        chosen |= set(members.tolist())
    options = {"min_count": int(rng.choice([3, 4])), "alpha": float(rng.choice([0.01, 0.005]))}
    return sorted(chosen), n_files, options


@pytest.mark.parametrize("seed", range(16))
def test_the_series_search_agrees_with_the_reference_on_random_candidates(seed):
    indices, n_files, options = _candidates(seed)
    fast = outliers.periodic_series(indices, n_files=n_files, **options)
    assert fast == outliers_reference.periodic_series(indices, n_files=n_files, **options)


def test_planted_series_are_found_by_both_alike():
    """A 64-series with two members missing amid 10 % scattered candidates: found, once."""
    rng = np.random.default_rng(7)
    noise = np.flatnonzero(rng.random(4096) < 0.1)
    chain = [i for i in range(60, 4096, 64) if i not in (508, 1660)]
    indices = sorted(set(noise.tolist()) | set(chain))
    fast = outliers.periodic_series(indices, n_files=4096)
    assert fast == outliers_reference.periodic_series(indices, n_files=4096)
    assert any(s.stride == 64 and s.start == 60 and set(chain) <= set(s.members) for s in fast), fast


@pytest.mark.parametrize("name", ["xfs-ram", "ext4-ram", "tmpfs-dir"])
def test_the_probe_analysis_agrees_with_the_reference_on_recorded_probes(name, monkeypatch):
    """analyze() and the sequential decisions with today's series search and with the old one:
    the same report, run by run as the probe job makes it (3 runs, then all 6)."""
    latency, wait = _recorded(name)
    reports = {}
    for impl, search in (("fast", outliers.periodic_series), ("reference", outliers_reference.periodic_series)):
        monkeypatch.setattr(outliers, "periodic_series", search)
        settling = sequential.Settling(3, latency.shape[0])
        made = []
        for runs in (3, latency.shape[0]):
            analysis = outliers.analyze(latency[:runs], wait_ns=wait[:runs])
            settling.after_run(runs - 1, analysis, latency[:runs], wait[:runs])
            made.append((settling.settled(analysis).to_json(), settling.to_json()))
        reports[impl] = made
    assert reports["fast"] == reports["reference"]
    assert any(report["series"] for report, _ in reports["fast"]), "the recorded probes hold series"
    if name == "xfs-ram":  # the inode-chunk series every 64 files from the probe directory's own inode
        assert any(s["stride"] == 64 for report, _ in reports["fast"] for s in report["series"])
