"""Run records: one directory per run, append-only and flushed as it goes.

    RUN/manifest.json    what ran where: job, spec, recipe, target, exact commands, kernel,
                         tool versions, seed, start/end, status (running → ok | failed |
                         cancelled: stopped early, with a report | interrupted: stopped
                         with no report, killed, or its parent died)
    RUN/events.ndjson    every event except bulk samples, one JSON object per line, flushed
    RUN/*.npy            arrays (e.g. latency_ns.npy, runs × files, int64, -1 = not measured)
    RUN/report.json      the job's final result
    RUN/lab.json         a Lab replication's judged findings, in each run it made (optional)

A killed job leaves a readable record: the manifest says "running" with a dead pid, which
:meth:`RunDir.status` reports as "interrupted"; arrays written through :meth:`RunDir.open_array` are
memory-mapped, so every measured value is on disk. Their blocks are allocated when they are
opened (a full disk is an error then, never a SIGBUS mid-run), and :func:`check_room`
refuses a run whose record will not fit before its directory is made.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

import numpy as np
import numpy.typing as npt
import psutil

from fsscope import paths, proctree, tools
from fsscope.errors import FsscopeError, os_error_line
from fsscope.format import format_bytes
from fsscope.records import dumps
from fsscope.store.manifest import Manifest, decode_manifest

FINAL_STATUSES = ("ok", "failed", "interrupted", "cancelled")

# A run's records besides its arrays: manifest, events, report, child log (generous).
RECORD_BYTES = 4 << 20


def check_room(array_bytes: int, root: Path | None = None) -> None:
    """Refuse, in one line, a run whose record cannot be written: the runs directory is not
    writable (read-only, permissions) or has less free space than the run's arrays
    (``array_bytes``) plus its records."""
    root = root or paths.runs_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        free_bytes = shutil.disk_usage(root).free
    except OSError as exc:
        raise FsscopeError(f"cannot keep run records: {os_error_line(exc)}; set FSSCOPE_HOME to a "
                           "writable directory") from None
    if not os.access(root, os.W_OK):
        ro = os.statvfs(root).f_flag & os.ST_RDONLY
        raise FsscopeError(f"cannot keep run records in {root}: "
                           f"{'its file system is read-only' if ro else 'not writable'}; "
                           "set FSSCOPE_HOME to a writable directory")
    need_bytes = array_bytes + RECORD_BYTES
    if free_bytes < need_bytes:
        what = f"{format_bytes(array_bytes)} of arrays and " if array_bytes else ""
        raise FsscopeError(f"not enough room for the run record in {root}: {format_bytes(free_bytes)} free, "
                           f"the run needs {what}{format_bytes(RECORD_BYTES)} of records; free space there "
                           "or set FSSCOPE_HOME to another place")


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        fh.write(dumps(data, indent=2))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_object(path: Path) -> dict | None:
    """A JSON object from ``path``; None when missing, torn, binary or not an object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return None
    return data if isinstance(data, dict) else None


