"""The two tracefs instances of a watch, their readers, and the decoded record.

- The **tasks' instance** keeps the events of the watched tasks only: ``set_event_pid`` holds
  their thread ids and ``options/event-fork`` adds what they fork. It traces every watched
  call's entry and exit, the events that name files, the file system's structure events and
  the tasks' scheduling (``sched_switch`` is kept when either side is watched).
- The **device's instance** keeps the device's block requests and journal whoever fires them:
  ``set_event_pid`` would drop them (an I/O completes in an interrupt, the jbd2 thread
  commits), so it is filtered by the device alone.

Both are made through :class:`fsscope.trace.tracefs.Instance` (journalled before the mkdir, so
``fsscope cleanup`` removes them after a crash), stamp on the monotonic clock and are copied by
:mod:`fsscope.trace.reader` processes. Events the ring buffer lost are counted from each CPU's
``stats`` and from the pages the kernel marked, per instance, never dropped silently.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fsscope.errors import FsscopeError
from fsscope.targets.journal import Journal
from fsscope.trace import catalog
from fsscope.trace.decode import EVENT_DTYPE, decode_files
from fsscope.trace.session import Tracer, filter_for
from fsscope.trace.tracefs import CpuStats, Instance
from fsscope.watch import syscalls

#: The readers sleep until a CPU's buffer is this full (percent), or READER_WAKE_S has passed
#: (:mod:`fsscope.trace.reader`): a reader polling every 20 ms spins beside a busy workload.
WAKE_PERCENT = 25
READER_WAKE_S = 0.5


@dataclass
class Lost:
    """What one instance's ring buffer lost."""

    instance: str
    overrun: int = 0          # overwritten before the reader got them
    dropped: int = 0          # not stored at all (buffer full, overwrite off)
    pages_with_loss: int = 0  # pages the kernel marked "events were missed before this one"
    #: where the marked losses were: (after, before) monotonic ns (:attr:`Decoded.losses`)
    spans: list[tuple[int, int]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.overrun + self.dropped

    @property
    def unplaced(self) -> bool:
        """Events were lost but no page says where: any window may lack some."""
        return self.total > 0 and not self.spans


@dataclass
class Recorded:
    """A watch's kernel record: every event of both instances on one clock, one name list."""

    events: np.ndarray              # EVENT_DTYPE, time-sorted
    names: list[str]                # code -> "sys/event"
    texts: list[str]                # string columns index this (names of entries, comms)
    comms: dict[int, str]           # pid -> command, from sched_switch
    lost: list[Lost]
    enabled: list[str]
    missing: list[str]
    filter_errors: list[str]
    duration_s: float


class _Side(Tracer):
    """One instance and its reader (the probe's Tracer, configured for watch)."""

    def __init__(self, raw_dir: Path, label: str, entries: tuple[catalog.CatalogEvent, ...], *,
                 device: str | None, tids: list[int] | None, journal: Journal | None,
                 buffer_kb: int):
        super().__init__(raw_dir, fs="", job=label, pid=None, device=device, journal=journal, events=entries)
        self.label = label
        self.tids = tids
        self.buffer_kb = buffer_kb
        self.wake_s = READER_WAKE_S

    def open(self) -> None:
        instance = self.instance = Instance.create(journal=self.journal, buffer_kb=self.buffer_kb)
        try:
            if self.tids is not None:
                (instance.path / "options" / "event-fork").write_text("1")
                # one write per tid, appended (a write without O_APPEND replaces the list)
                pids = os.open(instance.path / "set_event_pid", os.O_WRONLY | os.O_APPEND)
                try:
                    for tid in self.tids:
                        os.write(pids, f"{tid}\n".encode())
                finally:
                    os.close(pids)
            for entry in self.entries:
                expr = syscalls.FILTERS.get(entry.event, "") if self.tids is not None else filter_for(entry, None, self.dev)
                if expr is not None:
                    instance.enable(entry.event, expr)
            if not instance.enabled:
                raise FsscopeError(f"watch: none of the {self.label} events exists on this kernel")
            try:
                (instance.path / "buffer_percent").write_text(str(WAKE_PERCENT))
            except OSError:  # a kernel without it would wake the reader at every event: poll as before
                self.wake_s = None
            self._start_reader(instance)
        except BaseException:
            self._abort()
            raise

    def begin(self) -> None:
        if self.instance is not None:
            self.instance.start()
            self._t0 = time.monotonic()

    def finish(self) -> tuple[Lost, object, Instance]:
        """Stop, drain, count what was lost, decode, remove the instance."""
        instance = self.instance
        if instance is None:
            raise FsscopeError(f"watch: the {self.label} instance is gone")
        try:
            instance.stop()
            self._stop_reader()
            stats: list[CpuStats] = instance.stats()
            paths = {cpu: self.raw_dir / f"cpu{cpu}.raw" for cpu in instance.cpus()
                     if (self.raw_dir / f"cpu{cpu}.raw").exists()}
            decoded = decode_files(paths, instance.path / "events", self.entries)
        finally:
            self._abort()
            shutil.rmtree(self.raw_dir, ignore_errors=True)
        lost = Lost(self.label, sum(s.overrun + s.commit_overrun for s in stats),
                    sum(s.dropped for s in stats), decoded.pages_with_loss, decoded.losses)
        return lost, decoded, instance

    def raw_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.raw_dir.glob("cpu*.raw"))


