"""The trace reader: a separate process copying an instance's per-CPU raw pages to files.

It is a process, not a thread of the job: a thread would take the GIL inside the probe's
timed syscalls (see fsscope.workloads.probe). It only copies bytes (decoding happens after
the run), polls every :data:`POLL_S`, and stays off the measured CPU. It stops -- after a
final drain -- when its stdin says ``stop`` or closes (the job ended or was killed), so it
never outlives the job and never holds the instance busy for long.

With ``--wake-s S`` it sleeps in ``poll()`` instead: the kernel wakes it when a CPU's buffer
is the instance's ``buffer_percent`` full (then it copies that CPU's pages, whole ones but the
last), and every S seconds it copies every CPU's (partial pages included, so a reader of the
files sees events at most S old). A 20 ms poll costs a busy workload a reader spinning on the
second of two CPUs (a page or more is always ready); this wakes a few times a second.

    python -m fsscope.trace.reader INSTANCE_DIR OUT_DIR [--avoid-cpu N] [--wake-s S]
"""

from __future__ import annotations

import argparse
import errno
import os
import select
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

POLL_S = 0.02
PAGE_BYTES = 4096


def _drain(fds: dict[int, int], outs: Mapping[int, BinaryIO]) -> int:
    """Copy every readable page of every CPU; return how many pages moved."""
    moved = 0
    for cpu, fd in fds.items():
        while True:
            try:
                page = os.read(fd, PAGE_BYTES)
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EINTR):
                    break
                if exc.errno == errno.ENODEV:  # instance removed under us (cleanup)
                    break
                raise
            if not page:
                break
            outs[cpu].write(page)
            moved += 1
    return moved


def read_until_stopped(instance: Path, out_dir: Path, control_fd: int = 0, wake_s: float | None = None) -> None:
    cpus = sorted(int(p.name[3:]) for p in (instance / "per_cpu").glob("cpu*"))
    fds = {cpu: os.open(instance / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw",
                        os.O_RDONLY | os.O_NONBLOCK) for cpu in cpus}
    outs = {cpu: open(out_dir / f"cpu{cpu}.raw", "wb") for cpu in cpus}
    print("ready", flush=True)  # the job starts tracing only once every pipe is open
    try:
        if wake_s is not None:
            _poll_until_stopped(fds, outs, control_fd, wake_s)
        while wake_s is None:
            moved = _drain(fds, outs)
            ready, _, _ = select.select([control_fd], [], [], 0 if moved > 16 else POLL_S)
            if ready:
                command = os.read(control_fd, 64)
                if not command or b"stop" in command:
                    break
        while _drain(fds, outs):  # what the last poll interval left
            pass
    finally:
        for fd in fds.values():
            os.close(fd)
        for out in outs.values():
            out.close()


def _poll_until_stopped(fds: dict[int, int], outs: Mapping[int, BinaryIO], control_fd: int,
                        wake_s: float) -> None:
    """Sleep until a CPU's buffer is ``buffer_percent`` full (drain that CPU), every ``wake_s``
    (drain all), or a stop on ``control_fd``."""
    poller = select.poll()
    cpu_of = {fd: cpu for cpu, fd in fds.items()}
    for fd in fds.values():
        poller.register(fd, select.POLLIN)
    poller.register(control_fd, select.POLLIN | select.POLLHUP)
    deadline = time.monotonic() + wake_s
    while True:
        ready = poller.poll(max(0.0, deadline - time.monotonic()) * 1000)
        if any(fd == control_fd for fd, _ in ready):
            command = os.read(control_fd, 64)
            if not command or b"stop" in command:
                return
        if time.monotonic() >= deadline:
            _drain(fds, outs)
            for out in outs.values():  # a live reader of the files sees what was copied
                out.flush()
            deadline = time.monotonic() + wake_s
        else:
            _drain({cpu_of[fd]: fd for fd, _ in ready if fd in cpu_of}, outs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fsscope.trace.reader", description=__doc__.splitlines()[0])
    parser.add_argument("instance", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--avoid-cpu", type=int, default=None)
    parser.add_argument("--wake-s", type=float, default=None)
    args = parser.parse_args(argv)
    # A cancel signals the job's whole process group; the job stops the reader itself (after
    # the last drain), so the reader must not die with the first SIGTERM/SIGINT.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if args.avoid_cpu is not None:
        others = os.sched_getaffinity(0) - {args.avoid_cpu}
        if others:
            os.sched_setaffinity(0, others)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    read_until_stopped(args.instance, args.out_dir, wake_s=args.wake_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
