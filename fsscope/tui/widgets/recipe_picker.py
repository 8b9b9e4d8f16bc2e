"""Which file system and how: a recipe, its hygiene toggles, extra mkfs/mount options, and a
preview of the exact mkfs and mount commands fsscope will run."""

from __future__ import annotations

import shlex

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Checkbox, Input, Select, Static

from fsscope import recipes
from fsscope.errors import FsscopeError
from fsscope.recipes import ATIME_MODES, Recipe
from fsscope.targets import filesystem
from fsscope.tui.widgets.choice import Choice
from fsscope.tui.widgets.form import FieldRow, rows_css
from fsscope.tui.widgets.tick import Tick

PLACEHOLDERS = {
    "prep-io_scheduler": ("keep (e.g. none, mq-deadline)", "keep (e.g. none)"),
    "mkfs-extra": ("extra mkfs options, e.g. -i size=1024", "e.g. -i size=1024"),
    "mount-extra": ("extra mount options, e.g. nobarrier", "e.g. nobarrier"),
}
"""Each text field's placeholder, long and (where the long is cut) short."""
FIELD_LABEL_CELLS = 14  # a field row's label, the picker's border and padding

TOGGLES = (
    ("drop_caches", "drop caches before each run"),
    ("remount_after_populate", "remount after populating"),
    ("no_lazy_init", "ext4: no lazy inode-table init"),
    ("null_hash_seed", "ext4: fixed htree hash seed"),
)
EXT4_ONLY = ("no_lazy_init", "null_hash_seed")


def unusable(recipe: Recipe) -> str | None:
    """Why a job with ``recipe`` would fail at once on this machine (the kernel or mkfs lacks
    its file system), None when it can run."""
    try:
        filesystem.check_supported(recipe)
    except FsscopeError as exc:
        return str(exc).removeprefix(f"recipe {recipe.name}: ")
    return None


