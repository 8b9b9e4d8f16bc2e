"""A maildir-like writer for the watch tests: delivers N small messages into DIR as maildir
delivery does -- each written into tmp/ under a unique name, then renamed into new/.

    python maildir_writer.py DIR N [--fsync] [--wait] [--pace-ms=MS]

``--wait``: read one line from stdin before delivering (a test attaches first); ``--pace-ms``:
sleep that long after each message (a delivery still going while a watch attaches)."""

from __future__ import annotations

import os
import sys
import time


def deliver(root: str, count: int, *, fsync: bool, pace_s: float = 0.0) -> None:
    for sub in ("tmp", "new", "cur"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    body = b"From: a@example.org\nSubject: test\n\n" + b"x" * 512
    pid = os.getpid()
    for i in range(count):
        name = f"{1700000000 + i}.M{i:06d}P{pid % 100000:05d}.host"  # 29 bytes, whatever the pid
        tmp = os.path.join(root, "tmp", name)
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.write(fd, body)
        if fsync:
            os.fsync(fd)
        os.close(fd)
        os.rename(tmp, os.path.join(root, "new", name))
        if pace_s:
            time.sleep(pace_s)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--wait" in sys.argv:
        sys.stdin.readline()
    pace = next((float(a.split("=", 1)[1]) / 1000 for a in sys.argv if a.startswith("--pace-ms=")), 0.0)
    deliver(args[0], int(args[1]), fsync="--fsync" in sys.argv, pace_s=pace)
