"""``fsscope compare RUN_A RUN_B``: two recorded runs of one job side by side, with B/A ratios.

What is compared depends on the job: probe → latency statistics, flag counts and the
structural thresholds found in each; bench → throughput, its variation and per-op
p50/p99; age → ops, ops/s, fullness, fit p-values and fragmentation fresh and aged;
frag → fragmentation; syncwrite → throughput and latency per buffer size; any other job →
the numbers both reports share. The typical use: the same probe on a fresh file system (A)
and on an aged snapshot (B, ``--from-snapshot``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fsscope import store
from fsscope.errors import FsscopeError

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

console = Console() if sys.stdout.isatty() else Console(width=160)

# how a row's values print: ns → µs, bytes, fraction → %, plain numbers, or text
KINDS = ("us", "bytes", "pct", "int", "num", "p", "text")


def _row(metric: str, a, b, kind: str = "num") -> dict:
    ratio = None
    if kind != "text" and isinstance(a, (int, float)) and isinstance(b, (int, float)) and a and \
            math.isfinite(a) and math.isfinite(b):
        ratio = b / a
    return {"metric": metric, "a": a, "b": b, "kind": kind, "ratio": ratio}


def _get(d: dict | None, *keys):
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def _mean(values):
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


# ---------------------------------------------------------------- per job

def _probe(a: dict, b: dict) -> list[dict]:
    stats = [("count", "count", "int"), ("mean", "mean_ns", "us"), ("sd", "sd_ns", "us"), ("min", "min_ns", "us"),
             ("p50", "p50_ns", "us"), ("p95", "p95_ns", "us"), ("p99", "p99_ns", "us"), ("max", "max_ns", "us"),
             ("rsd", "rsd", "num")]
    latency = [_row(label, _get(a, "stats", "overall", key), _get(b, "stats", "overall", key), kind)
               for label, key, kind in stats]
    for group in ("low", "high"):
        latency.append(_row(f"{group} group mean", _get(a, "stats", "low_high", group, "mean_ns"),
                            _get(b, "stats", "low_high", group, "mean_ns"), "us"))
        latency.append(_row(f"{group} group count", _get(a, "stats", "low_high", group, "count"),
                            _get(b, "stats", "low_high", group, "count"), "int"))

    def explained(r):
        return [f for f in r.get("flags") or [] if f.get("structure")]

    flags = [
        _row("runs completed", a.get("runs_completed"), b.get("runs_completed"), "int"),
        _row("flags", len(a.get("flags") or []), len(b.get("flags") or []), "int"),
        _row("flags explained by a structure", len(explained(a)), len(explained(b)), "int"),
        _row("noise files", a.get("noise_count"), b.get("noise_count"), "int"),
    ]

    def where(r):
        out: dict[str, list[str]] = {}
        for f in explained(r):
            at = f.get("index", f.get("start"))
            out.setdefault(f["structure"], []).append(f"file {at}" if at is not None else "?")
        return out

    wa, wb = where(a), where(b)
    structure = []
    for name in sorted(set(wa) | set(wb)):
        structure.append(_row(name, ", ".join(wa.get(name, [])[:6]) or "—",
                              ", ".join(wb.get(name, [])[:6]) or "—", "text"))
    return [{"title": f"latency of {a.get('op')} (µs)", "rows": latency},
            {"title": "flags", "rows": flags},
            {"title": "structural thresholds found (where)", "rows": structure}]


def _bench(a: dict, b: dict) -> list[dict]:
    var = [("mean ops/s", "mean_ops_per_s", "num"), ("min ops/s", "min_ops_per_s", "num"),
           ("max ops/s", "max_ops_per_s", "num"), ("relative range", "relative_range", "pct"),
           ("RSD", "rsd", "pct"), ("runs", "runs", "int")]
    throughput = [_row(label, _get(a, "variation", key), _get(b, "variation", key), kind)
                  for label, key, kind in var]
    ops: list[str] = []
    for r in (a, b):
        for run in r.get("runs") or []:
            ops += [op for op in run.get("ops") or {} if op not in ops]

    def per_op(r, op, key):
        return _mean([(run.get("ops") or {}).get(op, {}).get(key) for run in r.get("runs") or []])

    per = []
    for op in ops:
        per.append(_row(f"{op} ops/s", per_op(a, op, "ops_per_s"), per_op(b, op, "ops_per_s"), "num"))
        per.append(_row(f"{op} p50", per_op(a, op, "p50_ns"), per_op(b, op, "p50_ns"), "us"))
        per.append(_row(f"{op} p99", per_op(a, op, "p99_ns"), per_op(b, op, "p99_ns"), "us"))
    flags = [_row("flags", len(a.get("flags") or []), len(b.get("flags") or []), "int")]
    return [{"title": f"throughput ({a.get('personality')})", "rows": throughput},
            {"title": "per op (mean over runs; latency in µs)", "rows": per},
            {"title": "flags", "rows": flags}]


def _frag_section(title: str, a: dict | None, b: dict | None) -> dict:
    from fsscope.layout.job import summary_rows

    ra, rb = summary_rows(a), summary_rows(b)
    kinds = {"fullness": "pct", "free_bytes": "bytes", "free_extents": "int",
             "largest_free_extent_bytes": "bytes", "mean_free_extent_bytes": "bytes", "test_file_bytes": "bytes",
             "test_file_fragments": "int", "test_file_extents": "int", "test_file_d_span_bytes": "bytes",
             "test_file_layout_index": "num"}
    labels = {k: k.replace("_bytes", "").replace("_", " ") for k in kinds}
    return {"title": title, "rows": [_row(labels[k], ra.get(k), rb.get(k), kind) for k, kind in kinds.items()]}


def _age(a: dict, b: dict) -> list[dict]:
    aging = [
        _row("profile", a.get("profile"), b.get("profile"), "text"),
        _row("seed", a.get("seed"), b.get("seed"), "text"),
        _row("recipe", a.get("recipe"), b.get("recipe"), "text"),
        _row("stop reason", a.get("stop_reason"), b.get("stop_reason"), "text"),
        _row("ops", a.get("ops"), b.get("ops"), "int"),
        _row("ops/s", a.get("ops_per_s"), b.get("ops_per_s"), "num"),
        _row("aging seconds", a.get("elapsed_s"), b.get("elapsed_s"), "num"),
        _row("fullness", a.get("fullness"), b.get("fullness"), "pct"),
        _row("overwrites", a.get("overwrites"), b.get("overwrites"), "num"),
        _row("live files", a.get("live_files"), b.get("live_files"), "int"),
        _row("convergence bound T", a.get("convergence_ops"), b.get("convergence_ops"), "int"),
        _row("op log sha256", (a.get("op_log_sha256") or "")[:16], (b.get("op_log_sha256") or "")[:16], "text"),
    ]
    fit = [_row(f"{name} p-value", _get(a, "fit", name, "p_value"), _get(b, "fit", name, "p_value"), "p")
           for name in ("size", "depth", "age")]
    return [{"title": "aging", "rows": aging}, {"title": "fit (chi-squared p)", "rows": fit},
            _frag_section("fragmentation, aged", a.get("aged"), b.get("aged")),
            _frag_section("fragmentation, fresh", a.get("fresh"), b.get("fresh"))]


def _syncwrite(a: dict, b: dict) -> list[dict]:
    def points(r):
        return {p["buffer_bytes"]: p for p in r.get("points") or [] if "buffer_bytes" in p}

    pa, pb = points(a), points(b)
    rows = []
    from fsscope.aging.profile import human_bytes

    for size in sorted(set(pa) | set(pb)):
        rows.append(_row(f"{human_bytes(size)} bytes/s", _get(pa, size, "bytes_per_s"),
                         _get(pb, size, "bytes_per_s"), "bytes"))
        rows.append(_row(f"{human_bytes(size)} p99", _get(pa, size, "latency_p99_ns"),
                         _get(pb, size, "latency_p99_ns"), "us"))
    return [{"title": f"synchronous writes ({a.get('mode')})", "rows": rows}]


def _numbers(d, prefix: str = "", depth: int = 0) -> dict[str, float]:
    out: dict[str, float] = {}
    if not isinstance(d, dict) or depth > 2:
        return out
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            out[name] = value
        elif isinstance(value, dict):
            out.update(_numbers(value, name + ".", depth + 1))
    return out


def _generic(a: dict, b: dict) -> list[dict]:
    na, nb = _numbers(a), _numbers(b)
    rows = [_row(k, na[k], nb[k], "num") for k in na if k in nb]
    return [{"title": "numbers both reports hold", "rows": rows}]


COMPARERS = {"probe": _probe, "bench": _bench, "age": _age, "syncwrite": _syncwrite,
             "frag": lambda a, b: [_frag_section("fragmentation", a, b)]}


def compare_reports(job: str, a: dict, b: dict) -> list[dict]:
    """Sections of rows ``{metric, a, b, kind, ratio}`` (ratio = b / a where both are numbers)."""
    return COMPARERS.get(job, _generic)(a, b)


# ---------------------------------------------------------------- rendering

def _fmt(value, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "text":
        return str(value)
    if not isinstance(value, (int, float)):
        return str(value)
    if kind == "us":
        return f"{value / 1e3:,.1f}"
    if kind == "bytes":
        from fsscope.aging.profile import human_bytes

        return human_bytes(value)
    if kind == "pct":
        return f"{value * 100:.1f}%"
    if kind == "int":
        return f"{value:,.0f}"
    if kind == "p":
        return f"{value:.3f}"
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def _ratio_cell(row: dict) -> str:
    if row["kind"] == "text":
        return "" if row["a"] == row["b"] else "[yellow]differs[/]"
    r = row["ratio"]
    if r is None:
        return "-"
    from fsscope.cli.age_cmd import ratio_text

    text = ratio_text(r)
    return text if 0.9 <= r <= 1.1 else f"[bold]{text}[/]"  # more than 10% apart stands out


def _describe(run: store.RunDir) -> tuple[str, str]:
    m = run.manifest()
    target = m.get("target") or {}
    spec = target.get("spec", target) if isinstance(target, dict) else {}
    recipe = (m.get("recipe") or {}).get("name", "-") if isinstance(m.get("recipe"), dict) else "-"
    where = f"{spec.get('kind', '?')} {spec.get('path', '')}".strip()
    if spec.get("snapshot"):
        where += f" from snapshot {spec['snapshot']}"
    return recipe, where


def render(doc: dict, out: Console) -> None:
    head = Table(title=f"{doc['job']} runs compared (ratios are B / A)", title_justify="left")
    for col in ("", "run", "status", "recipe", "target"):
        head.add_column(col, overflow="fold")
    for label in ("a", "b"):
        r = doc[label]
        head.add_row(label.upper(), r["id"], r["status"], r["recipe"], r["target"])
    out.print(head)
    for section in doc["sections"]:
        if not section["rows"]:
            continue
        table = Table(title=section["title"], title_justify="left")
        table.add_column("", no_wrap=True)
        table.add_column(f"A {doc['a']['id']}", justify="right", overflow="fold")
        table.add_column(f"B {doc['b']['id']}", justify="right", overflow="fold")
        table.add_column("B / A", justify="right", no_wrap=True)
        for row in section["rows"]:
            table.add_row(row["metric"], _fmt(row["a"], row["kind"]), _fmt(row["b"], row["kind"]), _ratio_cell(row))
        out.print(table)


def cmd_compare(args) -> int:
    runs = [store.find_run(args.run_a), store.find_run(args.run_b)]
    jobs = [r.manifest().get("job") for r in runs]
    if jobs[0] != jobs[1]:
        raise FsscopeError(f"cannot compare a {jobs[0]} run ({runs[0].id}) with a {jobs[1]} run ({runs[1].id}): "
                           "compare runs of the same job")
    reports = []
    for run in runs:
        report = run.report()
        if report is None:
            raise FsscopeError(f"run {run.id} has no report (status {run.status()}): nothing to compare")
        reports.append(report)
    doc = {"job": jobs[0], "sections": compare_reports(jobs[0], reports[0], reports[1])}
    for label, run in zip(("a", "b"), runs):
        recipe, where = _describe(run)
        doc[label] = {"id": run.id, "path": str(run.path), "status": run.status(), "recipe": recipe, "target": where}
    render(doc, console)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2, default=str) + "\n")
        Console(stderr=True).print(f"[dim]wrote {args.json}[/]")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="two recorded runs of one job side by side, with ratios B/A",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_a", metavar="RUN_A")
    p.add_argument("run_b", metavar="RUN_B")
    p.add_argument("--json", metavar="PATH", help="also write the comparison as JSON")
    p.set_defaults(func=cmd_compare)
