"""The job child process: ``python -m fsscope.engine.child RUN_DIR``.

Reads RUN_DIR/job.json, opens the target, runs the job, writes the report and the final
status. Events go to the file descriptor in $FSSCOPE_EVENT_FD (one JSON object per line);
stdout/stderr go to RUN_DIR/child.log. SIGTERM/SIGINT ask the job to stop (ctx.cancelled);
a second one interrupts it at once. Either way the target is undone before exit.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import psutil

from fsscope import store, tools
from fsscope.engine import registry
from fsscope.engine.context import JobContext
from fsscope.errors import FsscopeError, os_error_line
from fsscope.recipes import Recipe
from fsscope.targets import Target, TargetSpec


def main(run_path: str) -> int:
    run_dir = store.RunDir(Path(run_path))
    job_file = json.loads((run_dir.path / "job.json").read_text())
    fd = os.environ.get("FSSCOPE_EVENT_FD")
    event_fd = int(fd) if fd else None
    me = psutil.Process()
    run_dir.update_manifest(status="running", pid=me.pid, pid_start=me.create_time(),
                            started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), environment=store.environment())
    ctx: JobContext | None = None
    target: Target | None = None
    status, exit_code, error = "failed", 1, None
    hits = {"n": 0}

    def on_signal(signum, frame):
        hits["n"] += 1
        if ctx is not None:
            ctx.cancelled = True
        if hits["n"] > 1 or ctx is None:
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        module = registry.load(job_file["job"])
        spec = registry.spec_from_dict(module, job_file["spec"])
        recipe = Recipe.from_dict(job_file["recipe"]) if job_file.get("recipe") else None
        target = Target(TargetSpec.from_dict(job_file["target"]), recipe)
        ctx = JobContext(run_dir, target, event_fd)
        tools.listeners.append(lambda rec: ctx.emit(
            "log", line=f"$ {rec.line}  → exit {rec.rc} ({rec.duration_s:.2f} s)",
            stderr=rec.stderr.strip()[-500:]))
        ctx.emit("phase", name="setup", target=target.spec.describe())
        target.open()
        result = module.run(ctx, spec)
        run_dir.write_report(result)
        ctx.emit("result", report=result)
        status, exit_code = ("cancelled", 0) if ctx.cancelled else ("ok", 0)
    except FsscopeError as exc:
        error, exit_code = str(exc), exc.exit_status
    except KeyboardInterrupt:
        status, exit_code, error = "cancelled", 130, "interrupted by signal"
    except Exception as exc:  # a bug or a full/read-only disk: traceback to child.log, one line out
        traceback.print_exc()
        error = os_error_line(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
    finally:
        undone = target.close() if target is not None else []
        if error and ctx is not None:
            ctx.emit("error", message=error)
        if ctx is not None:
            for line in undone:
                ctx.emit("log", line=f"cleanup: {line}")
        run_dir.update_manifest(status=status, error=error, ended=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                target=target.describe() if target is not None else None)
        run_dir.close()
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
