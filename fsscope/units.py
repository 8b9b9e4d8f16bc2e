"""Sizes as people type them (binary multiples); fsscope.format writes them."""

from __future__ import annotations

import re

from fsscope.errors import FsscopeError

_SIZE_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


def parse_size_bytes(text: str | int, what: str = "size") -> int:
    """'64M', '64MiB', '1g', '512k', '1048576' -> bytes; FsscopeError naming ``what`` if not."""
    m = _SIZE_RE.fullmatch(str(text))
    if not m:
        raise FsscopeError(f"{what}: cannot read size {text!r} (examples: 512M, 2G, 1GiB)")
    value = int(float(m.group(1)) * (1 << (10 * " kmgt".index(m.group(2).lower() or " "))))
    if value <= 0:
        raise FsscopeError(f"{what}: size must be positive, got {text!r}")
    return value


def list_items(text: str) -> list[str]:
    """The items of a typed list: "4K,64K,1M", "4K 64K", "(4096, 8192)" or "[10, 30]"."""
    return [p for p in text.strip().strip("()[]").replace(",", " ").split() if p]
