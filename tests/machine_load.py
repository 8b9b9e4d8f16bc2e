"""Load that tests make themselves: a CPU hog per core, a writer on a device of its own.

Each is a child process of the test session, killed and reaped when the test (or session)
is done, even on failure; nothing here touches a device the test did not make.
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager

#: Spins at normal priority: a CPU taken by another tenant, not a special scheduling class.
HOG = "while True: pass"

#: Rewrites the device over and over in 1 MiB buffered writes, syncing it every N MiB (argv 2;
#: 0: never, so its dirty pages wait for writeback or for someone's sync()): dirty pages,
#: writeback and device I/O on a file system that is not the measured one.
WRITER = """
import os, sys
fsync_every = int(sys.argv[2]) << 20
fd = os.open(sys.argv[1], os.O_WRONLY)
size = os.lseek(fd, 0, os.SEEK_END)
block = os.urandom(1 << 20)
print("writing", flush=True)
offset = 0
while True:
    if offset + len(block) > size:
        offset = 0
    os.pwrite(fd, block, offset)
    offset += len(block)
    if fsync_every and offset % fsync_every == 0:
        os.fsync(fd)
"""


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.kill()
    for proc in procs:
        proc.wait(timeout=60)  # reaped: no zombie, no process holding a device


@contextmanager
def cpu_hogs(count: int | None = None):
    """``count`` spinning processes (default: one per CPU this process may use)."""
    procs = [subprocess.Popen([sys.executable, "-c", HOG])
             for _ in range(count or len(os.sched_getaffinity(0)))]
    try:
        yield procs
    finally:
        _stop(procs)


@contextmanager
def writer(device: str, fsync_every_mib: int = 64):
    """A process writing ``device`` (which the test made) until the block ends."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER, device, str(fsync_every_mib)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing", "the writer did not start"
        yield proc
    finally:
        _stop([proc])
        proc.stdout.close()


def running(procs: list[subprocess.Popen]) -> list[int]:
    """The pids of ``procs`` that have not been reaped."""
    return [p.pid for p in procs if p.returncode is None]
