"""Aging profiles: what an old file system looks like, as three distributions and a fullness.

A profile (``recipes/aging/<name>.toml``) holds, after Geriatrix (Kadekodi et al.):

- ``[size]``  ``bytes`` (bucket sizes, increasing) and ``weights``: files are created with
  exactly a bucket's size; a walked file of ``s`` bytes counts in the first bucket >= ``s``.
- ``[depth]`` ``depths`` (increasing, root = 0), ``weights`` and ``subdirs``: how many
  sibling directories at that depth the files of that depth are spread over (ignored at
  depth 0, whose files live in the root).
- ``[age]``   ``cutoffs`` (increasing, any unit: only ``cutoff / last cutoff`` matters) and
  ``weights`` of the relative-age histogram (youngest first).
- ``fullness`` in (0, 1): the default fraction of the file system the ager fills.

Weights are relative (they need not sum to anything); zero weights are allowed, negative
ones are not. A bad profile raises :class:`ProfileError` naming the file and the field.
:func:`capture` builds a profile from a real tree (one device, symlinks not followed).
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fsscope import paths, tomlsafe, trust
from fsscope.aging import fit
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes, visible

DEFAULT_FULLNESS = 0.8  # Geriatrix README: "Somewhere around 80% is reasonable"
AGING_STATE_FILE = ".fsscope-aging.json"  # the ager's state file; walks skip it


# Sane bounds for a profile's buckets: a larger value is a typo or a unit slip, not a tree.
MAX_FILE_BYTES = 16 << 40      # the largest file ext4 holds with 4 KiB blocks
MAX_DEPTH = 256                # d1/d2/…/d256 already takes ~1000 of PATH_MAX's 4096 bytes
MAX_SUBDIRS = 1_000_000        # sibling directories at one depth
MAX_WEIGHT = 1e15              # relative weights; a captured tree's file counts stay far below
MAX_CUTOFF = 1e15              # age cutoffs in any unit (1e15 s is 30 million years)


class ProfileError(FsscopeError):
    """A profile file that does not parse or validate; the message names the file and field."""


@dataclass(frozen=True)
class Profile:
    """An aging profile; tuples so it is hashable and pickles into worker/job processes."""

    name: str
    size_bytes: tuple[int, ...]
    size_weights: tuple[float, ...]
    depths: tuple[int, ...]
    depth_weights: tuple[float, ...]
    depth_subdirs: tuple[int, ...]
    age_cutoffs: tuple[float, ...]
    age_weights: tuple[float, ...]
    fullness: float = DEFAULT_FULLNESS
    description: str = ""
    provenance: str = ""
    source: str = field(default="", compare=False)  # file it was loaded from (for messages)

    def size_fractions(self) -> np.ndarray:
        return fit.fractions(np.array(self.size_weights))

    def depth_fractions(self) -> np.ndarray:
        return fit.fractions(np.array(self.depth_weights))

    def age_fractions(self) -> np.ndarray:
        return fit.fractions(np.array(self.age_weights))

    def relative_age_cutoffs(self) -> np.ndarray:
        return fit.relative_cutoffs(np.array(self.age_cutoffs))

    def mean_size_bytes(self) -> float:
        return float(np.dot(self.size_fractions(), np.array(self.size_bytes, dtype=np.float64)))

    def to_dict(self) -> dict:
        """The TOML document as a dict (what :func:`save_profile` writes)."""
        return {
            "name": self.name,
            "description": self.description,
            "provenance": self.provenance,
            "fullness": self.fullness,
            "size": {"bytes": list(self.size_bytes), "weights": list(self.size_weights)},
            "depth": {"depths": list(self.depths), "weights": list(self.depth_weights),
                      "subdirs": list(self.depth_subdirs)},
            "age": {"cutoffs": list(self.age_cutoffs), "weights": list(self.age_weights)},
        }


# ---------------------------------------------------------------- finding and loading


def profiles_dir() -> Path:
    return paths.recipes_dir() / "aging"


def list_profiles() -> list[str]:
    """Names of the shipped (or ``FSSCOPE_RECIPES``) profiles, sorted."""
    return sorted(p.stem for p in profiles_dir().glob("*.toml"))


def find_profile(name_or_path: str | Path) -> Path:
    """A profile file from a path or a shipped name (``wang_os`` and ``wang-os`` both work)."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.exists():
        if not candidate.is_file():
            raise ProfileError(f"{candidate}: no such profile file")
        return candidate
    stem = str(name_or_path).replace("_", "-")
    path = profiles_dir() / f"{stem}.toml"
    if not path.is_file():
        known = ", ".join(list_profiles()) or "none"
        raise ProfileError(f"unknown aging profile '{name_or_path}' (known: {known})")
    return path


