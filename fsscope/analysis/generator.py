"""Did a run measure the file system, or the workload generator?

Where operations are cheap (page-cache hits, tmpfs, a fast device) the workers' own CPU sets
the throughput: the number then describes the generator, not the storage stack. A run is
*CPU-bound* when its workers were on a CPU or waiting for one (runqueue) for at least
``CPU_BOUND`` of the time they ran, while the device under the file system was busy
(``/proc/diskstats`` io_ticks) less than ``DEVICE_IDLE`` of the run — or there is no block
device at all (tmpfs). Whose CPU it was decides what the run measured: when the workers' user
time (the generator's own code) is at least ``GENERATOR_SHARE`` of their CPU, the generator
(*generator-bound*); otherwise the kernel's file-system code working for it (*cpu_bound*: the
file system's CPU path, still not the device).
"""

from __future__ import annotations

from typing import Any

CPU_BOUND = 0.80      # share of the workers' wall time on a CPU or queued for one
DEVICE_IDLE = 0.50    # device busy below this share of the run
GENERATOR_SHARE = 0.50  # the workers' user time, as a share of their CPU


def generator_bound(*, workers: int, elapsed_s: float, cpu_user_s: float, cpu_system_s: float,
                    runqueue_s: float, device_busy: float | None, total_ops: int = 0) -> dict[str, Any]:
    """The verdict and its numbers; ``device_busy`` is the device's busy fraction of the run
    (None: no block device under the file system). ``user_us_per_op`` is the generator's own
    cost: the workers' user CPU per op counted (None without ops)."""
    wall_s = workers * elapsed_s
    cpu_s = cpu_user_s + cpu_system_s
    share = (cpu_s + runqueue_s) / wall_s if wall_s > 0 else 0.0
    idle = device_busy is None or device_busy < DEVICE_IDLE
    cpu_bound = bool(wall_s > 0 and share >= CPU_BOUND and idle)
    user = cpu_user_s / cpu_s if cpu_s > 0 else None
    return {"cpu_bound": cpu_bound, "generator_bound": cpu_bound and (user or 0.0) >= GENERATOR_SHARE,
            "workers_cpu_bound_share": share,
            "workers_user_share": user,
            "workers_cpu_s": cpu_s, "workers_runqueue_s": runqueue_s,
            "user_us_per_op": cpu_user_s / total_ops * 1e6 if total_ops > 0 else None,
            "device_busy": device_busy,
            "criterion": f"workers on or queued for a CPU >= {CPU_BOUND:.0%} of their time and the device "
                         f"busy < {DEVICE_IDLE:.0%} of the run (io_ticks), or no block device; the generator's "
                         f"when their user time is >= {GENERATOR_SHARE:.0%} of their CPU"}


def generator_flag(run: int, verdict: dict[str, Any]) -> dict[str, Any] | None:
    """A report flag for a CPU-bound run (None otherwise): ``generator_bound`` when the
    generator's own code took most of the CPU, ``cpu_bound`` when the kernel did."""
    if not verdict["cpu_bound"]:
        return None
    busy = verdict["device_busy"]
    device = "there is no block device under it (RAM)" if busy is None else f"the device was busy {busy:.0%} of it"
    user = verdict["workers_user_share"] or 0.0
    head = (f"The workers were on or queued for a CPU {verdict['workers_cpu_bound_share']:.0%} of the run and "
            f"{device}: the CPU set the throughput. Of the workers' CPU, {user:.0%} was the generator's own code "
            f"(user) and {1 - user:.0%} the kernel working for it (system). ")
    if verdict["generator_bound"]:
        return {"kind": "generator_bound", "run": run,
                "title": f"run {run + 1}: this run measured the generator, not the file system",
                "note": head + "Give it a slower or larger target (a file set beyond --mem-limit), fewer workers "
                               "per CPU, or read the number as the generator's ceiling."}
    return {"kind": "cpu_bound", "run": run,
            "title": f"run {run + 1}: CPU-bound in the kernel -- the file system's CPU path, not the device",
            "note": head + "The number describes the file-system code on these CPUs (and the page cache), "
                           "not the storage device: a file set beyond --mem-limit makes the device count."}
