"""Issue 27, what the walk saw in two live views, reproduced against real jobs: the bench
chart dropping a run's last 1-s bin (the table's "1 s min"), and the probe's sparklines
staying "–" for a whole run on a loop-image target."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pilot_wait import setup_ready, until
from test_tui import SIZE, assert_clean, job_view, live_of, plan_over, run_plan
from textual.widgets import Label

from fsscope import recipes
from fsscope.targets import TargetSpec
from fsscope.tui import AppConfig, make_app
from fsscope.tui.widgets.bench_view import BenchView
from fsscope.tui.widgets.spark_panel import ROWS
from fsscope.tui.widgets.throughput_chart import GUTTER


def drawn_seconds(chart) -> list[bool]:
    """Per second of the chart's span: whether a bar is drawn in any of its columns (a cell
    of the bottom plot row in a bar style, or a partial block)."""
    data = chart.data
    width, height = chart.size.width, chart.size.height
    lines = chart._build(width, height)
    styles = chart._styles()
    bar_styles = {styles["full"], styles["band_full"], styles["top"], styles["band_top"]}
    bottom = lines[max(0, height - 2)]
    cells = []
    for segment in bottom:
        cells += [(ch, segment.style) for ch in segment.text]
    plot = cells[GUTTER:width]
    n = len(data.current)
    seconds = [False] * n
    for c, (_ch, style) in enumerate(plot):
        if style in bar_styles:
            seconds[min(n - 1, c * n // len(plot))] = True
    return seconds


async def test_bench_chart_draws_every_second_the_table_counts(scratch):
    """A real bench (2 runs × 3 s of varmail in a directory): the live model has every 1-s bin
    the run recorded (run{r}_counts.npy), the last one included, and the chart draws a bar for
    each of them: the table's 1 s min is a bin on the chart."""
    bench = {"runs": 2, "duration_s": 3.0, "workers": 1, "nfiles": 50, "personality": "varmail",
             "window_sizes_s": [1]}
    app = make_app(AppConfig(is_root=False, target=TargetSpec("dir", str(scratch)), jobs=("bench",),
                             discover_devices=lambda: [], job_defaults={"bench": bench}))
    async with app.run_test(size=SIZE) as pilot:
        live, job = await run_plan(pilot, app, "the bench", 180)
        model = live.views[0].data
        for r in range(2):
            recorded = np.load(Path(job.run_path) / f"run{r}_counts.npy").sum(axis=0) / model.bin_s
            assert model.runs[r].bins == recorded.tolist(), (r, model.runs[r].bins, recorded)
        view = job_view(live, BenchView)
        for r in range(2):
            view.run_choice = r
            view.window_s = 1
            view.update_view(live.views[0])
            await pilot.pause()
            data = view.chart.data
            measured = [v is not None and v > 0 for v in data.current]
            assert drawn_seconds(view.chart) == measured, (r, data.current)
            table_min = view.variation_table.get_row_at(r)[2]
            assert str(table_min).split("..")[0] != "–"
    assert not app.worker_errors


@pytest.mark.privileged
@pytest.mark.parametrize("kind", ["ram", "image"])
async def test_probe_sparklines_fill_in_during_a_run_on_a_loop_image(scratch, kind):
    """A real probe on a RAM image (a loop device, as fsscope's default target): during each
    of its runs every sparkline row (the probe's p50, p99, calls/s; the device's IOPS and
    MB/s; CPU) shows a value at some point, not "–" the whole run. The runs are long enough
    (20,000 files, each call after a sync) for the screen's once-a-second sampler to see them."""
    target = TargetSpec(kind, str(scratch / "probe.img") if kind == "image" else "", size_bytes=512 * 2**20)
    app = make_app(AppConfig(target=target, recipe=recipes.load("ext4-default"),
                             jobs=("probe",), job_defaults={"probe": {"files": 20000, "runs": 2, "max_runs": 2}}))
    seen: dict[tuple[str, str], set[str]] = {}  # (run phase, row) -> the values shown

    def look() -> bool:
        if live.control is None or not live.jobs or live.jobs[0].status != "running":
            return plan_over(live)
        phase = live.jobs[0].phase
        if phase.startswith("run "):
            run = phase.split(":")[0]
            for key, _ in ROWS:
                seen.setdefault((run, key), set()).add(str(live.query_one(f"#spark-value-{key}", Label).render()))
        return plan_over(live)

    async with app.run_test(size=SIZE) as pilot:
        await setup_ready(pilot, app)
        await pilot.press("ctrl+r")
        live = live_of(app)
        await until(pilot, look, "the probe", timeout_s=300)
        job = live.jobs[0]
        assert job.status == "ok", job.error
    assert {run for run, _ in seen} >= {"run 1 of 2", "run 2 of 2"}, seen
    blank = [key for key, texts in seen.items() if not texts - {"–", ""}]
    assert not blank, (blank, {k: v for k, v in seen.items()})
    assert_clean(scratch / "probe.img" if kind == "image" else None)


async def test_a_low_last_second_still_draws_a_bar():
    """The real bench above did not lose its last bin. What can: a last second far below the
    others (a run stopped early, a partial bin) rounds to no eighth of a cell and the chart
    shows nothing there, though the table's 1 s min is that second. A measured second always
    draws at least the lowest block."""
    from textual.app import App

    from fsscope.tui.bench_model import ChartData
    from fsscope.tui.widgets.throughput_chart import ThroughputChart

    class One(App):
        def compose(self):
            yield ThroughputChart(id="chart")

    app = One()
    async with app.run_test(size=(60, 12)) as pilot:
        chart = app.query_one(ThroughputChart)
        chart.set_data(ChartData([20_000.0, 21_000.0, 19_500.0, 50.0], [None] * 4, [None] * 4, [None] * 4,
                                 4.0, 1, 0, ()))
        await until(pilot, lambda: chart.size.width > 0 and chart.data is not None, "the chart")
        assert drawn_seconds(chart) == [True, True, True, True]
