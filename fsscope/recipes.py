"""File-system recipes: which file system, mkfs and mount options, and benchmarking hygiene.

A recipe is a TOML file in ``recipes/`` (or any path). Unknown keys and wrong types are
errors that name the file and the field, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from fsscope import fsoptions, paths, tomlsafe, trust
from fsscope.errors import RecipeError, SafetyRefusal
from fsscope.records import convert

FILE_SYSTEMS = ("ext4", "xfs", "btrfs", "f2fs", "tmpfs")
ATIME_MODES = ("noatime", "relatime", "strictatime", "keep")


@dataclass(frozen=True)
class Prep:
    """Benchmarking hygiene, each step a real operation that can be switched off.

    no_lazy_init            ext4: write inode tables and journal at mkfs time
                            (-E lazy_itable_init=0,lazy_journal_init=0), so no ext4lazyinit
                            thread writes behind the measurement.
    null_hash_seed          ext4: debugfs 'ssv hash_seed null' after mkfs, so every fresh file
                            system orders its htree directories the same way (Cao et al.).
    drop_caches             sync and drop page/dentry/inode caches before each measured run.
    remount_after_populate  unmount and mount again after a data set is populated, so the run
                            starts from a cold cache and clean journal rather than just a sync.
    io_scheduler            write this name to /sys/block/DEV/queue/scheduler ("" leaves it).
    atime                   noatime / relatime / strictatime added to the mount, or "keep".
    """

    no_lazy_init: bool = False
    null_hash_seed: bool = False
    drop_caches: bool = True
    remount_after_populate: bool = False
    io_scheduler: str = ""
    atime: str = "keep"


@dataclass(frozen=True)
class Recipe:
    name: str
    fs: str
    description: str = ""
    mkfs_opts: tuple[str, ...] = ()
    mount_opts: tuple[str, ...] = ()
    prep: Prep = field(default_factory=Prep)
    source: str = ""  # the file it came from

    def __post_init__(self):
        # no recipe exists whose options would make mkfs or mount touch more than the target
        where = self.source or f"recipe {self.name}"
        fsoptions.check_mkfs(self.fs, self.mkfs_opts, f"{where}: mkfs_opts")
        fsoptions.check_mount(self.fs, self.mount_opts, f"{where}: mount_opts")

    def with_extra(self, mkfs_opts: str = "", mount_opts: str = "") -> Recipe:
        """This recipe plus one-run extra options (``--mkfs-opts "-i size=1024"``)."""
        try:
            extra = shlex.split(mkfs_opts)
        except ValueError as exc:  # "No closing quotation"
            raise RecipeError(f"--mkfs-opts {mkfs_opts}: {exc}") from None
        fsoptions.check_mkfs(self.fs, extra, "--mkfs-opts")
        fsoptions.check_mount(self.fs, mount_opts.split(","), "--mount-opts")
        return replace(
            self,
            mkfs_opts=self.mkfs_opts + tuple(extra),
            mount_opts=self.mount_opts + tuple(o for o in mount_opts.split(",") if o.strip()),
        )

    def with_prep(self, **changes: Any) -> Recipe:
        """This recipe with hygiene steps changed (``--prep``), each value checked like a file's."""
        for key, value in changes.items():
            if key not in {f.name for f in fields(Prep)}:
                raise RecipeError(f"unknown prep step '{key}' (known: {', '.join(f.name for f in fields(Prep))})")
            _check_type(f"--prep {key}", value, type(getattr(Prep(), key)))
        prep = replace(self.prep, **changes)
        check_prep(prep, self.fs, lambda key: f"--prep {key}")
        return replace(self, prep=prep)

    def effective_mount_opts(self) -> list[str]:
        opts = list(self.mount_opts)
        if self.prep.atime != "keep" and self.prep.atime not in opts:
            opts.append(self.prep.atime)
        return opts

    @classmethod
    def from_dict(cls, data: dict) -> Recipe:
        """A recipe as a job.json or a study treatment carries it (``records.plain(recipe)``):
        the job child gets its recipe this way, not from files, and checks it again."""
        return convert(data, cls, "recipe")


def _check_type(where: str, value: Any, expected: type | tuple[type, ...]) -> None:
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        names = expected.__name__ if isinstance(expected, type) else " or ".join(t.__name__ for t in expected)
        raise RecipeError(f"{where}: expected {names}, got {type(value).__name__} {value!r}")


TRUE_WORDS, FALSE_WORDS = ("true", "on", "yes", "1"), ("false", "off", "no", "0")


