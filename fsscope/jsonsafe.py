"""The one way fsscope turns its values into JSON (events, reports, manifests).

numpy scalars and arrays become plain numbers and lists, NaN and ±inf become null (JSON has
no spelling for them and a reader must not choke on one), dataclasses their ``to_json()`` or
fields, paths and anything else their ``str``. Lives at the bottom of the layers so analysis,
the store and the engine all share it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    """``value`` as plain JSON-ready Python (dict, list, str, int, float, bool, None)."""
    if value is None or isinstance(value, (str, bool, int)) and not isinstance(value, np.generic):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return plain(value.item())
    if hasattr(value, "to_json"):
        return plain(value.to_json())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    return str(value)


def _default(value: Any) -> Any:
    """json's hook for what it cannot write itself (the fast path: no NaN in sight)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "to_json"):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset)):
        return list(value)
    return str(value)


def dumps(value: Any, **kwargs: Any) -> str:
    """JSON text of ``value``; the common case (no NaN/inf) goes straight through ``json``,
    so a batch of a thousand latencies costs one C-speed encode."""
    try:
        return json.dumps(value, default=_default, allow_nan=False, **kwargs)
    except ValueError:  # a NaN or an infinity somewhere: walk the value once
        return json.dumps(plain(value), allow_nan=False, **kwargs)
