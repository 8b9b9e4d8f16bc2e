"""Where to measure: the embedded default image, a new image file, a RAM image, a directory,
or one of the machine's block devices (each shown as usable or not, with the reason)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from fsscope import paths
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
from fsscope.targets import DEFAULT_SIZE_BYTES, TargetSpec
from fsscope.targets.spec import RAM_DIR
from fsscope.tui.config import default_image_path, scratch_dir
from fsscope.tui.widgets.form import FieldRow, rows_css
from fsscope.units import parse_size_bytes

if TYPE_CHECKING:
    from fsscope.targets import devices

NOTES = {
    "default": "The embedded default: a sparse image file in fsscope's data directory, attached as a "
               "loop device and formatted fresh for every run. Nothing else on the machine is touched.",
    "image": "A sparse image file (created if missing) attached as a loop device with direct I/O. "
             "XFS needs at least 300M.",
    "ram": "An image in {ram_dir} (RAM), attached as a loop device and removed afterwards: no disk "
           "noise, but no real device behaviour either.",
    "dir": "A directory on a file system you already have: nothing is formatted or mounted; each "
           "run works in a fresh subdirectory that is removed afterwards, measured as the file "
           "system holding it (used, not fresh). The recipe does not apply.",
    "device": "A real block device. Formatting it DESTROYS everything on it: you will be asked to "
              "type its name to confirm.",
}


def size_text(n: int) -> str:
    for unit, factor in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


def found_text(path: str) -> str:
    """What file system holds a directory target, in one line (or why it is not known)."""

    directory = os.path.abspath(os.path.expanduser(path.strip())) if path.strip() else ""
    if not directory or not os.path.isdir(directory):
        return "Found there: nothing yet (no such directory)."
    from fsscope.targets.existing import existing_fs  # the mount table: not for the first frame

    try:
        return f"Found there: {existing_fs(directory).summary()}."
    except FsscopeError as exc:
        return f"Found there: not known ({exc})."


@dataclass
class DevicesFound(Message):
    devices: list[devices.Device]
    error: str = ""


class TargetPicker(Vertical):
    """The choice is the highlighted option; path and size below apply to it."""

    DEFAULT_CSS = rows_css("TargetPicker", 6) + """
    TargetPicker { height: auto; }
    TargetPicker OptionList { height: auto; max-height: 14; padding: 0; }
    TargetPicker OptionList, TargetPicker OptionList:focus { border: none; }
    TargetPicker #target-size { width: 12; }
    TargetPicker #target-note { color: $foreground 70%; padding: 0 1; }
    """

    class Changed(Message):
        """The target choice or one of its fields changed."""

    def __init__(self, initial: TargetSpec, *, is_root: bool, discover=None, id: str | None = None):
        super().__init__(id=id)
        self.initial = initial
        self.is_root = is_root
        self.discover = discover
        self.devices: dict[str, devices.Device] = {}
        self.choice = self._initial_choice()
        self._paths = {"image": str(paths.images_dir() / "probe.img"), "dir": str(scratch_dir())}
        if initial.kind in ("image", "dir") and self.choice != "default":
            self._paths[initial.kind] = initial.path
        self._size_text = size_text(initial.size_bytes or DEFAULT_SIZE_BYTES)
        self._note = ""

    def _initial_choice(self) -> str:
        spec = self.initial
        if spec.kind == "image" and Path(spec.path) == default_image_path():
            return "default"
        if spec.kind == "device":
            return f"dev:{spec.path}"
        return spec.kind

    def compose(self) -> ComposeResult:
        yield OptionList(*self._base_options(), id="target-list")
        with FieldRow("path"):
            yield Input(id="target-path", placeholder="path", compact=True)
        with FieldRow("size", id="target-size-row"):
            with self.prevent(Input.Changed):  # its first value is no change (nor a message)
                size = Input(self._size_text, id="target-size", placeholder="e.g. 512M, 2G", compact=True)
            yield size
        yield Static("", id="target-note")

    def _base_options(self) -> list[Option | None]:
        root_only = not self.is_root
        why = Text("  needs root", style="dim")
        return [
            # the path is in the path field below: here it wrapped mid-word on a narrow screen
            Option(Text.assemble(("Default image", "bold"), "  in fsscope's data directory",
                                 why if root_only else ""), id="default", disabled=root_only),
            Option(Text.assemble(("New image file", "bold"), "  path + size below", why if root_only else ""),
                   id="image", disabled=root_only),
            Option(Text.assemble(("RAM image", "bold"), f"  in {RAM_DIR}, removed afterwards",
                                 why if root_only else ""), id="ram", disabled=root_only),
            Option(Text.assemble(("Directory", "bold"), "  no formatting, no root needed"), id="dir"),
            None,
            Option(Text("Block devices: looking…", style="dim"), id="dev-header", disabled=True),
        ]

    def on_mount(self) -> None:
        self.border_title = "1 · Target"
        self._select(self.choice)

    def discover_devices(self) -> None:
        """Look for the block devices now, in a thread (the list says "looking…" until it
        answers). The Setup screen asks once it is whole: the probe (blkid) competed with the
        screen's start-up for the CPU."""
        self._discover()

    @work(thread=True, exclusive=True, group="discover-devices", exit_on_error=False,
          description="discovering block devices")
    def _discover(self) -> None:
        from fsscope.targets import devices  # not for the first frame (issue 33)

        try:
            found = (self.discover or devices.discover)()
            self.post_message(DevicesFound(list(found)))
        except Exception as exc:  # noqa: BLE001 - shown to the user, the picker still works
            self.post_message(DevicesFound([], error=str(exc)))

    def on_devices_found(self, message: DevicesFound) -> None:
        option_list = self.query_one("#target-list", OptionList)
        header = "Block devices" if message.devices else "Block devices: none found"
        if message.error:
            header = f"Block devices: discovery failed ({message.error})"
        option_list.replace_option_prompt("dev-header", Text(header, style="dim"))
        for device in message.devices:
            self.devices[device.path] = device
            hard, soft = device.hard_reasons(), device.soft_reasons()
            if hard:
                mark, style, verdict = "✗", "dim", "not usable: " + "; ".join(hard)
            elif soft:
                mark, style, verdict = "!", "", "usable only if you confirm destroying it: " + "; ".join(soft)
            else:
                mark, style, verdict = "✓", "", "usable (blank, unused)"
            if not self.is_root and not hard:
                verdict += " · needs root"
            label = Text.assemble((f"{mark} {device.path}", "bold " + style),
                                  f"  {format_bytes(device.size_bytes)} {device.model or ''}".rstrip(),
                                  (f"  {verdict}", "dim" if hard else ""))
            option_list.add_option(Option(label, id=f"dev:{device.path}", disabled=bool(hard) or not self.is_root))
        if self.choice.startswith("dev:"):
            self._select(self.choice)

    def _select(self, choice: str) -> None:
        option_list = self.query_one("#target-list", OptionList)
        try:
            index = option_list.get_option_index(choice)
        except Exception:  # noqa: BLE001 - not listed (yet)
            return
        option_list.highlighted = index
        self._apply(choice)

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        # not the highlight _select gave, applied there already
        if event.option.id and event.option.id != "dev-header" and event.option.id != self.choice:
            self._apply(event.option.id)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id and event.option.id != "dev-header":
            self._apply(event.option.id)
            self.screen.focus_next()

    def _apply(self, choice: str) -> None:
        self.choice = choice
        kind = self.kind
        path_input = self.query_one("#target-path", Input)
        size_input = self.query_one("#target-size", Input)
        # without the path field's Changed: its handler would keep the path this puts there
        # and post Changed, which this does below (each a preview of the recipe before the
        # Setup screen's first frame, bench/startup.py)
        with self.prevent(Input.Changed):
            if choice == "default":
                path_input.value = str(default_image_path())
            elif kind in ("image", "dir"):
                path_input.value = self._paths[kind]
            elif kind == "device":
                path_input.value = choice.removeprefix("dev:")
            else:
                path_input.value = ""
        path_input.disabled = kind not in ("image", "dir")
        # a RAM image has no path to give (it read "path  path"); a directory or a device no size
        path_input.placeholder = f"a new file in {RAM_DIR}" if kind == "ram" else "path"
        self.query_one("#target-size-row").display = kind in ("image", "ram")
        size_input.disabled = kind not in ("image", "ram") or choice == "default" and Path(path_input.value).exists()
        note = NOTES["device" if kind == "device" else choice].format(ram_dir=RAM_DIR)
        device = self.devices.get(choice.removeprefix("dev:")) if kind == "device" else None
        if device is not None:
            note += f"\n{device.path}: {device.verdict()}"
        self._note = note
        self._show_found()
        self.post_message(self.Changed())

    def _show_found(self) -> None:
        """The note, and for a directory what file system holds it (before anything starts)."""
        note = self._note
        if self.kind == "dir":
            note += "\n" + found_text(self.query_one("#target-path", Input).value)
        self.query_one("#target-note", Static).update(note)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "target-path" and self.kind in ("image", "dir") and self.choice != "default":
            self._paths[self.kind] = event.value
            if self.kind == "dir":
                self._show_found()
        if event.input.id in ("target-path", "target-size"):
            event.stop()
            self.post_message(self.Changed())

    @property
    def kind(self) -> str:
        if self.choice == "default":
            return "image"
        if self.choice.startswith("dev:"):
            return "device"
        return self.choice

    def spec(self) -> TargetSpec:
        """The chosen target; FsscopeError when a field is wrong."""
        kind = self.kind
        path = self.query_one("#target-path", Input).value.strip()
        size_raw = self.query_one("#target-size", Input).value.strip() or "2G"
        size = parse_size_bytes(size_raw, "target size")
        if kind in ("image", "dir") and not path:
            raise FsscopeError(f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} target needs a path")
        if kind == "dir":
            directory = os.path.abspath(os.path.expanduser(path))
            if not os.path.isdir(directory):
                why = "is not a directory" if os.path.exists(directory) else "does not exist"
                raise FsscopeError(f"directory target: {directory} {why} — create it or pick another")
            return TargetSpec("dir", directory, size)
        if kind == "image":
            return TargetSpec("image", os.path.abspath(os.path.expanduser(path)), size)
        if kind == "ram":
            return TargetSpec("ram", "", size)
        return TargetSpec("device", path, size)
