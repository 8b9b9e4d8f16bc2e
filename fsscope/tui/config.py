"""What the investigator starts with: the plan a user builds on the setup screen, and the
embedded default (no Textual here: the CLI, tests and benchmarks build these too).

``fsscope`` with no arguments opens on the embedded default: as root, a sparse loop image in
the user's data directory (``$FSSCOPE_HOME/images/default.img``) formatted with the ext4
recipe; without root, a scratch directory, with a banner that says what that mode cannot do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fsscope import paths, recipes
from fsscope.engine import jobs
from fsscope.errors import FsscopeError
from fsscope.recipes import Recipe
from fsscope.records import SpecRecord, plain
from fsscope.targets import DEFAULT_SIZE_BYTES, TargetSpec

DEFAULT_RECIPE = "ext4-default"
DEFAULT_IMAGE_NAME = "default.img"

NON_ROOT_BANNER = (
    "Not running as root: fsscope measures in a plain scratch directory on the file system it "
    "already lives on. In this mode it cannot format or mount anything, so there is no choice of "
    "file system, recipe or mkfs/mount options; it cannot drop caches between runs, attach loop "
    "images or RAM images, or read a dedicated device's counters. Run fsscope as root for the "
    "full investigation."
)


def recipe_label(job: str, spec: dict, setup_recipe: str) -> str:
    """The recipe(s) a job ran with, as labels say it: a study formats its own file systems
    (explore: its recipes; variation: its file systems, or its space's), not the Setup
    recipe the plan's target was made with."""
    def names(value) -> list[str]:  # a list, or the setup panel's "a,b" text
        parts = value.split(",") if isinstance(value, str) else list(value or ())
        return [str(p).strip() for p in parts if str(p).strip()]

    if job in jobs.JOBS and not jobs.JOBS[job].uses_target:
        return "no recipe (nothing formatted)"
    if job == "explore":
        return ", ".join(names(spec.get("recipes")) or ["ext4-default"])
    if job == "variation":
        return ", ".join(names(spec.get("file_systems"))) or f"the file systems of space {spec.get('space', '?')}"
    return setup_recipe


@dataclass(frozen=True)
class JobRequest:
    """One job of a plan: its registry name and its parameters (the job's Spec record, built
    once from the setup panel and handed to the runner as it is)."""

    job: str
    spec: SpecRecord


LARGE_PROBE_CALLS = 5_000_000  # about an hour of creat calls on a fast RAM image
LARGE_JOB_S = 2 * 3600


def _num(value, default: float = 0.0) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


@dataclass(frozen=True)
class RunPlan:
    """What Start runs: the jobs, one after another, each in its own child process."""

    target: TargetSpec
    recipe: Recipe | None
    jobs: tuple[JobRequest, ...]

    def recipe_label(self) -> str:
        """What the plan's jobs ran with (one label each, repeats once)."""
        setup = self.recipe.name if self.recipe else "no recipe"
        labels = [recipe_label(req.job, plain(req.spec), setup) for req in self.jobs] or [setup]
        return " · ".join(dict.fromkeys(labels))

    def large_parts(self) -> list[str]:
        """The jobs whose size deserves a second look before they start (a typo such as
        runs = 30000 would otherwise run for days without a word), and checks whose budget is
        shorter than the least they take, in words."""
        out = []
        for req in self.jobs:
            spec = plain(req.spec)
            if req.job == "probe":
                calls = _num(spec.get("files")) * _num(spec.get("runs"))
                if calls > LARGE_PROBE_CALLS:
                    out.append(f"probe: {_num(spec.get('files')):,.0f} files × {_num(spec.get('runs')):,.0f} "
                               f"runs = {calls:,.0f} timed calls")
            if req.job == "check":
                out += _check_floor(req.spec, self.target.kind != "dir")
            seconds = _num(spec.get("runs"), 1) * _num(spec.get("duration_s")) or _num(spec.get("max_seconds"))
            if seconds > LARGE_JOB_S:
                out.append(f"{req.job}: at least {seconds / 3600:,.1f} hours of measuring")
        return out

    @property
    def uses_target(self) -> bool:
        """A job of the plan formats and mounts the target (watch alone touches none of it)."""
        return any(jobs.job(req.job).uses_target for req in self.jobs)

    def where(self) -> str:
        """The target as the live screen names it: none for a plan that formats nothing."""
        return self.target.describe() if self.uses_target else "no target (watched where it runs)"

    def job_target(self, req: JobRequest) -> tuple[TargetSpec, Recipe | None]:
        """Where ``req`` runs: the plan's target and recipe, or, for a job that formats nothing
        (``Job.uses_target``), the directory its command gives it (nothing is made there)."""
        if jobs.job(req.job).uses_target:
            return self.target, self.recipe
        return TargetSpec("dir", str(paths.ram_dir(checked=False))), None

    @property
    def destructive(self) -> bool:
        """Formatting a block device, or an existing image file fsscope did not create,
        destroys what is on it: the user must confirm."""
        from fsscope.targets import image  # the journal and devices: not for the first frame

        return self.uses_target and (self.target.kind == "device" or (
            self.target.kind == "image" and bool(image.foreign_reason(Path(self.target.path)))))


def _check_floor(check, formats: bool) -> list[str]:
    """A check budget too short for what the check always does, said before it starts."""
    from fsscope.check.job import shortfall

    short = shortfall(check, formats)
    return [f"check: {short}; it stops at the budget with what it has"] if short else []


@dataclass
class AppConfig:
    """Everything ``make_app`` needs; every field has a sensible default."""

    target: TargetSpec | None = None
    """The target the setup screen starts on (None: the embedded default)."""
    recipe: Recipe | None = None
    """The recipe the setup screen starts on (None: the default for the target)."""
    theme: str = "fsscope-dark"
    """A theme name: fsscope-dark, fsscope-light, fsscope-high-contrast or any Textual theme."""
    runs_root: Path | None = None
    """Where runs are recorded (None: ``$FSSCOPE_HOME/runs``)."""
    discover_devices: Callable[[], list] | None = None
    """Block-device discovery (None: ``fsscope.targets.devices.discover``); tests inject fakes."""
    is_root: bool | None = None
    """Whether fsscope may format things (None: ask the OS)."""
    jobs: tuple[str, ...] | None = None
    """Jobs offered on the setup screen (None: every registered job)."""
    job_defaults: dict[str, dict] = field(default_factory=dict)
    """Initial parameters per job, e.g. {"probe": {"files": 200, "runs": 2}}."""
    start_screen: str = "setup"
    """The mode the app opens in: setup, live or runs."""
    banner: str | None = None
    """A banner for the setup screen (None: computed: the non-root notice when not root)."""


def running_as_root() -> bool:
    return os.geteuid() == 0


def default_image_path() -> Path:
    return paths.images_dir() / DEFAULT_IMAGE_NAME


def scratch_dir() -> Path:
    return paths.home() / "scratch"


def default_target(is_root: bool) -> TargetSpec:
    """The embedded default target: a loop image in the data dir (root) or a scratch dir."""
    if is_root:
        return TargetSpec("image", str(default_image_path()), DEFAULT_SIZE_BYTES)
    scratch = scratch_dir()
    scratch.mkdir(parents=True, exist_ok=True)
    return TargetSpec("dir", str(scratch), DEFAULT_SIZE_BYTES)


def default_recipe(target: TargetSpec) -> Recipe | None:
    if target.kind == "dir":
        return None
    try:
        return recipes.load(DEFAULT_RECIPE)
    except FsscopeError:
        available = recipes.available()
        return available[0] if available else None


def resolve(config: AppConfig) -> AppConfig:
    """Fill in the defaults that depend on the machine (root, target, recipe, banner)."""
    is_root = running_as_root() if config.is_root is None else config.is_root
    target = config.target or default_target(is_root)
    recipe = config.recipe if config.recipe is not None else default_recipe(target)
    banner = config.banner
    if banner is None and not is_root:
        banner = NON_ROOT_BANNER
    return AppConfig(target=target, recipe=recipe, theme=config.theme, runs_root=config.runs_root,
                     discover_devices=config.discover_devices, is_root=is_root, jobs=config.jobs,
                     job_defaults=dict(config.job_defaults), start_screen=config.start_screen,
                     banner=banner)
