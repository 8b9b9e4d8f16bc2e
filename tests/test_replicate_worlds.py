"""``fsscope replicate --self-test``: every judge tried on simulated worlds without the paper's
effect, with it and reversed; and the judges fixed in issue 34, each on the null data the
issue describes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fsscope.replicate import cao, chopper, geriatrix, mingardi, worlds
from fsscope.replicate.base import ProbeResult, ProbeRun, judge_index, judge_level_shift

TRIALS = 60


# the probe's detectors and the bench's flags: their own tests
JUDGED = tuple(s for s in worlds.SCENARIOS_TRIED if s not in ("probe", "variation"))


@pytest.fixture(scope="module")
def checked() -> worlds.SelfTest:
    return worlds.self_test(trials=50, modes=("full",), scenarios=JUDGED)  # the probe's judges: 10 draws a world


def test_every_judge_meets_the_false_agree_target(checked):
    """No judge agrees on more than 5 % of the worlds without the paper's effect, on a quiet or
    a loaded machine."""
    expected = {(g.scenario, f) for g in worlds.GROUPS for f in g.findings if g.scenario in JUDGED}
    assert {(j.scenario, j.finding) for j in checked.judges} == expected
    table = [(j.finding, j.noise, j.false_agree, j.power, j.reversed_disagree, j.runs_for_80) for j in checked.judges]
    assert all(j.false_agree <= worlds.FALSE_AGREE_TARGET for j in checked.judges), table


def test_every_judge_reaches_its_power_at_a_named_run_count(checked):
    """On a quiet machine each judge has 80 % power at the scenario's runs, or the self-test
    names the larger run count that reaches it; where it has it, the reversed effect is not agreed."""
    table = [(j.finding, j.noise, j.power, j.runs_for_80, j.runs_tried) for j in checked.judges]
    for j in checked.judges:
        if j.noise in ("quiet", "any"):
            assert j.power >= worlds.POWER_TARGET or (j.runs_for_80 is not None and j.runs_for_80 > j.runs), table
            assert (j.power >= worlds.POWER_TARGET) == (j.runs_for_80 == j.runs), table
    assert sum(j.target_met for j in checked.judges) >= len(checked.judges) // 2, table


def test_every_judge_names_what_reaches_its_power_on_a_loaded_machine_too(checked):
    """Loaded as well as quiet, each judge has 80 % power at the scenario's runs, or names a run
    count it tried that reaches it, or a setting it tried that does (with false agree still
    within target): Mingardi's small-buffer comparison needs 2,000 repetitions a side; Geriatrix
    an aging without a time bound."""
    table = [(j.scenario, j.finding, j.noise, j.power, j.runs_for_80, j.setting_for_80) for j in checked.judges]
    assert all(j.power >= worlds.POWER_TARGET or j.runs_for_80 is not None or j.setting_for_80
               for j in checked.judges), table
    small = next(j for j in checked.judges if j.finding == "xfs-ahead-of-ext4-small-buffers" and j.noise == "loaded")
    assert small.runs_for_80 == mingardi.LOADED_RUNS_FOR_80 and small.runs_for_80 in small.runs_tried, table
    aged = [j for j in checked.judges if j.scenario == "geriatrix" and j.noise == "loaded"]
    assert aged and all(j.runs_for_80 is None and j.setting_for_80 == worlds.NO_TIME_BOUND
                        and j.setting_power is not None and j.setting_power >= worlds.POWER_TARGET
                        and j.setting_false_agree is not None
                        and j.setting_false_agree <= worlds.FALSE_AGREE_TARGET for j in aged), table


def test_mingardi_small_buffers_loaded_runs_for_80_is_the_measured_count():
    """The count the verdict names for a loaded machine is where the judge's power crosses
    80 % on loaded sweeps (sd of log throughput 0.7), tried, not extrapolated; the verdict's
    own estimate from a loaded spread is of that order."""
    assert worlds.SWEEP_NOISE["loaded"] == mingardi.LOADED_SPREAD
    rng = np.random.default_rng(11)

    def power(repetitions: int, draws: int = 200) -> float:
        return sum(worlds._small_buffer_verdicts(rng, "effect", repetitions, "loaded", "full")
                   ["xfs-ahead-of-ext4-small-buffers"] == "agree" for _ in range(draws)) / draws

    assert power(mingardi.LOADED_RUNS_FOR_80) >= worlds.POWER_TARGET
    assert power(1500) < worlds.POWER_TARGET
    xfs, ext4 = (speed * np.exp(rng.normal(0, 0.7, 30)) for speed in (worlds.XFS_AHEAD, 1.0))
    found = mingardi.judge_small_buffers(xfs, ext4)
    if found.verdict == "inconclusive":
        assert 500 < found.statistic["runs_for_80"] < 5000 and f"{mingardi.LOADED_RUNS_FOR_80:,}" in found.why


def test_geriatrix_names_an_aging_without_a_time_bound_that_the_cli_accepts():
    """Where a time-bounded aging stopped short, the verdict names the same aging without the
    bound, as a command ``fsscope age`` parses."""
    import shlex

    from fsscope.cli import build_parser

    run = geriatrix.runs(quick=True)[0]
    fresh = {"largest_free_extent_bytes": 128e6, "free_extents": 10, "test_file_fragments": 3,
             "test_file_bytes": 64 << 20}
    aged = {"largest_free_extent_bytes": 4e6, "free_extents": 4000, "test_file_fragments": 600,
            "test_file_bytes": 64 << 20}
    stopped = geriatrix.judge_aged(fresh, aged, "the aging stopped at its time bound",
                                   decides=f"age with no time bound: {run.unbounded_command()}")
    assert all(f.verdict == "inconclusive" and run.unbounded_command() in f.why for f in stopped)
    command = run.unbounded_command().split(" (")[0]
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert args.max_minutes is None and args.profile == run.profile and args.fullness == run.fullness


def test_the_probes_detectors_flag_noise_rarely_and_find_their_effects():
    """Outliers (the analysis' and the probe's sequential flags), series, level shifts and ramps
    on 600-file worlds of simulated quiet noise and of
    noise drawn from runs recorded on this machine (loaded), 30 null draws each: none flags more
    than 5 % of them, and each finds its effect in 80 % of the effect worlds; a step down or a
    falling ramp is seen as such."""
    checked = worlds.self_test(trials=50, modes=("full",), scenarios=("probe",), noises=("quiet", "recorded"))
    table = [(j.finding, j.noise, j.false_agree, j.power, j.reversed_disagree) for j in checked.judges]
    assert {(j.finding, j.noise) for j in checked.judges} == {
        (f, n) for f in ("outlier", "outlier-sequential", "periodic-series", "level-shift", "linear-growth",
                         "linear-decrease")
        for n in ("quiet", "recorded")}
    assert all(j.null_trials == 30 and j.false_agree <= worlds.FALSE_AGREE_TARGET for j in checked.judges), table
    assert all(j.power >= worlds.POWER_TARGET for j in checked.judges), table
    assert all(j.reversed_disagree >= worlds.POWER_TARGET for j in checked.judges
               if j.finding in ("level-shift", "linear-decrease")), table


def test_the_bench_flags_have_null_and_effect_worlds():
    """The variation, periodic and warm-up flags each on worlds without their effect and with
    it: on a quiet machine none flags more than 5 % of the null worlds, and the series flags
    find theirs at a 120 s run's 12 windows (the default 30 s run's 3 windows are too few: the
    self-test names the windows that are enough). The variation flag is held to the claim it
    makes, the spread measured (the machine's included) above the threshold's, on both machines:
    whose spread it is, Cao's judge decides with its baseline."""
    checked = worlds.self_test(trials=40, scenarios=("variation",))
    table = [(j.finding, j.noise, j.mode, j.false_agree, j.power, j.runs_for_80) for j in checked.judges]
    assert {j.finding for j in checked.judges} == {"variation-flag", "periodic-dips", "warmup"}
    assert all(j.false_agree <= worlds.FALSE_AGREE_TARGET for j in checked.judges
               if j.noise == "quiet" or j.finding == "variation-flag"), table
    windows = {j.finding: j for j in checked.judges if j.noise == "quiet" and j.mode == "full"}
    assert windows["periodic-dips"].power >= worlds.POWER_TARGET and windows["warmup"].power >= worlds.POWER_TARGET
    short = [j for j in checked.judges if j.noise == "quiet" and j.mode == "quick" and j.finding != "variation-flag"]
    assert all(j.power < worlds.POWER_TARGET and j.runs_for_80 is not None and j.runs_for_80 > 3 for j in short), table


def test_cli_self_test_writes_the_judges(cli, scratch):
    out = scratch / "judges.json"
    done = cli("replicate", "chopper", "--self-test", "--trials", "20", "--json", str(out), timeout_s=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "targets:" in done.stdout and "chopper" in done.stdout
    data = json.loads(out.read_text())
    keys = {"scenario", "finding", "false_agree", "power", "reversed_disagree", "runs_for_80", "trials"}
    assert data["judges"] and all(set(j) >= keys for j in data["judges"])
    assert {(j["scenario"], j["finding"], j["mode"]) for j in data["judges"]} == {
        ("chopper", "ext4-tail-above-xfs", "full"), ("chopper", "ext4-tail-above-xfs", "quick")}
    assert all(j["trials"] == 20 and j["false_agree"] <= worlds.FALSE_AGREE_TARGET for j in data["judges"])
    bad = cli("replicate", "--self-test", "--trials", "3")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    flags = cli("replicate", "variation", "--self-test", "--trials", "10")  # a judge no scenario runs
    assert flags.returncode == 0 and "warmup" in flags.stdout, flags.stderr[-2000:]
    bad = cli("replicate", "variation")  # not a scenario to run
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


# --- the judges fixed in issue 34, on the null data it describes --------------------------------


@pytest.mark.parametrize("noise", ["quiet", "loaded"])
@pytest.mark.parametrize("repetitions", [5, 30])
def test_mingardi_flat_latency_without_saturation_is_not_agreed(noise, repetitions):
    """The old rule agreed on flat latency and no saturation in 95/100 trials; the knee now
    needs a significant rise and a saturation first."""
    rng = np.random.default_rng(34)
    verdicts = [mingardi.judge_knees("k", *worlds.sweep(rng, "null", repetitions, noise), rng=rng)
                for _ in range(TRIALS)]
    assert sum(f.verdict == "agree" for f in verdicts) <= 0.05 * TRIALS
    assert all("no significant rise" in f.why or "does not level off" in f.why
               for f in verdicts if f.verdict == "inconclusive")


def test_mingardi_positions_beside_the_papers_and_disagree_reachable():
    rng = np.random.default_rng(1)
    found = mingardi.judge_knees("k", *worlds.sweep(rng, "effect", 30, "quiet"), rng=rng)
    assert found.verdict == "agree", found.why
    assert "the paper's 512 KiB–1 MiB" in found.why and "the paper's 4 MiB–8 MiB" in found.why
    lat_low, lat_high = found.statistic["latency_range_bytes"]
    assert lat_low <= lat_high < found.statistic["throughput_range_bytes"][0]
    reversed_ = [mingardi.judge_knees("k", *worlds.sweep(rng, "reversed", 30, "quiet"), rng=rng).verdict
                 for _ in range(TRIALS)]
    assert "disagree" in reversed_ and "agree" not in reversed_


def test_mingardi_small_buffers_names_the_runs_it_would_need():
    rng = np.random.default_rng(2)
    xfs, ext4 = 1.0975e5 * rng.lognormal(0, 0.3, 5), 1e5 * rng.lognormal(0, 0.3, 5)
    found = mingardi.judge_small_buffers(xfs, ext4)
    assert found.verdict == "inconclusive"
    assert found.statistic["runs_for_80"] > 5 and "cannot be decided at this size" in found.why


def test_btrfs_step_down_is_a_disagree():
    """A level shift at the predicted file that goes DOWN is not the paper's step up."""
    rng = np.random.default_rng(3)
    report = {"predictions": [{"structure": "btrfs-fs-tree-leaf-split", "index": 45, "tolerance_files": 2,
                               "arithmetic": "16,061 / 351"}]}
    latency = worlds.probe_latency_ns(rng, 5, 200, "quiet")
    run = ProbeRun("btrfs-ram", "btrfs-default", 200, 5)
    down = ProbeResult(run, report | {"level_shifts": [{"index": 45, "before_ns": 60_000, "after_ns": 45_000}]},
                       latency, "")
    up = ProbeResult(run, report | {"level_shifts": [{"index": 46, "before_ns": 45_000, "after_ns": 60_000}]},
                     latency, "")
    kwargs = {"structure": "btrfs-fs-tree-leaf-split", "paper": 45, "paper_says": "", "paper_ratio": 1.3}
    assert judge_level_shift("b", down, **kwargs).verdict == "disagree"
    agreed = judge_level_shift("b", up, **kwargs)
    assert agreed.verdict == "agree" and "1.33x here; 1.3x in the paper" in agreed.why


def test_aota_kono_magnitude_stands_beside_the_position():
    rng = np.random.default_rng(5)
    from fsscope.analysis.outliers import analyze

    latency = worlds.probe_latency_ns(rng, 10, 300, "quiet", {22: 6.0})
    report = analyze(latency).to_json() | {"predictions": [{"structure": "xfs-dir-shortform-to-block",
                                                            "index": 22, "arithmetic": "6 + 15 x 22"}]}
    found = judge_index("sf", ProbeResult(ProbeRun("xfs-ram", "xfs-default", 300, 10), report, latency, ""),
                        structure="xfs-dir-shortform-to-block", paper=22, paper_says="", paper_ratio=54.0)
    assert found.verdict == "agree"
    assert "position agrees" in found.why and "54x in the paper" in found.why
    assert found.statistic["runs_slowest_call"] == 10


@pytest.mark.parametrize("treatments", [24, 400])
def test_chopper_location_shift_without_a_tail_is_not_agreed(treatments):
    """ext4 twice XFS everywhere with no tail of its own: the old location test agreed."""
    rng = np.random.default_rng(6)
    verdicts = [chopper.judge_tail(worlds.d_spans(rng, treatments, worlds.XFS_TAIL, 2.0),
                                   worlds.d_spans(rng, treatments, worlds.XFS_TAIL)).verdict for _ in range(TRIALS)]
    assert sum(v == "agree" for v in verdicts) <= 0.05 * TRIALS
    from scipy.stats import mannwhitneyu

    ext4, xfs = worlds.d_spans(rng, treatments, 0.0, 2.0), worlds.d_spans(rng, treatments, 0.0)
    assert mannwhitneyu(ext4, xfs, alternative="greater").pvalue < 0.01  # the shift the old judge took
    assert chopper.judge_tail(ext4, xfs).verdict != "agree"


def test_geriatrix_unfinished_aging_downgrades_an_agree():
    fresh = {"largest_free_extent_bytes": 128e6, "free_extents": 10, "test_file_fragments": 3,
             "test_file_bytes": 64 << 20}
    aged = {"largest_free_extent_bytes": 4e6, "free_extents": 4000, "test_file_fragments": 600,
            "test_file_bytes": 64 << 20}
    assert [f.verdict for f in geriatrix.judge_aged(fresh, aged, "")] == ["agree", "agree"]
    stopped = geriatrix.judge_aged(fresh, aged, "the aging stopped at its time bound")
    assert [f.verdict for f in stopped] == ["inconclusive", "inconclusive"]
    assert all(f.statistic["verdict_before"] == "agree" and "time bound" in f.why for f in stopped)


def test_cao_needs_its_baseline_and_says_when_the_machine_dominates():
    rng = np.random.default_rng(8)
    ext4, xfs = 1000 * rng.lognormal(0, 0.06, 10), 1000 * rng.lognormal(0, 0.005, 10)
    without = cao.judge_more_variable("v", ext4, xfs)
    assert without.verdict == "inconclusive" and "baseline" in without.why
    busy = 1000 * rng.lognormal(0, 0.06, 10)   # the same configuration varies as much: the machine
    noisy = cao.judge_more_variable("v", ext4, xfs, busy)
    assert noisy.verdict == "inconclusive" and "machine noise dominates" in noisy.why
    assert "more runs would decide" not in noisy.why
    if not cao.log_sd(ext4) > cao.log_sd(busy):  # the machine's spread as large: more runs measure it
        assert "not more runs" in noisy.why and noisy.statistic["runs_to_tell_from_baseline"] is None
    # the file system's spread under a machine's nearly as large: a quieter machine decides, or
    # (since it is there) enough runs, and the verdict says how many at least
    unit = np.linspace(-1.0, 1.0, 10) / np.linspace(-1.0, 1.0, 10).std(ddof=1)
    under = cao.judge_more_variable("v", 1000 * np.exp(0.074 * unit), xfs, 1000 * np.exp(0.05 * unit[::-1]))
    need = under.statistic["runs_to_tell_from_baseline"]
    assert under.verdict == "inconclusive" and "machine noise dominates" in under.why
    assert need is not None and need > 10 and f"at least about {need} runs a side" in under.why
    quiet = 1000 * rng.lognormal(0, 0.005, 10)
    assert cao.judge_more_variable("v", ext4, xfs, quiet).verdict == "agree"


def test_geriatrix_profile_fit_fails_on_a_mismatched_profile():
    """The fit the judge reads can fail: a tree of 2,000 files whose sizes follow the profile
    passes the chi-squared test against it, the same files sized as the profile's reverse do not,
    and the judge then calls even a fragmented image inconclusive (aged to some other state)."""
    from fsscope.aging import fit
    from fsscope.aging.profile import load_profile

    profile = load_profile("small")
    rng = np.random.default_rng(9)
    target = profile.size_fractions()
    as_profile = rng.multinomial(2000, target)
    mismatched = rng.multinomial(2000, target[::-1])
    assert fit.chi2_fit(as_profile, target).p_value >= 0.05
    rejected = fit.chi2_fit(mismatched, target)
    assert rejected.p_value is not None and rejected.p_value < 1e-6
    report = {"stop_reason": "done", "fit": {"size": rejected.to_json()}}
    unfinished = geriatrix._unfinished(report)
    assert "the fit rejects the profile's size" in unfinished
    fresh = {"largest_free_extent_bytes": 128e6, "free_extents": 10, "test_file_fragments": 3,
             "test_file_bytes": 64 << 20}
    aged = {"largest_free_extent_bytes": 4e6, "free_extents": 4000, "test_file_fragments": 600,
            "test_file_bytes": 64 << 20}
    assert [f.verdict for f in geriatrix.judge_aged(fresh, aged, unfinished)] == ["inconclusive"] * 2
    assert geriatrix._unfinished({"stop_reason": "done", "fit": {"size": fit.chi2_fit(as_profile, target).to_json()}}) == ""
