"""Start a job in a child process and read its event stream.

    handle = start("probe", spec, target_spec, recipe)
    for event in handle.records():     # typed events (fsscope.engine.events); blocks;
        ...                            # ends when the child exits (events(): the raw dicts)
    handle.returncode, handle.run_dir.status()

The child runs in its own session, so cancelling kills exactly its process tree. If it dies
without cleaning up (SIGKILL, crash), the parent undoes what the journal says it left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from fsscope.engine import events, registry
from fsscope.recipes import Recipe
from fsscope.store import RunDir, check_room
from fsscope.targets import Target, TargetSpec
from fsscope.targets.journal import cleanup

CHILD_MAIN = "import sys; from fsscope.engine.child import main; sys.exit(main(sys.argv[1]))"


class JobHandle:
    def __init__(self, run_dir: RunDir, proc: subprocess.Popen, read_fd: int):
        self.run_dir = run_dir
        self.proc = proc
        self._reader = os.fdopen(read_fd, "rb")
        self.returncode: int | None = None
        self.leftovers: list[str] = []
        self._cancel_sent = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def records(self) -> Iterator[events.Event]:
        """The job's events as typed records (see :mod:`fsscope.engine.events`)."""
        for data in self.events():
            yield events.decode(data)

    def events(self) -> Iterator[dict]:
        """The job's events in their wire form (one dict per line)."""
        for raw in self._reader:
            try:
                yield json.loads(raw)
            except json.JSONDecodeError:
                continue
        self._reader.close()
        self.wait()

    def wait(self, timeout_s: float | None = None) -> int:
        self.returncode = self.proc.wait(timeout_s)
        if self.returncode < 0 or self.run_dir.status() == "interrupted":
            # Killed before it could undo its target: undo what the journal says it made.
            self.leftovers = cleanup(owner_pid=self.proc.pid)
            if self.run_dir.manifest().get("status") == "running":
                self.run_dir.update_manifest(status="interrupted",
                                             error=f"job process killed (signal {-self.returncode})")
        return self.returncode

    def cancel(self) -> None:
        """Ask the job to stop; it cleans up and records what it measured. Idempotent: a
        second SIGTERM would interrupt the child's own cleanup, so escalate with kill()."""
        if not self._cancel_sent:
            self._cancel_sent = True
            self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signum)
            except ProcessLookupError:
                pass


def start(job: str, spec, target: TargetSpec, recipe: Recipe | None, *,
          runs_root: Path | None = None, pin_cpu: int | None = None) -> JobHandle:
    module = registry.load(job)
    if isinstance(spec, dict):
        spec = registry.spec_from_dict(module, spec)
    Target(target, recipe).preflight()  # a refusal is the user's message, not a failed run record
    check_room(getattr(module, "record_bytes", lambda spec: 0)(spec), runs_root)
    run_dir = RunDir.create(job, runs_root)
    job_file = {"job": job, "spec": registry.spec_to_dict(spec), "target": target.to_dict(),
                "recipe": recipe.to_dict() if recipe else None}
    (run_dir.path / "job.json").write_text(json.dumps(job_file, indent=2))
    run_dir.update_manifest(status="starting", events_version=events.VERSION, **job_file)
    read_fd, write_fd = os.pipe()
    env = os.environ | {"FSSCOPE_EVENT_FD": str(write_fd)}
    log = open(run_dir.path / "child.log", "ab")
    try:
        # "-c" rather than "-m fsscope.engine.child": a forkserver (the workloads use one)
        # re-imports a -m main module and runpy warns that it is already imported.
        proc = subprocess.Popen([sys.executable, "-c", CHILD_MAIN, str(run_dir.path)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                pass_fds=(write_fd,), start_new_session=True)
    finally:
        os.close(write_fd)
        log.close()
    return JobHandle(run_dir, proc, read_fd)
