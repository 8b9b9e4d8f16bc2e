"""One traced stretch of a job: instance + events + reader, then decoded arrays.

    with Tracer(raw_dir, fs="xfs", job="probe", pid=os.getpid(), device="/dev/loop3") as tracer:
        ... the measured work ...
    result = tracer.result      # TraceResult: events (numpy), names, lost counts, ...

The instance is journalled before it is made and removed on exit (even on error); the reader
process is stopped after a final drain. Raw pages stay in ``raw_dir`` only until decoded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from fsscope.errors import FsscopeError
from fsscope.targets.journal import Journal
from fsscope.trace import catalog
from fsscope.trace.decode import decode_files
from fsscope.trace.tracefs import Instance, TraceUnavailable


@dataclass
class TraceResult:
    events: np.ndarray                      # EVENT_DTYPE, time-sorted
    names: list[str]                        # code -> "sys/event"
    comms: dict[int, str] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)   # what string columns (catalog ``texts``) index into
    enabled: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    filter_errors: list[str] = field(default_factory=list)
    overrun: int = 0                        # events overwritten before the reader got them
    dropped: int = 0                        # events the kernel could not store
    pages_with_loss: int = 0
    duration_s: float = 0.0

    @property
    def lost(self) -> int:
        return self.overrun + self.dropped + self.pages_with_loss

    @property
    def events_per_s(self) -> float:
        return len(self.events) / self.duration_s if self.duration_s > 0 else 0.0

    def summary(self) -> dict:
        return {"events": int(len(self.events)), "enabled": self.enabled, "missing": self.missing,
                "filter_errors": self.filter_errors, "overrun": self.overrun,
                "dropped": self.dropped, "pages_with_loss": self.pages_with_loss,
                "duration_s": round(self.duration_s, 3),
                "events_per_s": round(self.events_per_s, 1)}


def kernel_dev(path: str | os.PathLike | None) -> tuple[int, int] | None:
    """(major, minor) of a block device node, or of the device holding a path."""
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    dev = st.st_rdev if st.st_rdev else st.st_dev
    return os.major(dev), os.minor(dev)


def filter_for(entry: catalog.CatalogEvent, pid: int | None, dev: tuple[int, int] | None) -> str | None:
    """The tracefs filter of one event; None: do not enable it (nothing to filter it by)."""
    kdev = f"{(dev[0] << 20) | dev[1]}" if dev else None
    if entry.scope == "switch":
        return f"prev_pid == {pid} || next_pid == {pid}" if pid else None
    if entry.scope == "pid" and pid:
        return f"common_pid == {pid}"
    if entry.scope in ("pid", "dev") and "dev" in entry.columns:
        return f"{entry.columns['dev']} == {kdev}" if kdev else ""
    if entry.scope == "bdi":
        return f'name == "{dev[0]}:{dev[1]}"' if dev else ""
    return ""


def _piped(stream: IO[bytes] | None) -> IO[bytes]:
    """A stream Popen was asked to pipe: never None then, though its type cannot say so."""
    if stream is None:
        raise FsscopeError("the trace reader was started without its pipes")
    return stream


class Tracer:
    """Trace ``events_for(fs, job)`` while the ``with`` body runs (see module docstring)."""

    def __init__(self, raw_dir: Path, *, fs: str, job: str, pid: int | None,
                 device: str | None, avoid_cpu: int | None = None, journal: Journal | None = None,
                 events: tuple[catalog.CatalogEvent, ...] | None = None):
        self.raw_dir = Path(raw_dir)
        self.entries = list(events if events is not None else catalog.events_for(fs, job))
        self.pid = pid
        self.dev = kernel_dev(device)
        self.avoid_cpu = avoid_cpu
        self.wake_s: float | None = None  # the reader's mode (fsscope.trace.reader --wake-s); None: 20 ms polls
        self.journal = journal
        self.instance: Instance | None = None
        self.reader: subprocess.Popen[bytes] | None = None
        self.result: TraceResult | None = None
        self._t0 = 0.0

    def __enter__(self) -> Tracer:
        instance = self.instance = Instance.create(journal=self.journal)
        try:
            for entry in self.entries:
                expr = filter_for(entry, self.pid, self.dev)
                if expr is not None:
                    instance.enable(entry.event, expr)
            if not instance.enabled:
                raise TraceUnavailable("none of the catalog's events exists on this kernel: "
                                       + ", ".join(instance.missing))
            self._start_reader(instance)
            instance.start()
            self._t0 = time.monotonic()
        except BaseException:
            self._abort()
            raise
        return self

    def _start_reader(self, instance: Instance) -> None:
        self.raw_dir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "fsscope.trace.reader", str(instance.path), str(self.raw_dir)]
        if self.avoid_cpu is not None:
            argv += ["--avoid-cpu", str(self.avoid_cpu)]
        if self.wake_s is not None:
            argv += ["--wake-s", str(self.wake_s)]
        # Its own session: a cancel signals the job's process group, and the reader must get
        # to its final drain (the job stops it). It ends when its stdin closes, so a killed
        # job never leaves it behind.
        self.reader = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, start_new_session=True)
        line = _piped(self.reader.stdout).readline()
        if line.strip() != b"ready":
            err = _piped(self.reader.stderr).read().decode(errors="replace").strip().splitlines()
            raise FsscopeError("the trace reader did not start: " + (err[-1] if err else "no output"))

    def _stop_reader(self) -> None:
        reader = self.reader
        if reader is None:
            return
        stdin, stdout, stderr = _piped(reader.stdin), _piped(reader.stdout), _piped(reader.stderr)
        try:
            stdin.write(b"stop\n")
            stdin.close()
        except (BrokenPipeError, ValueError):
            pass
        try:
            reader.wait(timeout=30)
        except subprocess.TimeoutExpired:
            reader.kill()
            reader.wait()
        err = stderr.read().decode(errors="replace").strip()
        stdout.close()
        stderr.close()
        code, self.reader = reader.returncode, None
        if code != 0:
            raise FsscopeError(f"the trace reader failed (exit {code}): {err.splitlines()[-1] if err else ''}")

    def _abort(self) -> None:
        try:
            if self.instance is not None:
                self.instance.stop()
            self._stop_reader()
        finally:
            if self.instance is not None:
                self.instance.remove()
                self.instance = None

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        instance = self.instance
        if instance is None:  # aborted already
            return
        duration_s = time.monotonic() - self._t0
        try:
            instance.stop()
            self._stop_reader()
            stats = instance.stats()
            events_dir = instance.path / "events"
            paths = {cpu: self.raw_dir / f"cpu{cpu}.raw" for cpu in instance.cpus()
                     if (self.raw_dir / f"cpu{cpu}.raw").exists()}
            decoded = decode_files(paths, events_dir, self.entries)
        except BaseException:
            self._abort()
            if exc_type is None:
                raise
            return
        instance.remove()
        self.instance = None
        shutil.rmtree(self.raw_dir, ignore_errors=True)
        self.result = TraceResult(
            events=decoded.events, names=[e.event for e in self.entries], comms=decoded.comms, texts=decoded.texts,
            enabled=list(instance.enabled), missing=list(instance.missing),
            filter_errors=list(instance.filter_errors),
            overrun=sum(s.overrun + s.commit_overrun for s in stats),
            dropped=sum(s.dropped for s in stats), pages_with_loss=decoded.pages_with_loss,
            duration_s=duration_s)
