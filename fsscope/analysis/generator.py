"""Did a run measure the file system, or the workload generator?

Where operations are cheap (page-cache hits, tmpfs, a fast device) the workers' own CPU sets
the throughput: the number then describes the generator, not the storage stack. A run is
*generator-bound* when its workers were on a CPU or waiting for one (runqueue) for at least
``CPU_BOUND`` of the time they ran, while the device under the file system was busy
(``/proc/diskstats`` io_ticks) less than ``DEVICE_IDLE`` of the run — or there is no block
device at all (tmpfs). The split of the workers' CPU into user time (the generator's own code)
and system time (the kernel's file-system code for it) goes into the note.
"""

from __future__ import annotations

from typing import Any

CPU_BOUND = 0.80      # share of the workers' wall time on a CPU or queued for one
DEVICE_IDLE = 0.50    # device busy below this share of the run


def generator_bound(*, workers: int, elapsed_s: float, cpu_user_s: float, cpu_system_s: float,
                    runqueue_s: float, device_busy: float | None) -> dict[str, Any]:
    """The verdict and its numbers; ``device_busy`` is the device's busy fraction of the run
    (None: no block device under the file system)."""
    wall_s = workers * elapsed_s
    cpu_s = cpu_user_s + cpu_system_s
    share = (cpu_s + runqueue_s) / wall_s if wall_s > 0 else 0.0
    idle = device_busy is None or device_busy < DEVICE_IDLE
    return {"generator_bound": bool(wall_s > 0 and share >= CPU_BOUND and idle),
            "workers_cpu_bound_share": share,
            "workers_user_share": cpu_user_s / cpu_s if cpu_s > 0 else None,
            "workers_cpu_s": cpu_s, "workers_runqueue_s": runqueue_s,
            "device_busy": device_busy,
            "criterion": f"workers on or queued for a CPU >= {CPU_BOUND:.0%} of their time and the device "
                         f"busy < {DEVICE_IDLE:.0%} of the run (io_ticks), or no block device"}


def generator_flag(run: int, verdict: dict[str, Any]) -> dict[str, Any] | None:
    """A report flag for a generator-bound run (None otherwise)."""
    if not verdict["generator_bound"]:
        return None
    busy = verdict["device_busy"]
    device = "there is no block device under it (RAM)" if busy is None else f"the device was busy {busy:.0%} of it"
    user = verdict["workers_user_share"] or 0.0
    return {"kind": "generator_bound", "run": run,
            "title": f"run {run + 1}: this run measured the generator, not the file system",
            "note": f"The workers were on or queued for a CPU {verdict['workers_cpu_bound_share']:.0%} of the run "
                    f"and {device}: the CPU set the throughput. Of the workers' CPU, {user:.0%} was the "
                    f"generator's own code (user) and {1 - user:.0%} the kernel working for it (system). "
                    "Give it a slower or larger target (a file set beyond --mem-limit), fewer workers per CPU, "
                    "or read the number as the generator's ceiling."}
