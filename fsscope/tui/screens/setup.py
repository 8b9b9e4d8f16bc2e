"""The setup screen: target, recipe, jobs, Start."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import msgspec
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Header, Input, Static

from fsscope import paths
from fsscope.engine import registry
from fsscope.errors import FsscopeError
from fsscope.records import plain
from fsscope.targets import TargetSpec, filesystem
from fsscope.tui.config import RunPlan, recipe_label
from fsscope.tui.screens.base import AppScreen
from fsscope.tui.widgets.fit_footer import FitFooter
from fsscope.tui.widgets.job_picker import JobPicker
from fsscope.tui.widgets.recipe_picker import RecipePicker
from fsscope.tui.widgets.target_picker import TargetPicker

# The target checks are the CLI's (Target.preflight); their words name its options, and the
# setup screen names its fields instead. Longest first: "--ram --size" before "--size".
SETUP_WORDS = (
    ("(--dir PATH)", "(pick Directory)"),
    ("--ram --size", "RAM image size"), ("--image PATH", "a New image file"), ("--size", "size"),
    ("--image", "image"), ("--dir", "directory"), ("--device", "device"), ("--mountpoint", "mount point"),
    ("without root use directory PATH", "without root pick Directory"),
)


def target_bytes(target: TargetSpec) -> int:
    """What a RAM or image target will hold: an image there already, its own size."""
    if target.kind == "image" and os.path.isfile(target.path):
        return os.path.getsize(target.path)
    return target.size_bytes or 0


def in_setup_words(message: str) -> str:
    for cli, setup in SETUP_WORDS:
        message = message.replace(cli, setup)
    return message


def preflight(target: TargetSpec, recipe) -> None:
    """What the CLI refuses before it starts (RAM that is not there, a size too small, a
    mount point in use…), in the setup screen's words. Destroying a device or someone's image
    is asked next (the confirmation), so it is not refused here."""
    asked = msgspec.structs.replace(target, yes_destroy=target.path) if target.kind in ("device", "image") else target
    from fsscope.targets import Target  # the journal, devices, mount table: not for the first frame

    try:
        Target(asked, recipe).preflight()
    except FsscopeError as exc:
        raise FsscopeError(in_setup_words(str(exc))) from None


def _unused(read):
    """A Setup field a plan does not use, or None where it is wrong (nothing reads it)."""
    try:
        return read()
    except FsscopeError:
        return None


class StartButton(Button, inherit_css=False):
    """Textual's Button with the rules of its one look here (default style, success variant):
    Button's own 7 KB of CSS, every style and variant, took more parsing than any other
    stylesheet of the Setup screen, before its first frame (bench/startup.py). The rules are
    Button's own (Textual 8.2), less the ``.-style-default`` each is under."""

    DEFAULT_CSS = """
    StartButton {
        width: auto;
        min-width: 16;
        height: auto;
        line-pad: 1;
        text-align: center;
        content-align: center middle;
        pointer: pointer;
        text-style: bold;
        color: $button-foreground;
        background: $surface;
        border: none;
        border-top: tall $surface-lighten-1;
        border-bottom: tall $surface-darken-1;
        &:disabled { text-opacity: 0.6; pointer: not-allowed; }
        &:focus { text-style: $button-focus-text-style; background-tint: $foreground 5%; }
        &:hover { border-top: tall $surface; background: $surface-darken-1; }
        &.-active {
            background: $surface;
            border-bottom: tall $surface-lighten-1;
            border-top: tall $surface-darken-1;
            tint: $background 30%;
        }
        &.-success {
            color: $button-color-foreground;
            background: $success;
            border-top: tall $success-lighten-2;
            border-bottom: tall $success-darken-3;
            &:hover { background: $success-darken-2; border-top: tall $success; }
            &.-active {
                background: $success;
                border-bottom: tall $success-lighten-2;
                border-top: tall $success-darken-2;
            }
        }
    }
    """


