"""Factor spaces: the factors a study varies and the levels each may take, from TOML.

A space file (``recipes/spaces/NAME.toml``)::

    name = "small"
    description = "what it is for"
    [settings]                      # passed to the treatment as they are (e.g. dir_depth)
    dir_depth = 4
    [factors]                       # in the order given; each a list of levels or a generator
    FileSize = ["8K", "64K", "256K"]
    InternalDensity = [0.5, 1.0, 2.0]
    ChunkOrder = "permutations"     # every order of the largest ChunkCount's chunks
    Fsync = "bitmaps"               # every ChunkCount-bit bitmap
    Sync = "bitmaps-last-set"       # ... with the last bit always 1

Generators also take a range: ``FileSize = {from = "8K", to = "256K", step = "8K"}``.

A space is generic (the configuration study of issue #15 has other factors); a *schema*
(name -> normaliser) lets a study check its own factors' levels: explore's says FileSize is a
size, ChunkOrder a permutation... Every error names the file and the field.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsscope import paths, tomlsafe, trust
from fsscope.errors import FsscopeError

Level = int | float | str
#: name -> function(raw level, where) -> normalised level (raise FsscopeError naming ``where``)
Schema = dict[str, Callable[[Any, str], Level]]


@dataclass(frozen=True)
class Factor:
    name: str
    levels: tuple[Level, ...]


@dataclass(frozen=True)
class Space:
    name: str
    factors: tuple[Factor, ...]
    description: str = ""
    settings: dict = field(default_factory=dict)
    source: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.factors)

    def factor(self, name: str) -> Factor:
        for f in self.factors:
            if f.name == name:
                return f
        raise FsscopeError(f"space {self.name}: no factor {name} (has: {', '.join(self.names)})")

    def to_dict(self) -> dict:
        return {"name": self.name, "description": self.description, "source": self.source,
                "settings": dict(self.settings),
                "factors": {f.name: list(f.levels) for f in self.factors}}

    @classmethod
    def from_dict(cls, data: dict) -> Space:
        return cls(data["name"], tuple(Factor(k, tuple(v)) for k, v in data["factors"].items()),
                   data.get("description", ""), dict(data.get("settings", {})), data.get("source", ""))

    def with_levels(self, overrides: dict[str, str], schema: Schema | None = None) -> Space:
        """This space with some factors' levels replaced (``--factor NAME=L1,L2``)."""
        raw: dict[str, Any] = {f.name: list(f.levels) for f in self.factors}
        for name, text in overrides.items():
            if name not in raw:
                raise FsscopeError(f"--factor {name}: no such factor in space {self.name} "
                                   f"(has: {', '.join(raw)})")
            # With a schema, its normalisers read the text ("0123" stays an order, not 123).
            read = (lambda t: t) if schema is not None else _scalar
            raw[name] = text if text in GENERATORS else [read(t.strip()) for t in text.split(",") if t.strip()]
        return _build(self.name, self.description, self.settings, raw, schema, "--factor", self.source)


def _scalar(text: str) -> Level:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _chunk_count(raw: dict) -> int:
    counts = raw.get("ChunkCount", [4])
    try:
        return max(int(c) for c in counts)
    except (TypeError, ValueError):
        return 4


GENERATORS: dict[str, Callable[[dict], list[Level]]] = {
    "permutations": lambda raw: ["".join(map(str, p)) for p in itertools.permutations(range(_chunk_count(raw)))],
    "bitmaps": lambda raw: [format(i, f"0{_chunk_count(raw)}b") for i in range(2 ** _chunk_count(raw))],
    "bitmaps-last-set": lambda raw: [format(i, f"0{_chunk_count(raw) - 1}b") + "1" if _chunk_count(raw) > 1 else "1"
                                     for i in range(2 ** (_chunk_count(raw) - 1))],
}


