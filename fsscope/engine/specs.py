"""Job parameters from JSON: one check shared by every job's Spec.from_dict."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from fsscope.errors import FsscopeError


def checked_fields(spec_type: type, data: Any, job: str) -> dict[str, Any]:
    """``data`` as a fresh dict, after checking it is a JSON object holding only the
    dataclass's fields (a typo is an error, never silently a default)."""
    if not isinstance(data, dict):
        raise FsscopeError(f"{job} spec must be a JSON object, not {type(data).__name__}")
    known = [f.name for f in fields(spec_type)]
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise FsscopeError(f"{job} spec field {unknown[0]!r} is unknown: known fields are {', '.join(known)}")
    return dict(data)
