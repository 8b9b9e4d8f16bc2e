"""The model of a job whose view shows only its final report (frag, scan): nothing to feed
while it runs, the report when it ends, the same from a recorded run."""

from __future__ import annotations

from typing import Any, Generic, Self, TypeVar

from fsscope.engine.events import Event
from fsscope.errors import FsscopeError
from fsscope.records import Record, convert, plain

S = TypeVar("S", bound=Record)


def spec_of(type_: type[S], spec: Any) -> S:
    """A model's job spec as ``type_``: the job's Spec, or a view's lenient record of the few
    fields it shows (a spec record or a manifest's dict is read once); one that does not read
    gives the defaults: a view must still show what the run recorded."""
    if isinstance(spec, type_):
        return spec
    try:
        return convert(plain(spec) or {}, type_)
    except FsscopeError:
        return type_()

R = TypeVar("R")


class FromReport:
    """A model a recorded run rebuilds from its report alone (``finish``)."""

    def __init__(self, spec: Any = None): ...

    def finish(self, report: Any) -> None: ...

    @classmethod
    def from_run(cls, run_dir: Any, spec: Any, report: Any) -> Self:
        model = cls(spec)
        model.finish(report)
        return model


class ReportModel(FromReport, Generic[R]):
    """The job's ``Report`` record (``R``) once it ends, and its notes: a job's model keeps
    what its events say and overrides ``notes_of`` and ``took`` for what its report adds."""

    kind = "report"

    def __init__(self, spec: Any = None):
        self.report: R | None = None
        self.error = ""
        """Why the job ended without a report (it failed): its view says so, not "…when it ends"."""
        self.notes: list[str] = []
        self.version = 0
        self.telemetry: list[tuple[float, float, float]] = []

    def feed(self, event: Event) -> bool:
        return False

    def finish(self, report: R | None) -> None:
        if report is not None:
            self.report = report
            self.notes = self.notes_of(report)
            self.took(report)
        self.version += 1

    def fail(self, error: str | None) -> None:
        """The job ended with no report: ``error`` is why (its Error event, or the manifest's)."""
        self.error = error or "no reason recorded"
        self.version += 1

    def notes_of(self, report: R) -> list[str]:
        return []

    def took(self, report: R) -> None:
        """What the model reads from the report beyond the report itself (none by default)."""
