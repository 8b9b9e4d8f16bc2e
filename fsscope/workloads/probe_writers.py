"""Other processes' I/O on the probed device during the probe's runs (issue 35: a 300–600 MB/s
direct writer on the very file system probed changed nothing in the report). Each run is
bracketed by two passes over /proc (:class:`fsscope.telemetry.procio.DeviceWatch`), outside the
timed calls; the writers seen become a report section, one flag and its note."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from fsscope.engine.events import Finding
from fsscope.telemetry.procio import DeviceWatch, Mover

FLAG = "other-io"
MB = 1e6


@dataclass
class Writers:
    """Every other process seen moving bytes on the probed device, run by run."""

    seen: dict[int, list[tuple[int, Mover]]] = field(default_factory=dict)  # pid -> (run, what it did)
    unwatched: str | None = None   # why a run could not be watched (once)

    @contextmanager
    def watch(self, ctx, fs, run: int) -> Iterator[None]:
        """Around one run's calls on ``fs`` (its MountedFS): who else moved bytes there meanwhile."""
        try:
            watch = DeviceWatch.of(fs.mountpoint, fs.device, frozenset({os.getpid(), os.getppid()}))
        except OSError as exc:
            watch = None
            if self.unwatched is None:
                self.unwatched = f"other processes' I/O not watched: {exc.strerror or exc}"
                ctx.log(self.unwatched)
        if watch is None:
            yield
            return
        watch.start()
        yield
        movers = watch.stop()
        for mover in movers:
            self.seen.setdefault(mover.pid, []).append((run, mover))
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
                        "device_bytes_per_s": top.device_bytes_per_s, "runs": [r for r, _ in seen]})
        return sorted(out, key=lambda w: -w["bytes_per_s"])

    def title(self) -> str:
        writers = self.to_json()
        top = writers[0]
        more = f" and {len(writers) - 1} more" if len(writers) > 1 else ""
        return (f"another process did I/O on this device: pid {top['pid']} ({top['command']}) "
                f"{top['bytes_per_s'] / MB:,.1f} MB/s in {_runs(top['runs'])}{more}")

    def note(self) -> str:
        parts = []
        for w in self.to_json():
            verb = "wrote" if w["write_bytes"] >= w["read_bytes"] else "read"
            device = ("" if w["device_bytes_per_s"] is None
                      else f", the device {w['device_bytes_per_s'] / MB:,.1f} MB/s in its busiest run")
            counted = (f" (/proc/PID/io counted {w['counted_bytes_per_s'] / MB:,.1f} MB/s, dirtied ahead of "
                       "writeback: at most the device's)" if w["counted_bytes_per_s"] > w["bytes_per_s"] * 1.01 else "")
            parts.append(f"another process {verb} {w['bytes_per_s'] / MB:,.1f} MB/s on this device during "
                         f"{_runs(w['runs'])}{device}: pid {w['pid']} ({w['command']}){counted}")
        return ("; ".join(parts) + " — its I/O competes with the probe's calls (the device's bandwidth and "
                "queue, the journal, writeback), so their latencies in those runs are not the file system's "
                "alone. Stop or pause it for the probe (kill -STOP PID), or probe another device.")

    def flag(self) -> dict | None:
        """The report's flag (after the analysis flags, so those stay aligned with their lists)."""
        if not self.seen:
            return None
        return {"flag": FLAG, "title": self.title(), "note": self.note(), "index": None, "structure": None,
                "run": min(r for seen in self.seen.values() for r, _ in seen)}


def _runs(runs: list[int]) -> str:
    shown = ", ".join(str(r + 1) for r in runs[:8]) + (f", … ({len(runs)})" if len(runs) > 8 else "")
    return f"run{'s' if len(runs) != 1 else ''} {shown}"
