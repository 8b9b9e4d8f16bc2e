"""The ``scan`` job: :func:`fsscope.scan.scan` of a directory target, for the TUI (the CLI's
``fsscope scan`` runs it in-process). Nothing is made in the directory: the job never asks
the target for a file system, so no scratch directory is created there. :class:`Report` is
the scan report as a record (the CLI, the TUI and replays read it by attribute)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from msgspec import Meta

from fsscope.engine import jobs
from fsscope.errors import FsscopeError
from fsscope.layout.records import FreeSpace
from fsscope.records import Record, ReportRecord, SpecRecord, typed
from fsscope.scan import scan


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "scan"

    # (the descriptions are the hints under the Setup screen's fields)
    near: Annotated[int, Meta(ge=1, description="list the directories at most this many creates from "
                                                "a structural change")] = 4
    largest: Annotated[int, Meta(ge=1, description="list the largest this many directories")] = 10
    free_space: Annotated[bool, Meta(description="the free-space histogram (GETFSMAP, read-only)")] = True
    aging: Annotated[bool, Meta(description="how aged the tree looks: its profile against the shipped ones")] = True


class Account(Record, frozen=True, kw_only=True, omit_defaults=True):
    """What the file system itself says of a directory's structure, and how it was asked."""

    structure: str | None
    how: str
    blocks: int | None = None
    depth: int | None = None
    size_bytes: int | None = None


class Ahead(Record, frozen=True, kw_only=True):
    """The next structural change: after this many creates, into this structure."""

    creates: int
    becomes: str
    name_bytes: int | None = None


class Dir(Record, frozen=True, kw_only=True, omit_defaults=True):
    """One directory: its structure by its names under the geometry, and the file system's
    account of it (``agrees`` None: not checked; ``why``: what differs)."""

    path: str
    entries: int
    size_bytes: int | None
    name_bytes_median: int | None
    structure: str | None
    bytes_needed: int | None
    limit_bytes: int | None
    depth: int | None
    account: Account | None
    agrees: bool | None
    creates_until_change: Ahead | None
    why: str | None = None

    @property
    def structure_text(self) -> str:
        if self.structure is None:
            return "not classified"
        return self.structure + (f" (depth {self.depth})" if self.depth else "")

    @property
    def verdict(self) -> str:
        if self.agrees is None:
            return "not checked" + (f": {self.why}" if self.why else f": {self.account.how}" if self.account else "")
        return "agrees" if self.agrees else f"differs: {self.why or ''}"


class Checked(Record, frozen=True, kw_only=True):
    agree: int = 0
    disagree: int = 0
    not_checked: int = 0


class ReadOnly(Record, frozen=True, kw_only=True):
    noatime_refused: int = 0
    note: str = ""


class Nearest(Record, frozen=True, kw_only=True):
    """A shipped aging profile and how far this tree's profile is from it."""

    profile: str
    distance: float
    size_log2: float | None = None
    depth_levels: float | None = None
    fullness: float | None = None
    description: str = ""


class Aging(Record, frozen=True, kw_only=True, omit_defaults=True):
    """The tree's captured profile against the shipped ones, nearest first (or why not)."""

    profile: dict[str, Any] | None = None
    nearest: list[Nearest] = []
    error: str | None = None


class Report(ReportRecord, frozen=True, kw_only=True):
    """The scan report (``existing``: the file system holding the tree, as on every report)."""

    path: str = ""
    geometry: dict[str, Any] = {}
    directories: int = 0
    files: int = 0
    walk_s: float = 0.0
    read_only: ReadOnly = ReadOnly()
    structures: dict[str, int] = {}
    checked: Checked = Checked()
    near_change: list[Dir] = []
    #: the directories near a change not listed (smaller than the listed ones), by what they become
    near_change_more: dict[str, int] = {}
    largest: list[Dir] = []
    disagreements: list[Dir] = []
    dirs: list[Dir] = []
    errors: list[str] = []
    errors_count: int = 0
    swapped: list[str] = []    # directories swapped during the walk, not followed (one line each)
    swapped_count: int = 0
    near_entries: int = 0
    free_space: FreeSpace | None = None
    free_space_error: str | None = None
    aging: Aging | None = None

    @property
    def summary(self) -> str:
        """The file system holding the tree, in one line."""
        return str((self.existing or {}).get("summary", ""))

    @property
    def unread(self) -> list[str]:
        """What of the geometry could not be read (and why)."""
        return [str(gap) for gap in self.geometry.get("unread") or []]

    @classmethod
    def of(cls, data: dict[str, Any]) -> Report:
        return typed(data, cls, "scan report")


def run(ctx, spec: Spec) -> Report:
    target = ctx.target.spec
    refusal = jobs.job("scan").target_refusal(target)
    if refusal:
        raise FsscopeError(refusal)
    ctx.phase(f"scanning {target.path} (read-only)")
    report = Report.of(scan(target.path, near=spec.near, largest=spec.largest,
                            free_space=spec.free_space, aging=spec.aging))
    ctx.log(f"{target.path} is on {report.summary}")
    return report
