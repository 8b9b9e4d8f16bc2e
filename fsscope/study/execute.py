"""Running a plan's treatments: locally or on a Dask cluster, through one code path.

    run_study(plan, treatment_fn, study_dir, workers=2)              # a LocalCluster here
    run_study(plan, treatment_fn, study_dir, scheduler="tls://h:8786", security="dask.toml")  # elsewhere

``treatment_fn(treatment: Treatment) -> Row`` is pluggable: explore's writes files on a cloned
disk state and reads FIEMAP; the variation study's (#15) runs a benchmark on a configuration.
It must be importable on the workers (a module-level function or a picklable object from an
installed package), and return its study's row record (a :class:`~fsscope.study.plan.Treatment`
with the measurements); ``treatments.ndjson`` reads back into that type.

Here the work goes to a ``distributed.LocalCluster`` of worker *processes* on loopback (one
thread each: a treatment owns its CPU affinity); with ``scheduler`` to a real cluster whose
workers run as root with fsscope installed. Either way the client connects by address over
mutual TLS (:mod:`fsscope.study.credentials`: per-job credentials for the LocalCluster, the
``--security`` file's for a real one), and:

- the plan is saved in ``study_dir`` before anything runs; every row is appended to
  ``treatments.ndjson`` (flushed, fsync'd) as it arrives, so ``resume`` submits only the
  treatments with no row yet, and the final table is the same as an uninterrupted study's;
- a worker lost mid-treatment: the scheduler runs the treatment again on another worker
  (Dask reschedules tasks of a dead worker; ``retries`` also re-runs ones that raised), and
  what the dead worker had mounted or attached is undone from its host's journal
  (:func:`cleanup_study_leftovers`, run by every treatment before it starts and on every
  worker at the end);
- a treatment that still fails gives a :class:`~fsscope.study.plan.Failed` row (``error``
  instead of metrics).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

import msgspec

from fsscope.errors import FsscopeError
from fsscope.records import convert, dumps, loads
from fsscope.study.credentials import NO_HTTP, PrivateDir, check_scheduler, load_security_file, stop_http
from fsscope.study.plan import Failed, Plan, Treatment
from fsscope.targets.journal import Journal, owner_alive, undo_entries

ROWS_FILE = "treatments.ndjson"
POLL_S = 0.5  # how often a running study looks at its cancel flag
STUDY_GROUP_PREFIX = "study-"
Row = TypeVar("Row", bound=Treatment)


def cleanup_study_leftovers() -> list[str]:
    """Undo the study resources (clones, loops, mounts) whose owning process is dead -- a
    worker killed mid-treatment -- on this host. Leaves every other journal entry alone."""
    journal = Journal()
    dead = [e for e in journal.entries() if e.group.startswith(STUDY_GROUP_PREFIX) and not owner_alive(e)]
    return undo_entries(journal, dead)


def require_root(job: str, scheduler: str) -> None:
    """Refuse, in one line, a study whose treatments would run here without root: every one
    would fail to attach its image, and the study would measure nothing."""
    if not scheduler and os.geteuid() != 0:
        raise FsscopeError(f"{job} attaches, formats and mounts disk images on this host: it needs root "
                           "(run it as root, or give --scheduler tls://HOST:PORT --security FILE whose workers run as root)")


def check_some_finished(rows: Sequence[Treatment]) -> None:
    """A study in which every treatment failed measured nothing: a failure, never "ok"."""
    failed = [r for r in rows if isinstance(r, Failed)]
    if rows and len(failed) == len(rows):
        first = failed[0]
        raise FsscopeError(f"every treatment failed ({len(rows)} of {len(rows)}); "
                           f"the first, {first.id}: {first.error}")


def load_rows(study_dir: Path | str, row_type: type[Row]) -> list[Row | Failed]:
    """Rows recorded so far, as ``row_type`` records (a failed treatment's as :class:`Failed`).
    A torn last line from a kill ends the rows; a line that is no row of this study is left
    out (its treatment runs again)."""
    rows: list[Row | Failed] = []
    try:
        with open(Path(study_dir) / ROWS_FILE, "rb") as fh:
            for line in fh:
                try:
                    data = _line(line)
                except ValueError:
                    break
                row = _row(data, row_type)
                if row is not None:
                    rows.append(row)
    except FileNotFoundError:
        pass
    return rows


def _line(line: bytes) -> Any:
    try:
        return loads(line)
    except msgspec.DecodeError:
        return json.loads(line)  # rows written before the one encoder may hold NaN; torn: ValueError


def _row(data: Any, row_type: type[Row]) -> Row | Failed | None:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        return None
    try:
        return convert(data, Failed) if data.get("error") else convert(data, row_type)
    except FsscopeError:
        return None


def _append_row(fh: IO[str], row: Treatment) -> None:
    fh.write(dumps(row) + "\n")
    fh.flush()
    os.fsync(fh.fileno())


def order_rows(plan: Plan, rows: Sequence[Row | Failed]) -> list[Row | Failed]:
    """Rows in plan order (recipe, design row, repeat), one per treatment (the first recorded)."""
    rank = {t.id: i for i, t in enumerate(plan.treatments())}
    seen: dict[str, Row | Failed] = {}
    for row in rows:
        if row.id in rank and row.id not in seen:
            seen[row.id] = row
    return sorted(seen.values(), key=lambda r: rank[r.id])


class Cluster:
    """A Dask client on a LocalCluster (``scheduler`` empty) or on a running scheduler, reached
    the same way: by address, with the credentials that cluster's members hold (mutual TLS,
    :mod:`fsscope.study.credentials`); a plain ``tcp://`` scheduler only when the user said
    ``insecure``. The LocalCluster's credentials and its workers' scratch space live in a
    private directory of this job's, removed on close."""

    def __init__(self, *, workers: int = 2, scheduler: str = "", security: str = "", insecure: bool = False):
        from distributed import Client, LocalCluster

        check_scheduler(scheduler, security, insecure)
        self.local = None
        self.private: PrivateDir | None = None
        if scheduler:
            address = scheduler
            tls = load_security_file(security).security() if security else None
        else:
            import dask

            self.private = PrivateDir()
            tls = self.private.credentials.security()
            scratch = str(self.private.scratch)
            # non-daemonic workers: a treatment may start processes of its own (the bench
            # personalities' workers); daemonic processes may not have children. A remote
            # cluster's workers need the same: DASK_DISTRIBUTED__WORKER__DAEMON=False.
            # temporary-directory: the scheduler's scratch space too (Dask puts it on sys.path).
            try:
                with dask.config.set({"distributed.worker.daemon": False, "temporary-directory": scratch} | NO_HTTP):
                    self.local = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                              host="127.0.0.1", protocol="tls://", security=tls,
                                              local_directory=scratch, dashboard_address=None,
                                              worker_dashboard_address=None, silence_logs=logging.ERROR)
                self.local.sync(stop_http, self.local.scheduler)
            except BaseException:
                self.private.remove()
                raise
            address = self.local.scheduler_address
        try:
            self.client = Client(address, security=tls, timeout="15s")
        except (OSError, TimeoutError) as exc:
            self._close_local()
            raise FsscopeError(f"--scheduler {scheduler}: cannot reach the Dask scheduler ({exc})") from None
        if self.local is not None:
            from fsscope.study.no_http import NoHttp  # Dask's WorkerPlugin: the study extra

            self.client.register_plugin(NoHttp())

    def close(self) -> None:
        try:
            self.client.close()
        finally:
            self._close_local()

    def _close_local(self) -> None:
        try:
            if self.local is not None:
                self.local.close()
        finally:
            if self.private is not None:
                self.private.remove()


