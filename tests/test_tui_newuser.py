"""The investigator as a new user meets it (issue 12): what is on screen must be true.

Each test drives the real app with Pilot and reads what the screen shows (the exported
screenshot), waiting on conditions (a message handled, a value reached), never on a fixed pause.
"""

from __future__ import annotations

import html
import re
import time

from fsscope.tui import AppConfig, make_app
from fsscope.tui import messages as msg
from fsscope.tui.model import JobState, format_ns
from fsscope.tui.widgets.heatmap import Heatmap

SIZE = (160, 48)


async def wait_for(pilot, condition, what: str, timeout_s: float = 20.0) -> None:
    """Poll ``condition`` between frames until it holds (the app keeps processing meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await pilot.pause()


def screen_text(app) -> str:
    """What the terminal shows, as text (tags of the SVG screenshot stripped)."""
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


def legend_line(app) -> str:
    text = screen_text(app)
    line = next((ln for ln in text.splitlines() if "log scale, mid" in ln), "")
    assert line, "no legend on screen"
    return line


def start_probe(live, index: int, files: int, runs: int, run_id: str) -> None:
    live.jobs = [JobState(i, "probe", {"files": files, "runs": runs}) for i in range(index + 1)]
    live.views = {}
    live.post_message(msg.JobStarted(index, "probe", run_id, "/nonexistent-run", 1))


async def test_legend_always_shows_the_scale_the_cells_use():
    """Batches whose latencies widen the range: after each one is drawn, the legend on screen
    names the heatmap's current low and high ends (it used to keep 1 µs … 1 ms)."""
    app = make_app(AppConfig(is_root=False, start_screen="live"))
    async with app.run_test(size=SIZE) as pilot:
        live = app.live
        await wait_for(pilot, lambda: live.is_mounted, "the live screen")
        start_probe(live, 0, files=300, runs=2, run_id="run-a")
        await wait_for(pilot, lambda: live.shown == 0, "the job's view")
        heatmap = live.query_one("#heatmap", Heatmap)
        batches = [(0, [45_000] * 100), (100, [20_000] * 50 + [1_580_000] * 50), (200, [9_000_000] * 100)]
        for n, (start, latency_ns) in enumerate(batches, 1):
            live.post_message(msg.SamplesArrived(0, 0, start, latency_ns, float(n)))
            await wait_for(pilot, lambda: live.views[0].matrix.measured == start + len(latency_ns), "the batch")
            await pilot.pause()
            low_ns, high_ns = heatmap.scale_ns
            line = legend_line(app)
            assert format_ns(low_ns) in line and format_ns(high_ns) in line, (line, low_ns, high_ns)
        assert heatmap.scale_ns[0] < 20_000 and heatmap.scale_ns[1] >= 9_000_000


async def test_a_second_job_shows_nothing_of_the_first():
    """Cursor line, calls/s reading, colour scale: a new job's view starts empty."""
    app = make_app(AppConfig(is_root=False, start_screen="live"))
    async with app.run_test(size=SIZE) as pilot:
        live = app.live
        await wait_for(pilot, lambda: live.is_mounted, "the live screen")
        start_probe(live, 0, files=200, runs=2, run_id="run-a")
        await wait_for(pilot, lambda: live.shown == 0, "the first job's view")
        for run in range(2):
            live.post_message(msg.SamplesArrived(0, run, 0, [38_100 + run] * 200, 1.0 + run))
        await wait_for(pilot, lambda: live.views[0].matrix.measured == 400, "the first job's samples")
        heatmap = live.query_one("#heatmap", Heatmap)
        heatmap.focus()
        await pilot.press("right", "down")
        await wait_for(pilot, lambda: "cursor: run 2" in screen_text(app), "the cursor reading")
        assert "/s" in screen_text(app)  # a calls/s reading of the first job
        first_scale = heatmap.scale_ns

        start_probe(live, 1, files=50, runs=1, run_id="run-b")
        await wait_for(pilot, lambda: live.shown == 1, "the second job's view")
        await pilot.pause()
        text = screen_text(app)
        assert "cursor: run 2" not in text and "38.1 µs" not in text
        rate_row = next(ln for ln in text.splitlines() if "calls/s" in ln or "rate" in ln)
        assert "/s" not in rate_row.split("calls/s")[-1], rate_row
        assert heatmap.matrix is live.views[1].matrix and heatmap.matrix.measured == 0
        assert heatmap.scale_ns != first_scale  # back to the default until the new job's data
