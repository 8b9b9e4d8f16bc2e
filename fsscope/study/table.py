"""The treatments table: one row per run, every factor and metric, for pandas or a notebook.

``treatments.csv`` (flat: id, recipe, fs, row, repeat, each factor, the treatment's metrics
(d-span: its largest file's; ``dspan_all_files_bytes``: over all its files),
per-file metrics as ``file{i}_...``, timing as ``t_...``, error) beside the append-only
``treatments.ndjson`` that holds the full rows. ``pandas.read_csv(RUN / "treatments.csv")``.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsscope.study.plan import Failed, Plan

if TYPE_CHECKING:
    from fsscope.study.explore import ExploreRow

TABLE_FILE = "treatments.csv"
METRIC_COLUMNS = ("d_span_bytes", "extents", "layout_score", "d_span_ideal_ratio", "dspan_all_files_bytes",
                  "layout_score_all_files")
FILE_COLUMNS = ("d_span_bytes", "extents", "size_bytes", "fragments", "layout_score")


def flat_row(row: ExploreRow | Failed, names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": row.id, "recipe": row.recipe, "fs": None, "row": row.row, "repeat": row.repeat}
    out |= {name: row.factors.get(name) for name in names}
    if isinstance(row, Failed):
        return out | {k: None for k in METRIC_COLUMNS} | {"host": "", "error": row.error}
    out["fs"] = row.fs
    out |= {k: getattr(row, k) for k in METRIC_COLUMNS}
    for i, f in enumerate(row.files):
        out |= {f"file{i}_{k}": getattr(f, k) for k in FILE_COLUMNS}
    out |= {f"t_{k}": v for k, v in row.timing_s.items()}
    return out | {"host": row.host, "error": ""}


def save_table(plan: Plan, rows: Sequence[ExploreRow | Failed], directory: Path | str) -> Path:
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
