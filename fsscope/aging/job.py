"""The aging job for the engine: ``Spec`` + ``run(ctx, spec)`` (registry name to be ``age``).

Runs in the job child on a fresh target: a mounted file system is aged against its own
``statvfs``; a directory target needs ``capacity_bytes``. Progress events carry the
ager's dict (phase, fullness, ops, ops_per_s, overwrites, p_values, convergence_ops,
horizon_ops) with ``done``/``total`` = ops / planned horizon; the report is
:meth:`AgingResult.to_json`. Cancel (``ctx.cancelled``) stops with the same summary.
"""

from __future__ import annotations

from pathlib import Path

from fsscope.aging.ager import AgingError, AgingSpec, age

Spec = AgingSpec


def run(ctx, spec: AgingSpec) -> dict:
    with ctx.fresh_fs() as fs:
        if fs.fs == "dir" and spec.capacity_bytes is None:
            raise AgingError("aging: capacity_bytes: a directory target has no file system of "
                             "its own; give the capacity to fill (e.g. --capacity 1G)")
        phase = {"name": ""}

        def on_progress(event: dict) -> None:
            if event["phase"] != phase["name"]:
                phase["name"] = event["phase"]
                ctx.emit("phase", name=f"aging: {event['phase']}")
            ctx.progress(event["ops"], event.get("horizon_ops") or 0, **event)

        result = age(Path(fs.workdir), spec, on_progress=on_progress,
                     cancelled=lambda: ctx.cancelled)
    return result.to_json()
