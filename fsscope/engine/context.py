"""What a job sees while it runs: the JobContext handed to every job function.

A job is a plain function ``run(ctx: JobContext, spec: SpecDataclass) -> dict`` registered
in :mod:`fsscope.engine.registry`. It runs inside the job child process, never prints, and
talks to the world only through the context:

- ``ctx.fresh_fs()`` is a context manager that yields a clean working directory on the
  target: a freshly formatted and mounted file system (device/image/RAM targets, recipe
  hygiene applied) or a fresh empty subdirectory (directory targets). It is released on
  exit, even on error or cancel. A job that wants one file system for all its work calls it
  once; the probe calls it once per run.
- ``ctx.emit(kind, **fields)`` streams an event to the parent (and, except for
  ``samples``, appends it to the run's ``events.ndjson``). Kinds: ``phase`` (name),
  ``progress`` (done, total), ``samples`` (batched measurements for live views),
  ``finding`` (a flag with a note), ``log`` (a line for the log panel), ``result``.
- ``ctx.run_dir`` is the :class:`fsscope.store.RunDir` for arrays (``save_array``,
  ``open_array``) and records.
- ``ctx.cancelled`` becomes True when the parent asks the job to stop (SIGTERM/SIGINT);
  long loops check it and return early with what they have.
"""
