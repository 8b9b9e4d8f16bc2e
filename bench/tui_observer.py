#!/usr/bin/env python3
"""Does watching a probe in the TUI change what it measures? (the observer effect)

Runs the same probe on the same kind of target (a fresh RAM image each time), in one
benchmark run, alternating in ABBA order (headless, TUI, TUI, headless, ...):

- headless: ``fsscope run probe`` (the CLI's progress bar is the only consumer);
- TUI live: the real ``fsscope`` investigator in a real terminal (tmux, WIDTHxHEIGHT),
  started with the keyboard (ctrl+r), drawing the heatmap, sparklines and flags while the
  probe runs.

It pools the calls of each side and compares the per-call latencies: two-sample Kolmogorov-Smirnov distance (the largest
gap between the two CDFs) and the ratio of the medians, TUI vs headless. Budget: K-S <= 0.1
and median ratio <= 1.1. The noise floor printed beside it is the same comparison between
the odd and the even headless rounds: what two identical configurations differ by here.

    .venv/bin/python bench/tui_observer.py [--files 20000] [--runs 3] [--rounds 2] [--recipe xfs-default] [--size 512M]
    .venv/bin/python bench/tui_observer.py --smoke   # seconds: 300 files x 1 run, 2 rounds; no verdict
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import benchlib  # noqa: E402

KS_BUDGET = 0.1
MEDIAN_BUDGET = 1.1


def ks_distance(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import ks_2samp

    return float(ks_2samp(a, b).statistic)


def latencies(run_dir: Path) -> np.ndarray:
    values = np.load(run_dir / "latency_ns.npy")
    return values[values >= 0].astype(np.int64)


def runs_in(home: Path) -> list[Path]:
    root = home / "runs"
    return sorted(p for p in root.iterdir() if (p / "manifest.json").exists()) if root.is_dir() else []


def run_headless(args, env: dict) -> Path:
    home = Path(env["FSSCOPE_HOME"])
    before = set(runs_in(home))
    cmd = [sys.executable, "-m", "fsscope", "run", "probe", "-p", f"files={args.files}", "-p", f"runs={args.runs}",
           "-p", f"sync_before={args.sync_before}", "--ram", "--size", args.size, "--recipe", args.recipe]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    if out.returncode != 0:
        raise SystemExit(f"headless probe failed: {out.stderr.strip()[-500:]}")
    (new,) = set(runs_in(home)) - before
    return new


TMUX_SOCKET = f"fsscope-observer-{os.getpid()}"  # a private tmux server


def tmux(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", TMUX_SOCKET, "-f", "/dev/null", *args], capture_output=True, text=True,
                          check=check)


def run_tui(args, env: dict) -> tuple[Path, float]:
    """The investigator in tmux; returns the run directory and the wall time it was live."""
    home = Path(env["FSSCOPE_HOME"])
    before = set(runs_in(home))
    session = f"fsscope-observer-{os.getpid()}"
    width, height = args.terminal.split("x")
    child = [sys.executable, str(Path(__file__).resolve()), "--tui-child", "--files", str(args.files),
             "--runs", str(args.runs), "--recipe", args.recipe, "--size", args.size,
             "--sync-before", args.sync_before]
    env_prefix = [f"FSSCOPE_HOME={env['FSSCOPE_HOME']}"]
    if "FSSCOPE_RAM_DIR" in env:
        env_prefix.append(f"FSSCOPE_RAM_DIR={env['FSSCOPE_RAM_DIR']}")
    command = "env " + " ".join(env_prefix + ["TERM=xterm-256color", "COLORTERM=truecolor"]) + " " + " ".join(child)
    tmux("new-session", "-d", "-s", session, "-x", width, "-y", height, command)
    try:
        deadline = time.monotonic() + 30
        while "1 · Target" not in tmux("capture-pane", "-p", "-t", session, check=False).stdout:
            if time.monotonic() > deadline:
                raise SystemExit("the TUI did not come up in tmux")
            time.sleep(0.2)
        t0 = time.monotonic()
        tmux("send-keys", "-t", session, "C-r")
        new: Path | None = None
        deadline = time.monotonic() + 600
        while True:
            fresh = set(runs_in(home)) - before
            if fresh:
                new = fresh.pop()
                import json

                status = json.loads((new / "manifest.json").read_text()).get("status")
                if status in ("ok", "failed", "cancelled", "interrupted"):
                    break
            if time.monotonic() > deadline:
                raise SystemExit("the TUI probe did not finish in time")
            time.sleep(0.2)
        live_s = time.monotonic() - t0
        time.sleep(1.0)  # let the screen settle (flags, report) before quitting
        tmux("send-keys", "-t", session, "q")
        deadline = time.monotonic() + 60
        while tmux("has-session", "-t", session, check=False).returncode == 0:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return new, live_s
    finally:
        if tmux("has-session", "-t", session, check=False).returncode == 0:
            tmux("kill-session", "-t", session, check=False)
        tmux("kill-server", check=False)


def tui_child(args) -> int:
    from fsscope import recipes
    from fsscope.cli.common import parse_size
    from fsscope.targets import TargetSpec
    from fsscope.tui import AppConfig, make_app

    app = make_app(AppConfig(target=TargetSpec("ram", size_bytes=parse_size(args.size)),
                             recipe=recipes.load(args.recipe), jobs=("probe",),
                             job_defaults={"probe": {"files": args.files, "runs": args.runs,
                                                     "sync_before": args.sync_before}},
                             start_screen="setup"))
    app.run()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--recipe", default="xfs-default")
    parser.add_argument("--size", default="512M", help="RAM image size")
    parser.add_argument("--sync-before", default="none", choices=("none", "each"),
                        help="sync() before every call (each) adds the whole machine's I/O noise; "
                        "none (default) times the creat alone, which is what a busy UI could disturb")
    parser.add_argument("--terminal", default="200x55", help="tmux terminal WIDTHxHEIGHT")
    parser.add_argument("--rounds", type=int, default=2,
                        help="headless/TUI pairs, in ABBA order so drift hits both alike (default 2)")
    parser.add_argument("--tui-child", action="store_true", help=argparse.SUPPRESS)
    benchlib.add_smoke(parser, "300 files x 1 run, 2 rounds")
    args = parser.parse_args()
    if args.tui_child:
        return tui_child(args)
    benchlib.start()
    benchlib.smoke(args, files=300, runs=1, rounds=2)
    if os.geteuid() != 0:
        raise SystemExit("needs root (formats RAM images)")
    if shutil.which("tmux") is None:
        raise SystemExit("needs tmux (scripts/setup installs it)")
    home = Path(tempfile.mkdtemp(prefix="fsscope-observer-", dir="/var/tmp"))
    env = os.environ | {"FSSCOPE_HOME": str(home)}
    try:
        print(f"observer effect: probe creat x {args.files} files x {args.runs} runs, sync_before={args.sync_before}, "
              f"RAM image {args.size} with {args.recipe}; TUI in tmux {args.terminal}; "
              f"{args.rounds} rounds in ABBA order; {benchlib.load()}")
        headless_runs: list[np.ndarray] = []
        tui_runs: list[np.ndarray] = []
        live_total = 0.0
        order = ["H", "T", "T", "H"] * ((args.rounds + 1) // 2)
        for kind in order[: 2 * args.rounds]:
            if kind == "H":
                headless_runs.append(latencies(run_headless(args, env)))
            else:
                run, live_s = run_tui(args, env)
                tui_runs.append(latencies(run))
                live_total += live_s
            print(f"  {'headless' if kind == 'H' else 'TUI live':9s} run: median "
                  f"{np.median((headless_runs if kind == 'H' else tui_runs)[-1]) / 1e3:7.2f} µs", flush=True)
        a, t = np.concatenate(headless_runs), np.concatenate(tui_runs)
        med_a, med_t = float(np.median(a)), float(np.median(t))
        ks_t, ratio_t = ks_distance(a, t), med_t / med_a
        half_1, half_2 = np.concatenate(headless_runs[0::2]), np.concatenate(headless_runs[1::2])
        ks_noise = ks_distance(half_1, half_2)
        ratio_noise = float(np.median(half_2)) / float(np.median(half_1))
        print(f"  headless {a.size:8d} calls  median {med_a / 1e3:8.2f} µs  p99 {np.percentile(a, 99) / 1e3:8.2f} µs")
        print(f"  TUI live {t.size:8d} calls  median {med_t / 1e3:8.2f} µs  p99 {np.percentile(t, 99) / 1e3:8.2f} µs"
              f"  ({live_total:.1f} s on screen)")
        print(f"  TUI vs headless:            K-S distance {ks_t:.3f} (budget {KS_BUDGET}), "
              f"median ratio {ratio_t:.3f} (budget {MEDIAN_BUDGET})")
        print(f"  headless vs headless:       K-S distance {ks_noise:.3f}, median ratio {ratio_noise:.3f}"
              f"  (noise floor: odd vs even headless rounds)")
        ok = ks_t <= KS_BUDGET and ratio_t <= MEDIAN_BUDGET
        print(f"  verdict: {'OK' if ok else 'OVER BUDGET'}; {benchlib.load()}")
        return 0 if ok or args.smoke else 1
    finally:
        subprocess.run([sys.executable, "-m", "fsscope", "cleanup"], env=env, capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
