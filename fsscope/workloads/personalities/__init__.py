"""Filebench-like throughput personalities: fileserver, webserver, varmail.

Modelled on Filebench's ``workloads/{fileserver,webserver,varmail}.f`` (same flowop sequences,
gamma-distributed file sizes with shape 1.5, ``appendfilerand`` appends of 1..append_size
bytes, whole-file reads/writes in ``io_size`` chunks), with two deliberate differences:

- Each worker runs its personality's loop in C (:mod:`.native`, built on first use): where
  ops are cheap or fsync wakes a worker every few ops, the generator's own CPU sets the number.
  The C loops run without the GIL, so the workers are threads spread over one process per CPU,
  like Filebench's threads sharing an address space (waking a thread of the same process is
  cheaper), yet an OOM kill takes only one process's share. The Python loops in
  :mod:`.worker` are the reference and the fallback without a compiler; they need a process
  per worker (the syscalls must not queue on one GIL).
- The worker processes are started with the ``forkserver`` method: a clean single-threaded
  server forks them, which is safe even when the caller has threads (a telemetry sampler, a
  queue feeder) and cheap (the preloaded interpreter pages are shared, which also keeps them
  out of a ``--mem-limit``).
- fileserver and varmail workers each own a disjoint slice of the file set (file i belongs to
  worker i mod W), like the FAST'17 description "each thread represents a user ... on a unique
  set of files"; no cross-process locks are needed to pick a free or existing file.
- webserver's shared log is truncated whenever it passes ``log_limit_bytes`` (like logrotate's
  copytruncate; :func:`default_spec` sets a quarter of the capacity). Filebench lets it grow,
  but at ~100 MB/s of appends it fills a 2 GiB target within a 30-s run.

A full file system (ENOSPC) stops the whole run at once, like a cancel: the workers stop,
what they measured is kept, and :attr:`RunResult.stopped_by` says why.

Measurements (chosen so memory stays bounded however long the run):

- completions, bytes and summed latency per op type per ``bin_s`` bin (int64, op x bin):
  Throughput-N is exact afterwards for any N that is a multiple of ``bin_s``;
- one whole-run latency histogram per op type on the shared log-bucketed grid of
  :mod:`fsscope.analysis.variation.grid` (4480 buckets, percentiles within 0.4 %);
- per ``latency_window_s`` window and op type, the same histogram stored sparsely
  (window, op, bucket, count rows), so windowed percentiles and CDFs stay exact to 1 %.

Raw per-call arrays would be exact too but grow by 16 bytes per op (about 1 GB an hour at
20 k ops/s); the histograms grow by a few kB per window.

Typical use from a job (the parent process does no I/O, it only aggregates)::

    spec = default_spec("fileserver", capacity_bytes=fs_size)
    populate(path, spec, seed=1)
    result = run(path, spec, RunOptions(on_window=emit_sample, cancelled=lambda: ctx.cancelled))

Split by concern: :mod:`.spec` (what a run is), :mod:`.fileset` (the files, populate),
:mod:`.worker` (the loop each worker process runs), :mod:`.native` (the same loops in C), :mod:`.aggregate` (per-bin arrays, the
result), :mod:`.launch` (start the workers, aggregate, stop).
"""

from fsscope.workloads.personalities.aggregate import LiveSample, RunResult
from fsscope.workloads.personalities.fileset import (
    Fileset,
    PopulateResult,
    file_sizes_bytes,
    fileset_paths,
    load_fileset,
    populate,
    write_sequential,
)
from fsscope.workloads.personalities.launch import RunOptions, run
from fsscope.workloads.personalities.spec import (
    LOG_DIR,
    MANIFEST_NAME,
    OPS,
    PERSONALITIES,
    PersonalitySpec,
    default_spec,
)

__all__ = ["LOG_DIR", "MANIFEST_NAME", "OPS", "PERSONALITIES", "Fileset", "LiveSample", "PersonalitySpec",
           "PopulateResult", "RunOptions", "RunResult", "default_spec", "file_sizes_bytes", "fileset_paths", "load_fileset", "populate",
           "run", "write_sequential"]
