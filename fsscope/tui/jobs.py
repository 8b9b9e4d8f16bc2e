"""The thread workers behind the live screen: one follows the plan's jobs (each a child
process started by the engine), one samples device/CPU counters. They only read and post
messages; widgets change in the handlers.

Cancelling: :class:`PlanControl` is shared with the screen. ``cancel()`` (the user's key)
or cancelling the worker (app exit) makes a watchdog send SIGTERM to the running child,
which stops, cleans up its target and keeps what it measured; the event stream then ends
and the worker returns. The ``finally`` makes sure no child outlives its worker; a kill
(the user's, or a cancel that hangs) ends the child's whole process tree. If the UI process
itself dies, the child sees its event pipe lose its reader and stops on its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from textual.message_pump import MessagePump
from textual.worker import get_current_worker

from fsscope.engine import runner
from fsscope.engine.events import Data, DataRecord, Error, Finding, Log, Phase, Progress, Result
from fsscope.records import SpecRecord
from fsscope.tui import messages as msg
from fsscope.tui.config import RunPlan
from fsscope.tui.telemetry import Sampler, job_device
from fsscope.workloads.probe_records import Samples

KILL_AFTER_S = 20.0  # a cancelled child that has not exited by then is killed

#: The CPUs this process could use when the UI started (children get all of them).
ALL_CPUS: frozenset[int] = frozenset(os.sched_getaffinity(0))


def _set_process_affinity(cpus: set[int] | frozenset[int]) -> None:
    """sched_setaffinity applies to one thread: set it for every thread of the UI process
    (threads created later inherit it from their creator)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except (OSError, ValueError):
            continue


def keep_ui_off(cpu: int | None) -> None:
    """Move the UI's threads off the CPU the job measures on, so drawing the heatmap never
    competes with the probe for that CPU (observer effect). A no-op on one-CPU machines."""
    if cpu is None or cpu not in ALL_CPUS or len(ALL_CPUS) < 2:
        return
    _set_process_affinity(ALL_CPUS - {cpu})


def restore_ui_cpus() -> None:
    if len(ALL_CPUS) > 1:
        _set_process_affinity(ALL_CPUS)


def job_cpu(spec: SpecRecord) -> int:
    """The CPU a job pins itself to: its ``cpu`` parameter, else the last CPU it may use
    (the probe's default, see fsscope.workloads.probe.default_cpu)."""
    cpu = getattr(spec, "cpu", None)
    return int(cpu) if isinstance(cpu, int) else max(ALL_CPUS)


class PlanControl:
    """What the UI thread and the plan worker share."""

    def __init__(self) -> None:
        self.cancel_requested = threading.Event()
        self.kill_requested = threading.Event()
        self.done = threading.Event()
        self.current_pid: int | None = None
        self.handles: list[runner.JobHandle] = []
        self._lock = threading.Lock()

    def cancel(self) -> None:
        self.cancel_requested.set()

    def kill(self) -> None:
        self.cancel_requested.set()
        self.kill_requested.set()

    def running_handles(self) -> list[runner.JobHandle]:
        with self._lock:
            return [h for h in self.handles if h.proc.poll() is None]

    def _track(self, handle: runner.JobHandle) -> None:
        with self._lock:
            self.handles.append(handle)


def _watch(handle: runner.JobHandle, control: PlanControl, stopped: threading.Event,
           worker_cancelled: threading.Event) -> None:
    """Turn a cancel request (user or worker) into SIGTERM, then SIGKILL if it hangs."""
    sent_at = None
    waited = 0.0
    while not stopped.wait(0.1):
        if sent_at is None and (control.cancel_requested.is_set() or worker_cancelled.is_set()):
            handle.cancel()
            sent_at = waited
        if control.kill_requested.is_set() or (sent_at is not None and waited - sent_at > KILL_AFTER_S):
            handle.kill()
            return
        waited += 0.1


