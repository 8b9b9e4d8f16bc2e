"""Plans: a seeded, balanced Latin Hypercube over a factor space, and the treatments it names.

``scipy.stats.qmc.LatinHypercube`` puts exactly one of N points in each of N strata of every
dimension. Mapping a point to one of L levels by its *rank* (level = rank * L // N) rather
than by ``floor(u * L)`` makes every level of every factor appear equally often -- exactly
N/L times when L divides N, else floor or ceil of it -- which is what a factor-mapping table
per level needs. Chopper used R's ``randomLHS`` and ``int(count * v)`` (anchors §2.3).

A plan is saved in the run record (``plan.json``) before any treatment runs, so a study can
be resumed (``--resume RUN``) and its table rebuilt from the record alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.analysis import scipy_stats
from fsscope.engine.events import DataRecord
from fsscope.errors import FsscopeError
from fsscope.records import Record
from fsscope.study.space import Level, Space

PLAN_FILE = "plan.json"


def balanced_lhs(n: int, level_counts: list[int], seed: int) -> np.ndarray:
    """(n, k) int array: row i's level index for each of k factors, balanced per column."""
    if n < 1:
        raise FsscopeError(f"--treatments must be at least 1, got {n}")
    k = len(level_counts)
    u = scipy_stats().qmc.LatinHypercube(d=k, seed=np.random.default_rng(seed)).random(n)
    ranks = np.argsort(np.argsort(u, axis=0, kind="stable"), axis=0, kind="stable")
    return (ranks * np.asarray(level_counts, dtype=np.int64)) // n


class Treatment(Record, frozen=True, kw_only=True):
    """One run: a design row on one file system (recipe), one repeat. What a worker is given,
    and the first keys of its row in ``treatments.ndjson`` (a study's row type extends it)."""

    id: str
    row: int  # index into the plan's design
    recipe: str
    repeat: int
    factors: dict[str, Level]


class Failed(Treatment, frozen=True, kw_only=True):
    """The row of a treatment that still failed after its retries: what stopped it."""

    error: str


class Ended(DataRecord, frozen=True, kw_only=True, tag="treatment"):
    """A treatment as it ends, live (each study's own kind adds its response): which one, on
    which file system, or ``error``: it failed, and why."""

    id: str = ""
    fs: str = ""
    error: str | None = None


class Failure(Record, frozen=True, kw_only=True):
    """A failed treatment as a report lists it."""

    id: str
    error: str | None = None


@dataclass(frozen=True)
class Plan:
    space: Space
    seed: int
    design: np.ndarray  # (n, k) level indices
    recipes: tuple[str, ...] = ("ext4-default",)
    repeat: int = 1

    @classmethod
    def make(cls, space: Space, n: int, seed: int, recipes: tuple[str, ...] = ("ext4-default",),
             repeat: int = 1) -> Plan:
        if repeat < 1:
            raise FsscopeError(f"--repeat must be at least 1, got {repeat}")
        design = balanced_lhs(n, [len(f.levels) for f in space.factors], seed)
        return cls(space, seed, design, tuple(recipes), repeat)

    @property
    def n(self) -> int:
        return int(self.design.shape[0])

    def factors_of(self, row: int) -> dict[str, Level]:
        return {f.name: f.levels[int(self.design[row, j])] for j, f in enumerate(self.space.factors)}

    def treatments(self) -> list[Treatment]:
        """Every treatment, recipe by recipe, row by row, repeats adjacent."""
        width = len(str(max(self.n - 1, 0)))
        return [Treatment(id=f"{recipe}-{row:0{width}d}-r{rep}", row=row, recipe=recipe, repeat=rep,
                          factors=self.factors_of(row))
                for recipe in self.recipes for row in range(self.n) for rep in range(self.repeat)]

    def to_dict(self) -> dict:
        return {"space": self.space.to_dict(), "seed": self.seed, "recipes": list(self.recipes),
                "repeat": self.repeat, "design": self.design.tolist()}

    @classmethod
    def from_dict(cls, data: dict) -> Plan:
        return cls(Space.from_dict(data["space"]), int(data["seed"]),
                   np.asarray(data["design"], dtype=np.int64).reshape(-1, len(data["space"]["factors"])),
                   tuple(data["recipes"]), int(data["repeat"]))

    def save(self, directory: Path) -> Path:
        path = Path(directory) / PLAN_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_dict()))
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, directory: Path) -> Plan:
        path = Path(directory) / PLAN_FILE
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except FileNotFoundError:
            raise FsscopeError(f"--resume {directory}: no {PLAN_FILE} there (not a study run)") from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:  # any JSON shape
            raise FsscopeError(f"{path}: not a readable plan ({exc})") from None


def check_plan(resume: str, workers: int, make: Callable[[], Plan],
               check_settings: Callable[[dict, str], None]) -> None:
    """A study spec, before any run record: the plan it would resume (its settings checked by
    ``check_settings``) or the one ``make()`` makes, and at least one worker."""
    if resume:
        check_settings(Plan.load(Path(resume)).space.settings, f"--resume {resume}")
    else:
        make()
    if workers < 1:
        raise FsscopeError(f"--workers must be at least 1, got {workers}")


def plan_or_resume(ctx: Any, resume: str, make: Callable[[], Plan]) -> tuple[Path, Plan]:
    """The study's directory and plan: the one saved in ``resume`` (an interrupted study), or
    ``make()`` saved into this run's directory before anything runs. Either way the manifest
    says where the study lives and its seed."""
    if resume:
        study_dir = Path(resume)
        plan = Plan.load(study_dir)
    else:
        study_dir = ctx.run_dir.path
        plan = make()
        plan.save(study_dir)
    ctx.run_dir.update_manifest(study_dir=str(study_dir), seed=plan.seed)
    return study_dir, plan
