"""The probe's series, shifts and ramps held to permuted worlds of their own matrix
(``analysis/nullgate``): what the matrix's noise, its files shuffled within each run, gives
as strong is not a flag."""

from __future__ import annotations

import math

import numpy as np

from fsscope.analysis import nullgate
from fsscope.analysis.findings import Series
from fsscope.analysis.outliers import analyze
from fsscope.replicate.worlds import probe_latency_ns


def test_a_real_series_stands_against_every_permuted_world():
    rng = np.random.default_rng(34)
    latency = probe_latency_ns(rng, 10, 600, "quiet", {i: 1.5 for i in range(5, 600, 21)})
    analysis = analyze(latency)
    (series,) = analysis.series
    assert (series.start, series.stride) == (5, 21) and series.chance is not None
    assert analysis.null_gate["rejected"] == []
    # that unlikely, no permuted world is drawn for it; a weaker one is held to all 19
    assert series.chance < nullgate.SURE_CHANCE and analysis.null_gate["worlds"] == 0

    assert analysis.null_gate["gated"] == ["series"]  # shifts and ramps only when asked (the final analysis)
    assert nullgate.FALSE_FLAG_BOUND == 1 / 20


def test_a_finding_no_stronger_than_a_permuted_worlds_is_taken_back():
    """A series as likely as 1 in 2 (what a search at alpha 1 finds in noise) falls to the first
    permuted world that has a chain as unlikely; the matrix's real analysis is the search."""
    rng = np.random.default_rng(35)
    latency = probe_latency_ns(rng, 10, 600, "loaded")

    def search(matrix, least_chance, levels):
        found = analyze(matrix, null_worlds=0, series_alpha=1.0)
        return nullgate.Found(list(found.series), list(found.level_shifts), list(found.linear_growth),
                              found.median_curve_ns)

    weak = Series(start=3, stride=40, count=5, missing=1, chance=0.5, members=(3, 43, 83, 163))
    gated = nullgate.gate(latency, nullgate.Found([weak], [], [], np.full(600, 50_000.0)), search)
    assert gated.series == []
    (taken,) = gated.rejected
    assert taken["kind"] == "series" and taken["finding"]["stride"] == 40
    assert taken["null_score"] >= taken["score"] == round(-math.log(0.5), 3)
    assert gated.worlds == taken["world"] < nullgate.NULL_WORLDS  # the worlds stop once every finding fell


def test_a_step_is_held_to_the_worlds_only_in_the_final_analysis():
    rng = np.random.default_rng(36)
    latency = probe_latency_ns(rng, 8, 400, "quiet", step=(200, 1.4))
    live = analyze(latency)
    final = analyze(latency, gate_levels=True)
    assert [s.index for s in live.level_shifts] == [s.index for s in final.level_shifts] != []
    assert final.null_gate["gated"] == ["series", "level_shifts", "linear_growth"]
    assert final.null_gate["worlds"] == nullgate.NULL_WORLDS and final.null_gate["rejected"] == []


def test_one_run_is_not_gated():
    """Nothing aligns across one run for a permutation to take away: the single-run report
    already says it cannot tell structure from noise."""
    rng = np.random.default_rng(37)
    analysis = analyze(probe_latency_ns(rng, 1, 300, "quiet", {i: 3.0 for i in range(7, 300, 30)}))
    assert analysis.null_gate["worlds"] == 0 and analysis.settings["single_run"]


def test_a_faint_series_is_held_to_all_nineteen_worlds():
    """A series as unlikely as 1e-4 is below the search's alpha but not sure: every permuted
    world is searched for a chain as unlikely (the analysis' own search, asked at that chance),
    and none of these loaded-noise worlds has one."""
    rng = np.random.default_rng(38)
    latency = probe_latency_ns(rng, 10, 600, "loaded")
    asked = []

    def search(matrix, least_chance, levels):
        asked.append(least_chance)
        found = analyze(matrix, null_worlds=0, series_alpha=2 * least_chance)
        return nullgate.Found(list(found.series), [], [], found.median_curve_ns)

    faint = Series(start=5, stride=21, count=28, missing=10, chance=1e-4, members=tuple(range(5, 600, 21))[:18])
    gated = nullgate.gate(latency, nullgate.Found([faint], [], [], np.full(600, 50_000.0)), search, levels=False)
    assert gated.series == [faint] and gated.rejected == []
    assert gated.worlds == len(asked) == nullgate.NULL_WORLDS and all(math.isclose(a, 1e-4) for a in asked)
