"""The model of a job whose view shows only its final report (frag, scan): nothing to feed
while it runs, the report when it ends, the same from a recorded run."""

from __future__ import annotations

from typing import Self

from fsscope.engine.events import Event


class FromReport:
    """A model a recorded run rebuilds from its report alone (``finish``)."""

    def __init__(self, spec: dict | None = None): ...

    def finish(self, report: dict | None) -> None: ...

    @classmethod
    def from_run(cls, run_dir, spec: dict, report: dict | None) -> Self:
        model = cls(spec)
        model.finish(report)
        return model


class ReportModel(FromReport):
    kind = "report"

    def __init__(self, spec: dict | None = None):
        self.report: dict | None = None
        self.notes: list[str] = []
        self.version = 0
        self.telemetry: list[tuple[float, float, float]] = []

    def feed(self, event: Event) -> bool:
        return False

    def finish(self, report: dict | None) -> None:
        if report is not None:
            self.report = report
            self.notes = self.notes_of(report)
        self.version += 1

    def notes_of(self, report: dict) -> list[str]:
        return []
