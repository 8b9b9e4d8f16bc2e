"""Start the workers, aggregate their bins as they arrive, stop them (deadline, cancel, full
file system, stragglers), and return the run's arrays."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import queue as queue_mod
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from fsscope.errors import FsscopeError
from fsscope.workloads.personalities import native
from fsscope.workloads.personalities.aggregate import Aggregator, LiveSample, RunResult
from fsscope.workloads.personalities.fileset import load_fileset, save_fileset
from fsscope.workloads.personalities.spec import PersonalitySpec
from fsscope.workloads.personalities.worker import worker_main

_ctx: Any = None


def _context() -> Any:
    """The forkserver context, preloading this module (and the caller's ``-m`` main module,
    which every worker re-imports as ``__mp_main__``) so workers start in milliseconds.

    Like any spawn/forkserver user, a *script* calling :func:`run` needs an
    ``if __name__ == "__main__":`` guard, since workers re-import it."""
    global _ctx
    if _ctx is None:
        _ctx = mp.get_context("forkserver")
        preload = [__name__]
        main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        main_name = getattr(main_spec, "name", None)
        if main_name and not main_name.endswith("__main__"):
            preload.append(main_name)
        _ctx.set_forkserver_preload(preload)
    return _ctx


def run(root: str | os.PathLike, spec: PersonalitySpec, duration_s: float | None = None,
        workers: int | None = None, on_window: Callable[[LiveSample], None] | None = None,
        cancelled: Callable[[], bool] | None = None, mem_limit_bytes: int | None = None,
        on_start: Callable[[tuple[int, ...]], None] | None = None,
        grace_s: float = 3.0, straggler_timeout_s: float = 60.0,
        alloc: Callable[[str, tuple[int, int]], np.ndarray] | None = None,
        native_loops: bool = True, processes: int | None = None) -> RunResult:
    """Run one personality on the file set populated under ``root`` and return its arrays.

    ``on_window`` gets a :class:`LiveSample` per bin, in order, once every worker has reported
    the bin (or ``grace_s`` after its end, flagged incomplete). ``cancelled`` is polled ~10x a
    second; when true the workers stop at their next op and the result covers the time run.
    ``mem_limit_bytes`` runs the workers in a fresh memory cgroup (see :mod:`.cgroup`).
    ``on_start`` receives the worker pids just before they start (e.g. for taskstats).
    ``alloc(name, shape)`` gives the zeroed int64 arrays the run adds into as bins arrive
    (counts, io_bytes, latency_sum_ns, latency_hist): memory-mapped files of a run record keep
    every aggregated bin if the job is killed. Default: plain in-memory arrays.
    ``native_loops``: run the personality's C loop (:mod:`.native`); False runs its Python
    loop (the reference). ``RunResult.worker_loop`` says which ran.
    ``processes``: how many processes the workers are spread over, as threads (C loops only:
    they run without the GIL). Default: one per CPU -- like Filebench's threads, which share
    an address space (waking a thread of the same process is cheaper: varmail ~1.10x the
    ops/s of a process per worker), yet a worker killed by the OOM killer takes only its
    process's share of the workers. The Python loops always run one process per worker.
    Must not be called from a daemonic process (those cannot have children)."""
    from fsscope.workloads.cgroup import MemoryCgroup

    spec = msgspec.structs.replace(spec, **{k: v for k, v in (("duration_s", duration_s), ("workers", workers))
                            if v is not None})
    root = Path(root)
    fileset = load_fileset(root, spec)
    ctx = _context()
    out = ctx.Queue()
    go = ctx.Event()
    start_v = ctx.RawValue("q", 0)
    deadline_v = ctx.RawValue("q", 1 << 62)
    nworkers = spec.workers
    notes: list[str] = []
    lib_path, worker_loop = None, "python"
    if native_loops and spec.name in native.PERSONALITIES:
        lib_path, why = native.library_path()
        if lib_path is None:
            notes.append(f"{spec.name} ran its Python loop, which costs more CPU per op: {why}")
        else:
            worker_loop = "native"
    n_procs = nworkers if lib_path is None else max(1, min(nworkers, processes or os.cpu_count() or 1))
    groups = [tuple(range(g, nworkers, n_procs)) for g in range(n_procs)]
    procs = [ctx.Process(target=worker_main, name=f"fsscope-{spec.name}-{g}",
                         args=(group, nworkers, str(root), spec, fileset.sizes_bytes, fileset.exists,
                               out, go, start_v, deadline_v, lib_path and str(lib_path)))
             for g, group in enumerate(groups)]
    proc_of = {w: p for group, p in zip(groups, procs) for w in group}
    agg = Aggregator(spec, nworkers, alloc or (lambda name, shape: np.zeros(shape, dtype=np.int64)))
    done: dict[int, tuple] = {}
    was_cancelled = went = False
    stopped_by: str | None = None
    start_ns = end_ns = 0
    start_unix_s = time.time()
    cg = None
    cg_stats: dict[str, Any] | None = None
    bin_ns = int(round(spec.bin_s * 1e9))

    def emit(bins: list[tuple[int, bool]], limit_ns: int) -> None:
        for b, complete in bins:
            sample = agg.live_sample(b, complete)
            if on_window is not None and b * bin_ns < limit_ns - start_ns:
                on_window(sample)

    try:
        if mem_limit_bytes:
            cg = MemoryCgroup(mem_limit_bytes).create()
        for p in procs:
            p.start()
        pids = tuple(p.pid for p in procs)
        _wait_ready(out, procs, nworkers, timeout_s=60.0)
        if cg is not None:
            for pid in pids:
                cg.add(pid)
        if on_start is not None:
            on_start(pids)
        start_unix_s = time.time()
        start_ns = time.monotonic_ns() + 2_000_000       # 2 ms for the go signal to land
        start_v.value = start_ns
        deadline_v.value = start_ns + int(spec.duration_s * 1e9)
        go.set()
        went = True
        grace_bins = max(1, int(math.ceil(grace_s / spec.bin_s)))
        gone_since: dict[int, float] = {}
        while len(done) < nworkers:
            if not was_cancelled and cancelled is not None and cancelled():
                was_cancelled = True
                deadline_v.value = min(deadline_v.value, time.monotonic_ns())
            for msg in _drain(out, timeout_s=0.1):
                if msg[0] == "bin":
                    _, wid, b, next_bin, payload = msg
                    agg.add(wid, b, next_bin, payload)
                elif msg[0] == "done":
                    done[msg[1]] = msg
                    agg.finish_worker(msg[1])
                elif msg[0] == "full" and stopped_by is None:
                    stopped_by = msg[2]
                    deadline_v.value = min(deadline_v.value, time.monotonic_ns())
            now = time.monotonic_ns()
            deadline = deadline_v.value
            now_bin = (min(now, deadline) - start_ns) // bin_ns + (1 if now >= deadline else 0)
            emit(agg.ready_bins(now_bin, grace_bins), deadline)
            agg.compact(min(agg.progress) // agg.bins_per_window)
            # workers that died without saying done (OOM kill, crash), or hang past the deadline
            for w, p in proc_of.items():
                if w in done:
                    continue
                if p.exitcode is not None:
                    first = gone_since.setdefault(w, time.monotonic())
                    if time.monotonic() - first > 2.0:       # its last messages had time to arrive
                        done[w] = ("done", w, None, [0] * agg.n_ops,
                                   f"worker {w} (pid {p.pid}) exited with code {p.exitcode}", None)
                        agg.finish_worker(w)
                elif now > deadline + int(straggler_timeout_s * 1e9):
                    notes.append(f"worker {w} (pid {p.pid}) still busy {straggler_timeout_s:g} s "
                                 "after the deadline (stuck in a syscall?): killed")
                    p.kill()
        end_ns = min(deadline_v.value, max(time.monotonic_ns(), start_ns))
        n_bins = max(1, int(math.ceil((end_ns - start_ns) / bin_ns - 1e-9)))
        emit(agg.ready_bins(n_bins, 0), end_ns)
        for p in procs:
            p.join(timeout=10)
    finally:
        if not went:  # a second set() could hang: a worker OOM-killed inside go.wait() holds its lock
            go.set()
        deadline_v.value = 0                     # any worker still running stops at its next op
        for p in procs:
            if p.pid is not None and p.is_alive():
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=5)
        if cg is not None:
            cg_stats = {"version": cg.version, **cg.stats()}
            cg.remove()
        out.close()

    elapsed_s = max(0.0, (end_ns - start_ns) / 1e9)
    errors = np.zeros(agg.n_ops, dtype=np.int64)
    exists = fileset.exists.copy()
    cpu_s = np.zeros(3)                         # user, system, runqueue wait; all workers
    for w, msg in sorted(done.items()):
        _, _, present, errs, error, cpu = msg
        errors += np.asarray(errs, dtype=np.int64)
        if cpu is not None:
            cpu_s += cpu
        if error:
            notes.append(error)
        if present is not None and spec.name != "webserver":
            owned = np.arange(w, spec.nfiles, nworkers)
            exists[owned] = False
            exists[np.asarray(present, dtype=np.int64)] = True
    try:
        save_fileset(root, spec, replace(fileset, exists=exists))
    except OSError as exc:  # a full file system: the measurements matter, the manifest does not
        notes.append(f"file-set manifest not updated ({exc.strerror}): populate again before another run")
    agg._grow(n_bins - 1)
    if cg_stats and cg_stats.get("oom_kills"):
        notes.append(f"the memory cgroup's OOM killer fired {cg_stats['oom_kills']} time(s): "
                     f"--mem-limit {mem_limit_bytes} is too small for the workers themselves")
    return RunResult(
        personality=spec.name, op_names=spec.op_names, bin_s=spec.bin_s, elapsed_s=elapsed_s,
        counts=agg.counts[:, :n_bins].copy(), io_bytes=agg.io_bytes[:, :n_bins].copy(),
        latency_sum_ns=agg.lat_sum[:, :n_bins].copy(), latency_hist=np.array(agg.hist),
        latency_window_s=spec.latency_window_s, window_hist=agg.window_hist(), errors=errors,
        worker_pids=tuple(p.pid for p in procs), worker_exitcodes=tuple(p.exitcode for p in procs),
        cancelled=was_cancelled, start_unix_s=start_unix_s,
        spec=spec, cgroup=cg_stats, notes=tuple(notes), start_ns=start_ns, stopped_by=stopped_by,
        worker_cpu_user_s=float(cpu_s[0]), worker_cpu_system_s=float(cpu_s[1]),
        worker_runqueue_s=float(cpu_s[2]), worker_loop=worker_loop)


def _drain(out: Any, timeout_s: float, max_messages: int = 10_000) -> list[tuple]:
    """Every message available now (waiting up to ``timeout_s`` for the first)."""
    try:
        messages = [out.get(timeout=timeout_s)]
    except queue_mod.Empty:
        return []
    while len(messages) < max_messages:
        try:
            messages.append(out.get_nowait())
        except queue_mod.Empty:
            break
    return messages


def _wait_ready(out: Any, procs: Sequence[Any], nworkers: int, timeout_s: float) -> None:
    ready: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while len(ready) < nworkers:
        try:
            msg = out.get(timeout=0.2)
        except queue_mod.Empty:
            dead = [p for p in procs if p.exitcode is not None]
            if dead:
                raise FsscopeError(f"workload worker {dead[0].name} exited during setup "
                                   f"(code {dead[0].exitcode})") from None
            if time.monotonic() > deadline:
                raise FsscopeError(f"workload workers not ready after {timeout_s:g} s") from None
            continue
        if msg[0] == "ready":
            ready.add(msg[1])