def _collect(futures: dict[Any, Treatment], study_dir: Path, done_rows: list[Any], total: int,
             on_row: Callable[[Any, int, int], None] | None, cancelled: Callable[[], bool]) -> None:
    """Append each treatment's row as it finishes (or its error), until all are done or the
    study is cancelled (the rest are dropped then)."""
    from distributed import wait

    pending = set(futures)
    done = total - len(futures)
    with open(study_dir / ROWS_FILE, "a") as fh:
        # Poll rather than block on the next row: a cancel must be seen even when no row
        # can come (the workers were stopped with the job's process group).
        while pending and not cancelled():
            try:
                finished = wait(pending, timeout=POLL_S, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                continue
            for future in sorted(finished, key=lambda f: futures[f].id):
                pending.discard(future)
                t = futures[future]
                if future.status == "finished":
                    row = future.result()
                else:
                    exc = future.exception()
                    row = Failed(id=t.id, row=t.row, recipe=t.recipe, repeat=t.repeat, factors=t.factors,
                                 error=f"{type(exc).__name__}: {exc}")
                _append_row(fh, row)
                done_rows.append(row)
                done += 1
                if on_row is not None:
                    on_row(row, done, total)
        for future in pending:
            future.cancel()


def _scheduler_lost(client: Any, exc: Exception) -> bool:
    """Whether ``exc`` means the remote scheduler went away (its futures cancelled with the
    connection, a closed stream) rather than a fault here (a full disk for the rows)."""
    from concurrent.futures import CancelledError

    from distributed.comm import CommClosedError

    if isinstance(exc, (CommClosedError, CancelledError)):
        return True
    return isinstance(exc, (OSError, TimeoutError)) and client.status != "running"


def run_study(plan: Plan, treatment_fn: Callable[[Treatment], Row], study_dir: Path | str, row_type: type[Row], *,
              workers: int = 2, scheduler: str = "", security: str = "", insecure: bool = False,
              retries: int = 2,
              on_row: Callable[[Row | Failed, int, int], None] | None = None,
              cancelled: Callable[[], bool] = lambda: False,
              teardown: Callable[[], object] | None = None) -> list[Row | Failed]:
    """Run every treatment of ``plan`` without a row in ``study_dir``; return all rows
    (``row_type`` records, or :class:`Failed`) in plan order. ``on_row(row, done, total)`` is
    called as rows arrive; ``cancelled()`` is polled between them (pending treatments are
    dropped, the record stays resumable); ``teardown()`` runs on every worker at the end
    (e.g. drop the disk-state cache)."""
    study_dir = Path(study_dir)
    if not (study_dir / "plan.json").exists():
        plan.save(study_dir)
    done_rows = load_rows(study_dir, row_type)
    done_ids = {r.id for r in done_rows}
    todo = [t for t in plan.treatments() if t.id not in done_ids]
    total = len(plan.treatments())
    if not todo:
        return order_rows(plan, done_rows)
    cluster = Cluster(workers=workers, scheduler=scheduler, security=security, insecure=insecure)
    tag = uuid.uuid4().hex[:8]
    try:
        futures = {cluster.client.submit(treatment_fn, t, key=f"treatment-{t.id}-{tag}",
                                         pure=False, retries=retries): t for t in todo}
        try:
            _collect(futures, study_dir, done_rows, total, on_row, cancelled)
        except Exception as exc:
            if scheduler and _scheduler_lost(cluster.client, exc):
                raise FsscopeError(
                    f"lost the Dask scheduler {scheduler} ({type(exc).__name__}); {len(order_rows(plan, done_rows))} "
                    f"of {total} treatments are recorded in {study_dir}: start the scheduler and its workers "
                    "again and continue with --resume latest") from None
            raise
        if teardown is not None:
            try:
                cluster.client.run(teardown)
            except Exception:  # noqa: BLE001 - a worker that is gone has nothing to tear down
                pass
        try:
            cluster.client.run(cleanup_study_leftovers)
        except Exception:  # noqa: BLE001
            pass
    finally:
        cluster.close()
        cleanup_study_leftovers()  # this host: workers of a LocalCluster killed on close
        if teardown is not None and not scheduler:
            teardown()
    return order_rows(plan, done_rows)
