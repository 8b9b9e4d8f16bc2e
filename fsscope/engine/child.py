"""The job child process: ``python -c ... RUN_DIR`` started by :mod:`fsscope.engine.runner`.

Reads RUN_DIR/job.json, opens the target, runs the job, writes the report and the final
status. Events go to the write end of a pipe in $FSSCOPE_EVENT_FD (one JSON object per line);
stdout/stderr go to RUN_DIR/child.log.

Stopping: SIGTERM/SIGINT ask the job to stop (ctx.cancelled): it returns early with what it
measured (status "cancelled"). A second one, or one before the job has started, interrupts it
at once (status "interrupted"). So does the death of the process that started it: a watcher
thread sees the event pipe lose its last reader (POLLERR on the write end — the kernel closes
a dead process's files, whichever thread started us, which the parent-death signal does not
get right), cancels, and interrupts after PARENT_GRACE_S. Once the cleanup has begun, further
signals are ignored (the undo's umount and losetup -d lead their own process group, out of
reach of a cancel's SIGTERM): the target is always undone before exit; only SIGKILL stops that.

Every process the job starts lives in the job's cgroup (see :mod:`fsscope.proctree`); the
parent kills and removes it when the child has exited, or the child itself when the parent is
gone.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import psutil

from fsscope import proctree, store, tools
from fsscope.engine import registry
from fsscope.engine.context import JobContext
from fsscope.engine.events import Error, Result
from fsscope.errors import FsscopeError, os_error_line
from fsscope.recipes import Recipe
from fsscope.records import Record, convert, loads, plain
from fsscope.targets import Target, TargetSpec
from fsscope.targets.journal import Journal, undo_entries
from fsscope.telemetry.machine import MachineLoad

PARENT_GRACE_S = 5.0  # after the parent died, a job still running by then is interrupted


class JobFile(Record, frozen=True, kw_only=True):
    """RUN/job.json, as the runner writes it: the job, its spec (decoded by the job's own Spec
    through the registry), the target and the recipe."""

    job: str
    spec: dict[str, Any]
    target: TargetSpec
    recipe: dict[str, Any] | None = None


class Stopper:
    """Turns signals and the parent's death into a cancel, then an interrupt."""

    def __init__(self) -> None:
        self.ctx: JobContext | None = None
        self.hits = 0
        self.closing = False            # cleanup has begun: nothing may interrupt it
        self.parent_gone = False
        self.closed = threading.Event()
        self._stopping_tools = threading.Lock()  # the watcher's kill of our tools vs. the cleanup's start

    def begin_cleanup(self) -> None:
        """From here on the watcher leaves our tools alone: a ``losetup -d`` or ``umount`` the
        cleanup runs must not die of the SIGTERM meant for the job's tools."""
        with self._stopping_tools:
            self.closing = True

    def on_signal(self, signum, frame) -> None:
        self.hits += 1
        if self.ctx is not None:
            self.ctx.cancelled = True
        if self.closing:
            return
        if self.hits > 1 or self.ctx is None:
            raise KeyboardInterrupt

    def watch_parent(self, event_fd: int) -> None:
        """Block until the event pipe has no reader left, then stop the job as a cancel would."""
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # main thread gets them
        poller = select.poll()
        poller.register(event_fd, select.POLLERR)
        while not poller.poll():
            pass
        self.parent_gone = True
        main = threading.main_thread().ident
        assert main is not None  # the main thread has started: it started us
        me = os.getpid()
        with self._stopping_tools:
            if self.closing:  # the job has ended: its cleanup finishes on its own
                return
            for pid in proctree.group_members(os.getpgrp()):  # the tools a cancel would stop too
                if pid != me:
                    try:
                        os.kill(pid, signal.SIGTERM)
                    except ProcessLookupError:
                        pass
        signal.pthread_kill(main, signal.SIGTERM)
        if not self.closed.wait(PARENT_GRACE_S):
            with self._stopping_tools:
                if not self.closing:
                    signal.pthread_kill(main, signal.SIGTERM)  # the job did not stop: interrupt it

    def why(self) -> str:
        return ("the fsscope process that started it died" if self.parent_gone
                else "it was cancelled")


