"""Kernel-event attribution through tracefs (root only; jobs fall back to untraced with a note).

- :mod:`~fsscope.trace.tracefs` -- find/mount tracefs; the job's own instance (journalled
  before it is made, removed after; ``fsscope cleanup`` removes a killed job's).
- :mod:`~fsscope.trace.catalog` -- which events per file system and job, what each means.
- :mod:`~fsscope.trace.reader` -- the process copying per-CPU raw pages while the job runs.
- :mod:`~fsscope.trace.decode` -- raw ring-buffer pages -> one compact numpy record per event.
- :mod:`~fsscope.trace.session` -- :class:`Tracer`: instance + filters + reader, as a ``with``.
- :mod:`~fsscope.trace.attribute` -- pure joins of events to calls, windows and writes.
- :mod:`~fsscope.trace.jobs` -- tracing inside the probe and bench jobs, report fields.
"""
