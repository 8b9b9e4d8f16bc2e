"""The watch report's per-window latencies (the TUI's sparklines), checked against a plain
loop, and the words of its format-change flags."""

from __future__ import annotations

import numpy as np

from fsscope.watch.job import by_window, window_length_s


def test_windows_line_up_and_match_a_plain_loop():
    rng = np.random.default_rng(7)
    window = rng.integers(0, 6, 500)
    window[window == 3] = 4  # a window without a call of this op
    duration_us = rng.lognormal(3, 1, 500)
    p50s, p99s, counts = by_window(duration_us, window, 8)
    assert len(p50s) == len(p99s) == len(counts) == 8  # every op over the same windows
    for w in range(8):
        mine = duration_us[window == w]
        assert counts[w] == len(mine)
        if len(mine):
            assert p50s[w] == round(float(np.percentile(mine, 50)), 1)
            assert p99s[w] == round(float(np.percentile(mine, 99)), 1)
        else:
            assert p50s[w] is None and p99s[w] is None


def test_window_length_keeps_about_forty_windows_never_under_a_quarter_second():
    assert window_length_s(2.0) == 0.25
    assert window_length_s(60.0) == 1.5
    assert 35 <= 600 / window_length_s(600.0) <= 45


def test_a_format_change_whose_names_are_not_known_says_so_in_its_flag():
    from fsscope.watch.job import format_finding
    from fsscope.watch.records import FormatChange

    unknown = FormatChange(dir="/srv/mail/new", event="ext4_allocate_blocks", call=7, op="rename",
                           entries_before=-1, name_bytes=29, arithmetic="the names it held are not known")
    assert format_finding(unknown).title == ("/srv/mail/new: ext4_allocate_blocks at rename with names not known "
                                             "(no exact prediction)")
    known = FormatChange(dir="/srv/mail/new", event="ext4_allocate_blocks", call=7, op="rename",
                         entries_before=101, name_bytes=29, predicted=101, matches=True)
    assert "with 101 names (as the arithmetic predicts)" in format_finding(known).title
