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
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from fsscope.errors import FsscopeError
from fsscope.workloads.personalities import native
from fsscope.workloads.personalities.aggregate import Aggregator, LiveSample, RunResult
from fsscope.workloads.personalities.fileset import load_fileset, save_fileset
from fsscope.workloads.personalities.spec import PersonalitySpec
from fsscope.workloads.personalities.worker import worker_main

if TYPE_CHECKING:
    from fsscope.workloads.cgroup import MemoryCgroup

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


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    """How to run one personality (:func:`run`); every field is optional.

    ``duration_s``/``workers`` override the spec's. ``on_window`` gets a :class:`LiveSample`
    per bin, in order, once every worker has reported the bin (or ``grace_s`` after its end,
    flagged incomplete). ``cancelled`` is polled ~10x a second; when true the workers stop at
    their next op and the result covers the time run. ``mem_limit_bytes`` runs the workers in
    a fresh memory cgroup (see :mod:`.cgroup`). ``on_start`` receives the worker pids just
    before they start (e.g. for taskstats). ``straggler_timeout_s``: a worker still busy that
    long after the deadline is killed. ``alloc(name, shape)`` gives the zeroed int64 arrays the
    run adds into as bins arrive (counts, io_bytes, latency_sum_ns, latency_hist):
    memory-mapped files of a run record keep every aggregated bin if the job is killed.
    Default: plain in-memory arrays. ``native_loops``: run the personality's C loop
    (:mod:`.native`); False runs its Python loop (the reference). ``RunResult.worker_loop``
    says which ran. ``processes``: how many processes the workers are spread over, as threads
    (C loops only: they run without the GIL). Default: one per CPU -- like Filebench's
    threads, which share an address space (waking a thread of the same process is cheaper:
    varmail ~1.10x the ops/s of a process per worker), yet a worker killed by the OOM killer
    takes only its process's share of the workers. The Python loops always run one process
    per worker.
    """

    duration_s: float | None = None
    workers: int | None = None
    on_window: Callable[[LiveSample], None] | None = None
    cancelled: Callable[[], bool] | None = None
    mem_limit_bytes: int | None = None
    on_start: Callable[[tuple[int, ...]], None] | None = None
    grace_s: float = 3.0
    straggler_timeout_s: float = 60.0
    alloc: Callable[[str, tuple[int, int]], np.ndarray] | None = None
    native_loops: bool = True
    processes: int | None = None


DEFAULT_OPTIONS = RunOptions()


def run(root: str | os.PathLike, spec: PersonalitySpec, options: RunOptions = DEFAULT_OPTIONS) -> RunResult:
    """Run one personality on the file set populated under ``root`` and return its arrays
    (see :class:`RunOptions`). Must not be called from a daemonic process (those cannot have
    children)."""
    launch = _Launch(Path(root), spec, options)
    try:
        launch.start()
        launch.collect()
    finally:
        launch.stop()
    return launch.result()


def _plain_arrays(name: str, shape: tuple[int, int]) -> np.ndarray:
    return np.zeros(shape, dtype=np.int64)


