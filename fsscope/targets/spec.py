"""A target's spec: what ``fsscope`` is told to measure on, and how it reads.

Apart from :mod:`fsscope.targets.target` (which makes and undoes targets) so that what only
names a target -- the TUI's Setup screen, a report, the runs table -- imports no journal,
device discovery or mount table (issue 33: the Setup screen's first frame).
"""

from __future__ import annotations

import msgspec

from fsscope import paths
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
from fsscope.records import Record, convert

TARGET_KINDS = ("device", "image", "ram", "dir")
DEFAULT_SIZE_BYTES = 2 * 2**30
RAM_DIR = paths.ram_dir(checked=False)  # checked where an image is made in it


class TargetSpec(Record, frozen=True, kw_only=False):
    """Where to measure. ``kind`` device | image | ram | dir; ``path`` is the device node,
    the image file or the directory (ram: chosen by fsscope). job.json's "target" holds it
    (read back with ``records.convert(data, TargetSpec)``)."""

    kind: str
    path: str = ""
    size_bytes: int = DEFAULT_SIZE_BYTES
    mountpoint: str = ""
    yes_destroy: str | None = None
    snapshot: str = ""  # an image restored before each mount instead of mkfs ("" = mkfs)

    def __post_init__(self):
        if self.kind not in TARGET_KINDS:
            raise FsscopeError(f"unknown target kind '{self.kind}' (one of {', '.join(TARGET_KINDS)})")
        if self.kind != "ram" and not self.path:
            raise FsscopeError(f"{'an' if self.kind[0] in 'aeiou' else 'a'} {self.kind} target needs a path")
        if self.snapshot and self.kind == "dir":
            raise FsscopeError("--from-snapshot needs a target fsscope writes an image onto "
                               "(--image, --ram or --device), not --dir")

    def describe(self) -> str:
        if self.kind == "ram":
            text = f"RAM image ({format_bytes(self.size_bytes)} in {RAM_DIR})"
        elif self.kind == "image":
            text = f"image {self.path} ({format_bytes(self.size_bytes)})"
        else:
            text = f"{self.kind} {self.path}"
        return f"{text} from snapshot {self.snapshot}" if self.snapshot else text

    @classmethod
    def describe_recorded(cls, recorded: dict) -> str:
        """A recorded target spec (a run's manifest) named as a live target is ("RAM image
        (512 MiB in …)", not "ram"): the TUI's runs table and ``fsscope runs`` alike."""
        if "size_bytes" in recorded:  # a full spec
            try:
                return convert(recorded, cls).describe()
            except (TypeError, FsscopeError):
                pass
        return f"{recorded.get('kind', '?')} {recorded.get('path', '')}".strip()

    def reported(self) -> ReportTarget:
        """This target as a report holds it: the spec and how it reads."""
        return ReportTarget(**msgspec.structs.asdict(self), described=self.describe())


class ReportTarget(TargetSpec, frozen=True, kw_only=True):
    """A report's "target": the spec, and ``describe`` as the run said it."""

    described: str = msgspec.field(default="", name="describe")
