"""A small real job for sanity checks and engine tests: on a fresh file system, write files
with fsync and report the rate. Runs for ``duration_s`` (or until cancelled)."""

from __future__ import annotations

import os
import time
from typing import ClassVar

from fsscope.records import SpecRecord


class Spec(SpecRecord, frozen=True):
    job: ClassVar[str] = "smoke"
    renamed: ClassVar[dict[str, str]] = {"seconds": "duration_s"}  # before units were spelled out

    duration_s: float = 2.0
    file_bytes: int = 4096


def run(ctx, spec: Spec) -> dict:
    payload = os.urandom(spec.file_bytes)
    with ctx.fresh_fs() as fs:
        ctx.phase("write+fsync")
        t0 = time.monotonic()
        files = 0
        latencies_ns = []
        while time.monotonic() - t0 < spec.duration_s and not ctx.cancelled:
            start = time.monotonic_ns()
            fd = os.open(fs.workdir / f"f{files:06d}", os.O_CREAT | os.O_WRONLY, 0o644)
            os.write(fd, payload)
            os.fsync(fd)
            os.close(fd)
            latencies_ns.append(time.monotonic_ns() - start)
            files += 1
            if files % 50 == 0:
                ctx.progress(time.monotonic() - t0, spec.duration_s, unit="s")
        elapsed_s = time.monotonic() - t0
    ctx.run_dir.save_array("latency_ns", latencies_ns)
    return {"files": files, "elapsed_s": round(elapsed_s, 3),
            "files_per_s": round(files / elapsed_s, 1) if elapsed_s else 0.0}
