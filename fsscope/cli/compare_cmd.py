"""``fsscope compare RUN_A RUN_B``: two recorded runs of one job side by side, with B/A ratios.

What is compared depends on the job: probe → latency statistics, flag counts and the
structural thresholds found in each; bench → throughput, its variation and per-op
p50/p99; age → ops, ops/s, fullness, fit p-values and fragmentation fresh and aged;
frag → fragmentation; syncwrite → throughput and latency per buffer size; any other job →
the numbers both reports share. The typical use: the same probe on a fresh file system (A)
and on an aged snapshot (B, ``--from-snapshot``).
"""

from __future__ import annotations

from typing import Any

from fsscope import store
from fsscope.cli.common import out_console, output_path, write_json
from fsscope.cli.render.compare import render_compare
from fsscope.engine import registry
from fsscope.errors import FsscopeError
from fsscope.tui.compare_model import where_of

DESCRIPTION = """\
Compare two recorded runs of the same job side by side, with the ratio B/A for every
number: probe (latency statistics, flags, the structural thresholds each run found), bench
(ops/s, relative range, RSD, per-op p50/p99), age (ops, ops/s, fit, fragmentation fresh and
aged), frag, syncwrite, or — for other jobs — every number both reports share.
RUN is a run directory, its name, a unique part of it, or 'latest'."""

EPILOG = """\
examples:
  fsscope probe --image /var/tmp/run.img --runs 5 --json fresh.json
  fsscope probe --image /var/tmp/run.img --from-snapshot /var/tmp/aged.img.aged --runs 5
  fsscope runs && fsscope compare 20260101-101010-probe latest"""

console = out_console()


def _describe(run: store.RunDir) -> tuple[str, str]:
    m = run.info()
    return m.recipe_name or "-", where_of(m)


def cmd_compare(args) -> int:
    runs = [store.find_run(args.run_a).check(), store.find_run(args.run_b).check()]
    jobs = [str(r.info().job) for r in runs]
    if jobs[0] != jobs[1]:
        raise FsscopeError(f"cannot compare a {jobs[0]} run ({runs[0].id}) with a {jobs[1]} run ({runs[1].id}): "
                           "compare runs of the same job")
    reports = []
    for run in runs:
        try:
            report = registry.report_from_data(jobs[0], run.report())
        except FsscopeError as exc:
            raise FsscopeError(f"the report of run {runs[0].id} or of run {runs[1].id}: {exc}") from None
        if report is None:
            raise FsscopeError(f"run {run.id} has no report (status {run.status()}): nothing to compare")
        reports.append(report)
    with store.reading(f"the report of run {runs[0].id} or of run {runs[1].id}"):
        doc: dict[str, Any] = {"job": jobs[0], "sections": registry.compare_reports(jobs[0], reports[0], reports[1])}
    for label, run in zip(("a", "b"), runs):
        recipe, where = _describe(run)
        doc[label] = {"id": run.id, "path": str(run.path), "status": run.status(), "recipe": recipe, "target": where}
    with store.reading(f"the report of run {runs[0].id} or of run {runs[1].id}"), console.capture() as out:
        render_compare(doc, console)
    print(out.get(), end="")
    if args.json:
        write_json(args.json, doc)
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("compare", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--json", type=output_path, metavar="PATH", help="also write the comparison as JSON")
    p.set_defaults(func=cmd_compare)