class RecipePicker(Vertical):
    DEFAULT_CSS = rows_css("RecipePicker", 10) + """
    RecipePicker { height: auto; }
    RecipePicker #recipe-description { color: $foreground 70%; padding: 0 1; }
    RecipePicker #recipe-preview { padding: 0 1; background: $panel; }
    """

    class Changed(Message):
        """The recipe or one of its options changed."""

    def __init__(self, initial: Recipe | None, *, id: str | None = None):
        super().__init__(id=id)
        self.recipes = {r.name: r for r in recipes.available()}
        if initial is not None:
            self.recipes.setdefault(initial.name, initial)
        self.initial = initial
        self.target_kind = "image"
        self.preview_device = "/dev/loopN"
        self._loading = False
        self._loaded: Recipe | None = None
        """The recipe whose own hygiene is in the toggles (_load)."""

    def compose(self) -> ComposeResult:
        # whether a file system is usable, once for all its recipes (it reads /proc/filesystems
        # and looks for mkfs on PATH, for each of the ~11 recipes before the first frame)
        usable = {fs: unusable(next(r for r in self.recipes.values() if r.fs == fs)) is None
                  for fs in {r.fs for r in self.recipes.values()}}
        options = [(f"{name}  ({r.fs}{'' if usable[r.fs] else ': not usable here'})", name)
                   for name, r in sorted(self.recipes.items())]
        value = self.initial.name if self.initial is not None else Select.NULL
        yield Choice(options, value=value, allow_blank=not self.recipes, id="recipe-select",
                     prompt="recipe", compact=True)
        yield Static("", id="recipe-description")
        for key, label in TOGGLES:
            yield Tick(label, id=f"prep-{key}", compact=True)
        with FieldRow("atime"):
            yield Choice([(m, m) for m in ATIME_MODES], value="keep", allow_blank=False, id="prep-atime", compact=True)
        for label, key in (("I/O sched", "prep-io_scheduler"), ("+mkfs", "mkfs-extra"), ("+mount", "mount-extra")):
            with FieldRow(label):
                yield Input(id=key, placeholder=PLACEHOLDERS[key][0], compact=True)
        yield Static("", id="recipe-preview")

    def on_resize(self) -> None:
        # at 80 columns the long placeholders were cut ("extra mount options,"): the short
        # ones where the long do not fit (the row's label already says what the field is)
        for key, (long, short) in PLACEHOLDERS.items():
            field = self.query_one(f"#{key}", Input)
            field.placeholder = long if len(long) < self.size.width - FIELD_LABEL_CELLS else short

    def on_mount(self) -> None:
        self.border_title = "2 · Recipe"
        self._load(self.initial)

    @property
    def base(self) -> Recipe | None:
        value = self.query_one("#recipe-select", Select).value
        return self.recipes.get(value) if isinstance(value, str) else None

    def _load(self, recipe: Recipe | None) -> None:
        """Put a recipe's own hygiene into the toggles."""
        if recipe is None:
            return
        self._loading = True
        self._loaded = recipe
        # without the toggles' and fields' own Changed messages: handled after this, each
        # rebuilt the preview that is built once below (five times before the Setup screen's
        # first frame, bench/startup.py)
        try:
            with self.prevent(Checkbox.Changed, Select.Changed, Input.Changed):
                for key, _ in TOGGLES:
                    box = self.query_one(f"#prep-{key}", Checkbox)
                    box.value = bool(getattr(recipe.prep, key))
                    box.display = key not in EXT4_ONLY or recipe.fs == "ext4"  # only where they mean something
                self.query_one("#prep-atime", Select).value = recipe.prep.atime
                self.query_one("#prep-io_scheduler", Input).value = recipe.prep.io_scheduler
            description = Text(recipe.description or "")
            if (why := unusable(recipe)) is not None:  # f2fs was offered without a word
                description.append(f"\nnot usable here: {why}", style="bold yellow")
            self.query_one("#recipe-description", Static).update(description)
        finally:
            self._loading = False
        self._refresh_preview()

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if event.select.id == "recipe-select":
            if self.base != self._loaded:  # not the list's Changed when it mounts (on_mount loaded it)
                self._load(self.base)
        else:
            self._refresh_preview()

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        event.stop()
        if not self._loading:
            self._refresh_preview()

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if not self._loading:
            self._refresh_preview()

    def set_target(self, kind: str, device: str = "") -> None:
        if (kind, device or "/dev/loopN") == (self.target_kind, self.preview_device):
            return  # the preview is of this target already (each field of the target says so)
        self.target_kind = kind
        self.preview_device = device or "/dev/loopN"
        self.disabled = kind == "dir"
        self._refresh_preview()

    def recipe(self) -> Recipe | None:
        """The recipe with the toggles and extra options applied; None for a directory."""
        if self.target_kind == "dir":
            return None
        base = self.base
        if base is None:
            raise FsscopeError("pick a recipe")
        changes: dict[str, object] = {key: self.query_one(f"#prep-{key}", Checkbox).value for key, _ in TOGGLES
                                      if base.fs == "ext4" or key not in EXT4_ONLY}
        atime = self.query_one("#prep-atime", Select).value
        changes["atime"] = atime if isinstance(atime, str) else "keep"
        changes["io_scheduler"] = self.query_one("#prep-io_scheduler", Input).value.strip()
        mkfs_extra = self.query_one("#mkfs-extra", Input).value
        try:
            shlex.split(mkfs_extra)
        except ValueError as exc:
            raise FsscopeError(f"extra mkfs options: {exc}") from None
        return base.with_prep(**changes).with_extra(mkfs_extra, self.query_one("#mount-extra", Input).value)

    def _refresh_preview(self) -> None:
        preview = self.query_one("#recipe-preview", Static)
        if self.target_kind == "dir":
            preview.update(Text("A directory is measured as it is: no mkfs, no mount.", style="dim"))
            self.post_message(self.Changed())
            return
        try:
            recipe = self.recipe()
        except FsscopeError as exc:
            preview.update(Text(str(exc), style="red"))
            return
        if recipe is None:
            return
        device = self.preview_device
        text = Text()
        if recipe.fs != "tmpfs":
            text.append("$ " + shlex.join(filesystem.mkfs_argv(recipe, device)) + "\n")
            if recipe.fs == "ext4" and recipe.prep.null_hash_seed:
                text.append(f"$ debugfs -w -R 'ssv hash_seed null' {device}\n")
        text.append("$ " + shlex.join(filesystem.mount_argv(recipe, device, "<mountpoint>", 2**30)))
        steps = [name for name, on in (("drop caches", recipe.prep.drop_caches),
                                       ("remount after populate", recipe.prep.remount_after_populate)) if on]
        if recipe.prep.io_scheduler:
            steps.append(f"scheduler {recipe.prep.io_scheduler}")
        if steps:
            text.append("\nhygiene: " + ", ".join(steps), style="dim")
        preview.update(text)
        self.post_message(self.Changed())
