"""A writer whose processes live shorter than any interval between two /proc passes: a parent
that moves nothing itself forks children that each write 4 MiB with O_DIRECT and exit. Started
in its own session so the test stops the parent and any child in flight together."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pilot_wait import wait_for

COMM = "short-writer"

SCRIPT = f"""
import mmap, os, sys
block = mmap.mmap(-1, 1 << 20)   # page-aligned, as O_DIRECT needs
block.write(b"s" * (1 << 20))
n = 0
while True:
    child = os.fork()
    if child == 0:
        with open("/proc/self/comm", "w") as f:
            f.write({COMM!r})
        fd = os.open(sys.argv[1] + str(n % 4), os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o600)
        for i in range(4):
            os.pwrite(fd, block, i << 20)
        os._exit(0)
    os.waitpid(child, 0)
    n += 1
    if n == 1:
        print("ready", flush=True)
"""


def _group_alive(pgid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) == pgid:
                return True
        except (OSError, ValueError, IndexError):
            continue
    return False


@contextmanager
def short_lived_writers(path: Path) -> Iterator[subprocess.Popen]:
    """The writer running on ``path`` (its first child done) for the body; then every process
    of it gone (a child in flight would keep the file system busy at unmount)."""
    writer = subprocess.Popen([sys.executable, "-c", SCRIPT, str(path)], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        yield writer
    finally:
        os.killpg(writer.pid, signal.SIGKILL)
        writer.wait()
        wait_for(lambda: not _group_alive(writer.pid), what="the short-lived writers to exit")
