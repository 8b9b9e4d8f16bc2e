"""The Lab screen driven with Pilot: the seed papers' scenarios and findings as lessons, and a
real quick run of one finding whose verdict appears on the screen."""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot_wait import until, until_screen
from textual.widgets import DataTable, Log, Markdown, Tree

from fsscope import replicate
from fsscope.tui import AppConfig, make_app
from fsscope.tui.screens.lab import LabScreen
from fsscope.tui.screens.live import LiveScreen

SIZE = (140, 45)


def lesson_text(screen: LabScreen) -> str:
    return screen.query_one("#lab-lesson", Markdown).source


async def move_to(pilot, screen: LabScreen, wanted: tuple[str, str | None]) -> None:
    """Press down in the tree until the wanted scenario/finding is highlighted."""
    for _ in range(60):
        if screen.selected() == wanted:
            return
        await pilot.press("down")
    raise AssertionError(f"{wanted} is not in the lab's tree")


async def test_lab_lists_every_scenario_and_explains_a_finding():
    app = make_app(AppConfig(is_root=False, start_screen="runs"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        screen = await until_screen(pilot, app, LabScreen)
        tree = screen.query_one("#lab-tree", Tree)
        listed = [node.data[0] for node in tree.root.children]
        assert listed == ["aota-kono", "cao", "chopper", "geriatrix", "mingardi"]
        findings = {node.data[0]: [leaf.data[1] for leaf in node.children] for node in tree.root.children}
        for name in replicate.SCENARIOS:
            assert findings[name] == list(replicate.load(name).NEEDS), name
        # the first scenario's lesson is shown; a finding's claim and why replace it when chosen
        await until(pilot, lambda: "Aota & Kono" in lesson_text(screen), "the first lesson")
        await move_to(pilot, screen, ("aota-kono", "xfs-shortform-limit"))
        claim, why = replicate.load("aota-kono").CLAIMS["xfs-shortform-limit"]
        await until(pilot, lambda: claim in lesson_text(screen) and why in lesson_text(screen),
                    "the finding's claim and why")
        assert "ext4-htree-start" not in lesson_text(screen)  # only the chosen finding
        await move_to(pilot, screen, ("mingardi", None))
        await until(pilot, lambda: replicate.load("mingardi").LESSON in lesson_text(screen), "mingardi's lesson")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, LabScreen), "leaving the lab")


@pytest.mark.privileged
async def test_lab_runs_a_finding_and_shows_its_verdict():
    # btrfs-first-leaf-full is the smallest probe of the quick scenarios: 200 creat() x 5 runs
    module = replicate.load("aota-kono")
    assert replicate.cost_s(module, quick=True, only=["btrfs-first-leaf-full"]) < 30
    app = make_app(AppConfig(start_screen="runs"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        screen = await until_screen(pilot, app, LabScreen)
        await move_to(pilot, screen, ("aota-kono", "btrfs-first-leaf-full"))
        await pilot.press("r")
        await until(pilot, lambda: screen.running == "aota-kono/btrfs-first-leaf-full", "the finding running")
        log = screen.query_one("#lab-log", Log)
        await until(pilot, lambda: any("btrfs-ram" in line for line in log.lines), "the run's progress lines")
        await until(pilot, lambda: screen.running is None, "the run's end", timeout_s=240)
        assert screen.error is None
        assert screen.result is not None
        (finding,) = screen.result.findings
        assert finding.id == "btrfs-first-leaf-full" and finding.paper == 45
        table = screen.query_one("#lab-verdicts", DataTable)
        row = [str(cell) for cell in table.get_row("btrfs-first-leaf-full")]
        assert row[0] == finding.verdict in ("agree", "disagree", "inconclusive")  # the first column
        assert row[1] == "btrfs-first-leaf-full" and row[2] == finding.why and row[5] == "45"
        assert any(line.startswith(f"btrfs-first-leaf-full: {finding.verdict}") for line in log.lines)
        # the recorded run opens in the usual replay view
        (run_dir,) = screen.run_dirs()
        await pilot.press("o")
        live = await until_screen(pilot, app, LiveScreen, "the replay of the lab's run")
        assert str(live.record.run.path) == run_dir
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "back in the lab")
    # the result is kept with the run it made: a new app on the same data directory shows it
    assert (Path(run_dir) / "lab.json").is_file()
    again = make_app(AppConfig(start_screen="runs"))
    async with again.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        screen = await until_screen(pilot, again, LabScreen)
        table = screen.query_one("#lab-verdicts", DataTable)
        await move_to(pilot, screen, ("aota-kono", None))
        assert table.row_count == 0 and "no result yet" in str(table.border_title)  # the scenario was not run
        await move_to(pilot, screen, ("aota-kono", "btrfs-first-leaf-full"))
        await until(pilot, lambda: table.row_count == 1, "the kept result")
        kept = [str(cell) for cell in table.get_row("btrfs-first-leaf-full")]
        assert kept == row
        assert Path(run_dir).name in str(table.border_title)
        assert screen.run_dirs() == [run_dir]  # o replays it as before the restart
