"""A job's parameter panel. The generic one builds a field per attribute of the job's Spec
dataclass (number/text inputs, a switch for booleans, a list for Literal choices), so every
registered job gets a panel; a job that wants hints or fewer fields subclasses it and is
named by its descriptor (``Job.panel`` in :mod:`fsscope.engine.jobs`).

A subclass can also start from other defaults than the Spec's (``DEFAULTS``: small ones for a
first try), show byte counts as sizes people type (``SIZE_FIELDS``: "512M"), and lists as
comma-separated text (``LIST_FIELDS``: "10,30" or, if also a size field, "4K,64K,1M";
``NAME_FIELDS``: "ext4-default,xfs-default").
Parameters given to the panel for fields it does not show (``job_defaults``) are passed on."""

from __future__ import annotations

import re
import typing
from typing import Any, ClassVar, Literal, get_args, get_origin

import msgspec
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Static

from fsscope.engine import registry
from fsscope.errors import FsscopeError
from fsscope.records import SpecRecord
from fsscope.tui.widgets.choice import Choice
from fsscope.tui.widgets.form import FieldRow, rows_css
from fsscope.tui.widgets.tick import Tick
from fsscope.units import list_items, parse_size_bytes


def size_text(n: int) -> str:
    """4096 -> '4K', 536870912 -> '512M' (exact multiples only; else the byte count)."""
    for unit, factor in (("T", 2**40), ("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return str(n)


def _field_kind(annotation: Any) -> tuple[str, tuple]:
    """('bool'|'int'|'float'|'str'|'choice', choices); Optional[X] counts as X."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return "choice", args
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _field_kind(inner[0])
    if annotation is bool:
        return "bool", ()
    if annotation is int:
        return "int", ()
    if annotation is float:
        return "float", ()
    return "str", ()


class JobParams(Vertical):
    """Fields for one job's Spec; ``spec_dict()`` reads them back (FsscopeError if wrong)."""

    DEFAULT_CSS = rows_css("JobParams", 13) + """
    JobParams { height: auto; }
    JobParams .param-hint { color: $foreground 60%; padding: 0 0 0 13; }
    JobParams .job-summary { color: $foreground 70%; }
    """

    FIELDS: ClassVar[tuple[str, ...] | None] = None
    """Which Spec fields to show (None: all); the others keep their defaults."""
    HINTS: ClassVar[dict[str, str]] = {}
    """A short explanation under a field."""
    LABELS: ClassVar[dict[str, str]] = {}
    """A shorter label than the field's name (labels are 12 characters wide)."""
    DEFAULTS: ClassVar[dict[str, Any]] = {}
    """Starting values that differ from the Spec's (the panel's first-try defaults)."""
    SIZE_FIELDS: ClassVar[tuple[str, ...]] = ()
    """Byte counts shown and typed as sizes (512M, 4K)."""
    LIST_FIELDS: ClassVar[tuple[str, ...]] = ()
    """Lists shown and typed as comma-separated values."""
    NAME_FIELDS: ClassVar[tuple[str, ...]] = ()
    """Lists of names shown as "a,b" (the Spec splits the text again)."""

    def choices(self, name: str) -> tuple | None:
        """Values a text field is picked from (a Choice instead of an Input); None: typed."""
        return None

    def __init__(self, job: str, initial: dict | None = None, *, id: str | None = None):
        super().__init__(id=id)
        self.job = job
        self.spec_type: Any = registry.spec_type(job)  # the job's own Spec (its ClassVars, properties)
        self.hints = typing.get_type_hints(self.spec_type)
        self.descriptions = self.spec_type.field_descriptions()
        """A field's own description (``Meta(description=…)`` on the Spec): its hint where the
        panel names none (a job without a panel of its own had no hints at all)."""
        fields = msgspec.structs.fields(self.spec_type)
        try:  # the defaults as the Spec makes them (bench derives its windows from its duration)
            defaults = self.spec_type()
            self.values = {f.name: getattr(defaults, f.name) for f in fields}
        except FsscopeError:  # a Spec that refuses its defaults alone (replay asks for its log,
            # watch for a pid or a cgroup): the fields' own; its check names the field the user
            # left empty when Start is pressed
            self.values = self.spec_type.field_defaults()
        self.values.update(self.DEFAULTS)
        self.values.update(initial or {})
        names = [f.name for f in fields]
        self.fields = [n for n in (self.FIELDS or names) if n in names]
        self.hidden = {k: v for k, v in {**self.DEFAULTS, **(initial or {})}.items()
                       if k in names and k not in self.fields}
        """Values for fields without an input (panel defaults, job_defaults): passed on as they are."""

    def _text(self, name: str, value: Any) -> str:
        if value is None:
            return ""
        if name in self.NAME_FIELDS and isinstance(value, (list, tuple)):
            return ",".join(str(v) for v in value)
        if name in self.LIST_FIELDS and isinstance(value, (list, tuple)):
            return ",".join(size_text(int(v)) if name in self.SIZE_FIELDS else f"{v:g}" for v in value)
        if name in self.SIZE_FIELDS and isinstance(value, int):
            return size_text(value)
        return str(value)

    def _label(self, name: str) -> str:
        """The field as the user sees it on screen (never the Spec's attribute name)."""
        return self.LABELS.get(name, name.replace("_", " "))

    def _parse_text(self, name: str, kind: str, text: str) -> Any:
        what = self._label(name)
        if name in self.LIST_FIELDS:
            parts = list_items(text)
            if not parts:
                raise FsscopeError(f"{self.job}: {what} needs at least one value")
            if name in self.SIZE_FIELDS:
                return [parse_size_bytes(p, f"{self.job}: {what}") for p in parts]
            try:
                return [int(float(p)) if float(p).is_integer() else float(p) for p in parts]
            except ValueError:
                raise FsscopeError(f"{self.job}: {what} must be numbers such as 10,30, not {text!r}") from None
        if name in self.SIZE_FIELDS:
            return parse_size_bytes(text, f"{self.job}: {what}")
        try:
            return int(text) if kind == "int" else float(text) if kind == "float" else text
        except ValueError:
            raise FsscopeError(f"{self.job}: {self._label(name)} must be "
                               f"{'a whole number' if kind == 'int' else 'a number'}, not {text!r}") from None

    def _param_id(self, name: str) -> str:
        return f"param-{self.job}-{name}"

    def compose(self) -> ComposeResult:
        yield Static(registry.job(self.job).summary, classes="job-summary")
        for name in self.fields:
            kind, choices = _field_kind(self.hints.get(name, str))
            if kind != "bool" and self.choices(name):
                kind, choices = "choice", tuple(self.choices(name) or ())
            value = self.values.get(name)
            label = self._label(name)
            if kind == "bool":
                yield Tick(label, value=bool(value), id=self._param_id(name), compact=True)
            else:
                with FieldRow(label):
                    if kind == "choice":
                        yield Choice([(str(c), c) for c in choices], value=value, allow_blank=False,
                                     id=self._param_id(name), compact=True)
                    else:
                        numeric = kind == "int" and name not in self.SIZE_FIELDS
                        with self.prevent(Input.Changed):  # its first value is no change (nor a message)
                            field = Input(self._text(name, value), id=self._param_id(name),
                                          type="integer" if numeric else "text", compact=True)
                        yield field
            hint = self.HINTS.get(name) or self.descriptions.get(name)
            if hint:
                yield Static(hint, classes="param-hint", id=f"hint-{self.job}-{name}")

    def on_descendant_focus(self, event) -> None:
        """Mark the focused field's hint (a short screen shows that one only)."""
        focused = event.widget.id or ""
        for hint in self.query(".param-hint"):
            hint.set_class(hint.id == focused.replace("param-", "hint-", 1), "-focused")

    def spec_dict(self) -> dict:
        """The parameters as the job's Spec takes them; every wrong field is named at once
        (one FsscopeError whose lines are the problems), not the first one only."""
        out: dict[str, Any] = dict(self.hidden)
        problems: list[str] = []
        for name in self.fields:
            try:
                self._read_field(name, out)
            except FsscopeError as exc:
                problems.append(str(exc))
        if problems:
            raise FsscopeError("\n".join(problems))
        return out

    def _read_field(self, name: str, out: dict[str, Any]) -> None:
        """One field into ``out``; FsscopeError naming the field as the screen labels it."""
        kind, _ = _field_kind(self.hints.get(name, str))
        if kind != "bool" and self.choices(name):
            kind = "choice"
        widget = self.query_one(f"#{self._param_id(name)}")
        if kind == "bool":
            out[name] = bool(widget.value)  # type: ignore[attr-defined]
            return
        if kind == "choice":
            out[name] = widget.value  # type: ignore[attr-defined]
            return
        text = str(widget.value).strip()  # type: ignore[attr-defined]
        if text == "":
            if self.values.get(name) in (None, ""):  # optional (None) or an empty-text default
                out[name] = self.values.get(name)
                return
            raise FsscopeError(f"{self.job}: {self._label(name)} needs a value")
        out[name] = self._parse_text(name, kind, text)

    def validated(self) -> SpecRecord:
        """The job's Spec from spec_dict(), checked (its errors are the user's message): built
        once here, handed to the runner as it is."""
        data = self.spec_dict()
        try:
            return registry.spec_from_data(self.job, data)
        except FsscopeError as exc:
            # the Spec speaks of its attributes (duration_s); the user sees the labels
            message = str(exc)
            for name in sorted(self.fields, key=len, reverse=True):
                message = re.sub(rf"\b{re.escape(name)}\b", self._label(name), message)
            raise FsscopeError(message if message.startswith(self.job) else f"{self.job}: {message}") from None
