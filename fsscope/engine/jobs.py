"""Every job fsscope can run, as one descriptor each (:class:`Job`): its module, its Spec and
Report types, its command, its renderer, and its TUI model, live view and Setup panel, each named
by where it lives (``"module:attribute"``) and imported only when that job is used (:func:`resolve`).

This module imports nothing but the standard library and fsscope.errors, so listing the jobs
(``fsscope --help``, the Setup screen's job list) costs no job's imports, and no numpy. What
fsscope knows about a job by its name is read here: the engine loads the job's own parts
(:mod:`fsscope.engine.registry`), the CLI its command and renderer, the TUI its model, view and
panel -- there is no other table of jobs.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any, NamedTuple

from fsscope.errors import FsscopeError

# The jobs whose packages are an extra, not the core install: (extra, its modules).
# `pip install fsscope` brings the core; the study engine's Dask and SALib (and, through them,
# pandas and matplotlib) come with `pip install 'fsscope[study]'`, which scripts/setup installs.
STUDY_EXTRA = ("study", ("distributed", "SALib"))


LABEL_CELLS = 25
"""The cells of a job's name and label in the Setup list: at 80 columns it has 26 (with its
scroll bar)."""


class Job(NamedTuple):
    """One job, every part named by where it lives (``"module:attribute"``; imported by
    :func:`resolve` when asked for, never when the jobs are listed). An empty part: the job has
    none of its own (the front end's default says what it gets instead). A NamedTuple, not a
    dataclass: dataclasses brings inspect, ast and dis (13 modules) into `fsscope --help`."""

    name: str
    module: str
    """The job itself: Spec, run, DATA, Report (see the module's docstring)."""
    summary: str
    """One line: the job list of `fsscope run --help`, and above the job's Setup panel."""
    label: str = ""
    """A few words beside its name in the Setup screen's job list (name, two spaces and label in
    at most :data:`LABEL_CELLS`: the summary was cut there mid-word); "": the name alone."""
    spec: str = ""
    """Its Spec where a lighter module than the job's holds it (the panel, the CLI's parser)."""
    report: str = ""
    """Its Report where a lighter module than the job's holds it (renderers, replay)."""
    command: str = ""
    """The ``fsscope/cli`` module whose ``add_parser`` adds ``fsscope NAME`` ("": no command of
    its own; `fsscope run NAME` runs it)."""
    command_help: str = ""
    """Its line in ``fsscope --help``."""
    renderer: str = ""
    """``(report, console) -> None``, printing its report (`fsscope report`, its command); "": JSON."""
    model: str = ""
    """Its TUI model class (plain Python; "": the per-file latency matrix alone)."""
    view: str = ""
    """Its live view on the TUI's live screen ("": the heatmap of per-file latencies)."""
    panel: str = ""
    """Its parameter panel on the Setup screen ("": the generic panel built from its Spec)."""
    comparer: str = ""
    """``(report_a, report_b) -> list[Section]``: two runs' reports side by side (`fsscope
    compare`, the TUI's compare screen; "": the numbers both reports hold)."""
    compare_verdict: str = ""
    """``(side_a, side_b, sections) -> Comparison``: the compare screen's verdict line over two
    runs' reports ("": B / A for every figure). A job whose live view is the heatmap compares
    as two heatmaps instead."""
    compare_charts: str = ""
    """A widget ``(side_a, side_b)`` the compare screen draws above the tables ("": none)."""
    extra: tuple[str, tuple[str, ...]] | None = None
    """(extra, its modules) when the job needs more than the core install."""
    setup: bool = True
    """Offered by the TUI's Setup screen (False: run from the CLI; a recorded run replays)."""
    uses_target: bool = True
    """Runs on the Setup screen's target, formatted and mounted with its recipe (False: the job
    formats and mounts nothing; the TUI runs it, as its command does, on a directory it never
    writes to -- watch observes the file system its process already uses)."""
    reads_a_tree: bool = False
    """Reads a tree already there (scan): a directory target only -- an image, RAM or a device
    would be formatted, with nothing on it to read."""

    def target_refusal(self, target: Any) -> str:
        """Why this job cannot run on ``target`` (a TargetSpec), in one line; "": it can. The
        job says it when it starts, the Setup screen before (it was offered, then failed)."""
        if self.reads_a_tree and target.kind != "dir":
            # the target named as the live screen names it ("RAM image (…)"), not by its kind
            return (f"{self.name} reads a tree you already have: choose a directory target "
                    f"(--dir PATH), not {target.describe()}, which fsscope would format")
        return ""

    @property
    def spec_ref(self) -> str:
        return self.spec or f"{self.module}:Spec"

    @property
    def report_ref(self) -> str:
        return self.report or f"{self.module}:Report"


HEAT_VIEW = "fsscope.tui.widgets.heat_view:HeatView"
"""The live view of a job without one of its own (its part is empty)."""
GENERIC_PANEL = "fsscope.tui.widgets.job_params:JobParams"
"""The Setup panel of a job without one of its own."""
GENERIC_COMPARER = "fsscope.analysis.compare:compare_generic"
"""The comparer of a job without one of its own."""

DESCRIPTORS: tuple[Job, ...] = (
    Job("smoke", "fsscope.engine.smoke", "write+fsync small files for a few seconds (sanity check)",
        label="a quick sanity run"),
    Job("probe", "fsscope.workloads.probe_job", "per-syscall latency of creat() & co. on fresh file systems",
        spec="fsscope.workloads.probe_spec:ProbeSpec", command="probe_cmd", command_help="per-syscall latency probe: repeatable outlier files, explained",
        renderer="fsscope.cli.render.probe:render_probe",
        panel="fsscope.tui.widgets.probe_params:ProbeParams", comparer="fsscope.analysis.compare:compare_probe",
        label="per-call latency"),
    Job("bench", "fsscope.workloads.bench_job",
        "throughput personality runs and their variation (Throughput-N, relative range)",
        spec="fsscope.workloads.bench_spec:Spec", report="fsscope.workloads.bench_records:Report",
        command="bench_cmd",
        command_help="throughput personalities (fileserver/webserver/varmail), run-to-run variation",
        renderer="fsscope.cli.render.bench:render_bench", model="fsscope.tui.bench_model:BenchModel",
        view="fsscope.tui.widgets.bench_view:BenchView", panel="fsscope.tui.widgets.bench_params:BenchParams",
        comparer="fsscope.analysis.compare:compare_bench", compare_verdict="fsscope.tui.compare_model:bench_verdict",
        label="throughput runs"),
    Job("syncwrite", "fsscope.workloads.syncwrite_job",
        "synchronous-write buffer sweep: throughput vs latency per buffer size",
        spec="fsscope.workloads.syncwrite_records:Spec", report="fsscope.workloads.syncwrite_records:Report",
        command="syncwrite_cmd",
        command_help="synchronous-write buffer sweep: throughput, latency, knees, best buffer",
        renderer="fsscope.cli.render.syncwrite:render_syncwrite",
        model="fsscope.tui.syncwrite_model:SyncWriteModel", view="fsscope.tui.widgets.syncwrite_view:SyncWriteView",
        panel="fsscope.tui.widgets.syncwrite_params:SyncWriteParams",
        comparer="fsscope.analysis.compare:compare_syncwrite",
        compare_verdict="fsscope.tui.compare_model:syncwrite_verdict",
        compare_charts="fsscope.tui.widgets.syncwrite_chart:CompareCharts", label="buffer sweep"),
    Job("age", "fsscope.aging.job",
        "profile-driven aging (Geriatrix): churn to a profile, fit, fresh vs aged fragmentation, snapshot",
        command="age_cmd", command_help="age a target to a profile (Geriatrix); fresh vs aged fragmentation; snapshot",
        renderer="fsscope.cli.render.age:render_age", model="fsscope.tui.aging_model:AgingModel",
        view="fsscope.tui.widgets.aging_view:AgingView", panel="fsscope.tui.widgets.age_params:AgeParams",
        comparer="fsscope.analysis.compare:compare_age", label="age to a profile"),
    Job("explore", "fsscope.study.explore",
        "layout exploration (Chopper): LHS plan of disk states and write patterns, d-span, sensitivity",
        command="explore_cmd", command_help="layout exploration (Chopper): which factors spread files on disk",
        renderer="fsscope.cli.render.explore:render_explore", model="fsscope.tui.explore_model:ExploreModel",
        view="fsscope.tui.widgets.explore_view:ExploreView",
        panel="fsscope.tui.widgets.explore_params:ExploreParams", extra=STUDY_EXTRA, label="layout (Chopper)"),
    Job("check", "fsscope.check.job",
        "pre-benchmark sanity check: audit of what distorts results, runs needed (calibration)",
        command="check_cmd", command_help="pre-benchmark sanity check: what distorts results here, and runs needed",
        renderer="fsscope.cli.render.check:render_check", model="fsscope.tui.check_model:CheckModel",
        view="fsscope.tui.widgets.check_view:CheckView", panel="fsscope.tui.widgets.check_params:CheckParams",
        label="sanity check"),
    Job("variation", "fsscope.study.variation",
        "configuration-space variation study (Cao et al.): LHS configurations x personalities, R runs, "
        "relative range",  # its command is `fsscope study variation` (study_cmd)
        renderer="fsscope.cli.render.variation:render_variation",
        model="fsscope.tui.variation_model:VariationModel", view="fsscope.tui.widgets.variation_view:VariationView",
        panel="fsscope.tui.widgets.variation_params:VariationParams", extra=STUDY_EXTRA, label="config study"),
    Job("ladder", "fsscope.workloads.ladder",
        "hygiene ladder (Cao et al.): baseline, no_lazy, umount, alloc; relative range per step",
        # its command is `fsscope bench --ladder` (ladder_cmd, through bench_cmd)
        renderer="fsscope.cli.render.ladder:render_ladder", model="fsscope.tui.ladder_model:LadderModel",
        view="fsscope.tui.widgets.ladder_view:LadderView", panel="fsscope.tui.widgets.ladder_params:LadderParams",
        label="hygiene ladder"),
    Job("scan", "fsscope.scan.job",
        "read-only: each directory's on-disk structure (checked against the file system), near-threshold "
        "and largest dirs, free space, aging",
        command="scan_cmd", command_help="read-only: each directory's on-disk structure, checked; near-threshold "
                                         "and largest directories; free-space fragmentation; how aged",
        renderer="fsscope.cli.render.scan:render_scan", model="fsscope.tui.scan_model:ScanModel",
        view="fsscope.tui.widgets.scan_view:ScanView", label="a tree's structure", reads_a_tree=True),
    Job("watch", "fsscope.watch.job",
        "attach to a process, cgroup or command: its file-system calls, the slow ones and why, what repeats",
        command="watch_cmd",
        command_help="attach to a process, cgroup or command: its slow file-system calls, why, what repeats",
        renderer="fsscope.cli.render.watch:render_watch", model="fsscope.tui.watch_model:WatchModel",
        view="fsscope.tui.widgets.watch_view:WatchView", panel="fsscope.tui.widgets.watch_params:WatchParams",
        uses_target=False, label="watch a process"),
    Job("replay", "fsscope.replay.job",
        "play an op log (watch --capture) on a fresh file system: per call type and per file latency, "
        "throughput, what repeats",
        command="replay_cmd",
        command_help="play an op log (watch --capture) on the file systems recipes make; compare them",
        renderer="fsscope.cli.render.replay:render_replay", model="fsscope.tui.replay_model:ReplayModel",
        view="fsscope.tui.widgets.replay_view:ReplayView", panel="fsscope.tui.widgets.replay_params:ReplayParams",
        comparer="fsscope.replay.compare:sections", compare_verdict="fsscope.tui.compare_model:replay_verdict",
        label="replay an op log"),
    Job("frag", "fsscope.layout.job",
        "free-space extent histogram and a large test file's fragments (fresh or --from-snapshot)",
        command="age_cmd", command_help="free-space histogram and a test file's fragments (fresh or --from-snapshot)",
        renderer="fsscope.cli.render.frag:render_frag", model="fsscope.tui.aging_model:FragModel",
        view="fsscope.tui.widgets.aging_view:FragView", comparer="fsscope.analysis.compare:compare_frag",
        label="fragmentation"),
)

JOBS: dict[str, Job] = {job.name: job for job in DESCRIPTORS}
"""Every job by name, in the order the job lists show them."""


def job(name: str) -> Job:
    """Job ``name``'s descriptor; one line naming the known jobs when there is none."""
    if name not in JOBS:
        raise FsscopeError(f"unknown job '{name}' (known: {', '.join(JOBS)})")
    return JOBS[name]


def resolve(ref: str) -> Any:
    """The part ``ref`` names (``"module:attribute"``), importing its module now."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


def missing_extra(name: str) -> str | None:
    """One line saying how to add what job ``name`` needs beyond the core install, or None
    when it is installed (or the job needs nothing more)."""
    needs = JOBS[name].extra if name in JOBS else None
    if needs is None:
        return None
    extra, modules = needs
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (f"{name} needs fsscope's {extra} extra ({', '.join(missing)} not installed): "
            f"pip install 'fsscope[{extra}]' (in a checkout: scripts/setup)")


def require_extra(name: str) -> None:
    """Refuse, in one line (exit 2), a job whose extra is not installed."""
    problem = missing_extra(name)
    if problem:
        raise FsscopeError(problem)
