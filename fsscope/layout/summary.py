"""The headline numbers of a fragmentation measurement (a frag report, or the ``fresh`` /
``aged`` halves of an age report) and the fresh-vs-aged table that shows them, shared by
``fsscope age``/``frag``, ``fsscope compare`` and the TUI."""

from __future__ import annotations

from fsscope.format import MISSING, format_bytes, format_count, format_pct, ratio_of

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


def summary_rows(measurement: dict | None) -> dict[str, float | None]:
    """The headline numbers of one measurement (for side-by-side tables and comparisons)."""
    m = measurement if isinstance(measurement, dict) else {}
    hist = m.get("free_space") or {}
    test = m.get("test_file") or {}
    space = m.get("space") or {}
    return {
        "fullness": space.get("fullness"),
        "free_bytes": space.get("free_bytes"),
        "free_extents": hist.get("free_extent_count"),
        "largest_free_extent_bytes": hist.get("largest_free_extent_bytes"),
        "mean_free_extent_bytes": hist.get("mean_free_extent_bytes"),
        "test_file_bytes": test.get("size_bytes", m.get("test_file_bytes")),
        "test_file_fragments": test.get("fragment_count"),
        "test_file_extents": test.get("extent_count"),
        "test_file_d_span_bytes": test.get("d_span_bytes"),
        "test_file_layout_index": test.get("layout_index"),
    }


def format_value(value: float | None, kind: str) -> str:
    if kind == "pct":
        return format_pct(value)
    if kind == "bytes":
        return format_bytes(value)
    if kind == "num":
        return MISSING if value is None else f"{value:.3f}"
    return format_count(value)


def frag_table(fresh: dict | None, aged: dict | None) -> list[tuple[str, str, str, str]]:
    """Rows of (what, fresh, aged, aged/fresh as "1.5×"); the test file's size is the same
    on both sides, fullness and the layout index have no ratio."""
    a, b = summary_rows(fresh), summary_rows(aged)
    return [(label, format_value(a[key], kind), format_value(b[key], kind),
             "" if kind in ("pct", "num") or key == "test_file_bytes" else ratio_of(a[key], b[key]))
            for label, key, kind in FRAG_ROWS]
