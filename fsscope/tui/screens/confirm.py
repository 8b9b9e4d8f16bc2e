"""Formatting a block device (or an image file fsscope did not create) destroys what is on it:
the user types its name."""

from __future__ import annotations

import os

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static


class ConfirmDestroyScreen(ModalScreen[bool]):
    """Dismissed with True only when the typed name is the device or file (``sdb`` or
    ``/dev/sdb``; ``old.img`` or its path)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    DEFAULT_CSS = """
    ConfirmDestroyScreen { align: center middle; }
    ConfirmDestroyScreen > Vertical {
        width: 72; height: auto; padding: 1 2; border: thick $error; background: $surface;
    }
    ConfirmDestroyScreen #confirm-title { text-style: bold; color: $error; }
    ConfirmDestroyScreen #confirm-error { color: $error; height: auto; }
    """

    def __init__(self, device: str, verdict: str = ""):
        super().__init__()
        self.device = device
        self.verdict = verdict

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Format {self.device}? Everything on it will be destroyed.", id="confirm-title")
            yield Static(f"fsscope's check says: {self.verdict or 'blank and unused'}.\n"
                         f"mkfs overwrites its file system, partition table and data. There is no undo.\n\n"
                         f"Type the device name ({os.path.basename(self.device)}) and press Enter to "
                         f"destroy it, or Escape to go back.")
            yield Input(placeholder=os.path.basename(self.device), id="confirm-input")
            yield Static("", id="confirm-error")

    def on_mount(self) -> None:
        self.query_one("#confirm-input", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        typed = event.value.strip()
        if typed and typed in (self.device, os.path.basename(self.device)):
            self.dismiss(True)
        else:
            self.query_one("#confirm-error", Static).update(
                f"'{typed}' is not {os.path.basename(self.device)}: nothing was done.")

    def action_cancel(self) -> None:
        self.dismiss(False)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question (y / Enter: yes; n / Escape: no), for what deserves a second thought."""

    BINDINGS = [
        Binding("y,enter", "answer(True)", "Yes", priority=True),
        Binding("n,escape", "answer(False)", "No", priority=True),
    ]

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 72; height: auto; padding: 1 2; border: thick $warning; background: $surface;
    }
    ConfirmScreen #confirm-question { text-style: bold; color: $warning; }
    """

    def __init__(self, question: str, body: str, yes: str = "yes", no: str = "no"):
        super().__init__()
        self.question, self.body, self.yes, self.no = question, body, yes, no

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, id="confirm-question")
            yield Static(f"{self.body}\n\ny / Enter: {self.yes}    n / Escape: {self.no}")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ConfirmQuitScreen(ConfirmScreen):
    """Quitting with a job running cancels it: say so and ask."""

    def __init__(self):
        super().__init__("A job is still running. Quit fsscope?",
                         "Quitting cancels it: the job stops, unmounts, detaches and keeps what it has "
                         "measured so far.", yes="quit", no="stay")
