"""The trace reader: a separate process copying an instance's per-CPU raw pages to files.

It is a process, not a thread of the job: a thread would take the GIL inside the probe's
timed syscalls (see fsscope.workloads.probe). It only copies bytes (decoding happens after
the run), polls every :data:`POLL_S`, and stays off the measured CPU. It stops -- after a
final drain -- when its stdin says ``stop`` or closes (the job ended or was killed), so it
never outlives the job and never holds the instance busy for long.

    python -m fsscope.trace.reader INSTANCE_DIR OUT_DIR [--avoid-cpu N]
"""

from __future__ import annotations

import argparse
import errno
import os
import select
import signal
import sys
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


def read_until_stopped(instance: Path, out_dir: Path, control_fd: int = 0) -> None:
    cpus = sorted(int(p.name[3:]) for p in (instance / "per_cpu").glob("cpu*"))
    fds = {cpu: os.open(instance / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw",
                        os.O_RDONLY | os.O_NONBLOCK) for cpu in cpus}
    outs = {cpu: open(out_dir / f"cpu{cpu}.raw", "wb") for cpu in cpus}
    print("ready", flush=True)  # the job starts tracing only once every pipe is open
    try:
        while True:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fsscope.trace.reader", description=__doc__.splitlines()[0])
    parser.add_argument("instance", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--avoid-cpu", type=int, default=None)
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
    read_until_stopped(args.instance, args.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