class SetupScreen(AppScreen):
    BINDINGS = [
        Binding("ctrl+r", "start", "Start", priority=True),
    ]

    def compose(self) -> ComposeResult:
        config = self.fs_app.config
        assert config.target is not None  # the app resolved it (config.resolve)
        yield Header(show_clock=False)
        if config.banner:
            yield Static(config.banner, id="banner")
        jobs = list(config.jobs or [job.name for job in registry.DESCRIPTORS if job.setup])
        preferred = "probe" if "probe" in jobs else (jobs[0] if jobs else "")
        # two columns: where and how (target above recipe), and what (the jobs and their
        # parameters, which need the height: three columns left half the screen empty)
        with Horizontal(id="setup-columns"):
            with VerticalScroll(id="setup-target", classes="setup-column", can_focus=False):
                yield TargetPicker(config.target, is_root=bool(config.is_root), discover=config.discover_devices,
                                   id="target-picker")
                yield RecipePicker(config.recipe, id="recipe-picker")
            with VerticalScroll(id="setup-jobs", classes="setup-column", can_focus=False):
                yield JobPicker(jobs, config.job_defaults, [preferred] if preferred else [], id="job-picker")
                yield StartButton("Start ▶  (ctrl+r)", id="start", variant="success")
        yield FitFooter()

    # The focus comes once the jobs' panels are mounted (JobPicker.when_ready): a focused
    # Setup screen is a whole one, every field there to type into.
    AUTO_FOCUS = ""

    def on_mount(self) -> None:
        self.sub_title = "setup: target · recipe · jobs"
        self._sync_recipe()
        jobs = self.query_one("#job-picker", JobPicker)
        jobs.when_ready(self.query_one("#target-list").focus)
        # once that whole screen is painted: the probe's thread took the CPU from that frame
        jobs.when_ready(lambda: self.call_after_refresh(self.query_one("#target-picker", TargetPicker).discover_devices))
        jobs.when_ready(self.fs_app.started_up)

    def on_screen_resume(self) -> None:
        # Coming back (F2) puts the focus on the first control, not in the text field last
        # used: a key meant for a list (space, x, m) must not type into "seconds" unseen.
        if isinstance(self.focused, Input):
            self.query_one("#target-list").focus()

    def on_target_picker_changed(self, event: TargetPicker.Changed) -> None:
        self._sync_recipe()

    def _sync_recipe(self) -> None:
        picker = self.query_one("#target-picker", TargetPicker)
        device = picker.choice.removeprefix("dev:") if picker.kind == "device" else ""
        self.query_one("#recipe-picker", RecipePicker).set_target(picker.kind, device)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "start":
            self.action_start()

    def build_plan(self) -> RunPlan:
        """The plan on screen, checked before anything starts: every wrong field (target,
        recipe, each job's parameters) in one FsscopeError, one problem per line."""
        problems: list[str] = []

        def checked(read):
            try:
                return read()
            except FsscopeError as exc:
                problems.extend(str(exc).splitlines())
                return None

        jobs = checked(self.query_one("#job-picker", JobPicker).requests)
        formats = jobs is None or any(registry.job(r.job).uses_target for r in jobs)  # watch alone: nothing
        if formats:
            target = checked(self.query_one("#target-picker", TargetPicker).spec)
            recipe = checked(self.query_one("#recipe-picker", RecipePicker).recipe)
        else:  # the plan makes nothing there: a wrong target or recipe field is not its problem
            target = _unused(self.query_one("#target-picker", TargetPicker).spec)
            recipe = _unused(self.query_one("#recipe-picker", RecipePicker).recipe)
        if formats and target is not None and (recipe is not None or target.kind == "dir"):
            checked(lambda: preflight(target, recipe))
        if target is not None:
            # scan on an image, RAM or a device was offered, then failed once running
            problems.extend(dict.fromkeys(filter(None, (in_setup_words(registry.job(r.job).target_refusal(target))
                                                        for r in jobs or ()))))
        if target is not None and recipe is not None and target.kind in ("ram", "image") and not target.snapshot \
                and any(registry.job(r.job).uses_target and recipe_label(r.job, plain(r.spec), recipe.name) == recipe.name
                        for r in jobs or ()):
            # a job formats the target with this recipe (a study makes its own): mkfs.xfs
            # refuses under 300M, and said so in a usage text after the job had started
            checked(lambda: filesystem.check_size(recipe, target_bytes(target)))
        problems.extend(filter(None, (registry.missing_extra(r.job) for r in jobs or ())))  # explore without Dask
        if problems:
            raise FsscopeError("\n".join(problems))
        return RunPlan(target or TargetSpec("dir", str(paths.ram_dir(checked=False))), recipe, jobs)

    def action_start(self) -> None:
        try:
            plan = self.build_plan()
        except FsscopeError as exc:
            count = len(str(exc).splitlines())
            self.notify(str(exc),  # paths are text (the app's notify shows every name visibly)
                        title="Cannot start" + (f": {count} problems" if count > 1 else ""),
                        severity="error", timeout=10, markup=False)
            return
        large = plan.large_parts()
        if large:
            from fsscope.tui.screens.confirm import ConfirmScreen  # not for the first frame

            def answered(yes: bool | None) -> None:
                if yes:
                    self._start_checked(plan)
                else:
                    self.notify("Nothing started: change the sizes and press ctrl+r again.", timeout=4)

            self.app.push_screen(ConfirmScreen("This plan is large or longer than asked. Start it anyway?",
                                               "\n".join(large) + "\n\nCancel (c on the live screen) keeps "
                                               "what was measured, if you change your mind.",
                                               yes="start", no="back to setup"), answered)
            return
        self._start_checked(plan)

    def _start_checked(self, plan: RunPlan) -> None:
        if not plan.destructive:
            self.fs_app.start_plan(plan)
            return
        picker = self.query_one("#target-picker", TargetPicker)
        device = picker.devices.get(plan.target.path)
        if device is not None and device.hard_reasons():
            self.notify(f"{plan.target.path}: {'; '.join(device.hard_reasons())}", title="Refused",
                        severity="error", timeout=8)
            return
        from fsscope.targets import image  # not for the first frame
        from fsscope.tui.screens.confirm import ConfirmDestroyScreen  # not for the first frame

        verdict = device.verdict() if device is not None else image.foreign_reason(Path(plan.target.path))

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.fs_app.start_plan(replace(plan, target=msgspec.structs.replace(plan.target, yes_destroy=plan.target.path)))
            else:
                self.notify(f"{plan.target.path} was not touched.", timeout=4)

        self.app.push_screen(ConfirmDestroyScreen(plan.target.path, verdict), confirmed)
