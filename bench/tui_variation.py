"""How long the variation-study view takes at the paper's scale: building its model from the
study's rows (what a replay pays per row, and a live view per treatment) and drawing each
figure.

Synthetic rows shaped like ``treatments.ndjson`` (10 runs of 800 s in 1-s bins, 10 ops with
~800 occupied latency buckets each, as a fileserver row at the paper's run length). Reference
in the same process: ``fsscope.study.variation.report`` on the same rows -- what the CLI pays
for its table -- so "model / report" says what the TUI adds; a figure is compared with a 60-Hz
frame (16.7 ms; Fig. 6 is drawn once per new row, later draws reuse its CDFs).

    .venv/bin/python bench/tui_variation.py [--configurations 40] [--runs 10] [--seconds 800] [--smoke]
"""

from __future__ import annotations

import argparse
import time

import benchlib
import msgspec
import numpy as np

from fsscope.study import variation as study
from fsscope.tui.variation_model import FIGURES, VariationModel
from fsscope.tui.widgets.variation_view import VariationView

OPS = ("create", "delete", "append", "fsync", "close", "open", "read", "stat", "write", "readdir")
PERSONALITIES = ("varmail", "fileserver", "webserver")
FRAME_S = 1 / 60


def synthetic_row(i: int, personality: str, runs: int, seconds: int, rng) -> study.VariationRow:
    fs = ("ext4", "xfs", "btrfs")[i % 3]
    run_rows = []
    for _ in range(runs):
        rate = 1000 * (1 + 0.2 * rng.random())
        hists = []
        for _ in OPS:
            buckets = np.unique(rng.integers(1000, 2500, 800))
            hists.append(np.column_stack([buckets, rng.integers(1, 50, buckets.size)]).tolist())
        run_rows.append({"ops_per_s": rate, "elapsed_s": float(seconds), "op_names": list(OPS),
                         "counts_per_bin": rng.poisson(rate, seconds).tolist(), "latency_hist": hists})
    knobs = {f"{fs}_block_size": (1024, 2048, 4096)[i % 3], "atime": ("noatime", "relatime")[i % 2],
             "scheduler": ("none", "bfq")[i // 2 % 2]}
    # typed as the study's rows are (report() and the model take VariationRow, not its JSON)
    return msgspec.convert({"id": f"{fs}:{personality}-{i:03d}-r0", "row": i, "recipe": f"{fs}:{personality}",
                            "repeat": 0, "fs": fs, "personality": personality, "knobs": knobs, "factors": knobs,
                            "runs": run_rows}, study.VariationRow)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configurations", type=int, default=40, help="per personality (default 40)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seconds", type=int, default=800, help="run length in 1-s bins")
    benchlib.add_smoke(parser, "3 configurations x 2 runs x 30 s")
    args = parser.parse_args()
    benchlib.start()
    benchlib.smoke(args, configurations=3, runs=2, seconds=30)
    rng = np.random.default_rng(1)
    rows = [synthetic_row(i, p, args.runs, args.seconds, rng) for p in PERSONALITIES for i in range(args.configurations)]
    plan = study.make_plan(study.Spec(configurations=2, file_systems=("ext4",), personalities=("varmail",),
                                      duration_s=args.seconds))

    started = time.perf_counter()
    study.report(plan, rows)
    report_s = time.perf_counter() - started
    model = VariationModel({})
    started = time.perf_counter()
    for row in rows:
        model.add_row(row)
    model_s = time.perf_counter() - started
    print(f"{len(rows)} rows ({args.runs} runs x {args.seconds} s, {len(OPS)} ops): report() {report_s:.2f} s, "
          f"model {model_s:.2f} s ({model_s / len(rows) * 1e3:.0f} ms per row), model / report "
          f"{model_s / report_s:.2f}; {benchlib.load()}")
    for figure in FIGURES:
        model.show_figure(figure)
        times = []
        for _ in range(3):
            started = time.perf_counter()
            VariationView.render_figure(model)
            VariationView.render_side(model)
            times.append(time.perf_counter() - started)
        print(f"  figure {figure}: first draw {times[0] * 1e3:6.1f} ms ({times[0] / FRAME_S:5.1f} frames), "
              f"then {np.median(times[1:]) * 1e3:6.1f} ms ({np.median(times[1:]) / FRAME_S:5.1f} frames)")


if __name__ == "__main__":
    main()
