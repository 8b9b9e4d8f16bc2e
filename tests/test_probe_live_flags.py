"""What the probe streams between runs is provisional, and says so: its series, shifts and
ramps are not held to the null worlds until the report's analysis; the final flags replace
them, and a streamed one the final test dropped is shown withdrawn. Run on a recorded probe
(``tests/fixtures/probe_matrices/xfs-ram.npz``: 6 runs of 3,000 creat on XFS at load ~20)
through the job's own per-run steps."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np

from fsscope.analysis.sequential import Settling
from fsscope.engine.events import Finding, decode, encode
from fsscope.tui.model import flag_from_event, with_withdrawn
from fsscope.tui.widgets.flags_panel import FlagsPanel
from fsscope.workloads import probe_job

FIXTURE = Path(__file__).parent / "fixtures" / "probe_matrices" / "xfs-ram.npz"


def _streamed_and_final(runs_min: int, cap: int) -> tuple[list[Finding], list[Finding], object]:
    with np.load(FIXTURE) as recorded:
        latency, wait = recorded["latency_ns"].astype(np.int64), recorded["wait_ns"].astype(np.int64)
    settling, emitted, streamed = Settling(runs_min, cap), {}, []
    ctx = SimpleNamespace(emit=streamed.append)
    for r in range(min(cap, latency.shape[0])):  # as probe_job._one_run does after each run
        analysis = settling.analyze(latency[:r + 1], wait[:r + 1])
        settling.after_run(r, analysis, latency[:r + 1], wait[:r + 1])
        probe_job._emit_new_findings(ctx, settling.settled(analysis), [], emitted,
                                     probe_job._provisional(settling, r + 1 >= settling.cap))
        if settling.done:
            break
    rows = list(range(settling.runs_seen))
    final_analysis = settling.settled(settling.final_analysis(latency, wait, rows))
    final: list[Finding] = []  # the report's flags: the final analysis, nothing provisional
    probe_job._emit_new_findings(SimpleNamespace(emit=final.append), final_analysis, [], {})
    def read(events: list[Finding]) -> list[Finding]:  # as a consumer reads them: from the wire
        return [decode(encode(f)) for f in events]  # type: ignore[misc]

    return read(streamed), read(final), final_analysis


def test_streamed_series_shifts_and_ramps_are_provisional_and_the_final_screen_is_gated():
    streamed, final, analysis = _streamed_and_final(6, 6)
    structure = [f for f in streamed if f.flag in ("series", "levelshift", "lineargrowth")]
    assert structure, "the recorded XFS probe streams series, shifts and ramps"
    assert all(f.provisional == probe_job.NOT_GATED for f in structure)
    # the wire carries it (an older line without it reads as final)
    assert decode(encode(structure[0])).provisional == probe_job.NOT_GATED
    assert decode(encode(Finding(flag="series", title="x"))).provisional == ""
    # outliers of a fixed number of runs are final only after the last run
    outliers = [f for f in streamed if f.flag == "outlier"]
    assert outliers and outliers[0].provisional and not outliers[-1].provisional
    assert analysis.null_gate["gated"] == ["series", "level_shifts", "linear_growth"]
    assert not any(f.provisional for f in final)
    # the final screen: the report's flags, then each streamed one they lack, withdrawn
    shown = with_withdrawn([flag_from_event(f) for f in streamed], [flag_from_event(f) for f in final], "dropped")
    assert shown[:len(final)] == [flag_from_event(f) for f in final]
    assert all(f.withdrawn == "dropped" for f in shown[len(final):])
    assert not any(f.finding.provisional for f in shown if not f.withdrawn)
    # the flags list says "provisional" beside a live one, not beside a final one
    assert "provisional" in FlagsPanel._prompt(flag_from_event(structure[0])).plain
    assert "provisional" not in FlagsPanel._prompt(flag_from_event(final[0])).plain


def test_a_sequential_probes_outlier_is_final_once_decided_slow():
    streamed, final, analysis = _streamed_and_final(3, 6)
    final_outliers = {o.index for o in analysis.outliers}
    decided = [f for f in streamed if f.flag == "outlier" and not f.provisional]
    assert decided and all(f.index in final_outliers for f in decided)
    assert all(f.provisional for f in streamed if f.flag == "outlier" and f.index not in final_outliers)
