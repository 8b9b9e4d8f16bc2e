"""Job parameters from JSON: one check shared by every job's Spec.from_dict (plain Python at
the bottom layer, so a job beside the readers it drives, like layout.job, can use it)."""

from __future__ import annotations

from dataclasses import MISSING, fields
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
    for f in fields(spec_type):  # plain-valued fields must get a value of their default's type
        want = type(f.default) if f.default is not MISSING else None
        if f.name in data and want in (bool, int, float, str) and not _is(data[f.name], want):
            kind = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}[want]
            raise FsscopeError(f"{job} spec field {f.name!r} must be {kind}, not {data[f.name]!r}")
    return dict(data)


def _is(value: Any, want: type) -> bool:
    if isinstance(value, bool) or want is bool:  # bool is an int to Python, not to a user
        return isinstance(value, bool) and want is bool
    return isinstance(value, want) or (want is float and isinstance(value, int))


def with_tuples(data: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """``data`` (already checked) with the list-valued fields ``names`` as tuples; a string is
    split at commas ("ext4-default,xfs-default" from ``-p recipes=...``)."""
    return {k: tuple(v.split(",") if isinstance(v, str) else v) if k in names else v for k, v in data.items()}


def tuples_as_lists(spec: Any) -> dict[str, Any]:
    """A frozen spec as JSON-ready data: its tuples as lists."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in spec.__dict__.items()}
