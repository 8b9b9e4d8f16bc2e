"""Other processes' I/O on the measured device during a job's runs (issue 35: a 300–600 MB/s
direct writer on the very file system probed changed nothing in the report). Each run is
bracketed by two passes over /proc (:class:`fsscope.telemetry.procio.DeviceWatch`), outside the
timed calls, and -- where the kernel can be traced -- by the block layer's own record of who
submitted I/O to the device (:class:`fsscope.trace.writers.BlockSubmitters`), which names a
process that started and exited inside the run as well. The writers seen become a report
section, one flag and its note. The probe and the bench both use it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import psutil

from fsscope.engine.events import Finding
from fsscope.telemetry.procio import DeviceWatch, Mover, devices_open
from fsscope.trace.writers import BlockSubmitters, Submitted, their_own, trace_error

FLAG = "other-io"
MB = 1e6


def _own_tasks() -> set[int]:
    """This job's process, its parent (the runner) and every process it has started so far."""
    own = {os.getpid(), os.getppid()}
    try:
        own |= {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        pass
    return own


def joined(movers: list[Mover], submitted: Submitted | None, device_bytes_per_s: float | None,
           own: set[int], uses_device: Callable[[int], bool], min_bytes: int = 1 << 20) -> list[Mover]:
    """/proc's movers and the block trace's submitters as one list, one row per process: the
    higher of the two rates, each capped at the device's own over the interval (diskstats;
    the trace's sum of every submitter's bytes without it)."""
    out = {m.pid: m for m in movers if m.pid not in own}
    if submitted is None:
        return sorted(out.values(), key=lambda m: -m.bytes_per_s)
    dt = max(submitted.seconds, 1e-3)
    device_s = device_bytes_per_s if device_bytes_per_s is not None else submitted.device_bytes / dt
    for s in their_own(submitted.others, uses_device, min_bytes):
        moved = s.read_bytes + s.write_bytes
        if s.pid in own:
            continue
        rate = min(moved / dt, device_s)
        seen = out.get(s.pid)
        if seen is not None and seen.bytes_per_s >= rate:
            out[s.pid] = Mover(seen.pid, seen.comm, seen.read_bytes, seen.write_bytes, seen.seconds,
                               seen.bytes_per_s, seen.counted_bytes_per_s, seen.device_bytes_per_s,
                               seen_by="/proc/PID/io and block_bio_queue")
            continue
        out[s.pid] = Mover(s.pid, s.comm, s.read_bytes, s.write_bytes, dt, rate, moved / dt, device_s,
                           exited=s.exited, tasks=s.tasks,
                           seen_by="block_bio_queue" if seen is None else "/proc/PID/io and block_bio_queue")
    return sorted(out.values(), key=lambda m: -m.bytes_per_s)


@dataclass
class Writers:
    """Every other process seen moving bytes on the measured device, run by run. ``trace``:
    also ask the block layer (root and tracefs; the probe's ``--trace off`` keeps it off)."""

    trace: bool = True
    competes: str = "the probe's calls"   # what the writers' I/O competes with, in the note
    fix: str = "probe another device"
    pinned: bool = True                    # the job measures in this process (the probe), not in workers
    seen: dict[int, list[tuple[int, Mover]]] = field(default_factory=dict)  # pid -> (run, what it did)
    unwatched: str | None = None   # why a run could not be watched (once)
    untraced: str | None = None    # why the block layer was not asked (once): short-lived writers unseen
    no_device: str | None = None   # nothing to watch: the file system has no block device

    def how(self) -> str:
        """How the writers were watched, for the report: what a reader may expect to be named."""
        if self.unwatched:
            return self.unwatched
        if self.no_device:
            return self.no_device
        proc = "/proc/PID/io and /proc/diskstats at each run's start and end"
        if self.untraced:
            return (f"{proc} (processes alive at both ends only: {self.untraced}, so a process that "
                    "started and exited inside a run is not named)")
        return f"{proc}, and every I/O submitted to the device (block_bio_queue: short-lived processes too)"

    def _block(self, fs, watch: DeviceWatch, own: set[int], ctx) -> BlockSubmitters | None:
        if not self.trace:
            self.untraced = self.untraced or "tracing off (--trace off)"
            return None
        if watch.disk is None or not os.path.exists(f"/dev/{watch.disk}"):
            return None   # no block device: nothing to trace, nothing /proc misses either
        why = BlockSubmitters.unavailable()
        if why is not None:
            self.untraced = self.untraced or f"kernel tracing unavailable ({why})"
            return None
        # one measured process (the probe): its reader keeps off that CPU, as the probe's own trace's does
        avoid = next(iter(os.sched_getaffinity(0))) if self.pinned else None
        return BlockSubmitters(f"/dev/{watch.disk}", own, journal=getattr(ctx.target, "journal", None),
                               avoid_cpu=avoid)

    @contextmanager
    def watch(self, ctx, fs, run: int) -> Iterator[set[int]]:
        """Around one run's work on ``fs`` (its MountedFS): who else moved bytes there meanwhile.
        Yields the job's own tasks: add to it what the body starts (a bench's workers)."""
        own = _own_tasks()
        # an overlay is judged by the file system under its upper directory: that device moves the bytes
        found = getattr(fs, "found", None)
        data = found.data if found is not None else None
        try:
            watch = DeviceWatch.of(data.mountpoint if data else fs.mountpoint, data.device if data else fs.device,
                                   frozenset(own))
            watch.devnos = watch.devnos | {os.stat(fs.workdir).st_dev}   # files open through the overlay too
        except OSError as exc:
            watch = None
            if self.unwatched is None:
                self.unwatched = f"other processes' I/O not watched: {exc.strerror or exc}"
                ctx.log(self.unwatched)
        if watch is None:
            yield own
            return
        if watch.disk is None:
            self.no_device = self.no_device or ("no block device under this file system (tmpfs, a network file "
                                                "system): no other process's I/O to watch")
        block = self._block(fs, watch, own, ctx)
        with ExitStack() as stack:
            if block is not None:
                try:
                    stack.enter_context(block)
                except Exception as exc:  # noqa: BLE001 -- the run goes on, watched through /proc only
                    block = None
                    if self.untraced is None:
                        self.untraced = f"the block layer could not be traced ({trace_error(exc)})"
                        ctx.log(f"other processes' I/O: {self.untraced}")
            watch.start()
            yield own
            movers = watch.stop()
        movers = joined(movers, block.result if block is not None else None, watch.device_bytes_per_s,
                        own | _own_tasks(), lambda pid: bool(devices_open(watch.root, pid) & watch.devnos))
        for mover in movers:
            # the short-lived processes of one command are one writer across runs too
            key = next((pid for pid, seen in self.seen.items() if seen[-1][1].exited and seen[-1][1].comm == mover.comm),
                       mover.pid) if mover.exited else mover.pid
            self.seen.setdefault(key, []).append((run, mover))
        if movers:
            ctx.emit(Finding(flag=FLAG, title=self.title(), note=self.note(), fields={"writers": self.to_json()}))

    def to_json(self) -> list[dict]:
        out = []
        for pid, seen in self.seen.items():
            last = seen[-1][1]
            top = max(seen, key=lambda s: s[1].bytes_per_s)[1]
            out.append({"pid": pid, "command": last.comm, "read_bytes": sum(m.read_bytes for _, m in seen),
                        "write_bytes": sum(m.write_bytes for _, m in seen), "bytes_per_s": top.bytes_per_s,
                        "counted_bytes_per_s": top.counted_bytes_per_s,
                        "device_bytes_per_s": top.device_bytes_per_s, "runs": [r for r, _ in seen],
                        "exited": any(m.exited for _, m in seen), "tasks": sum(m.tasks for _, m in seen if m.exited) or 1,
                        "seen_by": sorted({m.seen_by for _, m in seen}, key=len)[-1]})
        return sorted(out, key=lambda w: -w["bytes_per_s"])

    def title(self) -> str:
        writers = self.to_json()
        top = writers[0]
        more = f" and {len(writers) - 1} more" if len(writers) > 1 else ""
        who = (f"{top['tasks']} short-lived processes ({top['command']}), the first pid {top['pid']}," if top["tasks"] > 1
               else f"pid {top['pid']} ({top['command']})")
        return (f"another process did I/O on this device: {who} "
                f"{top['bytes_per_s'] / MB:,.1f} MB/s in {_runs(top['runs'])}{more}")

    def note(self) -> str:
        parts = []
        for w in self.to_json():
            verb = "wrote" if w["write_bytes"] >= w["read_bytes"] else "read"
            device = ("" if w["device_bytes_per_s"] is None
                      else f", the device {w['device_bytes_per_s'] / MB:,.1f} MB/s in its busiest run")
            counted = (f" (/proc/PID/io counted {w['counted_bytes_per_s'] / MB:,.1f} MB/s, dirtied ahead of "
                       "writeback: at most the device's)" if w["counted_bytes_per_s"] > w["bytes_per_s"] * 1.01 else "")
            many = f"{w['tasks']} short-lived processes named {w['command']}, the first " if w["tasks"] > 1 else ""
            exited = (f" -- {'they' if many else 'it'} exited before the run ended, named from the block layer's "
                      "record of who submitted I/O (block_bio_queue)" if w["exited"] else "")
            parts.append(f"another process {verb} {w['bytes_per_s'] / MB:,.1f} MB/s on this device during "
                         f"{_runs(w['runs'])}{device}: {many}pid {w['pid']} ({w['command']}){counted}{exited}")
        return ("; ".join(parts) + f" — its I/O competes with {self.competes} (the device's bandwidth and "
                "queue, the journal, writeback), so their figures in those runs are not the file system's "
                f"alone. Stop or pause it for the measurement (kill -STOP PID), or {self.fix}.")

    def flag(self) -> dict | None:
        """The report's flag (after the analysis flags, so those stay aligned with their lists)."""
        if not self.seen:
            return None
        return {"flag": FLAG, "title": self.title(), "note": self.note(), "index": None, "structure": None,
                "run": min(r for seen in self.seen.values() for r, _ in seen)}


def _runs(runs: list[int]) -> str:
    shown = ", ".join(str(r + 1) for r in runs[:8]) + (f", … ({len(runs)})" if len(runs) > 8 else "")
    return f"run{'s' if len(runs) != 1 else ''} {shown}"