def prep_changes(items: Iterable[str]) -> dict[str, Any]:
    """``--prep STEP=VALUE`` items as typed changes for :meth:`Recipe.with_prep`; a switch
    takes true/false (on/off, yes/no, 1/0), anything else is an error naming the step."""
    changes: dict[str, Any] = {}
    defaults = Prep()
    for item in items:
        if "=" not in item:
            raise RecipeError(f"--prep {item}: expected STEP=VALUE (e.g. drop_caches=false)")
        key, value = (part.strip() for part in item.split("=", 1))
        if isinstance(getattr(defaults, key, None), bool):
            if value.lower() not in TRUE_WORDS + FALSE_WORDS:
                raise RecipeError(f"--prep {key}: expected true or false, got '{value}'")
            changes[key] = value.lower() in TRUE_WORDS
        else:
            changes[key] = value
    return changes


def check_prep(prep: Prep, fs: str, where: Callable[[str], str]) -> None:
    """Values a type check cannot catch; ``where(step)`` names the field in the message."""
    if prep.atime not in ATIME_MODES:
        raise RecipeError(f"{where('atime')}: '{prep.atime}' is not one of {', '.join(ATIME_MODES)}")
    if prep.io_scheduler and not prep.io_scheduler.replace("-", "").replace("_", "").isalnum():
        raise RecipeError(f"{where('io_scheduler')}: '{prep.io_scheduler}' is not a scheduler name "
                          "(e.g. none, mq-deadline, bfq, kyber)")
    for step in ("no_lazy_init", "null_hash_seed"):
        if fs != "ext4" and getattr(prep, step):
            raise RecipeError(f"{where(step)}: applies to ext4 only, not {fs}")


def _opts(where: str, value: Any) -> tuple[str, ...]:
    """Options as a list of strings, or one string split like a shell would."""
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:  # "No closing quotation"
            raise RecipeError(f"{where}: {exc}") from None
    _check_type(where, value, list)
    for i, item in enumerate(value):
        _check_type(f"{where}[{i}]", item, str)
    return tuple(value)


def parse(data: dict, *, name: str, source: str) -> Recipe:
    known = {"description", "fs", "mkfs_opts", "mount_opts", "prep"}
    for key in data:
        if key not in known:
            raise RecipeError(f"{source}: unknown key '{key}' (known: {', '.join(sorted(known))})")
    if "fs" not in data:
        raise RecipeError(f"{source}: fs: missing (one of {', '.join(FILE_SYSTEMS)})")
    fs = data["fs"]
    _check_type(f"{source}: fs", fs, str)
    if fs not in FILE_SYSTEMS:
        raise RecipeError(f"{source}: fs: unknown file system '{fs}' (known: {', '.join(FILE_SYSTEMS)})")
    description = data.get("description", "")
    _check_type(f"{source}: description", description, str)
    prep_data = data.get("prep", {})
    _check_type(f"{source}: prep", prep_data, dict)
    defaults = Prep()
    prep_values = {}
    for key, value in prep_data.items():
        if not hasattr(defaults, key):
            known_prep = ", ".join(f.name for f in fields(Prep))
            raise RecipeError(f"{source}: prep.{key}: unknown prep step (known: {known_prep})")
        _check_type(f"{source}: prep.{key}", value, type(getattr(defaults, key)))
        prep_values[key] = value
    prep = replace(defaults, **prep_values)
    check_prep(prep, fs, lambda key: f"{source}: prep.{key}")
    return Recipe(name=name, fs=fs, description=description,
                  mkfs_opts=_opts(f"{source}: mkfs_opts", data.get("mkfs_opts", [])),
                  mount_opts=_opts(f"{source}: mount_opts", data.get("mount_opts", [])),
                  prep=prep, source=source)


def resolve_path(name_or_path: str) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or "/" in name_or_path:
        return candidate
    return paths.recipes_dir() / f"{name_or_path}.toml"


def load(name_or_path: str) -> Recipe:
    """A recipe by name (``xfs-default``) or by path (``./my.toml``)."""
    path = resolve_path(name_or_path)
    if path.is_dir():
        raise RecipeError(f"recipe {path}: is a directory, not a recipe file (name a .toml file in it, "
                          "or a shipped recipe: see 'fsscope recipes')")
    if not path.is_file():
        known = ", ".join(r.name for r in available())
        raise RecipeError(f"unknown recipe '{name_or_path}' (no file {path}; known: {known})")
    try:
        data = tomlsafe.loads(trust.read_input_text(path, "recipe"), str(path), RecipeError)
    except UnicodeDecodeError as exc:
        raise RecipeError(f"{path}: not a text file (byte {exc.start} is not UTF-8): a recipe is TOML") from None
    except SafetyRefusal as exc:  # a recipe root cannot trust is one it does not know (listings skip it)
        raise RecipeError(str(exc)) from None
    return parse(data, name=path.stem, source=str(path))


def available() -> list[Recipe]:
    """The shipped recipes, sorted by name (broken ones are skipped here; load() reports them)."""
    out = []
    for path in sorted(paths.recipes_dir().glob("*.toml")):
        try:
            out.append(load(str(path)))
        except RecipeError:
            continue
    return out
