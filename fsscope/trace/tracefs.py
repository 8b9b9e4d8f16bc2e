"""fsscope's own tracefs instance: made (journalled first), configured, read, removed.

A tracefs *instance* (``mkdir instances/NAME``) is a private ring buffer with its own clock,
events and filters, so a job's tracing never touches the global buffer or another tool's
instance. Every fsscope instance is named ``fsscope-<home tag>-<pid>-<random>`` and recorded in the state
journal (kind ``tracefs``) BEFORE the mkdir, so ``fsscope cleanup`` removes one a killed job
left behind.

Facts this relies on (checked on this kernel, see also Documentation/trace/ftrace.rst):

- ``trace_clock`` ``mono`` stamps events with CLOCK_MONOTONIC ns -- the clock of
  ``time.monotonic_ns``, so call start/end times and event times compare directly.
- ``per_cpu/cpuN/trace_pipe_raw`` hands out whole ring-buffer sub-buffers (binary, ns
  timestamps); a non-blocking read returns what is there, partial pages included, and
  consumes it. The text ``trace_pipe`` prints only µs, too coarse for 5 µs calls.
- ``per_cpu/cpuN/stats`` counts ``overrun`` (events overwritten before they were read) and
  ``dropped events`` (lost with overwrite off): both must stay 0 for a complete record.
- Event filters (``events/SYS/EVENT/filter``) keep the measured pid's file-system events and
  the target device's block/journal events. ``set_event_pid`` is NOT used: it would drop
  every event fired by another context (I/O completions in interrupts, the jbd2 thread).
- ``rmdir instances/NAME`` fails with EBUSY while a file of it is open (the reader).
"""

from __future__ import annotations

import errno
import hashlib
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from fsscope import paths, tools
from fsscope.errors import FsscopeError
from fsscope.targets import identity
from fsscope.targets.journal import Entry, Journal

#: Where tracefs is found (or mounted, if nothing is).
TRACEFS_MOUNTPOINT = Path("/sys/kernel/tracing")
INSTANCE_PREFIX = "fsscope-"
#: Ring buffer per CPU: a few seconds of a busy job's events between two reads.
DEFAULT_BUFFER_KB = 8192
JOURNAL_KIND = "tracefs"


class TraceUnavailable(FsscopeError):
    """Tracing cannot run here (not root, no tracefs, no events): the job runs untraced."""


def find_tracefs() -> Path | None:
    """The mount point of tracefs, or None when it is not mounted."""
    try:
        found = [m.mountpoint for m in identity.mounts() if m.fstype == "tracefs"]
    except OSError:
        return None
    return Path(found[0]) if found else None


def tracefs_root(*, mount: bool = True) -> Path:
    """tracefs, mounted at /sys/kernel/tracing if it is not mounted yet (root only).

    Mounting the kernel's own tracefs at its standard place is what every tracing tool does;
    it changes no tracing state, so it is left mounted afterwards."""
    if os.geteuid() != 0:
        raise TraceUnavailable("kernel tracing needs root (tracefs instances are root-only)")
    root = find_tracefs()
    if root is None and mount:
        try:
            tools.run("mount", "-t", "tracefs", "nodev", str(TRACEFS_MOUNTPOINT))
        except FsscopeError as exc:
            if find_tracefs() is None:  # a concurrent job may have mounted it meanwhile
                raise TraceUnavailable(f"tracefs is not mounted and mounting it at "
                                       f"{TRACEFS_MOUNTPOINT} failed: {exc}") from None
        root = find_tracefs()
    if root is None or not (root / "instances").is_dir():
        raise TraceUnavailable("tracefs is not available (kernel without CONFIG_TRACING?)")
    return root


def unavailable_reason() -> str | None:
    """Why tracing cannot run here, or None when it can."""
    try:
        tracefs_root()
    except TraceUnavailable as exc:
        return str(exc)
    return None


def home_tag(home: Path | None = None) -> str:
    """Part of every instance name that says which fsscope home (user, test session) made it."""
    return hashlib.sha1(str(home or paths.home()).encode()).hexdigest()[:8]


