"""The ``scan`` job: :func:`fsscope.scan.scan` of a directory target, for the TUI (the CLI's
``fsscope scan`` runs it in-process). Nothing is made in the directory: the job never asks
the target for a file system, so no scratch directory is created there."""

from __future__ import annotations

from dataclasses import dataclass

from fsscope.errors import FsscopeError
from fsscope.scan import scan
from fsscope.specs import checked_fields


@dataclass(frozen=True)
class Spec:
    near: int = 4              # list directories at most this many creates from a change
    largest: int = 10          # and the largest this many
    free_space: bool = True    # the free-space histogram (GETFSMAP)
    aging: bool = True         # the tree's profile against the shipped ones

    def to_dict(self) -> dict:
        return {"near": self.near, "largest": self.largest, "free_space": self.free_space,
                "aging": self.aging}

    @classmethod
    def from_dict(cls, data: dict) -> Spec:
        spec = cls(**checked_fields(cls, data, "scan"))
        if spec.near < 1 or spec.largest < 1:
            raise FsscopeError(f"scan: near and largest must be at least 1, got {spec.near}, {spec.largest}")
        return spec


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
