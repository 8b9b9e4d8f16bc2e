"""The fsscope investigator: an App with three modes (setup, live, runs), themes from
``themes/``, command-palette commands for every action, and the one worker error funnel.

Build it with :func:`make_app` (the CLI, the tests and the snapshot tests all do)."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import SystemCommand
from textual.binding import Binding
from textual.dom import DOMNode
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState

from fsscope.format import visible_lines
from fsscope.tui.config import AppConfig, RunPlan, resolve
from fsscope.tui.key_order import OrderedInput
from fsscope.tui.screens.setup import SetupScreen
from fsscope.tui.themes import FSSCOPE_THEMES, VARIABLE_DEFAULTS, load_themes

if TYPE_CHECKING:
    from fsscope.tui.jobs import PlanControl
    from fsscope.tui.screens.live import LiveScreen

# The screens other than Setup are imported when first opened: the live screen brings every
# job's view and the heatmap, Runs the comparison, the Lab the papers' scenarios -- seconds of
# imports before the first screen (bench/startup.py).


def _live_screen() -> Screen:
    from fsscope.tui.screens.live import LiveScreen

    return LiveScreen()


def _runs_screen() -> Screen:
    from fsscope.tui.screens.runs import RunsScreen

    return RunsScreen()


class FsscopeApp(OrderedInput):
    TITLE = "fsscope"
    CSS_PATH = "app.tcss"
    SCREENS = {"setup": SetupScreen, "live": _live_screen, "runs": _runs_screen}
    MODES = {"setup": "setup", "live": "live", "runs": "runs"}
    DEFAULT_MODE = "setup"
    # Screen classes by terminal size (app.tcss): 80×24 is a supported size, where the data
    # gets the room and the hints show for the focused field only.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]

    BINDINGS = [
        Binding("f1", "help", "Help"),
        Binding("question_mark", "keys", "Keys", show=False),  # as in btop, k9s, less
        Binding("f2", "mode('setup')", "Setup"),
        Binding("f3", "mode('live')", "Live"),
        Binding("f4", "mode('runs')", "Runs"),
        Binding("f5", "lab", "Lab"),
        Binding("t", "next_theme", "Theme"),
        # ctrl+s works everywhere, even in a text field (where x is just a letter)
        Binding("ctrl+s", "export_svg", "SVG", priority=True),
        Binding("x", "export_svg", "SVG", show=False),
        Binding("m", "export_flags", "Flags→MD", show=False),
        Binding("q", "quit", "Quit", show=False),
    ]

    def __init__(self, config: AppConfig | None = None):
        self.config = resolve(config or AppConfig())
        """The resolved configuration (target, recipe, theme, where runs go)."""
        super().__init__()
        self.theme_problems: list[str] = []
        for theme in load_themes():
            self.register_theme(theme)  # here, not in on_mount: the CSS uses their variables
        wanted = self.config.theme
        self.theme = wanted if wanted in self.available_themes else FSSCOPE_THEMES[0]
        # The stylesheet is parsed first when the app starts: with this theme's variables from
        # the start, the re-parses the theme's change asks for change nothing (refresh_css).
        self.stylesheet.set_variables(self.get_css_variables())
        self._styled_theme = self.theme
        self.plan_controls: list[PlanControl] = []
        """The PlanControl of every plan started (the live screen adds them)."""
        self.worker_errors: list[str] = []
        """Every worker failure, in order (also shown as a notification)."""

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """A notification is text, never markup, whatever the caller says (a widget's and a
        screen's ``notify`` pass Textual's default, markup, on to this): a job's error or a path
        it quotes may carry a name someone else chose ("big[/]x", "[link=…]"); its control
        characters are shown visibly, as everywhere else."""
        del markup
        super().notify(visible_lines(message), title=visible_lines(title), severity=severity,
                       timeout=timeout, markup=False)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(VARIABLE_DEFAULTS)

    def refresh_css(self, animate: bool = True) -> None:
        # Textual refreshes the CSS at start twice -- for the theme set in __init__ and for the
        # first mode's screen -- each time parsing every stylesheet again and restyling the
        # app, before anything but the app is styled. Until a screen is mounted, with the
        # variables the stylesheet already has (__init__), the app's own styles are all that
        # needs doing (the Setup screen's first frame comes before Textual styles the app).
        if self.theme == self._styled_theme and not any(
                screen.is_mounted for stack in self._screen_stacks.values() for screen in stack):
            self.stylesheet.apply(self, animate=animate)
            return
        super().refresh_css(animate)

    def update_styles(self, node: DOMNode, animate: bool = True) -> None:
        # A widget not mounted yet is restyled whenever a class of it changes (an Input's
        # "-valid", a compact widget's "-textual-compact", set in its __init__): wasted, as it is
        # styled once it is mounted, with the classes it has then (App._register). About 30
        # such restyles were 3 % of the Setup screen's start-up (bench/startup.py).
        if not node.is_attached:
            return
        super().update_styles(node, animate)

    # -- start-up -----------------------------------------------------------------------------
    START_UP_GC_LIMIT_S = 10.0
    """The longest the collector waits for the first screen to be whole (see on_load)."""
    _gc_paused = False

    def on_load(self) -> None:
        # No garbage collection until the first screen is whole (started_up): building it makes
        # some hundred thousand objects, few of them garbage, and the collector's passes over
        # them, several full ones, were a tenth of the Setup screen's start-up
        # (bench/startup.py). It runs again once the screen is there, at the latest after
        # START_UP_GC_LIMIT_S, and when the app ends.
        if gc.isenabled():
            gc.disable()
            self._gc_paused = True
            self.set_timer(self.START_UP_GC_LIMIT_S, self.started_up)

    def started_up(self, *, at_once: bool = False) -> None:
        """The first screen is whole: garbage collection runs again (if on_load paused it) once
        it is painted (the first collection then, a full one, comes after that frame)."""
        if at_once:
            self._collect_again()
        elif self._gc_paused:
            self.call_after_refresh(self._collect_again)

    def _collect_again(self) -> None:
        if self._gc_paused:
            self._gc_paused = False
            gc.enable()

    def on_mount(self) -> None:
        if self.config.start_screen != self.DEFAULT_MODE:
            self.switch_mode(self.config.start_screen)
            self.call_after_refresh(self.started_up)  # the Setup screen, which says when it is whole, is not shown

    # -- the plan ---------------------------------------------------------------------------
    @property
    def live(self) -> LiveScreen:
        return self.get_screen("live")  # type: ignore[return-value]

    def start_plan(self, plan: RunPlan) -> bool:
        live = self.live
        if live.running:
            self.notify("A job is still running: cancel it on the live screen (c) first.",
                        severity="warning", timeout=5)
            return False
        from fsscope.tui.screens.lab import LabScreen

        lab = next((s for s in self._live_stack() if isinstance(s, LabScreen) and s.running), None)
        if lab is not None:  # two measured jobs at once on a small machine would each distort the other
            self.notify(f"The Lab is running {lab.running}: let it end first.", severity="warning", timeout=5)
            return False
        self.switch_mode("live")
        while len(self.screen_stack) > 1 and not isinstance(self.screen, ModalScreen):
            self.pop_screen()  # a replay or the Lab left over the live screen: the new job is what shows
        return live.begin(plan)

    def _live_stack(self) -> list[Screen]:
        """The screens of the live mode (its live screen, then what was opened over it)."""
        return list(self._screen_stacks.get("live", []))

    async def action_quit(self) -> None:
        """Quit; with a job running, ask first (quitting cancels it: it cleans up, then exits)."""
        from fsscope.tui.screens.confirm import ConfirmQuitScreen  # not before the first screen

        if isinstance(self.screen, ConfirmQuitScreen):
            self.screen.dismiss(True)  # ctrl+q twice: yes
            return
        if not any(not c.done.is_set() for c in self.plan_controls):
            self.exit()
            return

        async def answered(yes: bool | None) -> None:
            if yes:
                running = self.live.mark_stopping("cancelling")
                what = ", ".join(running) or "the running job"
                self.notify(f"Cancelling {what}: it unmounts and detaches before fsscope exits…", timeout=30)
                await self.finish_jobs()
                ended = [f"{j.job} run {j.run_id}: {j.status}" for j in self.live.jobs if j.run_id and j.stopping]
                # said after the screen is gone (Text: a run's name is never markup)
                self.exit(message=Text(f"fsscope: quit and cancelled what was running ({'; '.join(ended) or what}); "
                                       "what it measured is kept: fsscope runs"))

        self.push_screen(ConfirmQuitScreen(), answered)

    async def finish_jobs(self, timeout_s: float = 60.0) -> None:
        """Cancel every running plan and wait (without blocking the UI) until its job
        processes have cleaned up and exited; kill what does not stop in time."""
        running = [c for c in self.plan_controls if not c.done.is_set()]
        for control in running:
            control.cancel()
        deadline = time.monotonic() + timeout_s
        while any(not c.done.is_set() for c in running):
            if time.monotonic() > deadline:
                for control in running:
                    control.kill()
                deadline = time.monotonic() + 10.0
                running = [c for c in running if not c.done.is_set()]
                if time.monotonic() > deadline:
                    break
            await asyncio.sleep(0.05)

    async def on_unmount(self) -> None:
        self.started_up(at_once=True)  # an app that ends before its first screen was whole
        # Whatever the way out (ctrl+q, an error, a signal), no job process outlives the app.
        await self.finish_jobs()

    # -- one error funnel for every worker -------------------------------------------------------
    @on(Worker.StateChanged)
    def worker_failed(self, event: Worker.StateChanged) -> None:
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        line = f"{event.worker.name or event.worker.description}: {type(error).__name__}: {error}"
        self.worker_errors.append(line)
        self.log.error(line)
        self.notify(line, title="Background work failed", severity="error", timeout=10)
        try:
            self.live.log_panel.note(f"error: {line}", style="bold red")
        except Exception:  # noqa: BLE001 - the live screen may not be composed
            pass

    # -- actions -----------------------------------------------------------------------------
    def action_mode(self, mode: str) -> None:
        if self.current_mode != mode:
            self.switch_mode(mode)
        elif len(self.screen_stack) > 1 and not isinstance(self.screen, ModalScreen):
            # F4 on a replay or a comparison goes back to the runs list (as F2/F3 go to theirs)
            while len(self.screen_stack) > 1:
                self.pop_screen()

    def action_lab(self) -> None:
        """The seed papers' findings as lessons: read one, run it, see its verdict."""
        from fsscope.tui.screens.lab import LabScreen

        if not isinstance(self.screen, LabScreen):
            self.push_screen(LabScreen())

    def action_help(self) -> None:
        from fsscope.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_keys(self) -> None:
        """The keys of the screen in front (its own, its views', the focused widget's, the app's)."""
        if not isinstance(self.screen, ModalScreen):
            from fsscope.tui.screens.keys import KeysScreen

            self.push_screen(KeysScreen(self.screen))

    def action_next_theme(self) -> None:
        names = [name for name in FSSCOPE_THEMES if name in self.available_themes]
        current = self.theme
        self.theme = names[(names.index(current) + 1) % len(names)] if current in names else names[0]
        self.notify(f"theme: {self.theme}", timeout=2)

    def action_export_svg(self) -> str:
        screen = self.screen
        name = type(screen).__name__.removesuffix("Screen").lower() or "screen"
        from fsscope.tui import exports  # its report helpers load numpy: not for the Setup screen
        from fsscope.tui.screens.live import LiveScreen

        if isinstance(screen, LiveScreen) and screen.shown_job is not None and screen.shown_job.run_id:
            name += f"-{screen.shown_job.run_id}"
        path = self.save_screenshot(exports.stamped(name, ".svg"), str(exports.export_dir()))
        self.notify(f"Screen saved to {path}", title="Exported", timeout=6)
        return path

    def action_export_flags(self) -> None:
        """The flags of what this screen shows (a live or replayed run, the highlighted run,
        the two compared runs) as Markdown; a screen without flags says so."""
        export = getattr(self.screen, "action_export_flags", None)
        if export is None:
            self.notify("This screen shows no flags: open a run (F3 live, F4 runs) to export its flags.",
                        timeout=4)
            return
        export()

    def _on_live(self, action: str) -> None:
        from fsscope.tui.screens.live import LiveScreen

        screen = self.screen if isinstance(self.screen, LiveScreen) else self.live
        getattr(screen, f"action_{action}")()

    def _on_heatmap(self, action: str) -> None:
        try:
            heatmap = self.screen.query_one("#heatmap")
        except Exception:  # noqa: BLE001
            self.notify("This screen has no heatmap.", timeout=3)
            return
        getattr(heatmap, f"action_{action}")()

    def _on_setup(self) -> None:
        self.switch_mode("setup")
        self.get_screen("setup").action_start()  # type: ignore[attr-defined]

    def _on_runs(self, action: str) -> None:
        from fsscope.tui.screens.runs import RunsScreen

        if not isinstance(self.screen, RunsScreen):
            self.switch_mode("runs")
        self.call_after_refresh(lambda: getattr(self.get_screen("runs"), f"action_{action}")())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Start", "Start the jobs chosen on the setup screen (ctrl+r)", self._on_setup)
        yield SystemCommand("Cancel job", "Stop the running job; it cleans up and keeps its data (c)",
                            lambda: self._on_live("cancel_job"))
        yield SystemCommand("Setup screen", "Pick target, recipe and jobs (F2)", lambda: self.action_mode("setup"))
        yield SystemCommand("Live screen", "Progress, heatmap, sparklines, flags, log (F3)",
                            lambda: self.action_mode("live"))
        yield SystemCommand("Runs screen", "Recorded runs: replay or compare (F4)", lambda: self.action_mode("runs"))
        yield SystemCommand("Lab", "The seed papers' findings: read one, run it, see its verdict (F5)",
                            self.action_lab)
        yield SystemCommand("Open run", "Replay the highlighted recorded run (Enter on the runs screen)",
                            lambda: self._on_runs("open_run"))
        yield SystemCommand("Mark run", "Mark the highlighted run for comparison (space)",
                            lambda: self._on_runs("mark"))
        yield SystemCommand("Compare runs", "Compare the two marked runs side by side (c)",
                            lambda: self._on_runs("compare"))
        yield SystemCommand("Next theme", "Cycle fsscope's dark, light and high-contrast themes (t)",
                            self.action_next_theme)
        yield SystemCommand("Export screen as SVG", "Save what is on screen as an SVG picture (x)",
                            self.action_export_svg)
        yield SystemCommand("Export flags as Markdown",
                            "Write the flags and notes of the run on this screen to exports/ (m)",
                            self.action_export_flags)
        yield SystemCommand("Heatmap: zoom in", "Fewer files per column (+)", lambda: self._on_heatmap("zoom_in"))
        yield SystemCommand("Heatmap: zoom out", "More files per column (-)", lambda: self._on_heatmap("zoom_out"))
        yield SystemCommand("Heatmap: fit", "All files on screen (0)", lambda: self._on_heatmap("zoom_fit"))
        yield SystemCommand("Heatmap: bucket aggregate", "Show a bucket's max, p99, p90, median or mean (a)",
                            lambda: self._on_heatmap("cycle_aggregate"))
        yield SystemCommand("Help", "What each view shows and how to read it (F1)", self.action_help)
        yield SystemCommand("Keys", "The keys of the screen in front of you (?)", self.action_keys)


def make_app(config: AppConfig | None = None, **overrides) -> FsscopeApp:
    """The one way to build the app: ``make_app(AppConfig(...))`` or ``make_app(theme=...)``."""
    if config is None:
        config = AppConfig(**overrides)
    elif overrides:
        from dataclasses import replace

        config = replace(config, **overrides)
    return FsscopeApp(config)
