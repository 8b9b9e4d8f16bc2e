#!/usr/bin/env python3
"""How long does fsscope take to start? Two starts, each against a reference timed in the same run.

Target (issue 33): ``fsscope --help`` <= 2x ``python -c "import argparse, rich"``, and the TUI to
its Setup screen, complete and painted, <= 2x a minimal Textual app to its first painted screen.

Each side is a fresh process (``sys.executable``, this venv), timed from its start to its exit by
the wall clock here: the CLI prints its help and exits; a TUI side runs headless at 160x48 and
exits at the first frame it draws of its first screen, mounted and complete. For the minimal app
that is its first frame. For fsscope it is the Setup screen as ``fsscope`` opens it (on the data
directory of a fresh ``FSSCOPE_HOME``) with the job's parameter panel mounted (``JobPicker.ready``,
which also gives the focus): a Setup screen without its panel is not what a user waits for. The
time of its first frame is printed beside it ("first frame", not judged; since the panel is
composed with the screen, the same frame), and so are the CPU seconds each side used (a
loaded machine sways them less than the wall clock). The sides alternate (A B, B A, ...) for
``--rounds`` rounds (default 3), the load printed with each round; the figures are medians over
the rounds.
``--smoke``: one round, every side must start and exit 0 (no target checked).

    .venv/bin/python bench/startup.py [--rounds 3] [--smoke]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib  # noqa: E402

import fsscope  # noqa: E402

TARGET_RATIO = 2.0
SIZE = (160, 48)

# A headless app that exits at the first frame of its first screen complete: the first time the
# app hands a frame of that screen, mounted and complete, to its driver (``App._display``, where
# every frame goes in Textual 8), the process ends (``os._exit``: a clean exit would first finish
# what the app does next). Waiting for the frame with Pilot's pauses instead (an earlier version
# of this bench) counted, after it, however long the screen's children took to finish their
# queued work. The first frame of the screen, complete or not, is written to stdout (its
# time.monotonic(), the clock the parent reads too) for the "first frame" figure.
FIRST_PAINT = f"""
import os, time
from textual.app import App

def first_paint(app: App, screen_type, complete=lambda screen: True) -> None:
    display = app._display
    first = []

    def first_frame(screen, renderable) -> None:
        display(screen, renderable)
        if renderable is None or not isinstance(screen, screen_type) or not screen.is_mounted:
            return
        if not first:
            first.append(time.monotonic())
            os.write(1, f"first-frame {{first[0]!r}}\\n".encode())
        if complete(screen):
            os._exit(0)  # at once: not after the work the app goes on with

    app._display = first_frame
    app.run(headless=True, size={SIZE})
"""

MINIMAL_TUI = FIRST_PAINT + """
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

class First(Screen):
    def compose(self):
        yield Header()
        yield Static("a minimal Textual app: its first screen")
        yield Footer()

class Minimal(App):
    def on_mount(self) -> None:
        self.push_screen(First())

first_paint(Minimal(), First)
"""

# complete: the job's parameter panel is mounted (and the focus given), as a user sees it
FSSCOPE_TUI = FIRST_PAINT + """
from fsscope.tui import make_app
from fsscope.tui.screens.setup import SetupScreen

first_paint(make_app(), SetupScreen, lambda screen: screen.query_one("#job-picker").ready)
"""

SIDES = {
    "python -c 'import argparse, rich'": [sys.executable, "-c", "import argparse, rich"],
    "fsscope --help": [sys.executable, "-m", "fsscope", "--help"],
    "minimal Textual app, first screen": [sys.executable, "-c", MINIMAL_TUI],
    "fsscope TUI, Setup screen complete": [sys.executable, "-c", FSSCOPE_TUI],
}
FIRST_FRAME_SHOWN = ("fsscope TUI, Setup screen complete",)
PAIRS = [("fsscope --help", "python -c 'import argparse, rich'"),
         ("fsscope TUI, Setup screen complete", "minimal Textual app, first screen")]


def children_cpu_s() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(argv: list[str], env: dict) -> tuple[float, float | None, float]:
    """Seconds from the process's start to its exit, and to the first frame it reported (None
    where it reports none), and the CPU seconds it used; fails if it did not exit 0."""
    cpu_before = children_cpu_s()
    start = time.monotonic()
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[:3]} exited {done.returncode}: {done.stderr[-2000:]}")
    frames = [float(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("first-frame ")]
    return elapsed, (frames[0] - start if frames else None), children_cpu_s() - cpu_before


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (default 3)")
    parser.add_argument("--smoke", action="store_true", help="one round; only check that every side runs")
    args = parser.parse_args()
    benchlib.start()
    # fsscope's byte code, as pip writes it when it installs fsscope (and as Textual's is, in
    # site-packages): with PYTHONDONTWRITEBYTECODE set, or a fresh checkout, every start would
    # compile fsscope's modules from source, which no installed fsscope does
    compileall.compile_dir(str(Path(fsscope.__file__).parent), quiet=1)
    rounds = 1 if args.smoke else max(1, args.rounds)
    home = Path(tempfile.mkdtemp(prefix="fsscope-startup-"))
    env = os.environ | {"FSSCOPE_HOME": str(home / "fsscope")}
    times: dict[str, list[float]] = {name: [] for name in SIDES}
    first_frames: dict[str, list[float]] = {name: [] for name in SIDES}
    cpu_times: dict[str, list[float]] = {name: [] for name in SIDES}
    try:
        for side_a, side_b in PAIRS:
            for rep, side in benchlib.alternate([side_a, side_b], rounds):
                elapsed, first_frame, cpu = timed(SIDES[side], env)
                times[side].append(elapsed)
                cpu_times[side].append(cpu)
                if first_frame is not None:
                    first_frames[side].append(first_frame)
                seen = f"  (first frame {first_frame:.2f} s)" if first_frame is not None and side in FIRST_FRAME_SHOWN else ""
                print(f"round {rep + 1}: {side:36s} {elapsed:6.2f} s  ({benchlib.load()}){seen}")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if args.smoke:
        print("smoke: every side started and exited 0")
        return 0
    met = True
    print(f"\nmedians over {rounds} alternated rounds (target: each <= {TARGET_RATIO:g}x its reference)")
    for side, reference in PAIRS:
        ours, ref = statistics.median(times[side]), statistics.median(times[reference])
        ratio = ours / ref
        met &= ratio <= TARGET_RATIO
        print(f"  {side:36s} {ours:6.2f} s / {reference} {ref:6.2f} s = {ratio:4.2f}x "
              f"{'ok' if ratio <= TARGET_RATIO else 'OVER'}")
        if side in FIRST_FRAME_SHOWN and first_frames[side]:
            first = statistics.median(first_frames[side])
            print(f"    (its first frame: {first:.2f} s = {first / ref:.2f}x; not judged)")
        # CPU seconds, which other users' load sways less than the wall clock: beside it, not judged
        cpu_ours, cpu_ref = statistics.median(cpu_times[side]), statistics.median(cpu_times[reference])
        print(f"    (CPU: {cpu_ours:.2f} s / {cpu_ref:.2f} s = {cpu_ours / cpu_ref:.2f}x; not judged)")
    print(f"({benchlib.load()} at the end)")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
