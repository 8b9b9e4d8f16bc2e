"""The treatments table: one row per run, every factor and metric, for pandas or a notebook.

``treatments.csv`` (flat: id, recipe, fs, row, repeat, each factor, the treatment's metrics
(d-span: its largest file's; ``dspan_all_files_bytes``: over all its files),
per-file metrics as ``file{i}_...``, timing as ``t_...``, error) beside the append-only
``treatments.ndjson`` that holds the full rows. ``pandas.read_csv(RUN / "treatments.csv")``.
"""

from __future__ import annotations

import csv
from pathlib import Path

from fsscope.study.plan import Plan

TABLE_FILE = "treatments.csv"
METRIC_COLUMNS = ("d_span_bytes", "extents", "layout_score", "d_span_ideal_ratio", "dspan_all_files_bytes",
                  "layout_score_all_files")
FILE_COLUMNS = ("d_span_bytes", "extents", "size_bytes", "fragments", "layout_score")


def flat_row(row: dict, names: list[str]) -> dict:
    out = {k: row.get(k) for k in ("id", "recipe", "fs", "row", "repeat")}
    out |= {name: row["factors"].get(name) for name in names}
    out |= {k: row.get(k) for k in METRIC_COLUMNS}
    for i, f in enumerate(row.get("files") or []):
        out |= {f"file{i}_{k}": f.get(k) for k in FILE_COLUMNS}
    out |= {f"t_{k}": v for k, v in (row.get("timing_s") or {}).items()}
    out["host"] = row.get("host", "")
    out["error"] = row.get("error", "")
    return out


def save_table(plan: Plan, rows: list[dict], directory: Path) -> Path:
    names = list(plan.space.names)
    flat = [flat_row(r, names) for r in rows]
    columns: list[str] = []
    for r in flat:
        columns += [c for c in r if c not in columns]
    path = Path(directory) / TABLE_FILE
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(flat)
    return path
