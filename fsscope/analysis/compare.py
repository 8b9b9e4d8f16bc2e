"""Two recorded runs' reports side by side: sections of rows (metric, a, b, kind, ratio = b/a).

Pure functions on reports (a job's report record, or a dict for jobs not typed yet), shared by ``fsscope compare`` and the TUI's compare screen.
What is compared depends on the job: probe → latency statistics, flag counts and the
structural thresholds found in each; bench → throughput, its variation and per-op p50/p99;
age → ops, ops/s, fullness, fit p-values and fragmentation fresh and aged; frag →
fragmentation; syncwrite → throughput and latency per buffer size; any other job → the
numbers both reports share.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np

from fsscope.analysis.efficiency import compare_per_size
from fsscope.analysis.variation.temporal import compare_recipes
from fsscope.format import format_bytes
from fsscope.layout.summary import FRAG_ROWS, summary_rows
from fsscope.records import Record, convert, plain

# how a row's values print: ns → µs, bytes, fraction → %, plain numbers, or text
KINDS = ("us", "bytes", "pct", "int", "num", "p", "text")


class Row(Record, frozen=True, kw_only=True):
    """One figure of both runs: ``a``, ``b`` and ``ratio`` = b / a where both are numbers;
    ``kind`` how the values print (one of :data:`KINDS`)."""

    metric: str
    a: Any = None
    b: Any = None
    kind: str = "num"
    ratio: float | None = None


class Section(Record, frozen=True, kw_only=True):
    title: str
    rows: list[Row] = []


def row(metric: str, a, b, kind: str = "num") -> Row:
    ratio = None
    if kind != "text" and isinstance(a, (int, float)) and isinstance(b, (int, float)) and a and \
            math.isfinite(a) and math.isfinite(b):
        ratio = b / a
    return Row(metric=metric, a=a, b=b, kind=kind, ratio=ratio)


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

def _probe(a: Any, b: Any) -> list[Section]:
    """Two probe ``Report`` records (fsscope.workloads.probe_records; read by attribute, as
    analysis imports no job module)."""
    stats = [("count", "count", "int"), ("mean", "mean_ns", "us"), ("sd", "sd_ns", "us"), ("min", "min_ns", "us"),
             ("p50", "p50_ns", "us"), ("p95", "p95_ns", "us"), ("p99", "p99_ns", "us"), ("max", "max_ns", "us"),
             ("rsd", "rsd", "num")]
    latency = [row(label, getattr(a.stats.overall, key), getattr(b.stats.overall, key), kind)
               for label, key, kind in stats]
    for group in ("low", "high"):
        ga, gb = getattr(a.stats.low_high, group), getattr(b.stats.low_high, group)
        latency.append(row(f"{group} group mean", ga.mean_ns, gb.mean_ns, "us"))
        latency.append(row(f"{group} group count", ga.count, gb.count, "int"))

    def explained(r) -> list:
        return [f for f in r.flags or [] if f.structure]

    flags = [
        row("runs completed", a.runs_completed, b.runs_completed, "int"),
        row("flags", len(a.flags or []), len(b.flags or []), "int"),
        row("flags explained by a structure", len(explained(a)), len(explained(b)), "int"),
        row("noise files", a.noise_count, b.noise_count, "int"),
    ]

    def where(r) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for f in explained(r):
            out.setdefault(f.structure, []).append(f"file {f.index}" if f.index is not None else "?")
        return out

    wa, wb = where(a), where(b)
    structure = []
    for name in sorted(set(wa) | set(wb)):
        structure.append(row(name, ", ".join(wa.get(name, [])[:6]) or "—",
                              ", ".join(wb.get(name, [])[:6]) or "—", "text"))
    return [Section(title=f"latency of {a.op} (µs)", rows=latency),
            Section(title="flags", rows=flags),
            Section(title="structural thresholds found (where)", rows=structure)]


def _bench(a: dict, b: dict) -> list[Section]:
    var = [("mean ops/s", "mean_ops_per_s", "num"), ("min ops/s", "min_ops_per_s", "num"),
           ("max ops/s", "max_ops_per_s", "num"), ("relative range", "relative_range", "pct"),
           ("RSD", "rsd", "pct"), ("runs", "runs", "int")]
    throughput = [row(label, _get(a, "variation", key), _get(b, "variation", key), kind)
                  for label, key, kind in var]
    ops: list[str] = []
    for r in (a, b):
        for run in r.get("runs") or []:
            ops += [op for op in run.get("ops") or {} if op not in ops]

    def per_op(r, op, key):
        return _mean([(run.get("ops") or {}).get(op, {}).get(key) for run in r.get("runs") or []])

    per = []
    for op in ops:
        per.append(row(f"{op} ops/s", per_op(a, op, "ops_per_s"), per_op(b, op, "ops_per_s"), "num"))
        per.append(row(f"{op} p50", per_op(a, op, "p50_ns"), per_op(b, op, "p50_ns"), "us"))
        per.append(row(f"{op} p99", per_op(a, op, "p99_ns"), per_op(b, op, "p99_ns"), "us"))
    flags = [row("flags", len(a.get("flags") or []), len(b.get("flags") or []), "int")]
    return [Section(title=f"throughput ({a.get('personality')})", rows=throughput),
            Section(title="per op (mean over runs; latency in µs)", rows=per),
            Section(title="flags", rows=flags)]


def _frag_section(title: str, a: dict | None, b: dict | None) -> Section:
    ra, rb = summary_rows(a), summary_rows(b)
    return Section(title=title, rows=[row(label, ra[key], rb[key], kind) for label, key, kind in FRAG_ROWS])


def _age(a: dict, b: dict) -> list[Section]:
    aging = [
        row("profile", a.get("profile"), b.get("profile"), "text"),
        row("seed", a.get("seed"), b.get("seed"), "text"),
        row("recipe", a.get("recipe"), b.get("recipe"), "text"),
        row("stop reason", a.get("stop_reason"), b.get("stop_reason"), "text"),
        row("ops", a.get("ops"), b.get("ops"), "int"),
        row("ops/s", a.get("ops_per_s"), b.get("ops_per_s"), "num"),
        row("aging seconds", a.get("elapsed_s"), b.get("elapsed_s"), "num"),
        row("fullness", a.get("fullness"), b.get("fullness"), "pct"),
        row("overwrites", a.get("overwrites"), b.get("overwrites"), "num"),
        row("live files", a.get("live_files"), b.get("live_files"), "int"),
        row("convergence bound T", a.get("convergence_ops"), b.get("convergence_ops"), "int"),
        row("op log sha256", (a.get("op_log_sha256") or "")[:16], (b.get("op_log_sha256") or "")[:16], "text"),
    ]
    fit = [row(f"{name} p-value", _get(a, "fit", name, "p_value"), _get(b, "fit", name, "p_value"), "p")
           for name in ("size", "depth", "age")]
    return [Section(title="aging", rows=aging), Section(title="fit (chi-squared p)", rows=fit),
            _frag_section("fragmentation, aged", a.get("aged"), b.get("aged")),
            _frag_section("fragmentation, fresh", a.get("fresh"), b.get("fresh"))]


def _syncwrite(a: dict, b: dict) -> list[Section]:
    """Per buffer size: mean throughput and latency, p99, and a Welch t-test on the
    repetitions' throughput at the paper's p < 0.001; then both knees and the recommendation."""

    def sizes(r):
        return {p["buffer_bytes"]: p for p in r.get("sizes") or [] if isinstance(p, dict) and "buffer_bytes" in p}

    pa, pb = sizes(a), sizes(b)
    tests = compare_per_size({"A": {s: p.get("throughput_runs") or [] for s, p in pa.items()},
                              "B": {s: p.get("throughput_runs") or [] for s, p in pb.items()}})
    verdicts = {t["buffer_bytes"]: t for t in tests}
    rows = []
    for size in sorted(set(pa) | set(pb)):
        label = format_bytes(size)
        rows.append(row(f"{label} bytes/s", _get(pa, size, "throughput_mean"), _get(pb, size, "throughput_mean"),
                        "bytes"))
        rows.append(row(f"{label} mean latency µs", _get(pa, size, "latency_mean_ns"),
                        _get(pb, size, "latency_mean_ns"), "us"))
        rows.append(row(f"{label} p99 µs", _get(pa, size, "latency_p99_ns"), _get(pb, size, "latency_p99_ns"), "us"))
        test = verdicts.get(size)
        if test is not None:
            p = test["p"] if isinstance(test["p"], float) and math.isfinite(test["p"]) else None
            rows.append(msgspec.structs.replace(row(f"{label} Welch p (throughput)", p, p, "p"), ratio=None))
            rows.append(row(f"{label} verdict (p < 0.001)", test["verdict"], test["verdict"], "text"))
    summary = [row("latency rises after", _get(a, "knees", "latency_rise_bytes"),
                   _get(b, "knees", "latency_rise_bytes"), "bytes"),
               row("throughput saturates at", _get(a, "knees", "throughput_saturation_bytes"),
                   _get(b, "knees", "throughput_saturation_bytes"), "bytes"),
               row("recommended buffer", a.get("recommended_bytes"), b.get("recommended_bytes"), "bytes")]
    return [Section(title=f"synchronous writes ({a.get('mode')})", rows=rows),
            Section(title="knees and recommendation", rows=summary)]


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


def _generic(a: dict, b: dict) -> list[Section]:
    na, nb = _numbers(a), _numbers(b)
    rows = [row(k, na[k], nb[k], "num") for k in na if k in nb]
    return [Section(title="numbers both reports hold", rows=rows)]


def _replay(a: dict, b: dict) -> list[Section]:
    """Two replays (of one log on two file systems, say): per call type p50, p99 and calls/s."""
    def ops(r: dict) -> dict[str, dict]:
        return {o["op"]: o for o in r.get("ops") or []}

    oa, ob = ops(a), ops(b)
    per = [row(f"{op} {label}", oa[op].get(key), ob[op].get(key), "num")
           for op in oa if op in ob
           for label, key in (("p50 µs", "p50_us"), ("p99 µs", "p99_us"), ("calls/s", "calls_per_s"))]
    whole = [row(label, a.get(key), b.get(key), "int") for label, key in
             (("calls in the log", "calls"), ("slow calls", "slow_total"), ("threads", "threads"))]
    return [Section(title=f"per call type (every run; {a.get('fs')} vs {b.get('fs')})", rows=per),
            Section(title="replay", rows=whole)]


def _on_written(compare: Callable[[dict, dict], list[Section]]) -> Callable[[Any, Any], list[Section]]:
    """A comparer of two reports' written form, handed the report records (or dicts) themselves."""
    return lambda a, b: compare(plain(a), plain(b))


