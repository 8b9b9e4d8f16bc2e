"""The one way fsscope reads a TOML document it is handed (recipes, spaces, aging profiles).

tomllib recurses once per nesting level, so a few hundred nested arrays are a RecursionError,
and TOML spells integers of any size and ``inf``/``nan``: a file another user wrote must give
one line, never a traceback or a number no field can hold. Nesting is bounded below what the
parser can take, every integer fits 64 bits and every float is finite; each field's own range
is checked by its reader.
"""

from __future__ import annotations

import math
import tomllib

from fsscope.errors import FsscopeError

MAX_DEPTH = 16              # tables and arrays within one another (fsscope's files use 3)
MAX_TEXT_BYTES = 4 << 20    # larger than any profile `fsscope profile capture` writes
INT64 = 2**63


def loads(text: str, where: str, error: type[FsscopeError] = FsscopeError, *, invalid: str = "not valid TOML") -> dict:
    """The document in ``text`` (from ``where``), or ``error`` with one line saying why not
    (``invalid`` starts the line of a syntax error)."""
    if len(text) > MAX_TEXT_BYTES:
        raise error(f"{where}: {len(text):,} characters, more than the {MAX_TEXT_BYTES:,} a TOML file here may have")
    if _bracket_depth(text) > MAX_DEPTH:
        raise error(f"{where}: nested more than {MAX_DEPTH} levels deep")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where}: {invalid}: {exc}") from None
    except RecursionError:  # the scan above is a bound, not a parser: keep the promise anyway
        raise error(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
    _check_values(data, where, error)
    return data


def _bracket_depth(text: str) -> int:
    """How deep ``[`` and ``{`` open, counted over the whole text (brackets in strings and
    comments count too: an over-estimate, which only matters past MAX_DEPTH)."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
    return deepest


def _check_values(data: dict, where: str, error: type[FsscopeError]) -> None:
    stack: list[tuple[object, str, int]] = [(data, "", 0)]
    while stack:  # iterative: dotted keys (a.b.c…) nest without brackets
        value, key, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise error(f"{where}: {key}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, dict):
            stack += [(v, f"{key}.{k}" if key else str(k), depth + 1) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, f"{key}[{i}]", depth + 1) for i, v in enumerate(value)]
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int) and not -INT64 <= value < INT64:
            raise error(f"{where}: {key}: the integer {str(value)[:20]}… does not fit 64 bits")
        elif isinstance(value, float) and not math.isfinite(value):
            raise error(f"{where}: {key}: {value} is not a finite number")
