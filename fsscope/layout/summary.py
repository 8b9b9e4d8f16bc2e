"""The headline numbers of a fragmentation measurement (a frag report, or the ``fresh`` /
``aged`` halves of an age report) and the fresh-vs-aged table that shows them, shared by
``fsscope age``/``frag``, ``fsscope compare`` and the TUI."""

from __future__ import annotations

from typing import Any

from fsscope.format import MISSING, format_bytes, format_count, format_pct, ratio_of
from fsscope.layout.records import Measurement
from fsscope.records import convert

# (row label, key of summary_rows, kind of number: pct | bytes | int | num)
FRAG_ROWS = (
    ("fullness", "fullness", "pct"),
    ("free space", "free_bytes", "bytes"),
    ("free extents", "free_extents", "int"),
    ("largest free extent", "largest_free_extent_bytes", "bytes"),
    ("mean free extent", "mean_free_extent_bytes", "bytes"),
    ("test file", "test_file_bytes", "bytes"),
    ("test-file fragments", "test_file_fragments", "int"),
    ("test-file extents", "test_file_extents", "int"),
    ("test-file d-span", "test_file_d_span_bytes", "bytes"),
    ("test-file layout index", "test_file_layout_index", "num"),
)


def measurement_of(data: Measurement | dict[str, Any] | None) -> Measurement:
    """A measurement record from a record (as it is) or plain data (a report read as JSON)."""
    if isinstance(data, Measurement):
        return data
    return convert(data or {}, Measurement, "fragmentation measurement")


def summary_rows(measurement: Measurement | dict[str, Any] | None) -> dict[str, float | None]:
    """The headline numbers of one measurement (for side-by-side tables and comparisons)."""
    m = measurement_of(measurement)
    hist, test, space = m.free_space, m.test_file, m.space
    return {
        "fullness": space.fullness if space else None,
        "free_bytes": space.free_bytes if space else None,
        "free_extents": hist.free_extent_count if hist else None,
        "largest_free_extent_bytes": hist.largest_free_extent_bytes if hist else None,
        "mean_free_extent_bytes": hist.mean_free_extent_bytes if hist else None,
        "test_file_bytes": test.size_bytes if test else m.test_file_bytes,
        "test_file_fragments": test.fragment_count if test else None,
        "test_file_extents": test.extent_count if test else None,
        "test_file_d_span_bytes": test.d_span_bytes if test else None,
        "test_file_layout_index": test.layout_index if test else None,
    }


def format_value(value: float | None, kind: str) -> str:
    if kind == "pct":
        return format_pct(value)
    if kind == "bytes":
        return format_bytes(value)
    if kind == "num":
        return MISSING if value is None else f"{value:.3f}"
    return format_count(value)


def frag_table(fresh: Measurement | dict[str, Any] | None, aged: Measurement | dict[str, Any] | None) -> list[tuple[str, str, str, str]]:
    """Rows of (what, fresh, aged, aged/fresh as "1.5×"); the test file's size is the same
    on both sides, fullness and the layout index have no ratio."""
    a, b = summary_rows(fresh), summary_rows(aged)
    return [(label, format_value(a[key], kind), format_value(b[key], kind),
             "" if kind in ("pct", "num") or key == "test_file_bytes" else ratio_of(a[key], b[key]))
            for label, key, kind in FRAG_ROWS]
