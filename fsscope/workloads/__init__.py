"""Workloads: plain functions that take a mounted path and a spec and measure; no UI."""

#: The Filebench personalities fsscope runs (each has its flowops in personalities/ and a C loop
#: ``fsscope_<name>()`` in personalities/native/loops.c). Here, not in personalities/, whose
#: package imports multiprocessing: the CLI builds its parser from this name list alone.
PERSONALITIES = ("fileserver", "webserver", "varmail")