def load_profile(name_or_path: str | Path) -> Profile:
    """Load and validate a profile by name or path; raises :class:`ProfileError`."""
    path = find_profile(name_or_path)
    where = _display(path)
    try:
        data = tomlsafe.loads(trust.read_input_text(path, "aging profile"), where, ProfileError, invalid="invalid TOML")
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{where}: not a text file (byte {exc.start} is not UTF-8): a profile is TOML") from None
    except OSError as exc:
        raise ProfileError(f"{where}: cannot read: {exc.strerror}") from None
    return profile_from_dict(data, where=where, default_name=path.stem, source=str(path))


def profile_from_dict(data: dict, *, where: str = "<profile>", default_name: str = "profile",
                      source: str = "") -> Profile:
    """Validate a parsed profile document; errors read ``<where>: <field>: <problem>``."""

    def fail(field_name: str, problem: str) -> ProfileError:
        return ProfileError(f"{where}: {field_name}: {problem}")

    _no_unknown(data, {"name", "description", "provenance", "fullness", "size", "depth", "age"},
                "", fail)
    name = data.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise fail("name", f"expected a non-empty string, got {name!r}")
    for text_field in ("description", "provenance"):
        if not isinstance(data.get(text_field, ""), str):
            raise fail(text_field, "expected a string")
    if "fullness" not in data:
        raise fail("fullness", "missing (a fraction in (0, 1), e.g. 0.8)")
    fullness = data["fullness"]
    if isinstance(fullness, bool) or not isinstance(fullness, (int, float)) \
            or not 0.0 < float(fullness) < 1.0:
        raise fail("fullness", f"must be a number in (0, 1) (exclusive), got {fullness!r}")

    size = _table(data, "size", {"bytes", "weights"}, fail)
    depth = _table(data, "depth", {"depths", "weights", "subdirs"}, fail)
    age = _table(data, "age", {"cutoffs", "weights"}, fail)

    size_bytes = _ints(size, "size", "bytes", fail, minimum=0, maximum=MAX_FILE_BYTES)
    _increasing(size_bytes, "size.bytes", fail)
    size_weights = _weights(size, "size", len(size_bytes), fail)

    depths = _ints(depth, "depth", "depths", fail, minimum=0, maximum=MAX_DEPTH)
    _increasing(depths, "depth.depths", fail)
    depth_weights = _weights(depth, "depth", len(depths), fail)
    subdirs = _ints(depth, "depth", "subdirs", fail, minimum=0, maximum=MAX_SUBDIRS)
    if len(subdirs) != len(depths):
        raise fail("depth.subdirs", f"has {len(subdirs)} entries but depth.depths has {len(depths)}")

    cutoffs = _numbers(age, "age", "cutoffs", fail)
    if any(c <= 0 for c in cutoffs):
        raise fail("age.cutoffs", "cutoffs must be > 0")
    if max(cutoffs) > MAX_CUTOFF:
        raise fail("age.cutoffs", f"{max(cutoffs):g} is more than the sane maximum {MAX_CUTOFF:g}")
    _increasing(cutoffs, "age.cutoffs", fail)
    age_weights = _weights(age, "age", len(cutoffs), fail)

    return Profile(
        name=name, size_bytes=tuple(size_bytes), size_weights=tuple(size_weights),
        depths=tuple(depths), depth_weights=tuple(depth_weights), depth_subdirs=tuple(subdirs),
        age_cutoffs=tuple(float(c) for c in cutoffs), age_weights=tuple(age_weights),
        fullness=float(fullness), description=data.get("description", ""),
        provenance=data.get("provenance", ""), source=source,
    )


