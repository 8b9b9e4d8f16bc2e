"""What a job sees while it runs: the JobContext handed to every job function.

A job is a plain function ``run(ctx: JobContext, spec) -> dict`` (see
:mod:`fsscope.engine.registry`). It runs inside the job child process, never prints, and
talks to the world only through the context:

- ``ctx.fresh_fs()`` is a context manager that yields a clean :class:`MountedFS` on the
  target: a freshly formatted and mounted file system (device/image/RAM targets, recipe
  hygiene applied) or a fresh empty subdirectory (directory targets). It is released on
  exit, even on error or cancel. ``ctx.run_fs(fresh)`` is the same per run of a repeated
  measurement, or with fresh=False one file system shared by all runs.
- ``ctx.after_populate()`` applies the recipe's hygiene between populating a data set and
  measuring: unmount+mount (remount_after_populate) or sync, then drop caches.
- ``ctx.emit(event)`` streams a typed event (:mod:`fsscope.engine.events`: Phase, Progress,
  Finding, Log, Result, Error, a job's own DataRecord kind, or Data) to the parent and
  (except ``samples``) appends it to the run's ``events.ndjson``. Short forms:
  ``ctx.phase(name)``, ``ctx.progress(done, total)``, ``ctx.log(line)``,
  ``ctx.finding(flag, title, note, **fields)``, ``ctx.data(kind, **fields)``.
- ``ctx.run_dir`` (:class:`fsscope.store.RunDir`) holds arrays and records.
- ``ctx.cancelled`` becomes True when the parent asks the job to stop (SIGTERM/SIGINT);
  long loops check it and return early with what they have.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from msgspec.structs import replace

from fsscope.engine import events
from fsscope.engine.events import UNLOGGED_KINDS, Data, Event, Finding, Log, Phase, Progress
from fsscope.store import RunDir
from fsscope.targets import MountedFS, Target, filesystem


class JobContext:
    def __init__(self, run_dir: RunDir, target: Target, event_fd: int | None):
        self.run_dir = run_dir
        self.target = target
        self.event_fd = event_fd
        self.cancelled = False
        self._shared_fs: MountedFS | None = None
        self._found_said = False
        self.t0 = time.monotonic()
        self._emitting = threading.Lock()  # jobs may emit from helper threads (bench telemetry)

    @property
    def recipe(self):
        return self.target.recipe

    def emit(self, event: Event) -> None:
        """Stream ``event`` (stamped with the job's clock) and record it; safe from any thread."""
        with self._emitting:  # one event at a time: lines never interleave in the pipe or the file
            line = events.encode(replace(event, t=round(time.monotonic() - self.t0, 6)))
            if event.kind not in UNLOGGED_KINDS:
                self.run_dir.append_line(line)
            if self.event_fd is not None:
                data = (line + "\n").encode()
                try:
                    while data:  # a pipe write may be partial for large events
                        data = data[os.write(self.event_fd, data):]
                except BrokenPipeError:
                    self.event_fd = None  # the parent is gone; the run directory still records

    def phase(self, name: str, run: int | None = None, runs: int | None = None, **detail: Any) -> None:
        self.emit(Phase(name=name, run=run, runs=runs, detail=detail))

    def progress(self, done: float, total: float | None, unit: str = "", info: str = "", **detail: Any) -> None:
        self.emit(Progress(done=done, total=total, unit=unit, info=info, detail=detail))

    def log(self, line: str, stderr: str = "") -> None:
        self.emit(Log(line=line, stderr=stderr))

    def finding(self, flag: str, title: str = "", note: str = "", **fields: Any) -> None:
        self.emit(Finding(flag=flag, title=title, note=note, fields=fields))

    def data(self, kind: str, **fields: Any) -> None:
        """An undeclared event kind (its view model reads ``fields``); a declared one is a
        DataRecord: ``ctx.emit(WindowSample(...))``."""
        self.emit(Data(kind=kind, fields=fields))

    def _said(self, mounted: MountedFS) -> MountedFS:
        """A --dir target: say once which file system holds it (before anything is measured)."""
        if mounted.found is not None and not self._found_said:
            self._found_said = True
            self.log(f"{self.target.spec.path} is on {mounted.found.summary()}")
        return mounted

    @contextmanager
    def fresh_fs(self) -> Iterator[MountedFS]:
        self.phase("format" if self.target.spec.kind != "dir" else "fresh directory")
        mounted = self._said(self.target.format_and_mount())
        if self.recipe is not None and self.recipe.prep.drop_caches:
            filesystem.drop_caches()
        try:
            yield mounted
        finally:
            self.target.unmount()

    @contextmanager
    def run_fs(self, fresh: bool = True) -> Iterator[MountedFS]:
        """The file system for one run of a repeated measurement: a fresh one per call, or
        (fresh=False) one made on first use and shared by every run of the job — released
        with the target when the job ends."""
        if fresh:
            with self.fresh_fs() as mounted:
                yield mounted
            return
        if self._shared_fs is None:
            self.phase("format" if self.target.spec.kind != "dir" else "fresh directory")
            self._shared_fs = self._said(self.target.format_and_mount())
        if self.recipe is not None and self.recipe.prep.drop_caches:
            filesystem.drop_caches()
        yield self._shared_fs

    def after_populate(self) -> None:
        recipe = self.recipe
        if recipe is not None and recipe.prep.remount_after_populate:
            self.target.remount()
        else:
            os.sync()
        if recipe is not None and recipe.prep.drop_caches:
            filesystem.drop_caches()
