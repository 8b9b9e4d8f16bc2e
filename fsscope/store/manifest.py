"""The run manifest (RUN/manifest.json) as a record: what ran where, and how it ended.

The runner writes it in steps (``RunDir.update_manifest``: starting, running, its end), so
every field has a default and a record of any age reads. Readers get :class:`Manifest` from
``RunDir.info()``; a field of the wrong type is one line naming it ("manifest.json: pid is str
'me', not a whole number"), never a traceback. The store sits below the targets and the jobs,
so the target's spec and the job's spec stay plain data here: ``TargetSpec`` and the job's
``Spec`` are made from them above (``convert``, ``registry.spec_from_data``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from fsscope.errors import FsscopeError
from fsscope.records import Record

__all__ = ["Command", "Manifest", "ManifestRecipe", "ManifestTarget", "decode_manifest"]


class Command(Record, frozen=True, kw_only=True):
    """An external command the target ran (mkfs, mount, losetup…), as the manifest keeps it."""

    argv: list[Any]
    rc: int | None = None
    duration_s: float | None = None
    stdout: str = ""
    stderr: str = ""


class ManifestRecipe(Record, frozen=True, kw_only=True):
    """The recipe the target was made with (``Recipe.to_dict``)."""

    name: str = ""
    fs: str = ""
    description: str = ""
    mkfs_opts: list[Any] = []
    mount_opts: list[Any] = []
    prep: dict[str, Any] = {}
    source: str = ""


class ManifestTarget(Record, frozen=True, kw_only=True):
    """What went into the target (``Target.describe()``); until the job has ended, only
    ``spec`` (the runner records the target spec itself, which :func:`decode_manifest` puts
    here)."""

    spec: dict[str, Any] = {}
    recipe: ManifestRecipe | None = None
    device: str | None = None
    direct_io: bool | None = None
    restores: list[dict[str, Any]] = []
    image: str | None = None
    mounted: dict[str, Any] | None = None
    existing: dict[str, Any] | None = None
    commands: list[Command] = []


class Manifest(Record, frozen=True, kw_only=True):
    """RUN/manifest.json. ``status`` is what was written ("running" of a killed job stays so:
    ``RunDir.status()`` tells a dead one); ``pid_start`` is wall-clock seconds for people,
    ``pid_start_ticks`` the process's identity (see fsscope.proctree)."""

    job: str | None = None
    status: str | None = None
    events_version: int | None = None
    spec: dict[str, Any] | None = None
    target: ManifestTarget | None = None
    recipe: ManifestRecipe | None = None
    pid: int | None = None
    pid_start: float | None = None
    pid_start_ticks: int | None = None
    cgroup: str | None = None
    started: str | None = None
    ended: str | None = None
    environment: dict[str, Any] | None = None
    machine: dict[str, Any] | None = None
    error: str | None = None
    cleanup_error: str | None = None
    study_dir: str | None = None   # a study: where its per-configuration records are
    seed: int | None = None        # a study: its plan's seed

    @property
    def recipe_name(self) -> str | None:
        return self.recipe.name if self.recipe is not None else None

    @property
    def target_spec(self) -> dict[str, Any]:
        """The target's spec as recorded (kind, path, size_bytes…); {} when none was."""
        return self.target.spec if self.target is not None else {}


_KINDS = {"str": "text", "int": "a whole number", "float": "a number", "object": "an object", "array": "a list",
          "bool": "true or false"}


def decode_manifest(data: Any) -> Manifest:
    """``data`` (a decoded manifest.json) as a :class:`Manifest`; FsscopeError in one line
    naming the field whose type is wrong."""
    if isinstance(data, dict) and isinstance(data.get("target"), dict) and "spec" not in data["target"]:
        data = data | {"target": {"spec": data["target"]}}  # recorded at the start: the spec itself
    try:
        return msgspec.convert(data, Manifest)
    except msgspec.ValidationError as exc:
        raise FsscopeError(_one_line(str(exc), data)) from None


def _one_line(message: str, data: Any) -> str:
    """msgspec's "Expected `int | null`, got `str` - at `$.pid`" as "pid is str 'me', not a
    whole number"."""
    text, _, where = message.partition(" - at `$")
    path = where.rstrip("`").lstrip(".")
    value = data
    for part in path.replace("[", ".[").split("."):
        try:
            value = value[int(part[1:-1])] if part.startswith("[") else value[part]
        except (KeyError, IndexError, TypeError, ValueError):
            break
    name = path.replace(".[", "[")
    if name.startswith("target.commands["):
        return "manifest.json: target.commands holds an entry that is not a command"
    expected = text.partition("Expected `")[2].partition("`")[0]
    kinds = " or ".join(_KINDS.get(k, k) for k in expected.split(" | ") if k != "null")
    if not kinds:
        return f"manifest.json: {name or 'it'}: {text}"
    return f"manifest.json: {name} is {type(value).__name__} {str(value)[:40]!r}, not {kinds}"