# Each job's comparer is named by its descriptor (fsscope.engine.jobs, ``comparer``); the
# engine's registry.compare_reports picks it. The probe's reads its Report record, the others
# a report's written form.
compare_probe = _probe
compare_bench = _on_written(_bench)
compare_age = _on_written(_age)
compare_syncwrite = _on_written(_syncwrite)
compare_frag = _on_written(lambda a, b: [_frag_section("fragmentation", a, b)])
compare_replay = _on_written(_replay)
compare_generic = _on_written(_generic)
"""Any other job: the numbers both reports hold."""


# ---------------------------------------------------------------- recipes (bench --recipes)

class RecipeRuns(Record, frozen=True, kw_only=True):
    """One recipe's bench: its runs' cumulative throughput and their variation."""

    recipe: str = ""
    run_id: str | None = None
    ops_per_s_runs: list[float] = []
    mean_ops_per_s: float | None = None
    relative_range: float | None = None
    rsd: float | None = None


class RecipePair(Record, frozen=True, kw_only=True):
    """Welch's t-test of two recipes' runs (a winner only where significant)."""

    a: str = ""
    b: str = ""
    t: float | None = None
    p: float | None = None
    df: float | None = None
    mean_a: float | None = None
    mean_b: float | None = None
    winner: str | None = None
    note: str = ""
    window_flag: dict[str, Any] | None = None  # the Throughput-N windows disagree with the verdict


