"""The ``scan`` job: :func:`fsscope.scan.scan` of a directory target, for the TUI (the CLI's
``fsscope scan`` runs it in-process). Nothing is made in the directory: the job never asks
the target for a file system, so no scratch directory is created there."""

from __future__ import annotations

from typing import Annotated, ClassVar

from msgspec import Meta

from fsscope.errors import FsscopeError
from fsscope.records import SpecRecord
from fsscope.scan import scan


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "scan"

    near: Annotated[int, Meta(ge=1)] = 4      # list directories at most this many creates from a change
    largest: Annotated[int, Meta(ge=1)] = 10  # and the largest this many
    free_space: bool = True    # the free-space histogram (GETFSMAP)
    aging: bool = True         # the tree's profile against the shipped ones


def run(ctx, spec: Spec) -> dict:
    target = ctx.target.spec
    if target.kind != "dir":
        raise FsscopeError("scan reads a tree you already have: choose a directory target "
                           f"(--dir PATH), not a {target.kind} fsscope would format")
    ctx.phase(f"scanning {target.path} (read-only)")
    report = scan(target.path, near=spec.near, largest=spec.largest, free_space=spec.free_space,
                  aging=spec.aging)
    ctx.log(f"{target.path} is on {report['existing']['summary']}")
    return report
