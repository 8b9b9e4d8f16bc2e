"""Typed records and the one JSON encoding (job specs, events, data kinds, reports, manifests).

Everything a job is told or says is a :class:`Record` (a frozen msgspec Struct) declared next
to the job; :func:`convert` checks outside data (a job.json, ``-p KEY=VALUE``, a form) into one,
and turns msgspec's complaint into one line a user can act on. :func:`dumps`/:func:`encode` is
the one JSON encoding: numpy scalars and arrays become plain numbers and lists, NaN and ±inf
become null (JSON has no spelling for them and a reader must not choke on one), dataclasses
their fields (or ``to_json()``), paths and anything else their ``str``. Bottom layer: analysis,
the store, the engine and every job share it.
"""

from __future__ import annotations

import math
import re
import sys
import typing
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

import msgspec
from msgspec.structs import force_setattr

from fsscope.errors import FsscopeError

R = TypeVar("R")
__all__ = ["Record", "ReportRecord", "SpecRecord", "convert", "typed", "build", "dumps", "encode", "loads", "plain", "report_part", "force_setattr"]


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """A frozen typed record: fields by keyword, compared by value, encoded by :func:`dumps`."""


class ReportRecord(Record, frozen=True, kw_only=True):
    """A job's report (``Report`` in the job's module). Fields keep their wire names and have
    defaults, so an older report.json still reads. ``machine``: how busy the machine was while
    the job measured, and ``existing``: the file system measured in place (``--dir``), both
    added by the engine to every report."""

    machine: dict[str, Any] | None = None
    existing: dict[str, Any] | None = None


