"""``fsscope replicate``: the seed papers' headline findings, each run with the paper's setup
as far as this machine allows, and held to a measurement.

One module per scenario (:data:`SCENARIOS`); each names its probes (jobs run through the
engine, headless, as ``fsscope probe`` runs them) and judges the reports finding by finding:
the paper's number, what the paper's own arithmetic gives for today's geometry, what fsscope
measured, and a verdict (agree | disagree | inconclusive) with the statistic that decided it.
No verdict defaults to agree: a judge that cannot decide says inconclusive and why.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from fsscope import store
from fsscope.errors import FsscopeError
from fsscope.records import Record, convert, plain
from fsscope.replicate.base import Finding, Result, RunDone

#: name -> module
SCENARIOS: dict[str, str] = {
    "aota-kono": "fsscope.replicate.aota_kono",
    "cao": "fsscope.replicate.cao",
    "chopper": "fsscope.replicate.chopper",
    "geriatrix": "fsscope.replicate.geriatrix",
    "mingardi": "fsscope.replicate.mingardi",
}

#: judges tried by ``--self-test`` that no scenario runs: the probe's detectors, the ladder's
#: step and the bench's flags (``worlds.GROUPS``)
SELF_TEST_ONLY = ("probe", "ladder", "variation")


def load(name: str) -> ModuleType:
    if name not in SCENARIOS:
        raise FsscopeError(f"replicate: no scenario {name!r}; choose one of {', '.join(SCENARIOS)}")
    return importlib.import_module(SCENARIOS[name])


def listing() -> list[dict]:
    """Every scenario: name, title, its quick and full cost (s, estimated)."""
    out = []
    for name in SCENARIOS:
        module = load(name)
        out.append({"name": name, "title": module.TITLE, "quick_cost_s": round(cost_s(module, quick=True)),
                    "full_cost_s": round(cost_s(module, quick=False))})
    return out


def lessons() -> list[dict]:
    """Every scenario as a lesson: name, title, paper, lesson text, quick cost (s), and its
    findings, each with what the paper saw and why in plain words (for the TUI's Lab)."""
    out = []
    for name in SCENARIOS:
        module = load(name)
        out.append({"name": name, "title": module.TITLE, "paper": module.PAPER, "lesson": module.LESSON,
                    "setup": module.SETUP, "quick_cost_s": round(cost_s(module, quick=True)),
                    "findings": [{"id": fid, "claim": module.CLAIMS[fid][0], "why": module.CLAIMS[fid][1],
                                  "quick_cost_s": round(cost_s(module, quick=True, only=[fid]))}
                                 for fid in module.NEEDS]})
    return out


def cost_s(module: ModuleType, *, quick: bool, only: list[str] | None = None) -> float:
    return sum(p.cost_s() for p in planned(module, quick=quick, only=only))


def planned(module: ModuleType, *, quick: bool, only: list[str] | None = None) -> list:
    """The probe runs the scenario (or only the findings named) needs."""
    probes = module.runs(quick)
    if not only:
        return probes
    unknown = sorted(set(only) - set(module.NEEDS))
    if unknown:
        raise FsscopeError(f"replicate {module.NAME}: no finding {', '.join(unknown)}; "
                           f"choose from {', '.join(module.NEEDS)}")
    keys = {key for finding in only for key in module.NEEDS[finding]}
    return [p for p in probes if p.key in keys]


def run(name: str, *, quick: bool, only: list[str] | None = None,
        progress: Callable[[str], None] = lambda line: None) -> Result:
    """Run scenario ``name`` and judge it."""
    module = load(name)
    probes = planned(module, quick=quick, only=only)
    results: dict[str, Any] = {}
    for probe in probes:
        results[probe.key] = probe.execute(progress=progress)
    findings: list[Finding] = module.judge(results, quick)
    if only:
        findings = [f for f in findings if f.id in only]
    return Result(scenario=name, title=module.TITLE, paper=module.PAPER, quick=quick, setup=list(module.SETUP),
                  runs={p.key: RunDone(setup=p.describe(), run_dir=results[p.key].run_dir) for p in probes},
                  # numbers as plain Python (numpy scalars to numbers, NaN to None): what the CLI,
                  # the Lab and --json show is the same value
                  findings=convert(plain(findings), list[Finding], "replication findings"))


class Kept(Record, frozen=True, kw_only=True):
    """A replication's result kept with the runs it made (``lab.json`` in each): what was run
    (a scenario, or ``scenario/finding``) and its judged findings."""

    selection: str
    result: Result


def keep(result: Result, selection: str) -> None:
    """Write ``result`` into every run it made, so the Lab shows it again after a restart."""
    for done in result.runs.values():
        if done.run_dir:
            store.RunDir(Path(done.run_dir)).write_lab(plain(Kept(selection=selection, result=result)))


def kept(root: Path | None = None) -> dict[str, tuple[str, Result]]:
    """The newest kept result of each selection, with the id of a run it made, from the runs
    directory; a ``lab.json`` that does not read is passed over (its run still opens)."""
    out: dict[str, tuple[str, Result]] = {}
    for run in store.list_runs(root):  # oldest first: a newer result replaces an older one
        data = run.lab()
        if data is None:
            continue
        try:
            record = convert(data, Kept, f"{run.id}/lab.json")
        except FsscopeError:
            continue
        out[record.selection] = (run.id, record.result)
    return out


__all__ = ["SCENARIOS", "Finding", "Kept", "load", "listing", "lessons", "run", "cost_s", "planned", "keep", "kept"]
