"""Start a job in a child process and read its event stream.

    handle = start("probe", ProbeSpec(...), target_spec, recipe)   # the job's Spec record
    for event in handle.records():     # typed events (fsscope.engine.events and the job's
        ...                            # DATA kinds); blocks; ends when the child exits
                                       # (events(): the raw wire dicts)
    handle.returncode, handle.run_dir.status()

The child runs in its own session and its own cgroup (see :mod:`fsscope.proctree`):
``cancel()`` sends SIGTERM to its process group (the job stops and keeps what it measured),
``kill()`` SIGKILLs every process it started. Whatever its end, ``wait()`` kills what it left
running and undoes what the journal says it left (mounts, loop devices). If this process dies
instead, the child notices (its event pipe loses its reader) and stops on its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from fsscope import proctree
from fsscope.engine import events, registry
from fsscope.errors import FsscopeError
from fsscope.recipes import Recipe
from fsscope.records import SpecRecord, dumps, plain
from fsscope.store import RunDir, check_room
from fsscope.targets import Target, TargetSpec
from fsscope.targets.journal import Journal, cleanup
from fsscope.targets.target import INHERITED_IMAGE_FD

CHILD_MAIN = "import sys; from fsscope.engine.child import main; sys.exit(main(sys.argv[1]))"


class JobHandle:
    def __init__(self, run_dir: RunDir, proc: subprocess.Popen, read_fd: int, job: str | None = None):
        self.job = job
        self.run_dir = run_dir
        self.proc = proc
        self._fd = read_fd
        self._buf = bytearray()
        self.returncode: int | None = None
        self.leftovers: list[str] = []   # what the parent undid after the child died
        self.killed: list[str] = []      # what kill() found running ("mkfs.ext4 (pid 12)")
        self.cleanup_error: str | None = None  # what the parent could not undo after the child
        self._cancel_sent = False
        self._kill_reason: str | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def next_event(self) -> dict | None:
        """The next event, or None when the stream has ended (the child is then waited for).
        Safe to interrupt: a KeyboardInterrupt loses no event; call it again to go on."""
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[:end])
                del self._buf[:end + 1]
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    continue
            if self._fd < 0:
                self.wait()
                return None
            chunk = os.read(self._fd, 1 << 16)
            if chunk:
                self._buf += chunk
            else:
                os.close(self._fd)
                self._fd = -1

    def records(self) -> Iterator[events.Event]:
        """The job's events as typed records (see :mod:`fsscope.engine.events`)."""
        while (data := self.next_event()) is not None:
            yield registry.decode_event(self.job, data)

    def drain(self) -> None:
        """Follow the stream to its end without its events (the child is then waited for):
        a caller leaving early, after cancel(), so a child blocked on a full pipe can exit."""
        while self.next_event() is not None:
            pass

    def wait(self, timeout_s: float | None = None) -> int:
        """Wait for the child; then kill whatever it left running and undo what it left."""
        if self.returncode is not None:
            return self.returncode
        rc = self.proc.wait(timeout_s)
        # Every process the job started dies with it. A child that ended by itself has done
        # this already (it removes its own cgroup); after a kill, its orphans (mkfs, badblocks,
        # the forkserver, workers) die here, before anything they hold is unmounted or detached.
        stragglers = proctree.kill_job(self._cgroup(), self.proc.pid)
        killed = rc < 0 or self.run_dir.status() in ("interrupted", "running", "starting")
        # Undo what the journal says it left (mounts, loop devices, the job's cgroup).
        try:
            leftovers = cleanup(owner_pid=self.proc.pid)
        except (FsscopeError, OSError) as exc:  # what failed stays journalled: say so, go on
            leftovers = []
            self.cleanup_error = f"could not undo everything the job left ({exc}): run `fsscope cleanup`"
            self.run_dir.update_manifest(cleanup_error=self.cleanup_error)
        proctree.sweep_semaphores(self.proc.pid)  # a kill took the tracker that would unlink them
        if killed:
            if stragglers and not self.killed:
                leftovers.insert(0, f"killed what the job left running: {', '.join(stragglers)}")
            self.leftovers = leftovers
            if self.run_dir.info().status in ("running", "starting"):
                why = (f"job process killed (signal {-rc})" if rc < 0
                       else f"job process exited ({rc}) without recording its end")
                self.run_dir.update_manifest(status="interrupted", error=self._kill_reason or why)
        self.returncode = rc
        return rc

    def cancel(self) -> None:
        """Ask the job to stop; it cleans up and records what it measured. Idempotent: a
        second SIGTERM would interrupt the child's own cleanup, so escalate with kill()."""
        if not self._cancel_sent:
            self._cancel_sent = True
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGTERM)  # the job and the tools it runs
                except ProcessLookupError:
                    pass

    def kill(self, reason: str = "killed") -> list[str]:
        """SIGKILL the job and every process it started (its cgroup and process group), now.
        Returns what was running; wait() then undoes what it left (mounts, loop devices)."""
        if self.returncode is None:
            self._kill_reason = reason
            self.killed = self.killed or proctree.kill_job(self._cgroup(), self.proc.pid)
        return self.killed

    def _cgroup(self) -> Path | None:
        for entry in Journal().entries():
            if entry.kind == "cgroup" and entry.owner_pid == self.proc.pid:
                return Path(entry.fields["path"])
        return None


def start(job: str, spec: SpecRecord, target: TargetSpec, recipe: Recipe | None, *,
          runs_root: Path | None = None, pin_cpu: int | None = None) -> JobHandle:
    """Start ``job`` with its ``spec`` (an instance of the job's Spec, built once by the caller)."""
    registry.require_extra(job)
    module = registry.load(job)
    if type(spec) is not module.Spec:
        raise TypeError(f"{job} needs a {module.Spec.__qualname__} record, not {type(spec).__name__}")
    # A refusal is the user's message, not a failed run record; an image is locked from here on.
    claimed = Target(target, recipe).claim()
    try:
        return _start(module, job, spec, target, recipe, claimed, runs_root)
    finally:
        if claimed is not None:
            os.close(claimed)  # the child holds the image's lock now (or nobody: it failed to start)


def _start(module, job: str, spec, target: TargetSpec, recipe: Recipe | None, claimed: int | None,
           runs_root: Path | None) -> JobHandle:
    check_room(getattr(module, "record_bytes", lambda spec: 0)(spec), runs_root)
    run_dir = RunDir.create(job, runs_root)
    job_file = {"job": job, "spec": spec, "target": target,
                "recipe": plain(recipe)}
    (run_dir.path / "job.json").write_text(dumps(job_file, indent=2))
    run_dir.update_manifest(status="starting", events_version=events.VERSION, **job_file)
    read_fd, write_fd = os.pipe()
    env = os.environ | {"FSSCOPE_EVENT_FD": str(write_fd)}
    passed = (write_fd,) if claimed is None else (write_fd, claimed)
    if claimed is not None:
        env[INHERITED_IMAGE_FD] = str(claimed)
    log = open(run_dir.path / "child.log", "ab")
    try:
        # "-c" rather than "-m fsscope.engine.child": a forkserver (the workloads use one)
        # re-imports a -m main module and runpy warns that it is already imported.
        proc = subprocess.Popen([sys.executable, "-c", CHILD_MAIN, str(run_dir.path)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                pass_fds=passed, start_new_session=True)
    finally:
        os.close(write_fd)
        log.close()
    return JobHandle(run_dir, proc, read_fd, job)