def _display(path: Path) -> str:
    """The path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _no_unknown(table: dict, known: set[str], prefix: str, fail) -> None:
    for key in table:
        if key not in known:
            raise fail(f"{prefix}{key}", f"unknown key (expected one of: {', '.join(sorted(known))})")


def _table(data: dict, name: str, keys: set[str], fail) -> dict:
    table = data.get(name)
    if table is None:
        raise fail(name, f"missing table [{name}] with {', '.join(sorted(keys))}")
    if not isinstance(table, dict):
        raise fail(name, f"expected a table [{name}], got {type(table).__name__}")
    _no_unknown(table, keys, f"{name}.", fail)
    return table


def _list(table: dict, section: str, key: str, fail) -> list:
    value = table.get(key)
    if value is None:
        raise fail(f"{section}.{key}", "missing")
    if not isinstance(value, list):
        raise fail(f"{section}.{key}", f"expected a list of numbers, got {value!r}")
    if not value:
        raise fail(f"{section}.{key}", "empty: a distribution needs at least one bucket")
    return value


def _numbers(table: dict, section: str, key: str, fail) -> list[float]:
    values = _list(table, section, key, fail)
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise fail(f"{section}.{key}", f"entry {i} is not a finite number: {v!r}")
    return [float(v) if isinstance(v, float) else v for v in values]


def _ints(table: dict, section: str, key: str, fail, *, minimum: int, maximum: int) -> list[int]:
    values = _list(table, section, key, fail)
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int):
            raise fail(f"{section}.{key}", f"entry {i} is not an integer: {v!r}")
        if v < minimum:
            raise fail(f"{section}.{key}", f"entry {i} is {v}, must be >= {minimum}")
        if v > maximum:
            shown = format_bytes(v) if key == "bytes" else f"{v:,}"
            limit = format_bytes(maximum) if key == "bytes" else f"{maximum:,}"
            raise fail(f"{section}.{key}", f"entry {i} is {shown}, more than the sane maximum {limit}")
    return list(values)


def check_fits(profile: Profile, capacity_bytes: int, fullness: float) -> None:
    """Refuse a profile whose weighted size buckets cannot fit the space aging will fill."""
    room = capacity_bytes * fullness
    for i, (size, weight) in enumerate(zip(profile.size_bytes, profile.size_weights)):
        if weight > 0 and size > room:
            raise ProfileError(f"{profile.source or profile.name}: size.bytes: entry {i} is {format_bytes(size)}, "
                               f"larger than the {format_bytes(room)} aging fills on this target "
                               f"({fullness:.0%} of {format_bytes(capacity_bytes)}): no such file fits")


def _increasing(values: list, field_name: str, fail) -> None:
    for i in range(1, len(values)):
        if values[i] <= values[i - 1]:
            raise fail(field_name, f"must be strictly increasing (entry {i}: {values[i]!r} "
                                   f"after {values[i - 1]!r})")


def _weights(table: dict, section: str, n_buckets: int, fail) -> list[float]:
    weights = _numbers(table, section, "weights", fail)
    if len(weights) != n_buckets:
        raise fail(f"{section}.weights", f"has {len(weights)} entries for {n_buckets} buckets")
    for i, w in enumerate(weights):
        if w < 0:
            raise fail(f"{section}.weights", f"entry {i} is negative ({w!r})")
        if w > MAX_WEIGHT:  # weights are relative: huge ones only overflow their sum
            raise fail(f"{section}.weights", f"entry {i} is {w:g}, more than the sane maximum {MAX_WEIGHT:g} "
                                             "(weights are relative: scale them down)")
    if sum(weights) <= 0:
        raise fail(f"{section}.weights", "all weights are zero: the distribution is empty")
    return [float(w) for w in weights]


# ---------------------------------------------------------------- saving


def save_profile(profile: Profile, path: Path) -> None:
    """Write ``profile`` as TOML (comments for the provenance); it loads back equal. Root
    may write it into /tmp: through the checked descriptor (:func:`fsscope.trust.write_output`)."""
    # a captured profile's name and provenance quote a directory's name: no control character
    # may end a comment line early (and inject keys) or make the file unreadable TOML
    lines = [f"# fsscope aging profile '{visible(profile.name)}'"]
    for text in profile.provenance.split("\n"):
        lines.append(f"# {visible(text)}")
    lines += [
        f"name = {_toml_str(profile.name)}",
        f"description = {_toml_str(profile.description)}",
        f"provenance = {_toml_str(profile.provenance)}",
        f"fullness = {profile.fullness!r}",
        "",
        "[size]  # file sizes in bytes; files are created with exactly these sizes",
        f"bytes = {_toml_list(profile.size_bytes)}",
        f"weights = {_toml_list(profile.size_weights)}",
        "",
        "[depth]  # directory depth of files (root = 0); subdirs = sibling dirs at that depth",
        f"depths = {_toml_list(profile.depths)}",
        f"weights = {_toml_list(profile.depth_weights)}",
        f"subdirs = {_toml_list(profile.depth_subdirs)}",
        "",
        "[age]  # relative-age histogram, youngest first; only cutoff / last cutoff matters",
        f"cutoffs = {_toml_list(profile.age_cutoffs)}",
        f"weights = {_toml_list(profile.age_weights)}",
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    trust.write_output(path, "\n".join(lines), "profile")


def _toml_str(text: str) -> str:
    """A TOML basic string: quotes, backslashes and every control character escaped."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 else c for c in escaped) + '"'