def fsscope_instances(root: Path | None = None, *, home: Path | None = None) -> list[Path]:
    """The fsscope instances present now that the fsscope home ``home`` made (None: this
    process's home)."""
    root = root or find_tracefs()
    if root is None or not (root / "instances").is_dir():
        return []
    prefix = f"{INSTANCE_PREFIX}{home_tag(home)}-"
    return sorted(p for p in (root / "instances").iterdir() if p.name.startswith(prefix))


def remove_instance(path: Path, *, wait_s: float = 5.0) -> bool:
    """Stop and remove an instance; True if it existed. A reader that still holds one of its
    files (a job being killed) makes rmdir fail with EBUSY: retry for ``wait_s``."""
    path = Path(path)
    if not path.is_dir():
        return False
    _write_quiet(path / "tracing_on", "0")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                raise FsscopeError(f"cannot remove tracefs instance {path}: {exc.strerror}") from None
            time.sleep(0.05)


def _write_quiet(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError:
        pass


@dataclass(frozen=True)
class CpuStats:
    cpu: int
    entries: int
    overrun: int
    commit_overrun: int
    dropped: int
    read: int

    @property
    def lost(self) -> int:
        return self.overrun + self.commit_overrun + self.dropped


def parse_stats(cpu: int, text: str) -> CpuStats:
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        try:
            values[key.strip()] = int(value.strip())
        except ValueError:
            continue  # the "ts" lines
    return CpuStats(cpu, values.get("entries", 0), values.get("overrun", 0),
                    values.get("commit overrun", 0), values.get("dropped events", 0),
                    values.get("read events", 0))


class Instance:
    """One tracefs instance owned by this process. Use :meth:`create` (journals it first)."""

    def __init__(self, path: Path, journal: Journal | None = None, entry: Entry | None = None):
        self.path = Path(path)
        self.journal = journal
        self.entry = entry
        self.enabled: list[str] = []      # "sys/event" actually enabled
        self.missing: list[str] = []      # asked for, not on this kernel
        self.filter_errors: list[str] = []

    @classmethod
    def create(cls, *, journal: Journal | None = None, buffer_kb: int = DEFAULT_BUFFER_KB) -> Instance:
        root = tracefs_root()
        name = f"{INSTANCE_PREFIX}{home_tag()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        path = root / "instances" / name
        entry = None
        if journal is not None:  # written down before it exists: cleanup can find it
            entry = journal.record(JOURNAL_KIND, f"trace-{name}", path=str(path))
        try:
            path.mkdir()
        except OSError as exc:
            if journal is not None and entry is not None:
                journal.forget(entry)
            raise TraceUnavailable(f"cannot make tracefs instance {path}: {exc.strerror}") from None
        instance = cls(path, journal, entry)
        try:
            (path / "tracing_on").write_text("0")
            (path / "trace_clock").write_text("mono")
            (path / "buffer_size_kb").write_text(str(buffer_kb))
        except OSError as exc:
            instance.remove()
            raise TraceUnavailable(f"cannot configure tracefs instance {path}: {exc.strerror}") from None
        return instance

    @property
    def name(self) -> str:
        return self.path.name

    def cpus(self) -> list[int]:
        return sorted(int(p.name[3:]) for p in (self.path / "per_cpu").glob("cpu*"))

    def enable(self, event: str, filter_expr: str = "") -> bool:
        """Enable ``sys/name`` with an optional filter; False (and noted) when missing."""
        directory = self.path / "events" / event
        if not (directory / "enable").exists():
            self.missing.append(event)
            return False
        if filter_expr:
            try:
                (directory / "filter").write_text(filter_expr)
            except OSError as exc:  # keep the event unfiltered rather than lose it
                self.filter_errors.append(f"{event}: filter {filter_expr!r} rejected ({exc.strerror})")
        (directory / "enable").write_text("1")
        self.enabled.append(event)
        return True

    def start(self) -> None:
        (self.path / "tracing_on").write_text("1")

    def stop(self) -> None:
        _write_quiet(self.path / "tracing_on", "0")

    def stats(self) -> list[CpuStats]:
        return [parse_stats(cpu, (self.path / "per_cpu" / f"cpu{cpu}" / "stats").read_text())
                for cpu in self.cpus()]

    def remove(self) -> None:
        remove_instance(self.path)
        if self.journal is not None and self.entry is not None:
            self.journal.forget(self.entry)
            self.entry = None

    def __enter__(self) -> Instance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
