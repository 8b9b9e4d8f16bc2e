"""The worker plugin that stops each worker's HTTP server (see :mod:`fsscope.study.credentials`).

Apart from :mod:`~fsscope.study.credentials` because it subclasses Dask's ``WorkerPlugin``:
the credentials and ``check_scheduler`` are imported by the explore and variation jobs' modules,
which must import without the study extra (the Setup screen and ``--help`` read their specs
there), and this module only where a cluster is started.
"""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from fsscope.study.credentials import stop_http


class NoHttp(WorkerPlugin):
    """Stops each worker's HTTP server as it joins (a worker the nanny restarts too)."""

    name = "fsscope-no-http"

    async def setup(self, worker: Any) -> None:
        await stop_http(worker)