class _Launch:
    """One run's workers and what came back from them: start, collect bins, stop, sum up."""

    def __init__(self, root: Path, spec: PersonalitySpec, options: RunOptions):
        if options.duration_s is not None:
            spec = msgspec.structs.replace(spec, duration_s=options.duration_s)
        if options.workers is not None:
            spec = msgspec.structs.replace(spec, workers=options.workers)
        self.root, self.spec, self.options = root, spec, options
        self.fileset = load_fileset(root, spec)
        ctx = _context()
        self.out = ctx.Queue()
        self.go = ctx.Event()
        self.start_v = ctx.RawValue("q", 0)
        self.deadline_v = ctx.RawValue("q", 1 << 62)
        self.nworkers = nworkers = spec.workers
        self.notes: list[str] = []
        lib_path, self.worker_loop = self._loop_library()
        n_procs = nworkers if lib_path is None else max(1, min(nworkers, options.processes or os.cpu_count() or 1))
        groups = [tuple(range(g, nworkers, n_procs)) for g in range(n_procs)]
        self.procs = [ctx.Process(target=worker_main, name=f"fsscope-{spec.name}-{g}",
                                  args=(group, nworkers, str(root), spec, self.fileset.sizes_bytes,
                                        self.fileset.exists, self.out, self.go, self.start_v,
                                        self.deadline_v, lib_path and str(lib_path)))
                      for g, group in enumerate(groups)]
        self.proc_of = {w: p for group, p in zip(groups, self.procs) for w in group}
        self.agg = Aggregator(spec, nworkers, options.alloc or _plain_arrays)
        self.done: dict[int, tuple] = {}
        self.was_cancelled = self.went = False
        self.stopped_by: str | None = None
        self.start_ns = self.end_ns = self.n_bins = 0
        self.start_unix_s = time.time()
        self.cg: MemoryCgroup | None = None
        self.cg_stats: dict[str, Any] | None = None
        self.bin_ns = int(round(spec.bin_s * 1e9))

    def _loop_library(self) -> tuple[Path | None, str]:
        """The C loops' library when asked for and it builds (else a note says why not)."""
        name = self.spec.name
        if not (self.options.native_loops and name in native.PERSONALITIES):
            return None, "python"
        lib_path, why = native.library_path()
        if lib_path is None:
            self.notes.append(f"{name} ran its Python loop, which costs more CPU per op: {why}")
            return None, "python"
        return lib_path, "native"

    def emit(self, bins: list[tuple[int, bool]], limit_ns: int) -> None:
        on_window = self.options.on_window
        for b, complete in bins:
            sample = self.agg.live_sample(b, complete)
            if on_window is not None and b * self.bin_ns < limit_ns - self.start_ns:
                on_window(sample)

    def start(self) -> None:
        """Start the workers, wait until each is ready, then let them go together."""
        from fsscope.workloads.cgroup import MemoryCgroup  # not in the workers' preload

        options, spec = self.options, self.spec
        if options.mem_limit_bytes:
            self.cg = MemoryCgroup(options.mem_limit_bytes).create()
        for p in self.procs:
            p.start()
        pids = tuple(p.pid for p in self.procs)
        _wait_ready(self.out, self.procs, self.nworkers, timeout_s=60.0)
        if self.cg is not None:
            for pid in pids:
                self.cg.add(pid)
        if options.on_start is not None:
            options.on_start(pids)
        self.start_unix_s = time.time()
        self.start_ns = time.monotonic_ns() + 2_000_000       # 2 ms for the go signal to land
        self.start_v.value = self.start_ns
        self.deadline_v.value = self.start_ns + int(spec.duration_s * 1e9)
        self.go.set()
        self.went = True

    def collect(self) -> None:
        """Aggregate bins as they arrive until every worker is done; then the last bins."""
        agg, deadline_v, cancelled = self.agg, self.deadline_v, self.options.cancelled
        grace_bins = max(1, int(math.ceil(self.options.grace_s / self.spec.bin_s)))
        gone_since: dict[int, float] = {}
        while len(self.done) < self.nworkers:
            if not self.was_cancelled and cancelled is not None and cancelled():
                self.was_cancelled = True
                deadline_v.value = min(deadline_v.value, time.monotonic_ns())
            for msg in _drain(self.out, timeout_s=0.1):
                self.receive(msg)
            now = time.monotonic_ns()
            deadline = deadline_v.value
            now_bin = (min(now, deadline) - self.start_ns) // self.bin_ns + (1 if now >= deadline else 0)
            self.emit(agg.ready_bins(now_bin, grace_bins), deadline)
            agg.compact(min(agg.progress) // agg.bins_per_window)
            self.check_workers(now, deadline, gone_since)
        self.end_ns = min(deadline_v.value, max(time.monotonic_ns(), self.start_ns))
        self.n_bins = max(1, int(math.ceil((self.end_ns - self.start_ns) / self.bin_ns - 1e-9)))
        self.emit(agg.ready_bins(self.n_bins, 0), self.end_ns)
        for p in self.procs:
            p.join(timeout=10)

    def receive(self, msg: tuple) -> None:
        if msg[0] == "bin":
            _, wid, b, next_bin, payload = msg
            self.agg.add(wid, b, next_bin, payload)
        elif msg[0] == "done":
            self.done[msg[1]] = msg
            self.agg.finish_worker(msg[1])
        elif msg[0] == "full" and self.stopped_by is None:
            self.stopped_by = msg[2]
            self.deadline_v.value = min(self.deadline_v.value, time.monotonic_ns())

    def check_workers(self, now: int, deadline: int, gone_since: dict[int, float]) -> None:
        """Workers that died without saying done (OOM kill, crash), or hang past the deadline."""
        straggler_timeout_s = self.options.straggler_timeout_s
        for w, p in self.proc_of.items():
            if w in self.done:
                continue
            if p.exitcode is not None:
                first = gone_since.setdefault(w, time.monotonic())
                if time.monotonic() - first > 2.0:       # its last messages had time to arrive
                    self.done[w] = ("done", w, None, [0] * self.agg.n_ops,
                                    f"worker {w} (pid {p.pid}) exited with code {p.exitcode}", None)
                    self.agg.finish_worker(w)
            elif now > deadline + int(straggler_timeout_s * 1e9):
                self.notes.append(f"worker {w} (pid {p.pid}) still busy {straggler_timeout_s:g} s "
                                  "after the deadline (stuck in a syscall?): killed")
                p.kill()

    def stop(self) -> None:
        """Whatever happened: no worker left running, the cgroup read and removed."""
        if not self.went:  # a second set() could hang: a worker OOM-killed inside go.wait() holds its lock
            self.go.set()
        self.deadline_v.value = 0                     # any worker still running stops at its next op
        for p in self.procs:
            if p.pid is not None and p.is_alive():
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=5)
        if self.cg is not None:
            self.cg_stats = {"version": self.cg.version, **self.cg.stats()}
            self.cg.remove()
        self.out.close()

    def result(self) -> RunResult:
        """The run's arrays; the file-set manifest updated with the files the workers left."""
        spec, agg, notes, n_bins = self.spec, self.agg, self.notes, self.n_bins
        elapsed_s = max(0.0, (self.end_ns - self.start_ns) / 1e9)
        errors = np.zeros(agg.n_ops, dtype=np.int64)
        exists = self.fileset.exists.copy()
        cpu_s = np.zeros(3)                         # user, system, runqueue wait; all workers
        for w, msg in sorted(self.done.items()):
            _, _, present, errs, error, cpu = msg
            errors += np.asarray(errs, dtype=np.int64)
            if cpu is not None:
                cpu_s += cpu
            if error:
                notes.append(error)
            if present is not None and spec.name != "webserver":
                owned = np.arange(w, spec.nfiles, self.nworkers)
                exists[owned] = False
                exists[np.asarray(present, dtype=np.int64)] = True
        try:
            save_fileset(self.root, spec, replace(self.fileset, exists=exists))
        except OSError as exc:  # a full file system: the measurements matter, the manifest does not
            notes.append(f"file-set manifest not updated ({exc.strerror}): populate again before another run")
        agg._grow(n_bins - 1)
        cg_stats = self.cg_stats
        if cg_stats and cg_stats.get("oom_kills"):
            notes.append(f"the memory cgroup's OOM killer fired {cg_stats['oom_kills']} time(s): "
                         f"--mem-limit {self.options.mem_limit_bytes} is too small for the workers themselves")
        procs = self.procs
        return RunResult(
            personality=spec.name, op_names=spec.op_names, bin_s=spec.bin_s, elapsed_s=elapsed_s,
            counts=agg.counts[:, :n_bins].copy(), io_bytes=agg.io_bytes[:, :n_bins].copy(),
            latency_sum_ns=agg.lat_sum[:, :n_bins].copy(), latency_hist=np.array(agg.hist),
            latency_window_s=spec.latency_window_s, window_hist=agg.window_hist(), errors=errors,
            worker_pids=tuple(p.pid for p in procs), worker_exitcodes=tuple(p.exitcode for p in procs),
            cancelled=self.was_cancelled, start_unix_s=self.start_unix_s,
            spec=spec, cgroup=cg_stats, notes=tuple(notes), start_ns=self.start_ns,
            stopped_by=self.stopped_by, worker_cpu_user_s=float(cpu_s[0]),
            worker_cpu_system_s=float(cpu_s[1]), worker_runqueue_s=float(cpu_s[2]),
            worker_loop=self.worker_loop)


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