def _toml_num(value: float | int) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return f"{int(value)}.0"
    return repr(value)


def _toml_list(values) -> str:
    return "[" + ", ".join(_toml_num(v) for v in values) + "]"


# ---------------------------------------------------------------- capture


@dataclass(frozen=True)
class TreeScan:
    """Raw facts of a walked tree (regular files only), before bucketing."""

    root: str
    size_bytes: np.ndarray      # int64, per file
    depth: np.ndarray           # int64, per file (root = 0)
    age_s: np.ndarray           # float64, now - mtime, clamped at 0
    dirs_per_depth: tuple[int, ...]  # directories at each depth (index 0: the root itself)
    fullness: float             # used / total blocks of the root's file system
    errors: int                 # entries that could not be read (permission, vanished)
    symlinks_skipped: int
    other_device_skipped: int   # mount points below the root, not crossed
    now_s: float
    swapped: tuple[str, ...] = ()  # directories swapped during the walk, not followed (one line each)


def scan_tree(root: Path, *, now_s: float | None = None,
              exclude_names: frozenset[str] = frozenset({AGING_STATE_FILE})) -> TreeScan:
    """Walk ``root`` on its own device without following symlinks; unreadable parts are counted.

    Iterative (no recursion limit on deep trees); ``exclude_names`` skips entries by name
    anywhere (the ager uses it for its state file). Never redirected: each directory is
    opened from its parent's descriptor and must be the one listed
    (:class:`fsscope.trust.TreeWalk`; a swapped one is named in ``swapped``, not followed).
    """
    now = time.time() if now_s is None else float(now_s)
    try:
        root = Path(trust.real_tree(root, "profile capture"))  # never through a link another user made
        root_stat = os.stat(root)
    except OSError as exc:
        raise ProfileError(f"{root}: cannot read: {exc.strerror}") from None
    if not stat.S_ISDIR(root_stat.st_mode):
        raise ProfileError(f"{root}: not a directory")
    sizes: list[int] = []
    depths: list[int] = []
    mtimes: list[float] = []
    dirs_per_depth = [1]
    errors = 0
    tree = trust.TreeWalk(str(root), noatime=False, exclude=exclude_names)
    try:
        for listed in tree:
            depth = listed.depth
            if listed.subdirs:
                while len(dirs_per_depth) <= depth + 1:
                    dirs_per_depth.append(0)
                dirs_per_depth[depth + 1] += len(listed.subdirs)
            for entry in listed.entries:
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    errors += 1
                    continue
                sizes.append(st.st_size)
                depths.append(depth)
                mtimes.append(st.st_mtime)
    except OSError as exc:
        raise ProfileError(f"{root}: cannot read: {exc.strerror}") from None
    errors += len(tree.errors)
    try:
        vfs = os.statvfs(root)
        fullness = (vfs.f_blocks - vfs.f_bfree) / vfs.f_blocks if vfs.f_blocks else 0.0
    except OSError:
        fullness = 0.0
    return TreeScan(
        root=str(root), size_bytes=np.array(sizes, dtype=np.int64),
        depth=np.array(depths, dtype=np.int64),
        age_s=np.maximum(0.0, now - np.array(mtimes, dtype=np.float64)),
        dirs_per_depth=tuple(dirs_per_depth), fullness=float(fullness), errors=errors,
        symlinks_skipped=tree.symlinks, other_device_skipped=tree.other_device, now_s=now,
        swapped=tuple(tree.swapped),
    )


def _pow2_ceil_exponent(values: np.ndarray) -> np.ndarray:
    """Smallest k with 2**k >= v, for v >= 1."""
    return np.ceil(np.log2(np.maximum(values, 1))).astype(np.int64)


def capture_buckets(scan: TreeScan) -> dict[str, np.ndarray]:
    """Bucket edges for a scan: powers of two for sizes (plus 0) and age seconds, every depth."""
    sizes = scan.size_bytes
    nonzero = sizes[sizes > 0]
    size_edges: list[int] = [0] if (sizes == 0).any() else []
    if len(nonzero):
        exps = _pow2_ceil_exponent(nonzero)
        size_edges += [2 ** int(k) for k in range(int(exps.min()), int(exps.max()) + 1)]
    ages = np.maximum(scan.age_s, 1.0)
    age_exps = _pow2_ceil_exponent(ages)
    age_edges = [float(2 ** int(k)) for k in range(int(age_exps.min()), int(age_exps.max()) + 1)]
    depth_edges = list(range(int(scan.depth.max()) + 1))
    return {"size": np.array(size_edges, dtype=np.int64), "depth": np.array(depth_edges),
            "age": np.array(age_edges, dtype=np.float64)}