def _expand(value: Any, raw: dict, where: str, schema_fn) -> list[Level]:
    if isinstance(value, str):
        if value not in GENERATORS:
            raise FsscopeError(f"{where}: '{value}' is neither a list of levels nor one of "
                               f"{', '.join(GENERATORS)}")
        return GENERATORS[value](raw)
    if isinstance(value, dict):
        if set(value) != {"from", "to", "step"}:
            raise FsscopeError(f"{where}: a range needs exactly from, to, step (got {', '.join(value)})")
        norm = schema_fn or (lambda v, w: v)
        lo, hi, step = (norm(value[k], f"{where}.{k}") for k in ("from", "to", "step"))
        if not all(isinstance(v, (int, float)) for v in (lo, hi, step)) or step <= 0 or hi < lo:
            raise FsscopeError(f"{where}: a range needs numbers from <= to and step > 0")
        out, v = [], lo
        while v <= hi + 1e-9 * abs(step):
            out.append(round(v, 10) if isinstance(v, float) else v)
            v += step
        return out
    if isinstance(value, list):
        if not value:
            raise FsscopeError(f"{where}: no levels")
        bad = [v for v in value if not isinstance(v, (int, float, str)) or isinstance(v, bool)]
        if bad:
            raise FsscopeError(f"{where}: levels must be numbers or strings, got {bad[0]!r}")
        return list(value)
    raise FsscopeError(f"{where}: expected a list of levels, a range table or a generator name, "
                       f"got {type(value).__name__}")


def _build(name: str, description: str, settings: dict, raw: dict, schema: Schema | None,
           source: str, origin: str = "") -> Space:
    factors = []
    for fname, value in raw.items():
        where = f"{source}: factors.{fname}"
        schema_fn = None
        if schema is not None:
            if fname not in schema:
                raise FsscopeError(f"{where}: unknown factor (known: {', '.join(schema)})")
            schema_fn = schema[fname]
        levels = _expand(value, raw, where, schema_fn)
        if schema_fn is not None:
            levels = [schema_fn(v, f"{where}[{i}]") for i, v in enumerate(levels)]
        if len(set(levels)) != len(levels):
            raise FsscopeError(f"{where}: a level appears twice")
        factors.append(Factor(fname, tuple(levels)))
    if not factors:
        raise FsscopeError(f"{source}: factors: the space has no factors")
    return Space(name, tuple(factors), description, dict(settings), origin or source)


def parse(text: str, source: str, schema: Schema | None = None) -> Space:
    data = tomlsafe.loads(text, source)
    unknown = set(data) - {"name", "description", "settings", "factors"}
    if unknown:
        raise FsscopeError(f"{source}: unknown key '{sorted(unknown)[0]}' "
                           "(known: name, description, settings, factors)")
    raw = data.get("factors")
    if not isinstance(raw, dict):
        raise FsscopeError(f"{source}: factors: missing (a [factors] table of NAME = [levels])")
    settings = data.get("settings", {})
    if not isinstance(settings, dict):
        raise FsscopeError(f"{source}: settings: expected a table")
    name = data.get("name", Path(source).stem)
    return _build(str(name), str(data.get("description", "")), settings, raw, schema, source)


def spaces_dir() -> Path:
    return paths.recipes_dir() / "spaces"


def load(name_or_path: str, schema: Schema | None = None) -> Space:
    """A space by name (``recipes/spaces/NAME.toml``) or path."""
    path = Path(name_or_path)
    if not path.is_file():
        path = spaces_dir() / f"{name_or_path}.toml"
    if not path.is_file():
        known = sorted(p.stem for p in spaces_dir().glob("*.toml"))
        raise FsscopeError(f"--space {name_or_path}: no such file or space (known: {', '.join(known)})")
    try:
        text = trust.read_input_text(path, "space")
    except UnicodeDecodeError as exc:
        raise FsscopeError(f"{path}: not a text file (byte {exc.start} is not UTF-8): a space is TOML") from None
    return parse(text, str(path), schema)


def parse_overrides(items: list[str]) -> dict[str, str]:
    """``["FileSize=8K,64K", ...]`` -> {"FileSize": "8K,64K"}."""
    out = {}
    for item in items:
        if "=" not in item:
            raise FsscopeError(f"--factor {item}: expected NAME=LEVEL,LEVEL,... (e.g. FileSize=8K,64K)")
        key, value = item.split("=", 1)
        out[key.strip()] = value.strip()
    return out