def follow_plan(plan: RunPlan, node: MessagePump, control: PlanControl, *, runs_root=None,
                start: Callable[..., runner.JobHandle] = runner.start) -> str:
    """Run the plan's jobs one after another and post what they say to ``node``."""
    worker = get_current_worker()
    post = node.post_message
    cancelled = False
    try:
        for index, request in enumerate(plan.jobs):
            if control.cancel_requested.is_set() or worker.is_cancelled:
                cancelled = True
                break
            restore_ui_cpus()  # the child inherits this mask: it must see every CPU to pick its own
            try:
                handle = start(request.job, request.spec, *plan.job_target(request), runs_root=runs_root)
            except Exception as exc:  # noqa: BLE001 - a refused start is the user's message
                post(msg.JobFinished(index, "failed", str(exc), None, None))
                continue
            keep_ui_off(job_cpu(request.spec))
            control._track(handle)
            control.current_pid = handle.pid
            post(msg.JobStarted(index, request.job, handle.run_dir.id, str(handle.run_dir.path), handle.pid))
            stopped = threading.Event()
            threading.Thread(target=_watch, args=(handle, control, stopped, worker.cancelled_event),
                             name=f"fsscope-watch-{handle.pid}", daemon=True).start()
            report = error = None
            try:
                for event in handle.records():
                    if isinstance(event, Samples):
                        post(msg.SamplesArrived(index, event.run, event.start, event.latency_ns, event.t))
                    elif isinstance(event, Progress):
                        post(msg.ProgressUpdated(index, event.done, event.total, event.unit))
                        if event.detail:  # the job's own fields (the ager's): its view reads them
                            post(msg.JobEvent(index, "progress", event))
                    elif isinstance(event, Phase):
                        post(msg.PhaseChanged(index, event.name, event.t, event.run))
                    elif isinstance(event, Finding):
                        post(msg.FindingArrived(index, event))
                    elif isinstance(event, Log):
                        post(msg.LogLine(index, event.line, event.stderr))
                    elif isinstance(event, Result):
                        report = event.report
                    elif isinstance(event, Error):
                        error = event.message
                    elif isinstance(event, (Data, DataRecord)) and event.kind:
                        # bench windows, sync-write points, telemetry…: the job's view reads them
                        post(msg.JobEvent(index, event.kind, event))
            finally:
                stopped.set()
                if handle.proc.poll() is None:  # we are leaving early (an exception): stop the child
                    handle.cancel()
                    handle.drain()
                if handle.returncode is None:
                    handle.wait()
                control.current_pid = None
            status = handle.run_dir.status()
            if error is None and status != "ok":  # failed before it could say so (e.g. a bad spec)
                error = handle.run_dir.info().error
            if handle.cleanup_error:
                error = f"{error}; {handle.cleanup_error}" if error else handle.cleanup_error
            killed = [f"killed {', '.join(handle.killed)}"] if handle.killed else []  # what kill() found running
            post(msg.JobFinished(index, status, error, report, handle.returncode, killed + list(handle.leftovers)))
            if status == "cancelled" or control.cancel_requested.is_set():
                cancelled = True
                break
    finally:
        restore_ui_cpus()
        control.done.set()
        post(msg.PlanFinished(cancelled or control.cancel_requested.is_set()))
    return "cancelled" if cancelled else "done"


def sample_telemetry(plan: RunPlan, node: MessagePump, control: PlanControl, interval_s: float = 1.0) -> None:
    """Device IOPS/throughput and CPU once a second while the plan runs."""
    worker = get_current_worker()
    sampler = Sampler()
    device, device_pid = "", None
    while not control.done.is_set() and not worker.cancelled_event.wait(interval_s):
        if not device or device_pid != control.current_pid:
            device_pid = control.current_pid
            device = job_device(device_pid, plan.target.kind, plan.target.path)
        tick = sampler.sample(device)
        if tick is not None:
            node.post_message(msg.TelemetryTick(tick.device, tick.iops, tick.bytes_per_s, tick.cpu_percent))
