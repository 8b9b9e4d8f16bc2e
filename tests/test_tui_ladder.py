"""The hygiene ladder in the TUI (#15, the paper's Fig. 3): per step the runs' ops/s and the
relative range, live run by run and from the report; a real two-step ladder (baseline, alloc:
2 runs x 1 s each) started from the setup screen and replayed."""

from __future__ import annotations

import pytest
from pilot_wait import setup_ready, until
from test_tui import SIZE, assert_clean, open_replay, run_plan

from fsscope import recipes
from fsscope.engine.events import Progress, decode
from fsscope.engine.registry import report_from_data
from fsscope.format import format_pct
from fsscope.targets import TargetSpec
from fsscope.tui import AppConfig, make_app
from fsscope.tui import messages as msg
from fsscope.tui.ladder_model import LadderModel
from fsscope.tui.widgets.ladder_view import LadderView


def test_ladder_model_live_then_report():
    model = LadderModel({"steps": ["baseline", "alloc"]})
    assert not model.feed(decode({"kind": "progress", "done": 1, "total": 4}))  # no run's numbers: not ours
    for step, ops in (("baseline", 80.0), ("baseline", 120.0), ("alloc", 99.0)):
        assert model.feed(decode({"kind": "progress", "step": step, "ops_per_s": ops}))
    assert dict(model.relative_ranges()) == {"baseline": pytest.approx(0.4), "alloc": None}  # one alloc run yet
    text = LadderView.render_model(model).plain
    assert "3 runs so far" in text and "40.0%" in text
    model.finish(report_from_data("ladder", {"ladder": [
        {"step": "baseline", "runs": [{"ops_per_s": 80.0, "image_sha256": "a"}, {"ops_per_s": 120.0, "image_sha256": "b"}]},
        {"step": "alloc", "runs": [{"ops_per_s": 99.0, "image_sha256": "c"}, {"ops_per_s": 101.0, "image_sha256": "c"}]},
    ]}))
    assert dict(model.relative_ranges()) == {"baseline": pytest.approx(0.4), "alloc": pytest.approx(0.02)}
    assert model.images == {"baseline": 2, "alloc": 1}
    # 2 runs a step decide nothing: the comparison with the paper says so, and what would decide it
    [note] = model.notes
    assert note.startswith("relative range baseline 40.0% → alloc 2.0%: no step's change is decided")
    assert ": inconclusive — about" in note and "as in the paper" not in note
    text = LadderView.render_model(model).plain
    assert "4 runs final" in text and "1 image checksum at" in text and "2 image checksums" in text


@pytest.mark.privileged
async def test_ladder_live_and_replayed():
    tiny = {"personality": "varmail", "runs": 2, "duration_s": 1.0, "nfiles": 40, "steps": ["baseline", "alloc"],
            "image_size_bytes": 256 << 20}
    # the ladder formats RAM images of its own with the recipe; the target only has to carry it
    app = make_app(AppConfig(target=TargetSpec("ram", size_bytes=64 << 20), recipe=recipes.load("ext4-default"),
                             jobs=("ladder",), job_defaults={"ladder": tiny}))
    messages = []
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await setup_ready(pilot, app)
        assert app.screen.query_one("#param-ladder-steps").value == "baseline,alloc"
        live, job = await run_plan(pilot, app, "the ladder", 300)
        steps = job.report.ladder
        # live: every run's ops/s reached the view before the job's end
        seen = list({id(m): m for m in messages}.values())
        def step(m) -> str | None:  # a run's numbers ride on a progress event's detail
            return m.event.detail.get("step") if isinstance(m, msg.JobEvent) and isinstance(m.event, Progress) else None

        order = [step(m) or "end" for m in seen if step(m) or isinstance(m, msg.JobFinished)]
        assert order == ["baseline", "alloc", "baseline", "alloc", "end"]  # the steps interleave

        def text(screen) -> str:
            return str(screen.job_view.query_one("#ladder-text").content)

        for screen in (live, await open_replay(pilot, app, job.run_id)):
            assert isinstance(screen.job_view, LadderView)
            await until(pilot, lambda s=screen: "4 runs final" in text(s), "the final ladder", 10)
            for step in steps:
                assert step.step in text(screen) and format_pct(step.relative_range) in text(screen)
            assert "1 image checksum at" in text(screen)  # alloc: every run from the same bytes
    assert_clean()
    assert not app.worker_errors
