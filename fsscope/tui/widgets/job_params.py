"""A job's parameter panel. The generic one builds a field per attribute of the job's Spec
dataclass (number/text inputs, a switch for booleans, a list for Literal choices), so every
registered job gets a panel; a job that wants hints or fewer fields subclasses it and is
registered in :mod:`fsscope.tui.job_panels`."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar, Literal, get_args, get_origin

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Checkbox, Input, Label, Select, Static

from fsscope.engine import registry
from fsscope.errors import FsscopeError


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

    DEFAULT_CSS = """
    JobParams { height: auto; }
    JobParams .param-row { height: auto; }
    JobParams .param-row Label { width: 13; padding: 0; }
    JobParams .param-row Input, JobParams .param-row Select { width: 1fr; }
    JobParams Checkbox { border: none; padding: 0; height: 1; }
    JobParams .param-hint { color: $foreground 60%; padding: 0 0 0 13; }
    JobParams .job-summary { color: $foreground 70%; }
    """

    FIELDS: ClassVar[tuple[str, ...] | None] = None
    """Which Spec fields to show (None: all); the others keep their defaults."""
    HINTS: ClassVar[dict[str, str]] = {}
    """A short explanation under a field."""

    def __init__(self, job: str, initial: dict | None = None, *, id: str | None = None):
        super().__init__(id=id)
        self.job = job
        module = registry.load(job)
        self.spec_type = module.Spec
        self.hints = typing.get_type_hints(self.spec_type)
        defaults = self.spec_type()
        self.values = {f.name: getattr(defaults, f.name) for f in dataclasses.fields(self.spec_type)}
        self.values.update(initial or {})
        names = [f.name for f in dataclasses.fields(self.spec_type)]
        self.fields = [n for n in (self.FIELDS or names) if n in names]

    def _param_id(self, name: str) -> str:
        return f"param-{self.job}-{name}"

    def compose(self) -> ComposeResult:
        yield Static(registry.JOBS.get(self.job, ("", ""))[1], classes="job-summary")
        for name in self.fields:
            kind, choices = _field_kind(self.hints.get(name, str))
            value = self.values.get(name)
            if kind == "bool":
                yield Checkbox(name.replace("_", " "), value=bool(value), id=self._param_id(name), compact=True)
            else:
                with Horizontal(classes="param-row"):
                    yield Label(name.replace("_", " "))
                    if kind == "choice":
                        yield Select([(str(c), c) for c in choices], value=value, allow_blank=False,
                                     id=self._param_id(name), compact=True)
                    else:
                        yield Input("" if value is None else str(value), id=self._param_id(name),
                                    type="integer" if kind == "int" else "text", compact=True)
            if name in self.HINTS:
                yield Static(self.HINTS[name], classes="param-hint")

    def spec_dict(self) -> dict:
        out: dict[str, Any] = {}
        for name in self.fields:
            kind, _ = _field_kind(self.hints.get(name, str))
            widget = self.query_one(f"#{self._param_id(name)}")
            if kind == "bool":
                out[name] = bool(widget.value)  # type: ignore[attr-defined]
                continue
            if kind == "choice":
                out[name] = widget.value  # type: ignore[attr-defined]
                continue
            text = str(widget.value).strip()  # type: ignore[attr-defined]
            if text == "":
                if self.values.get(name) is None:
                    out[name] = None
                    continue
                raise FsscopeError(f"{self.job}: {name} needs a value")
            try:
                out[name] = int(text) if kind == "int" else float(text) if kind == "float" else text
            except ValueError:
                raise FsscopeError(f"{self.job}: {name} must be {'an integer' if kind == 'int' else 'a number'}, "
                                   f"not {text!r}") from None
        return out

    def validated(self) -> dict:
        """spec_dict() checked by the job's own Spec (its errors are the user's message)."""
        data = self.spec_dict()
        registry.spec_from_dict(registry.load(self.job), data)
        return data
