"""Profile-driven file-system aging (Geriatrix method): profiles, capture, the ager, fit.

Wiring for the engine/CLI::

    from fsscope.aging import AgingSpec, age, load_profile, capture, render_bars
    result = age(mounted_path, AgingSpec(profile="agrawal", seed=1, confidence=0.9),
                 on_progress=lambda progress: print(progress.phase, progress.ops),
                 cancelled=lambda: ctx.cancelled)
    report = result.to_json()

Names are imported lazily: aging worker processes import only ``fsscope.aging.executor``
and must not pay for numpy/scipy. Nothing here imports Textual or Rich.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "fsscope.aging.ager": ["STATE_FILE", "AgingError", "AgingResult", "AgingSpec", "age",
                           "read_state"],
    "fsscope.aging.fit": ["Fit", "chi2_fit", "convergence_ops"],
    "fsscope.aging.profile": ["Profile", "ProfileError", "capture", "distributions",
                              "find_profile", "list_profiles", "load_profile", "render_bars",
                              "save_profile", "scan_tree"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'fsscope.aging' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
