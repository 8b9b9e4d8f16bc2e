#!/usr/bin/env python3
"""How long does the heatmap take to redraw 100,000 files x 10 runs? Against a blank screen.

Runs a headless Textual app holding only the latency heatmap at a terminal size (default
200 x 60), fills it with a synthetic probe matrix (lognormal latencies, a few repeatable
outliers, a level shift), and times a full redraw as the live screen does after new data:
the bucketed values recomputed (numpy), every visible line rendered (render_line -> Strip),
and the whole frame composited and encoded to terminal escape codes. The reference is the
same full frame of the same size with a blank widget instead of the heatmap, timed in the
same process, so the ratio says what the heatmap itself costs on this machine.

Cases: the default view (all files fit: ~500-1000 files per column, bucket max), the same
with the p99 of each bucket (a sort per bucket), and zoomed in to one file per column in the
middle of the files. Target (issue 12): median <= 16 ms (60 frames/s) in every mode, every
frame <= 33 ms. On a shared machine pass --cpu-time to time the drawing thread's CPU only.

    .venv/bin/python bench/tui_heatmap.py [--files 100000] [--runs 10] [--size 200x60] [--reps 15]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.widgets import Static  # noqa: E402

from fsscope.tui.model import LatencyMatrix  # noqa: E402
from fsscope.tui.themes import VARIABLE_DEFAULTS  # noqa: E402
from fsscope.tui.widgets.heatmap import Heatmap  # noqa: E402

BUDGET_MS = 16.0  # median per redraw: 60 frames/s
WORST_MS = 33.0  # any single redraw: 30 frames/s
CPU_TIME = False


def synthetic_matrix(files: int, runs: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.lognormal(mean=np.log(20_000), sigma=0.35, size=(runs, files))
    values[:, files // 3:] *= 1.8  # a level shift
    values[:, 22] *= 15  # a repeatable outlier (XFS short-form limit)
    values[:, 64::64] *= 4  # a series
    values[rng.random((runs, files)) < 0.001] *= 30  # noise: slow in one run only
    return values.astype(np.int64)


class BenchApp(App):
    def __init__(self, blank: bool):
        super().__init__()
        self.blank = blank

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(VARIABLE_DEFAULTS)

    def compose(self) -> ComposeResult:
        yield Static("", id="w") if self.blank else Heatmap(id="w")


def full_frame(app: App, console: Console) -> None:
    """Composite the whole screen and encode it as the terminal would receive it."""
    update = app.screen._compositor.render_update(full=True)  # noqa: SLF001 - what a repaint does
    console.file = io.StringIO()
    console.print(update)


async def measure(blank: bool, matrix: np.ndarray | None, size: tuple[int, int], reps: int,
                  setup=None) -> list[float]:
    app = BenchApp(blank)
    times = []
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.05)
        widget = app.query_one("#w")
        if not blank:
            widget.set_matrix(LatencyMatrix.from_array(matrix))
            if setup is not None:
                setup(widget)
            await pilot.pause(0.05)
        console = Console(width=size[0], height=size[1], file=io.StringIO(), force_terminal=True,
                          color_system="truecolor", legacy_windows=False)
        for _ in range(reps + 2):
            t0 = time.perf_counter() if not CPU_TIME else time.thread_time()
            if blank:
                widget.refresh()
            else:
                widget._invalidate(buckets=True)  # noqa: SLF001 - as after new samples
                widget.refresh()
            full_frame(app, console)
            times.append(((time.perf_counter() if not CPU_TIME else time.thread_time()) - t0) * 1e3)
    return times[2:]


def zoom_to_middle(widget: Heatmap) -> None:
    widget.zoom = 1
    widget._invalidate(buckets=True)  # noqa: SLF001
    widget._update_virtual_size()  # noqa: SLF001
    widget.move_to_file(widget.matrix.files // 2)


def p99_buckets(widget: Heatmap) -> None:
    widget.aggregate = "p99"


async def main_async(args) -> int:
    width, height = (int(v) for v in args.size.lower().split("x"))
    size = (width, height)
    matrix = synthetic_matrix(args.files, args.runs)
    global CPU_TIME
    CPU_TIME = args.cpu_time  # before the reference, so both sides of the ratio use one clock
    reference = statistics.median(await measure(True, None, size, args.reps))
    print(f"heatmap redraw, {args.files:,} files x {args.runs} runs, terminal {width}x{height}, "
          f"median of {args.reps} (full frame: compute + render + encode), "
          f"{'CPU time of the drawing thread' if CPU_TIME else 'wall time'}")
    print(f"  reference: blank screen of the same size          {reference:7.2f} ms")
    worst_median = worst_frame = 0.0
    for label, setup in (("fit (bucket max)", None), ("fit (bucket p99)", p99_buckets),
                         ("1 file per column, middle", zoom_to_middle)):
        times = await measure(False, matrix, size, args.reps, setup)
        median = statistics.median(times)
        worst_median, worst_frame = max(worst_median, median), max(worst_frame, max(times))
        print(f"  heatmap {label:32s}          {median:7.2f} ms  ({median / reference:5.1f}x reference, "
              f"max {max(times):.2f} ms)")
    ok = worst_median <= BUDGET_MS and worst_frame <= WORST_MS
    print(f"  target: median <= {BUDGET_MS:.0f} ms and every frame <= {WORST_MS:.0f} ms in every mode: "
          f"{'OK' if ok else 'MISSED'} (worst median {worst_median:.2f} ms, worst frame {worst_frame:.2f} ms)")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--size", default="200x60", help="terminal WIDTHxHEIGHT")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the drawing thread's CPU (thread_time) instead of the wall clock: "
                             "steadier when other work shares the cores")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
