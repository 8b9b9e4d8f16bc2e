"""What the per-file-system rules (xfs.py, ext4.py, btrfs.py) share: the :class:`Prediction`
record they return, the ops that create, and small arithmetic helpers."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Kind = Literal["outlier", "series", "level_shift", "linear"]

#: Ops that add one directory entry (and one inode) per timed call.
CREATING_OPS = frozenset({"creat", "mkdir", "symlink", "write-fsync"})

#: The probe's symlink target length (fsscope.workloads.probe_loops.SYMLINK_TARGET).
DEFAULT_SYMLINK_TARGET_BYTES = 22
DEFAULT_WRITE_BYTES = 4096


@dataclass(frozen=True)
class Prediction:
    """A structural change predicted at a file index (or a series / window / range of them).

    ``index``: exact index (series: first element; linear: first file of the range).
    ``index_low``/``index_high``: inclusive window when the index is not exact (hash-dependent).
    ``end``: linear growth range end (exclusive). ``tolerance_files``: how far a measured
    index may be from ``index`` and still match, with ``tolerance_why``. ``condition``: an
    assumption the prediction depends on ("" when everything was measured).
    """

    structure: str
    kind: Kind
    index: int | None
    stride: int | None = None
    count: int = 1
    arithmetic: str = ""
    note: str = ""
    index_low: int | None = None
    index_high: int | None = None
    end: int | None = None
    tolerance_files: int = 0
    tolerance_why: str = "deterministic: verified on disk at exactly this index"
    condition: str = ""
    fs: str = ""
    op: str = ""

    @property
    def exact(self) -> bool:
        return self.index is not None and self.index_low is None

    def indices(self) -> list[int]:
        """Every predicted index (series expanded; window/linear -> its bounds)."""
        if self.kind == "series" and self.index is not None and self.stride:
            return [self.index + k * self.stride for k in range(self.count)]
        if self.index is not None:
            return [self.index]
        return [i for i in (self.index_low, self.index_high) if i is not None]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def series_count(start: int, stride: int, files: int) -> int:
    return len(range(start, files, stride)) if start < files else 0


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple
