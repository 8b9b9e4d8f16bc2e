"""The records of a fragmentation measurement (the ``frag`` job's report, an ``age`` report's
``fresh``/``aged`` sections) and of where it was measured: what :mod:`fsscope.layout.summary`,
the renderers and the TUI read by attribute."""

from __future__ import annotations

from typing import Any

from fsscope.records import Record, ReportRecord, convert, plain


class Space(Record, frozen=True, kw_only=True):
    """statvfs of a file system: bytes and inodes (:func:`space_of`)."""

    total_bytes: int = 0
    used_bytes: int = 0
    free_bytes: int = 0
    fullness: float | None = None
    inodes_used: int | None = None
    block_size_bytes: int = 0


class FreeSpace(Record, frozen=True, kw_only=True):
    """The free-extent histogram (:class:`fsscope.layout.freespace.FreeSpaceHistogram`)."""

    fs: str = ""
    source: str = ""
    block_size_bytes: int = 0
    bucket_lower_bytes: list[int] = []
    bucket_upper_bytes: list[int] = []
    bucket_extent_counts: list[int] = []
    bucket_free_bytes: list[int] = []
    free_extent_count: int | None = None
    total_free_bytes: int | None = None
    largest_free_extent_bytes: int | None = None
    smallest_free_extent_bytes: int | None = None
    unallocated_bytes: int = 0
    notes: list[str] = []
    mean_free_extent_bytes: float | None = None

    def buckets(self) -> list[tuple[int, int, int]]:
        """(lower bound, free extents, free bytes) per bucket."""
        return list(zip(self.bucket_lower_bytes, self.bucket_extent_counts, self.bucket_free_bytes))


class TestFile(Record, frozen=True, kw_only=True):
    """Where the large test file landed (:class:`fsscope.layout.probe_file.ProbeFileLayout`)."""

    __test__ = False  # not a pytest class
    path: str = ""
    size_bytes: int | None = None
    chunk_bytes: int = 0
    extent_count: int | None = None
    fragment_count: int | None = None
    d_span_bytes: int | None = None
    layout_index: float | None = None
    run_lengths_bytes: list[int] = []


class Measurement(ReportRecord, frozen=True, kw_only=True, omit_defaults=True):
    """One fragmentation measurement (a frag report, an age report's fresh/aged): a part that
    could not be measured has its ``*_error`` line instead (absent keys stay absent). A
    ReportRecord because the frag report is one with a few fields more (msgspec structs have
    one base); inside an age report its ``machine``/``existing`` stay empty (not written)."""

    space: Space | None = None
    free_space: FreeSpace | None = None
    free_space_error: str | None = None
    test_file: TestFile | None = None
    test_file_error: str | None = None
    test_file_bytes: int | None = None   # the size asked for, when the test file failed
    from_run: str | None = None          # an age run that resumed: whose fresh numbers these are

    def errors(self) -> list[tuple[str, str]]:
        """(what, error line) of the parts that could not be measured."""
        return [(what, err) for what, err in (("free space", self.free_space_error),
                                             ("test file", self.test_file_error)) if err]


class TargetInfo(Record, frozen=True, kw_only=True):
    """The target a report was measured on (:class:`fsscope.targets.TargetSpec` and its
    ``describe()`` line)."""

    kind: str = ""
    path: str = ""
    size_bytes: int | None = None
    mountpoint: str = ""
    yes_destroy: str | None = None
    snapshot: str = ""
    describe: str = ""

    @classmethod
    def of(cls, spec: Any) -> TargetInfo:
        """From a :class:`fsscope.targets.TargetSpec` (layout sits below the targets)."""
        return convert(plain(spec) | {"describe": spec.describe()}, cls)


class Restore(Record, frozen=True, kw_only=True, omit_defaults=True):
    """One snapshot restore of the target: how, and what was in use after it."""

    snapshot: str = ""
    method: str = ""
    inodes_used: int | None = None
    used_bytes: int | None = None
