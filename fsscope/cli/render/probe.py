"""The report of ``fsscope probe``: latency per run, explained flags, the kernel's side."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from fsscope.explain.names import plain as plain_words
from fsscope.format import format_bytes, format_us
from fsscope.workloads.probe_records import LatencySummary, Report

MAX_FLAGS_SHOWN = 30


def render_probe(report: Report, console: Console) -> None:
    _render_stats(report, console)
    _render_flags(report, console)
    render_writers(report, console)
    render_kernel(report, console)
    render_decisions(report, console)
    if report.stopped_by:
        console.print(f"[red]stopped early:[/] {report.stopped_by}")


def _render_stats(report: Report, console: Console) -> None:
    """Latency statistics per run, over all runs, and of the low and high groups."""
    stats = report.stats
    completed = report.runs_completed if report.runs_completed is not None else report.runs
    table = Table(title=f"{report.op} × {report.files} files, {completed} of {report.runs} runs (latency in µs)",
                  title_justify="left")
    for col in ("", "count", "mean", "sd", "min", "p50", "p95", "p99", "max", "rsd"):
        table.add_column(col, justify="right", no_wrap=True)

    def row(label: str, s: LatencySummary) -> None:
        if not s.count:
            return
        table.add_row(label, str(s.count), *(format_us(v) for v in (s.mean_ns, s.sd_ns, s.min_ns, s.p50_ns,
                                                                      s.p95_ns, s.p99_ns, s.max_ns)),
                      f"{s.rsd or 0:.2f}")

    for i, s in enumerate(stats.per_run):
        row(f"run {i + 1}", s)
    row("all", stats.overall)
    row("low group", stats.low_high.low)
    row("high group", stats.low_high.high)
    console.print(table)


def _render_flags(report: Report, console: Console) -> None:
    """The explained flags first, then unexplained ones up to MAX_FLAGS_SHOWN; kernel-only thresholds."""
    flags = [f for f in report.flags or [] if f.flag != "other-io"]  # render_writers shows that one
    if not flags:
        console.print("no repeatable outliers, series or level shifts")
    if report.settings.single_run:
        console.print("[yellow]one run cannot tell structure from noise: every slow file is listed; "
                      "use --runs 3 or more[/]")
    explained = [f for f in flags if f.structure]
    unexplained = [f for f in flags if not f.structure][: max(0, MAX_FLAGS_SHOWN - len(explained))]
    shown = explained + unexplained
    for flag in explained:
        console.print(f"[bold yellow]▲[/] [bold]{flag.title}[/]")
        if flag.predicted_index is not None:
            console.print(f"    predicted at file {flag.predicted_index}")
        console.print(f"    {flag.note}", highlight=False)
    if unexplained:  # the quieter list: repeatable, but nothing names a cause
        console.print("[dim]repeatable, unexplained (no rule and no kernel event names a cause):[/]")
        for flag in unexplained:
            console.print(f"[dim]  · {escape(flag.title)}[/]", highlight=False)
    for threshold in [t for t in report.thresholds if t.evidence == "kernel"]:
        console.print(f"[bold cyan]●[/] [bold]file {threshold.index} — {plain_words(threshold.structure or '')}[/] "
                      f"(kernel evidence; latency: {threshold.latency})", highlight=False)
        console.print(f"    {threshold.note}", highlight=False)
    if len(flags) > len(shown):
        console.print(f"[dim]… and {len(flags) - len(shown)} more unexplained flags (all in --json and 'fsscope report')[/]")
    if report.noise_count:
        console.print(f"[dim]{report.noise_count} files were slow in too few runs to be structural (noise)[/]")
    chance = report.settings.outlier_chance
    if report.inconclusive_outliers and chance is not None:  # the 80 % rule's, not beyond chance
        more = (f"{chance.runs_to_decide} runs would decide" if chance.runs_to_decide
                else f"{chance.slow_runs_needed} slow runs of these would make one an outlier")
        console.print(f"[yellow]{len(report.inconclusive_outliers)} files slow in most runs are inconclusive: "
                      f"{chance.noise_rate:.1%} of calls were slow, so among {chance.files:,} files that "
                      f"happens by chance; {more}[/]")


def render_writers(report: Report, console: Console) -> None:
    """Other processes that did I/O on the probed device during the runs, and what that means."""
    for flag in [f for f in report.flags or [] if f.flag == "other-io"]:
        console.print(f"[bold red]▲[/] [bold]{escape(flag.title)}[/]", highlight=False)
        console.print(f"    {escape(flag.note)}", highlight=False)
    if not report.writers:
        return
    table = Table(title="other processes' I/O on the probed device (per run)", title_justify="left")
    for col in ("pid", "command", "read", "written", "MB/s (≤ device's)", "runs", "seen by"):
        table.add_column(col, justify="left" if col in ("command", "seen by") else "right")
    for w in report.writers:
        command = Text(w.command) + (Text(f" ×{w.tasks}, exited") if w.tasks > 1 else Text(" (exited)") if w.exited
                                     else Text(""))
        table.add_row(str(w.pid), command, format_bytes(w.read_bytes), format_bytes(w.write_bytes),
                      f"{w.bytes_per_s / 1e6:,.1f}", _indices([r + 1 for r in w.runs]), w.seen_by)
    console.print(table)
    if report.writers_watched:
        console.print(f"[dim]watched: {escape(report.writers_watched)}[/]", highlight=False)


def render_decisions(report: Report, console: Console) -> None:
    """How many runs the probe needed and why; calls the machine disturbed; the sync used."""
    decisions = report.decisions
    if decisions is not None and decisions.why:
        undecided = [c.index for c in decisions.candidates if c.verdict == "undecided"]
        console.print(f"[dim]runs: {decisions.why}"
                      + (f"; undecided: files {_indices(undecided)}" if undecided else "") + "[/]", highlight=False)
    disturbed = report.settings.disturbed_calls_per_run
    if disturbed and sum(disturbed):
        count = sum(disturbed)
        console.print(f"[dim]{count} call{' was' if count == 1 else 's were'} slow only because another task had the CPU "
                      f"(per run: {', '.join(map(str, disturbed))}); they did not vote[/]", highlight=False)
    if report.sync is not None:
        console.print(f"[dim]sync: {report.sync.note}[/]", highlight=False)


def _indices(values: list[int], limit: int = 6) -> str:
    if not values:
        return "-"
    text = ", ".join(str(v) for v in values[:limit])
    return text + (f", … ({len(values)})" if len(values) > limit else "")


def render_kernel(report: Report, console: Console) -> None:
    """The kernel's side: per structure predicted / seen / slow, and one-off noise causes."""
    trace = report.trace
    if trace is None or not trace.active:
        if trace is not None and trace.reason and trace.mode != "off":
            console.print(f"[dim]kernel tracing off: {trace.reason}[/]", highlight=False)
        return
    runs = trace.runs_traced
    table = Table(title=f"structures: geometry vs kernel ({len(runs)} traced run{'s' if len(runs) != 1 else ''}) "
                        f"vs latency", title_justify="left")
    for col in ("structure", "predicted at", "kernel saw it at", "slow at", "verdict"):
        table.add_column(col, overflow="fold")
    for row in report.structures:
        verdict = row.verdict
        style = "green" if verdict.startswith("confirmed") and "contradicts" not in verdict else (
            "red" if verdict.startswith("contradicted") or "contradicts" in verdict else "dim")
        if row.window:
            style = "yellow"
        predicted = f"range {row.window[0]}–{row.window[1]}" if row.window else _indices(row.predicted)
        table.add_row(row.structure, predicted, _indices(row.seen), _indices(row.slow), f"[{style}]{verdict}[/]")
    console.print(table)
    kernel_marked = {i for t in report.thresholds if t.evidence == "kernel"
                     for i in t.indices or ([] if t.index is None else [t.index])}  # already shown as thresholds
    quiet = [e for e in report.structural_events
             if not e.latency_outlier and e.event.startswith(("xfs_dir2_", "ext4_allocate"))
             and e.event != "xfs_dir2_grow_inode" and e.index not in kernel_marked]
    for event in quiet[:10]:
        console.print(f"[cyan]●[/] {event.event} at file {event.index} in {event.runs}/{len(runs)} "
                      f"traced runs, not a latency outlier", highlight=False)
    for item in report.noise[:5]:
        console.print(f"[dim]one-off: run {item.run + 1} file {item.index} {item.latency_ns / 1e3:.0f} µs: "
                      f"{item.cause}[/]", highlight=False)
    if trace.median_ratio_vs_untraced is not None:
        console.print(f"[dim]the traced run's median call took {trace.median_ratio_vs_untraced:.2f}× the "
                      f"untraced runs' (observer effect; the flags come from the untraced runs)[/]", highlight=False)
    if not trace.complete:
        console.print(f"[red]trace incomplete:[/] {trace.overrun} overrun, {trace.dropped} dropped")