def profile_from_scan(scan: TreeScan, *, name: str | None = None) -> Profile:
    """A profile whose buckets are powers of two (sizes in bytes, ages in seconds) and every depth.

    Fullness is the file system's used fraction, clamped to [0.01, 0.99] so the profile
    stays valid on an (almost) empty or full file system.
    """
    if len(scan.size_bytes) == 0:
        raise ProfileError(f"{scan.root}: no regular files found, nothing to capture")
    edges = capture_buckets(scan)
    size_counts = fit.bucket_counts(fit.size_bucket_index(scan.size_bytes, edges["size"]),
                                    len(edges["size"]))
    depth_counts = fit.bucket_counts(fit.depth_bucket_index(scan.depth, edges["depth"]),
                                     len(edges["depth"]))
    rel_age = scan.age_s / edges["age"][-1]
    age_counts = fit.bucket_counts(fit.age_bucket_index(rel_age, fit.relative_cutoffs(edges["age"])),
                                   len(edges["age"]))
    subdirs = [0] + [scan.dirs_per_depth[d] if d < len(scan.dirs_per_depth) else 0
                     for d in edges["depth"][1:]]
    when = _dt.datetime.fromtimestamp(scan.now_s, _dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    provenance = (
        f"captured by fsscope from {scan.root} at {when}: {len(scan.size_bytes)} files, "
        f"{sum(scan.dirs_per_depth) - 1} directories; {scan.errors} unreadable entries, "
        f"{scan.symlinks_skipped} symlinks not followed, {scan.other_device_skipped} mount points "
        f"not crossed; {len(scan.swapped)} directories swapped during the walk not followed; "
        f"file system {scan.fullness:.1%} full. Ages are seconds since mtime."
    )
    return Profile(
        name=name or Path(scan.root).resolve().name or "root",
        size_bytes=tuple(int(x) for x in edges["size"]),
        size_weights=tuple(float(x) for x in size_counts),
        depths=tuple(int(x) for x in edges["depth"]),
        depth_weights=tuple(float(x) for x in depth_counts),
        depth_subdirs=tuple(int(x) for x in subdirs),
        age_cutoffs=tuple(float(x) for x in edges["age"]),
        age_weights=tuple(float(x) for x in age_counts),
        fullness=min(0.99, max(0.01, round(scan.fullness, 4))),
        description=f"captured from {scan.root}",
        provenance=provenance,
    )


def capture(root: Path, *, name: str | None = None, now_s: float | None = None) -> Profile:
    """Walk a real tree and describe it as a profile (see :func:`profile_from_scan`)."""
    return profile_from_scan(scan_tree(Path(root), now_s=now_s), name=name)


# ---------------------------------------------------------------- showing


def _num(value: float) -> str:
    return f"{int(value)}" if float(value).is_integer() else f"{value:g}"


def distributions(profile: Profile) -> dict[str, list[dict]]:
    """The three distributions as rows ``{label, fraction, ...}`` for charts (CLI/TUI render)."""
    return {
        "size": [{"label": format_bytes(b), "bytes": b, "fraction": float(f)}
                 for b, f in zip(profile.size_bytes, profile.size_fractions())],
        "depth": [{"label": f"d{d}", "depth": d, "fraction": float(f), "subdirs": s}
                  for d, f, s in zip(profile.depths, profile.depth_fractions(),
                                     profile.depth_subdirs)],
        "age": [{"label": f"≤{_num(c)}", "cutoff": c, "relative_cutoff": float(r),
                 "fraction": float(f)}
                for c, r, f in zip(profile.age_cutoffs, profile.relative_age_cutoffs(),
                                   profile.age_fractions())],
    }


def render_bars(profile: Profile, *, width: int = 40) -> str:
    """A plain-text bar chart of the three distributions (no colour, for logs and pipes)."""
    rows = distributions(profile)
    out = [f"profile {profile.name}: default fullness {profile.fullness:.0%}"]
    if profile.description:
        out.append(f"  {profile.description}")
    titles = {"size": "file size", "depth": "directory depth", "age": "relative age (youngest first)"}
    for key, title in titles.items():
        out.append(f"{title}:")
        top = max(r["fraction"] for r in rows[key]) or 1.0
        label_width = max(len(r["label"]) for r in rows[key])
        for r in rows[key]:
            bar = "#" * int(round(r["fraction"] / top * width))
            extra = f"  sub={r['subdirs']}" if key == "depth" else ""
            out.append(f"  {r['label']:>{label_width}} {r['fraction'] * 100:6.2f}% {bar}{extra}")
    return "\n".join(out)


