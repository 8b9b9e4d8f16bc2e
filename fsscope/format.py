"""Numbers as fsscope shows them, one way for the CLI and the TUI alike: sizes, ratios
("1.5×"), latencies, durations, percentages, and the cells of a comparison table.

No Rich and no Textual here (plain strings; ``ratio_cell`` marks what stands out with Rich
markup, which both the CLI's tables and the TUI's render)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

MISSING = "–"

# control characters (C0, DEL, C1: ESC starts every terminal sequence, OSC 52 writes the
# clipboard) and the Unicode format characters that hide text or reverse its order
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
# what a spreadsheet reads as a formula at the start of a cell (OWASP: CSV injection)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_SIGNED_NUMBER = re.compile(r"[-+]([\d.,]+([eE][-+]?\d+)?( ?[%a-zA-Zµ×]+)?)?")


def visible(text: object) -> str:
    """A string someone else may have chosen (a file or directory name, a path, a recipe,
    profile or space name, a note quoting one) as text that shows what it holds: every control
    or invisible format character as its escape (``\\x1b``, ``\\u202e``), so a name can neither
    drive the terminal (clear it, move the cursor, write the clipboard) nor pass for other text.
    Shown through Rich or Textual, the result still goes in as text (``Text``, ``Content``,
    ``rich.markup.escape``), never as markup."""
    return _INVISIBLE.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}",
                          str(text))


def visible_lines(text: object) -> str:
    """:func:`visible` line by line: a message's own line breaks kept, every other control
    character shown as its escape."""
    return "\n".join(visible(line) for line in str(text).split("\n"))


def csv_cell(text: str) -> str:
    """A CSV cell as a spreadsheet should read it: text, never a formula (a cell starting with
    ``= + - @``, tab or CR gets a leading ``'``, as OWASP advises); control characters visible.
    A signed number, with its unit (``-1.5``, ``-12.3%``, ``+2 ms``), and a lone ``-`` (a
    missing value) stay as they are: no formula can hide in them."""
    text = visible(text)
    if text.startswith(_FORMULA_START) and not _SIGNED_NUMBER.fullmatch(text):
        return "'" + text
    return text
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def format_bytes(size_bytes: float | None, missing: str = MISSING) -> str:
    """Binary multiples: ``4096`` → ``4 KiB``, ``1536`` → ``1.5 KiB``, ``None`` → ``–``."""
    if size_bytes is None:
        return missing
    value = float(size_bytes)
    if not math.isfinite(value):
        return missing
    for unit in _BYTE_UNITS:
        if abs(value) < 1024 or unit == _BYTE_UNITS[-1]:
            text = f"{value:.0f}" if value.is_integer() else f"{value:.1f}"
            return f"{text} {unit}"
        value /= 1024
    return f"{size_bytes} B"


def format_ratio(ratio: float | None, missing: str = MISSING) -> str:
    """3 significant digits, the sign after: ``0.0123×``, ``1.5×``, ``1,642×``."""
    if ratio is None or not math.isfinite(ratio):
        return missing
    if ratio >= 1000:
        return f"{ratio:,.0f}×"
    if ratio >= 0.001 or ratio == 0:
        return f"{ratio:.3g}×"
    return "<0.001×"


def ratio_of(a: float | None, b: float | None, missing: str = MISSING) -> str:
    """``b / a`` as :func:`format_ratio` writes it (``missing`` when either is absent or a is 0)."""
    if a is None or b is None or not a:
        return missing
    return format_ratio(b / a, missing)


def format_measure(value: object, missing: str = MISSING) -> str:
    """A paper's number or a measurement as a scenario gives it: a mapping as "name value, …"
    (one per run or setup), anything else as itself."""
    if value is None:
        return missing
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return str(value)


def format_pct(fraction: float | None, missing: str = MISSING, digits: int = 1) -> str:
    """``0.123`` → ``12.3%`` (``digits`` after the point)."""
    return missing if fraction is None else f"{fraction:.{digits}%}"


def format_count(value: float | None, missing: str = MISSING) -> str:
    return missing if value is None else f"{value:,.0f}"


def format_duration(seconds: float | None) -> str:
    """``75`` → ``1:15``, ``3725`` → ``1:02:05``."""
    if seconds is None or math.isnan(seconds):
        return MISSING
    seconds = int(round(seconds))
    if seconds < 3600:
        return f"{seconds // 60:d}:{seconds % 60:02d}"
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def format_ns(value_ns: float | None) -> str:
    """A latency for humans: 850 ns, 12.3 µs, 4.56 ms, 1.20 s."""
    if value_ns is None or value_ns < 0 or math.isnan(value_ns):
        return "not measured"
    if value_ns < 1_000:
        return f"{value_ns:.0f} ns"
    if value_ns < 1_000_000:
        return f"{value_ns / 1e3:.3g} µs"
    if value_ns < 1_000_000_000:
        return f"{value_ns / 1e6:.3g} ms"
    return f"{value_ns / 1e9:.3g} s"


def format_us(value_ns: float | None, missing: str = "-") -> str:
    """A latency in a column headed µs: ``12345`` → ``12.3``, ``1,234.5``; 100 ms and more
    as ``250 ms`` (a µs figure that long is unreadable)."""
    if value_ns is None or not math.isfinite(value_ns):
        return missing
    return f"{value_ns / 1e3:,.1f}" if value_ns < 1e8 else f"{value_ns / 1e6:,.0f} ms"


SPARK_GLYPHS = "▁▂▃▄▅▆▇█"


def spark(values: Iterable[float | None], lo: float | None = None, hi: float | None = None, *, log: bool = False) -> str:
    """A sparkline, one glyph per value: ▁ at ``lo`` to █ at ``hi`` (by default the finite
    values' range; a flat series is all ▁); None or nan is a space; "" when nothing is finite.
    ``log``: on a log10 scale. Rows that share ``lo``/``hi`` share a scale."""
    def scaled(v: float) -> float:
        return math.log10(max(v, 1e-12)) if log else v

    finite = [scaled(v) for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return ""
    a = min(finite) if lo is None else scaled(lo)
    b = max(finite) if hi is None else scaled(hi)
    top = len(SPARK_GLYPHS) - 1
    return "".join(" " if v is None or not math.isfinite(v)
                   else SPARK_GLYPHS[0 if b - a < 1e-12 else max(0, min(top, int((scaled(v) - a) / (b - a) * (top + 0.999))))]
                   for v in values)


# how a comparison row's values print (see fsscope.report.compare): ns → µs, bytes, fraction → %,
# integers, p-values, plain numbers, or text
def format_cell(value: object, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "text" or not isinstance(value, (int, float)):
        return str(value)
    if kind == "us":
        return format_us(value)
    if kind == "bytes":
        return format_bytes(value)
    if kind == "pct":
        return format_pct(value)
    if kind == "int":
        return f"{value:,.0f}"
    if kind == "p":
        return f"{value:.3f}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def ratio_cell(row: Any) -> str:
    """The B / A cell of a comparison row (``analysis.compare.Row``); more than 10% apart
    stands out (bold)."""
    if row.kind == "text":
        return "" if row.a == row.b else "[yellow]differs[/]"
    r = row.ratio
    if r is None:
        return "-"
    text = format_ratio(r)
    return text if 0.9 <= r <= 1.1 else f"[bold]{text}[/]"