def main(run_path: str) -> int:
    journal = Journal()
    cgroup = proctree.enter_job_cgroup(journal)  # first, before anything can start a process
    proctree.name_semaphores_after_job()          # so what a kill leaves can be swept (runner.wait)
    run_dir = store.RunDir(Path(run_path))
    fd = os.environ.get("FSSCOPE_EVENT_FD")
    event_fd = int(fd) if fd else None
    me = psutil.Process()
    run_dir.update_manifest(status="running", pid=me.pid, pid_start=me.create_time(),  # wall clock, for people
                            pid_start_ticks=proctree.start_ticks(me.pid),          # identity (store.status)
                            cgroup=str(cgroup) if cgroup else None,
                            started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), environment=store.environment())
    stop = Stopper()
    load = MachineLoad(cgroup)  # started with the job's work, stopped after it: the run record keeps it
    target: Target | None = None
    status, exit_code, error = "failed", 1, None

    signal.signal(signal.SIGTERM, stop.on_signal)
    signal.signal(signal.SIGINT, stop.on_signal)
    try:
        if event_fd is not None:
            threading.Thread(target=stop.watch_parent, args=(event_fd,), name="fsscope-parent-watch",
                             daemon=True).start()
        job_file = convert(loads((run_dir.path / "job.json").read_bytes()), JobFile, "job.json")
        module = registry.load(job_file.job)
        spec = registry.spec_from_data(job_file.job, job_file.spec)
        recipe = Recipe.from_dict(job_file.recipe) if job_file.recipe else None
        target = Target(job_file.target, recipe)
        ctx = stop.ctx = JobContext(run_dir, target, event_fd)
        if stop.hits:  # a signal came while we were starting
            raise KeyboardInterrupt
        tools.listeners.append(lambda rec: ctx.log(
            f"$ {rec.line}  → exit {rec.rc} ({rec.duration_s:.2f} s)", stderr=rec.stderr.strip()[-500:]))
        ctx.phase("setup", target=target.spec.describe())
        target.open()
        load.start()
        # the job's Report record (or a dict) as report.json and the result event carry it
        result = plain(module.run(ctx, spec))
        if isinstance(result, dict) and result.get("machine") is None:  # how busy the machine was
            result["machine"] = load.stop()
        if isinstance(result, dict) and target.found is not None and result.get("existing") is None:
            result["existing"] = target.found.to_dict()  # --dir: which fs was measured
        run_dir.write_report(result)
        ctx.emit(Result(report=result))
        if stop.parent_gone:
            status, exit_code = "interrupted", 130
            error = f"{stop.why()}: the job stopped early and kept what it measured"
        else:
            status, exit_code = ("cancelled", 0) if ctx.cancelled else ("ok", 0)
    except FsscopeError as exc:
        if stop.hits:  # e.g. mkfs stopped by the cancel's SIGTERM: not a failure of the recipe
            status, exit_code, error = "interrupted", 130, f"{stop.why()} before it finished ({exc})"
        else:
            error, exit_code = str(exc), exc.exit_status
    except KeyboardInterrupt:
        status, exit_code, error = "interrupted", 130, f"{stop.why()} before it finished"
    except Exception as exc:  # a bug or a full/read-only disk: traceback to child.log, one line out
        traceback.print_exc()
        error = os_error_line(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
    finally:
        stop.begin_cleanup()
        live = stop.ctx  # None when the job never started
        try:
            undone = target.close() if target is not None else []
        except (FsscopeError, OSError) as exc:  # what failed stays journalled: `fsscope cleanup` retries it
            undone = []
            traceback.print_exc()
            line = f"cleanup failed, run `fsscope cleanup`: {exc}"
            error = f"{error}; {line}" if error else line
        try:  # a full or read-only run disk must not stop the undo below
            if error and live is not None:
                if status == "failed":
                    live.emit(Error(message=error))
                else:
                    live.log(error)
            if live is not None:
                for line in undone:
                    live.log(f"cleanup: {line}")
            run_dir.update_manifest(status=status, error=error, ended=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                    target=target.describe() if target is not None else None,
                                    machine=load.stop() if load.started else None)
            run_dir.close()
        except OSError:
            traceback.print_exc()
        try:  # the rest we made: the cgroup (kill what we leave running, the forkserver…), a tracefs instance…
            undo_entries(journal, [e for e in journal.entries() if e.owner_pid == me.pid])
        except (FsscopeError, OSError):  # what failed stays journalled: the parent or `fsscope cleanup` retries it
            traceback.print_exc()
        stop.closed.set()
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