class RecipeComparison(Record, frozen=True, kw_only=True):
    personality: str | None = None
    alpha: float = 0.05
    window_s: float = 10.0
    recipes: list[RecipeRuns] = []
    pairs: list[RecipePair] = []
    best: str | None = None  # significantly faster than every other recipe


def compare_recipe_reports(reports: dict[str, dict], alpha: float = 0.05) -> RecipeComparison:
    """Welch t-tests on cumulative throughput for every pair of recipes' bench reports
    (winner only where significant), plus the Throughput-N window flag of
    :func:`fsscope.analysis.compare_recipes`."""
    names = list(reports)
    first = next(iter(reports.values()))
    window_s = ((first.get("spec") or {}).get("window_sizes_s") or [10])[0]
    key = f"{window_s:g}"

    def ops(name):
        return [r["ops_per_s"] for r in reports[name].get("runs", []) if r.get("ops_per_s") is not None]

    def tn(name):
        return [np.asarray([v for v in (r.get("windows") or {}).get(key, []) if v is not None], dtype=float)
                for r in reports[name].get("runs", [])]

    entries = []
    for name in names:
        var = reports[name].get("variation") or {}
        entries.append({"recipe": name, "run_id": reports[name].get("run_id"), "ops_per_s_runs": ops(name),
                        "mean_ops_per_s": var.get("mean_ops_per_s"), "relative_range": var.get("relative_range"),
                        "rsd": var.get("rsd")})
    pairs = []
    wins = {name: 0 for name in names}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            verdict, flag = compare_recipes(ops(a), ops(b), tn(a), tn(b), window_s, labels=(a, b),
                                                      alpha=alpha)
            if verdict.winner:
                wins[verdict.winner] += 1
            pairs.append({"a": a, "b": b, "t": verdict.t, "p": verdict.p, "df": verdict.df,
                          "mean_a": verdict.mean_a, "mean_b": verdict.mean_b, "winner": verdict.winner,
                          "note": verdict.note, "window_flag": flag.to_dict() if flag else None})
    best = next((n for n, w in wins.items() if w == len(names) - 1), None)
    return convert(plain({"personality": first.get("personality"), "alpha": alpha, "window_s": window_s,
                          "recipes": entries, "pairs": pairs, "best": best}), RecipeComparison)