def _object_problem(path: Path, *, required: bool) -> str | None:
    """Why ``path`` is not a JSON object fsscope could have written; None when it is (or
    when it is absent and not ``required``)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return f"no {path.name}" if required else None
    except OSError as exc:
        return f"{path.name}: {os_error_line(exc)}"
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError
        return f"{path.name} is not JSON ({str(exc).split(':')[0]})"
    return None if isinstance(data, dict) else f"{path.name} holds a JSON {type(data).__name__}, not an object"


@contextmanager
def reading(what: str) -> Iterator[None]:
    """Around code that reads a record's contents: a record of the wrong shape (valid JSON,
    not what fsscope writes -- a missing key, a string where a list was) becomes one line
    naming ``what`` was read, never a traceback."""
    try:
        yield
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        detail = f"missing {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        raise FsscopeError(f"{what} is not in the shape fsscope writes ({detail})") from None


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._events: TextIO | None = None

    @classmethod
    def create(cls, job: str, root: Path | None = None) -> RunDir:
        root = root or paths.runs_dir()
        root.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        # runs of any job within one second share the counter, so the ids sort in the
        # order they were made (see _creation_order)
        taken = sum(1 for _ in root.glob(f"{stamp}-*"))
        for n in range(taken, taken + 1000):
            path = root / (f"{stamp}-{job}" + (f"-{n}" if n else ""))
            try:
                path.mkdir()
                return cls(path)
            except FileExistsError:
                continue
        raise RuntimeError("could not create a run directory")

    @property
    def id(self) -> str:
        return self.path.name

    # -- manifest ---------------------------------------------------------------------------
    def manifest(self) -> dict:
        """The manifest as plain data ({} when unreadable); readers use :meth:`info`."""
        return _read_object(self.path / "manifest.json") or {}

    def info(self) -> Manifest:
        """The manifest as its record (an empty one when it is missing or not an object);
        FsscopeError in one line when a field has the wrong type (:meth:`problem` says which)."""
        return decode_manifest(self.manifest())

    def problem(self, *, report: bool = True) -> str | None:
        """Why this run record cannot be read (its manifest -- or, with ``report``, its report
        -- is not JSON, not an object, or a field has the wrong type), or None when it can."""
        why = _object_problem(self.path / "manifest.json", required=True)
        if why is None:
            try:
                decode_manifest(self.manifest())
            except FsscopeError as exc:
                why = str(exc)
        return why or (_object_problem(self.path / "report.json", required=False) if report else None)

    def check(self) -> RunDir:
        """This run, or FsscopeError naming it and what is wrong with its record."""
        why = self.problem()
        if why:
            raise FsscopeError(f"run {self.id} cannot be read: {why}")
        return self

    def update_manifest(self, **fields: object) -> dict:
        data = self.manifest() | fields
        _write_json(self.path / "manifest.json", data)
        return data

    # -- events -----------------------------------------------------------------------------
    def append_event(self, event: dict) -> None:
        """Record one event given in its wire form (see fsscope.engine.events)."""
        self.append_line(dumps(event))

    def append_line(self, line: str) -> None:
        """Record one already-encoded event line."""
        if self._events is None:
            self._events = open(self.path / "events.ndjson", "a", buffering=1)
        self._events.write(line + "\n")
        self._events.flush()

    def events(self) -> list[dict]:
        out = []
        try:
            with open(self.path / "events.ndjson") as fh:
                for line in fh:
                    try:
                        out.append(json.loads(line))
                    except json.JSONDecodeError:
                        break  # a torn last line of a killed job
        except FileNotFoundError:
            pass
        return out

    def close(self) -> None:
        if self._events is not None:
            self._events.close()
            self._events = None

    # -- arrays and report ------------------------------------------------------------------
    def open_array(self, name: str, shape: tuple[int, ...], dtype: npt.DTypeLike = np.int64,
                   fill: float = -1) -> np.memmap:
        """A memory-mapped .npy filled with ``fill`` (= not measured) that jobs write into."""
        path = self.path / f"{name}.npy"
        arr = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
        fd = os.open(path, os.O_RDWR)
        try:  # real blocks now: a mapping over a hole on a full disk is a SIGBUS later
            os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
        except OSError as exc:
            del arr
            path.unlink()
            size = format_bytes(int(np.prod(shape)) * np.dtype(dtype).itemsize)
            raise FsscopeError(f"no room for {name} ({size}) in {self.path}: {exc.strerror}") from None
        finally:
            os.close(fd)
        arr[...] = fill
        return arr

    def save_array(self, name: str, array: np.ndarray) -> None:
        """Write (or replace) an array whole. Written aside and renamed: a memory map still open
        on the old file (see open_array) keeps its pages instead of faulting on a truncated file."""
        tmp = self.path / f".{name}.tmp.npy"
        np.save(tmp, np.asarray(array))
        os.replace(tmp, self.path / f"{name}.npy")

    def load_array(self, name: str, mmap: bool = True) -> np.ndarray:
        return np.load(self.path / f"{name}.npy", mmap_mode="r" if mmap else None)

    def arrays(self) -> list[str]:
        return sorted(p.stem for p in self.path.glob("*.npy") if not p.name.startswith("."))

    def write_report(self, report: dict) -> None:
        _write_json(self.path / "report.json", report)

    def report(self) -> dict | None:
        return _read_object(self.path / "report.json")

    def write_lab(self, kept: dict) -> None:
        """The Lab's judged result of the replication that made this run (``lab.json``)."""
        _write_json(self.path / "lab.json", kept)

    def lab(self) -> dict | None:
        return _read_object(self.path / "lab.json")

    def status(self) -> str:
        """The manifest's status, with a dead 'running' job shown as 'interrupted'."""
        try:
            m = self.info()
        except FsscopeError:
            return "unreadable"
        status = m.status or "unknown"
        if status == "running":
            started = m.pid_start_ticks if m.pid_start_ticks is not None else m.pid_start  # the latter: an older record
            if not proctree.same_process(m.pid, started):
                return "interrupted"
        return status


def environment() -> dict:
    """Kernel and tool versions for the manifest."""

    return {"kernel": platform.release(), "machine": platform.machine(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "memory_bytes": psutil.virtual_memory().total,
            "tools": {t: tools.version(t) for t in ("mkfs.ext4", "mkfs.xfs", "btrfs", "mkfs.f2fs", "losetup")}}


_RUN_ID = re.compile(r"(\d{8}-\d{6})-.+?(?:-(\d+))?")


def _creation_order(path: Path) -> tuple[str, int, str]:
    """Second, then the within-second counter as a number: "…-probe-10" after "…-smoke-2",
    and "…-smoke-1" after "…-probe" of the same second, which a sort by name gets wrong."""
    match = _RUN_ID.fullmatch(path.name)
    return (match[1], int(match[2] or 0), path.name) if match else (path.name, 0, path.name)


def list_runs(root: Path | None = None) -> list[RunDir]:
    """Every recorded run under ``root``, oldest first (the last is what "latest" means)."""
    root = root or paths.runs_dir()
    if not root.is_dir():
        return []
    runs = [p for p in root.iterdir() if (p / "manifest.json").exists()]
    return [RunDir(p) for p in sorted(runs, key=_creation_order)]


def find_run(name: str, root: Path | None = None) -> RunDir:
    """A run by path, by directory name, or by a unique suffix/prefix of it ("latest" works)."""
    if Path(name).is_dir() and (Path(name) / "manifest.json").exists():
        return RunDir(Path(name))
    runs = list_runs(root)
    if name == "latest" and runs:
        return runs[-1]
    matches = [r for r in runs if r.id == name] or [r for r in runs if name in r.id]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise FsscopeError(f"no run '{name}' in {root or paths.runs_dir()} (see 'fsscope runs')")
    raise FsscopeError(f"'{name}' matches {len(matches)} runs: {', '.join(r.id for r in matches[:5])}")