class SpecRecord(Record, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A job's parameters. A typo is an error, never silently a default; ``job`` names it in
    messages; ``renamed`` maps a field's earlier names to its name (old job.json files load);
    ``parsers`` read a list field given as text or one value ("4K,64K" from ``-p`` or a form;
    other list fields split text at commas)."""

    job: ClassVar[str] = "job"
    renamed: ClassVar[dict[str, str]] = {}
    parsers: ClassVar[dict[str, Callable[[Any], Any]]] = {}

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        """Each field's declared default (None for a required one), without making a Spec: its
        checks may need a field given first (watch: what to watch) or read files (age)."""
        return {f.name: f.default if f.default is not msgspec.NODEFAULT
                else f.default_factory() if f.default_factory is not msgspec.NODEFAULT else None
                for f in msgspec.structs.fields(cls)}

    @classmethod
    def field_descriptions(cls) -> dict[str, str]:
        """Each field's ``Meta(description=...)``, where it has one: its help on the command
        line and its hint on the Setup screen."""
        out = {}
        for name, annotation in typing.get_type_hints(cls, include_extras=True).items():
            for meta in getattr(annotation, "__metadata__", ()):
                if isinstance(meta, msgspec.Meta) and meta.description:
                    out[name] = meta.description
        return out


def _numpy() -> Any:
    """numpy, if it is loaded: a value is a numpy array or scalar only once numpy has been
    imported, and the command line's --help and the Setup screen never import it (a third of
    their start-up time)."""
    return sys.modules.get("numpy")


def _enc_hook(value: Any) -> Any:
    """What msgspec cannot write itself."""
    np = _numpy()
    if np is not None and isinstance(value, np.ndarray):
        return value.tolist()
    if np is not None and isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "to_json"):
        return value.to_json()
    return str(value)


_encoder = msgspec.json.Encoder(enc_hook=_enc_hook)
_decoder = msgspec.json.Decoder()


def encode(value: Any) -> bytes:
    """JSON bytes of ``value`` (non-finite floats as null)."""
    try:
        return _encoder.encode(value)
    except msgspec.EncodeError:  # e.g. a key that is no str/int (a tuple): the slow, plain way
        return _encoder.encode(plain(value))


def dumps(value: Any, indent: int | None = None) -> str:
    """JSON text of ``value``; ``indent``: for files people read (job.json, report.json)."""
    data = encode(value)
    return (msgspec.json.format(data, indent=indent) if indent else data).decode()


def loads(text: str | bytes) -> Any:
    """Plain Python from JSON text (dicts, lists, numbers, str, bool, None)."""
    return _decoder.decode(text)


def report_part(report: Any, name: str) -> Any:
    """A section of a report: a record's attribute (a job whose report is typed) or a dict's
    key (a job whose report is not yet); None when it has none."""
    if isinstance(report, Record):
        return getattr(report, name, None)
    return report.get(name) if isinstance(report, dict) else None


def plain(value: Any) -> Any:
    """``value`` as plain JSON-ready Python (dict, list, str, int, float, bool, None)."""
    np = _numpy()
    if value is None or isinstance(value, (str, bool, int)) and not (np is not None and isinstance(value, np.generic)):
        return value
    if isinstance(value, float):  # numpy.float64 is a float too: plain means a float
        return float(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if np is not None and isinstance(value, np.ndarray):
        return plain(value.tolist())
    if np is not None and isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, msgspec.Struct) or hasattr(value, "__dataclass_fields__"):
        return plain(msgspec.to_builtins(value, enc_hook=_enc_hook))
    if hasattr(value, "to_json"):
        return plain(value.to_json())
    return str(value)


# --------------------------------------------------------------------------------------------
# Checking outside data into a record


def build(type_: type[R], **fields: Any) -> R:
    """A ``type_`` record from keyword fields, checked as :func:`convert` checks (the way the
    CLI and the TUI make a job's spec: ``build(ProbeSpec, files=args.files, ...)``)."""
    return convert(fields, type_)


def convert(data: Any, type_: type[R], what: str | None = None) -> R:
    """``data`` (plain Python: a decoded job.json, a dict of parameters) as a ``type_`` record,
    or FsscopeError in one line ("probe files must be at least 1, not 0"). A SpecRecord's
    earlier field names are taken, and a text value of a list field splits at commas
    ("ext4-default,xfs-default" from ``-p recipes=...``)."""
    what = what or getattr(type_, "job", None) or type_.__name__
    if isinstance(data, dict) and issubclass(type_, SpecRecord):
        data = _spec_data(data, type_)
    try:
        return msgspec.convert(data, type_)
    except msgspec.ValidationError as exc:
        raise FsscopeError(_one_line(str(exc), data, type_, what)) from None


def typed(data: Any, type_: type[R], what: str | None = None) -> R:
    """What a job built (a dict from its analysis) as its ``type_`` record, keeping every key:
    :func:`convert` reads outside data leniently and drops a key the record does not declare,
    which for a job's own report would lose a finding without a word. A key it would drop is a
    bug in fsscope: TypeError naming it (the suite runs every job)."""
    record = convert(data, type_, what)
    dropped = _dropped(plain(data), record)
    if dropped:
        raise TypeError(f"{what or type_.__name__} declares no field for {', '.join(dropped)}")
    return record


def _dropped(built: Any, kept: Any, where: str = "") -> list[str]:
    """Keys (dotted paths) of ``built`` (plain data) with a value that the record ``kept`` made
    of it has no field for (a field left out of the encoding as a default is declared)."""
    if isinstance(built, dict) and isinstance(kept, msgspec.Struct):
        fields = {f.encode_name: getattr(kept, f.name) for f in msgspec.structs.fields(kept)}
        config = kept.__struct_config__
        if config.tag_field is not None:  # a tagged record's kind is written, not a field
            fields[config.tag_field] = config.tag
    elif isinstance(built, dict) and isinstance(kept, dict):
        fields = {str(k): v for k, v in kept.items()}
    elif isinstance(built, list) and isinstance(kept, (list, tuple)) and len(built) == len(kept):
        return [path for i, (b, k) in enumerate(zip(built, kept)) for path in _dropped(b, k, f"{where}{i}.")]
    else:
        return []
    return [path for key, value in built.items() if value is not None
            for path in ([where + str(key)] if key not in fields
                         else _dropped(value, fields[key], f"{where}{key}."))]


def _spec_data(data: dict, type_: type[SpecRecord]) -> dict:
    out = {}
    for key, value in data.items():
        key = type_.renamed.get(key, key) if type_.renamed.get(key) not in data else key
        out[key] = value
    lists = {f.name for f in msgspec.structs.fields(type_) if _is_list(f.type)}
    for key, value in out.items():
        if key in type_.parsers and not isinstance(value, (list, tuple)):
            out[key] = type_.parsers[key](value)
        elif key in lists and isinstance(value, str):
            out[key] = tuple(value.split(","))
    return out


def _is_list(annotation: Any) -> bool:
    return getattr(_bare(annotation), "__origin__", None) in (tuple, list)


def _bare(annotation: Any) -> Any:
    """A field's type without its ``Annotated[..., Meta(...)]`` (bounds, help)."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


_KIND = {"int": "a whole number", "float": "a number", "str": "text", "bool": "true or false",
         "array": "a list", "object": "a JSON object", "null": "null"}
_BOUND = {">=": "at least", "<=": "at most", ">": "greater than", "<": "less than"}


def _one_line(message: str, data: Any, type_: type, what: str) -> str:
    """msgspec's "Expected `int` >= 1 - at `$.files`" as fsscope says it."""
    text, _, where = message.partition(" - at `$")
    path = where.rstrip("`").lstrip(".")
    name = path.split(".")[0].split("[")[0] if path else ""
    value = data.get(name) if isinstance(data, dict) else data
    field = "spec field" if isinstance(type_, type) and issubclass(type_, SpecRecord) else "field"
    if m := re.match(r"Object contains unknown field `(.+)`", text):
        known = ", ".join(f.name for f in msgspec.structs.fields(type_))
        return f"{what} {field} {m[1]!r} is unknown: known fields are {known}"
    if m := re.match(r"Object missing required field `(.+)`", text):
        return f"{what} {field} {m[1]!r} is missing"
    if re.match(r"Invalid enum value", text):
        choices = getattr(_bare(msgspec.structs.fields(type_)[_index(type_, name)].type), "__args__", ())
        return f"{what} {name} {value!r} is unknown: choose one of {', '.join(map(str, choices))}"
    if m := re.match(r"Expected `([^`]+)` (>=|<=|>|<) (\S+)", text):
        return f"{what} {name} must be {_BOUND[m[2]]} {m[3]}, not {value!r}"
    if m := re.match(r"Expected `([^`]+)`, got `([^`]+)`", text):
        kinds = " or ".join(_KIND.get(k, k) for k in m[1].split(" | ") if k != "null")
        if not name:
            return f"{what} spec must be {kinds}, not {type(data).__name__}"
        return f"{what} {field} {name!r} must be {kinds}, not {value!r}"
    return f"{what}: {text}" + (f" ({name})" if name else "")


def _index(type_: type, name: str) -> int:
    return [f.name for f in msgspec.structs.fields(type_)].index(name)