class WatchSession:
    """Both instances: ``open()`` makes and configures them (tracing still off), ``begin()``
    turns both on, ``finish()`` stops, decodes and removes them. Removed on any error.
    ``leave_out``: event groups not traced (:data:`fsscope.watch.syscalls.GROUPS`; ``device``:
    no device instance)."""

    def __init__(self, raw_dir: Path, *, fs: str, device: str | None, tids: list[int],
                 journal: Journal | None, buffer_kb: int = 8192, leave_out: frozenset[str] = frozenset()):
        task_events = syscalls.task_events(fs, leave_out=leave_out)
        self.sides = [_Side(raw_dir / "tasks", "tasks", task_events, device=None, tids=tids,
                            journal=journal, buffer_kb=buffer_kb)]
        if device and "device" not in leave_out:
            self.sides.append(_Side(raw_dir / "device", "device", syscalls.DEVICE, device=device,
                                    tids=None, journal=journal, buffer_kb=buffer_kb))
        self._t0 = 0.0

    def open(self) -> None:
        try:
            for side in self.sides:
                side.open()
        except BaseException:
            self.abort()
            raise

    def begin(self) -> None:
        for side in self.sides:
            side.begin()
        self._t0 = time.monotonic()

    def raw_bytes(self) -> int:
        return sum(side.raw_bytes() for side in self.sides)

    def abort(self) -> None:
        for side in self.sides:
            side._abort()

    def finish(self) -> Recorded:
        duration_s = time.monotonic() - self._t0
        parts, comms, lost = [], {}, []
        names: list[str] = []
        texts: list[str] = []
        enabled, missing, errors = [], [], []
        try:
            for side in self.sides:
                side_lost, decoded, instance = side.finish()
                lost.append(side_lost)
                events = decoded.events.copy()  # type: ignore[attr-defined]
                events["code"] += len(names)
                for col in {c for e in side.entries for c in e.texts}:  # into the one text list
                    rows = np.isin(events["code"], [len(names) + i for i, e in enumerate(side.entries)
                                                    if col in e.texts])
                    events[col][rows] += len(texts)
                texts += decoded.texts  # type: ignore[attr-defined]
                comms.update(decoded.comms)  # type: ignore[attr-defined]
                names += [e.event for e in side.entries]
                parts.append(events)
                enabled += instance.enabled
                missing += instance.missing
                errors += instance.filter_errors
        finally:
            self.abort()
        events = np.concatenate(parts) if parts else np.zeros(0, EVENT_DTYPE)
        events = events[np.argsort(events["ts_ns"], kind="stable")]
        return Recorded(events, names, texts, comms, lost, enabled, missing, errors, duration_s)
