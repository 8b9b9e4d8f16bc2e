"""``fsscope replay``: an op log captured by ``watch --capture`` (:mod:`fsscope.oplog`) played
again on file systems a recipe makes, so an admin sees how *their* workload runs on each.

- :mod:`.play`: the starting tree recreated, a thread per recorded thread, the log's
  dependencies between threads kept, asap or at the recorded pace; each call timed into
  watch's call record
- :mod:`.records`: the report; :mod:`.job`: the job (per run a fresh file system), the
  distributions per call type and per file, watch's slow-call and repeat judges on the
  replayed calls, and the captured latencies beside the replayed ones
- :mod:`.compare`: recipes compared per call type with Welch's t-test (as ``bench --recipes``)
"""
