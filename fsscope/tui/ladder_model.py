"""What the hygiene-ladder view shows, as plain data (no Textual): per step (baseline,
no_lazy, umount, alloc -- Cao et al.'s Fig. 3), each run's cumulative ops/s and the relative
range across the step's runs. Live, each run's ops/s arrives with the job's progress; the
report replaces them with its exact numbers (and the images' checksums) when the job ends,
and a replay is built from that report."""

from __future__ import annotations

from fsscope.analysis.variation.metrics import relative_range
from fsscope.analysis.variation.stats import ladder_verdict
from fsscope.engine.events import Event, Progress
from fsscope.errors import FsscopeError
from fsscope.records import convert
from fsscope.tui.report_model import FromReport, spec_of
from fsscope.workloads.ladder import STEPS, Report, Spec, StepProgress, step_ops

WHAT = {"baseline": "mkfs, populate, sync, drop caches", "no_lazy": "+ inode tables and journal written at mkfs",
        "umount": "+ unmount and mount after populating", "alloc": "+ every run restores one populated image"}


class LadderModel(FromReport):
    kind = "ladder"

    def __init__(self, spec: Spec | dict | None = None):
        self.spec = spec_of(Spec, spec)
        self.steps: dict[str, list[float]] = {s: [] for s in self.spec.steps or STEPS}
        self.images: dict[str, int] = {}  # step -> distinct image checksums at the runs' start
        self.report: Report | None = None
        self.notes: list[str] = []
        self.version = 0
        self.telemetry: list[tuple[float, float, float]] = []

    def feed(self, event: Event) -> bool:
        if not isinstance(event, Progress):
            return False
        try:
            run = convert(event.detail, StepProgress, "ladder progress")
        except FsscopeError:  # a progress line without a step (none is sent today)
            return False
        self.steps.setdefault(run.step, []).append(run.ops_per_s)
        self.version += 1
        return True

    def finish(self, report: Report | None) -> None:
        if report is not None and report.ladder:
            self.report = report
            self.steps = dict(step_ops(report.ladder))
            self.images = {s.step: len({r.image_sha256 for r in s.runs}) for s in report.ladder}
        verdict = ladder_verdict(list(self.steps.items()))
        self.notes = [verdict.text] if len(verdict.ranges) > 1 else []
        self.version += 1

    def relative_ranges(self) -> list[tuple[str, float | None]]:
        """(step, relative range of its runs' ops/s) in ladder order; None below 2 runs."""
        return [(s, relative_range(ops) if len(ops) > 1 else None) for s, ops in self.steps.items()]
