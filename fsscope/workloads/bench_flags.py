"""The bench's flags: a short title for each variation flag, the flags the variation analysis
cannot see (a full file system, a run that measured nothing), and the interim flags streamed
as soon as the runs so far show them."""

from __future__ import annotations

from typing import Any

from fsscope.analysis.variation.report import variation_report
from fsscope.engine.events import Finding
from fsscope.format import format_bytes
from fsscope.workloads import personalities as P
from fsscope.workloads.bench_spec import Spec


def flag_title(flag: dict[str, Any]) -> str:
    """One short line for a variation flag (the note says the rest)."""
    kind = flag.get("kind")
    if kind == "variation":
        varies = f"throughput varies {flag.get('relative_range', 0):.0%} across runs (relative range)"
        if flag.get("verdict") == "inconclusive":  # above the threshold, but not beyond chance
            more = flag.get("runs_to_decide")
            return f"{varies}: inconclusive" + (f", about {more} runs would decide" if more else "")
        return varies
    if kind == "warmup":
        return f"warm-up ({flag.get('direction', '')}): settles after {flag.get('warmup_s', 0):g} s"
    if kind == "periodic":
        match = flag.get("matches")
        why = {"dirty_expire": " — dirty-page expiry", "dirty_writeback": " — flusher wake-ups"}.get(str(match), "")
        return (f"Throughput-{flag.get('window_s', 0):g} {flag.get('shape', 'varies')} every "
                f"{flag.get('period_s', 0):g} s{why}")
    if kind == "window_disagrees":
        return (f"Throughput-{flag.get('window_s', 0):g} windows disagree with the cumulative verdict "
                f"({flag.get('fraction_windows_above', 0):.0%} of windows above threshold)")
    return str(kind)


def full_flag(r: int, result: P.RunResult, pspec: P.PersonalitySpec) -> dict[str, Any]:
    log = (f" (webserver's log rotates at {format_bytes(pspec.log_limit_bytes)})"
           if pspec.log_limit_bytes else "")
    return {"kind": "fs_full", "run": r, "elapsed_s": result.elapsed_s,
            "title": f"the file system filled up {result.elapsed_s:.1f} s into run {r + 1}: the job stopped there",
            "note": f"{result.stopped_by}. The workers stopped at once and the numbers of the "
                    f"{result.elapsed_s:.1f} s measured are kept, but a full file system is not the one the "
                    f"later runs would have measured, so no further runs were made{log}. Give a larger "
                    "--size, fewer --files or a shorter --duration."}


def nothing_flag(r: int, result: P.RunResult) -> dict[str, Any]:
    why = "; ".join(result.notes) or "no worker completed an operation"
    return {"kind": "nothing_measured", "run": r, "elapsed_s": result.elapsed_s,
            "title": f"run {r + 1} measured nothing: 0 operations in {result.elapsed_s:.1f} s",
            "note": f"Its throughput of 0 ops/s is not a result of the file system. Why: {why}"}


def flag_key(flag: dict[str, Any]) -> tuple:
    return (flag.get("kind"), flag.get("window_s"))


def emit_new_flags(ctx, spec: Spec, results: list, dirty: dict, emitted: dict) -> None:
    """Flags the runs so far show (from the second run on), each streamed again whenever its
    verdict changes (a variation flag inconclusive after two runs may be decided by a later one,
    and undecided again by the next): ``emitted`` maps a flag to the verdict last streamed."""
    if len(results) < 2 and spec.runs > 1:
        return
    partial = variation_report(
        spec.personality, results, window_sizes_s=spec.window_sizes_s, threshold=spec.threshold,
        dirty_expire_centisecs=dirty.get("dirty_expire_centisecs"),
        dirty_writeback_centisecs=dirty.get("dirty_writeback_centisecs"))
    for flag in partial.flags:
        key = flag_key(flag)
        if key in emitted and emitted[key] == flag.get("verdict"):
            continue
        emitted[key] = flag.get("verdict")
        details = {k: v for k, v in flag.items() if k not in ("kind", "note")}
        provisional = (f"from {len(results)} of {spec.runs} runs: the test of all runs at the end replaces it"
                       if len(results) < spec.runs else "")
        ctx.emit(Finding(flag=flag["kind"], title=flag_title(flag), note=flag["note"], provisional=provisional,
                         fields={"after_runs": len(results), **details}))
