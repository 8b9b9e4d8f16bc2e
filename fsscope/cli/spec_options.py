"""A job's command-line options read from its Spec (issue 33): each field's type, its bounds
(``Annotated[int, Meta(ge=1)]``), its unit (the name's suffix: ``_bytes`` a size such as 512M,
``_s`` seconds) and its help (``Meta(description=...)``) make the option, so a command does
not say again what the Spec says. A value is checked by the Spec itself when it is parsed: a
bound broken is one line and exit 2 ("scan near must be at least 1, not 0"), as ``fsscope run
-p`` and the Setup screen say it.

    add_spec_options(parser, Spec, ("near", "largest", "free_space"))
    spec = spec_from_args(args, Spec, ("near", "largest", "free_space"))

A field left out on the command line takes the Spec's default (the option's default is
``SUPPRESS``: the default lives in the Spec only, and ``--help`` shows it from there).
"""

from __future__ import annotations

import argparse
import operator
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, get_args, get_origin

import msgspec

from fsscope.cli.common import dash_value, parse_size
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes
from fsscope.records import SpecRecord, build

# a field's unit, by its name's suffix (names carry units): how it is typed and shown
UNITS: dict[str, tuple[str, Callable[[str], Any], Callable[[Any], str]]] = {
    "_bytes": ("SIZE", parse_size, lambda n: format_bytes(n)),
    "_s": ("S", float, lambda s: f"{s:g} s"),
}


def _unwrap(annotation: Any) -> tuple[Any, list[msgspec.Meta]]:
    """The field's value type (an Optional's non-None member) and its Meta annotations."""
    metas: list[msgspec.Meta] = []
    while True:
        if get_origin(annotation) is Annotated:
            annotation, *extras = get_args(annotation)
            metas += [m for m in extras if isinstance(m, msgspec.Meta)]
        elif get_origin(annotation) in (typing.Union, types.UnionType):
            inner = [a for a in get_args(annotation) if a is not type(None)]
            if len(inner) != 1:
                return annotation, metas
            annotation = inner[0]
        else:
            return annotation, metas


def _unit(name: str) -> str:
    return next((suffix for suffix in UNITS if name.endswith(suffix)), "")


# a Meta bound: whether a value keeps it, and how it is said
BOUNDS = {"ge": ("at least", operator.ge), "gt": ("more than", operator.gt), "le": ("at most", operator.le),
          "lt": ("less than", operator.lt)}


def _checked(annotation: Any, read: Callable[[str], Any], metas: list[msgspec.Meta],
             show: Callable[[Any], str]) -> Callable[[str], Any]:
    """argparse's type for a field typed ``annotation``: the text read, held to the field's
    bounds (said in its unit: "must be at least 4 KiB, not 1 KiB") and type. Checks across
    fields (``--max-runs`` against ``--runs``) wait for the whole Spec (:func:`spec_from_args`):
    here the other fields are not known yet."""

    def parse(text: str) -> Any:
        try:
            value = read(text)
        except (ValueError, FsscopeError):
            raise argparse.ArgumentTypeError(f"{text!r} is not {_what(read)}") from None
        for meta in metas:
            for bound, (words, keeps) in BOUNDS.items():
                limit = getattr(meta, bound)
                if limit is not None and not keeps(value, limit):
                    raise argparse.ArgumentTypeError(f"must be {words} {show(limit)}, not {show(value)}")
        try:
            return msgspec.convert(value, annotation)
        except msgspec.ValidationError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _what(read: Callable[[str], Any]) -> str:
    return "a whole number" if read is int else "a number" if read is float else "a value"


def add_spec_options(parser: argparse._ActionsContainer, spec: type[SpecRecord], names: Sequence[str], *,
                     flags: Mapping[str, str] | None = None,
                     readers: Mapping[str, tuple[str, Callable[[str], Any]]] | None = None) -> None:
    """An option per field ``names`` of ``spec`` (its flag: ``flags[name]``, else ``--`` and the
    name without its unit; a switch off a field that defaults to true: ``--no-`` and that, or
    ``flags[name]`` as given, such as ``--same-fs`` for ``fresh_fs``). ``readers[name]``: the
    metavar and reader of a value written otherwise than its type ("10%", "4K,64K"), still held
    to the field's bounds. A field without ``Meta(description=...)`` is a TypeError here;
    ``parser`` may be a group (mutually exclusive options)."""
    hints = typing.get_type_hints(spec, include_extras=True)
    defaults = spec.field_defaults()
    for name in names:
        value_type, metas = _unwrap(hints[name])
        description = next((m.description for m in metas if m.description), None)
        if description is None:
            raise TypeError(f"{spec.__name__}.{name} needs Meta(description=...) to be an option")
        description = description.replace("%", "%%")  # argparse formats help with %
        unit = _unit(name)
        given = (flags or {}).get(name)
        flag = given or "--" + name.removesuffix(unit).replace("_", "-")
        default = defaults[name]
        if value_type is bool:  # a switch away from the default
            if default:
                parser.add_argument(given or "--no-" + flag.removeprefix("--"), dest=name, action="store_false",
                                    default=argparse.SUPPRESS, help=f"leave out {description}")
            else:
                parser.add_argument(flag, dest=name, action="store_true", default=argparse.SUPPRESS, help=description)
            continue
        show = UNITS[unit][2] if unit else lambda v: f"{v:g}" if isinstance(v, float) else str(v)
        # a list's default (4K..16M) is said by its description
        shown = "" if default is None or isinstance(default, tuple) else f" (default {show(default)})"
        if get_origin(value_type) is Literal:
            parser.add_argument(flag, dest=name, choices=get_args(value_type), default=argparse.SUPPRESS,
                                help=description + shown)
            continue
        if name in (readers or {}):
            metavar, read = (readers or {})[name]
        elif unit:
            metavar, read = UNITS[unit][0], UNITS[unit][1]
        elif value_type in (int, float, str):
            metavar, read = {int: "N", float: "X", str: "TEXT"}[value_type], value_type
        else:
            raise TypeError(f"{spec.__name__}.{name}: a {value_type} field has no option form here")
        dash_value(parser.add_argument(flag, dest=name, type=_checked(hints[name], read, metas, show), metavar=metavar,
                                       default=argparse.SUPPRESS, help=description + shown))


def spec_from_args(args: argparse.Namespace, spec: type[SpecRecord], names: Sequence[str], **fields: Any) -> Any:
    """The ``spec`` record of the options given (the others at the Spec's defaults) and ``fields``."""
    given = {name: getattr(args, name) for name in names if hasattr(args, name)}
    return build(spec, **given, **fields)


def field_lines(spec: type[SpecRecord]) -> list[str]:
    """One line per field of ``spec`` (``fsscope run JOB -p help=1``): its name and default, its
    bounds in its unit, and its help where the Spec gives one."""
    hints = typing.get_type_hints(spec, include_extras=True)
    defaults = spec.field_defaults()
    lines = []
    for field in msgspec.structs.fields(spec):
        _, metas = _unwrap(hints[field.name])
        unit = _unit(field.name)
        show = UNITS[unit][2] if unit else repr
        bounds = [f"{BOUNDS[bound][0]} {show(getattr(meta, bound))}" for meta in metas for bound in BOUNDS
                  if getattr(meta, bound) is not None]
        description = next((m.description for m in metas if m.description), "")
        default = defaults[field.name]
        extra = "; ".join(filter(None, [", ".join(bounds), description]))
        lines.append(f"{field.name} = {default!r}" + (f"  ({extra})" if extra else ""))
    return lines
