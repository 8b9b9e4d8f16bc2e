"""The report of ``fsscope age`` (target against actual distributions, fresh vs aged
fragmentation, the snapshot) and of ``fsscope profile show``."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fsscope.aging.job import FitResult, Report
from fsscope.cli.render.frag import format_p, render_errors, render_histograms
from fsscope.format import format_bytes, format_pct, visible
from fsscope.layout.records import Measurement
from fsscope.layout.summary import frag_table

BAR = "█"
BAR_WIDTH = 30
DISTRIBUTIONS = ("size", "depth", "age")
TITLES = {"size": "file size", "depth": "directory depth", "age": "relative age (youngest first)"}


def _bar(fraction: float, top: float, style: str) -> str:
    n = 0 if not top else int(round(fraction / top * BAR_WIDTH))
    return f"[{style}]{BAR * n}[/]" if n else ""


def _fit_bar(target: float, actual: float, top: float) -> str:
    """The actual share as a bar, the target share as a mark "┃" on the same line."""
    n_actual = 0 if not top else int(round(actual / top * BAR_WIDTH))
    n_target = 0 if not top else min(BAR_WIDTH, int(round(target / top * BAR_WIDTH)))
    cells = [BAR if i < n_actual else " " for i in range(BAR_WIDTH + 1)]
    mark = max(0, n_target - 1) if n_target else 0
    cells[mark] = "[bold yellow]┃[/]"
    return "[cyan]" + "".join(cells).rstrip() + "[/]"


def render_fit(name: str, fit: FitResult, console: Console) -> None:
    """One distribution, target against actual, with bars."""
    table = Table(title=f"{TITLES.get(name, name)}: chi-squared p = {format_p(fit.p_value)}",
                  title_justify="left")
    for col in ("bucket", "target", "actual", "files"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("actual █  target ┃", justify="left", no_wrap=True)
    actuals = [a or 0.0 for a in fit.actual]
    top = max([*fit.target, *actuals, 0.0])
    counts: list[int | None] = list(fit.counts) or [None] * len(fit.target)
    for label, t, a, c in zip(fit.labels, fit.target, actuals, counts):
        table.add_row(str(label), format_pct(t, "-"), format_pct(a, "-"), "-" if c is None else f"{c:,}", _fit_bar(t, a, top))
    console.print(table)


def render_age(report: Report, console: Console) -> None:
    _render_head(report, console)
    fits = report.fit
    for name in DISTRIBUTIONS:
        if name in fits:
            render_fit(name, fits[name], console)
    console.print("fit: " + ", ".join(f"{name} p = {format_p(fits[name].p_value if name in fits else None)}"
                                      for name in DISTRIBUTIONS), highlight=False)
    if report.fresh or report.aged:
        _render_fresh_vs_aged(report.fresh, report.aged, console)
    _render_kept(report, console)
    _render_notes(report, console)
    console.print(f"[dim]op log sha256 {report.op_log_sha256}[/]")


def _render_head(report: Report, console: Console) -> None:
    """Profile, seed and target; why it stopped; ops, fullness, overwrites, live files."""
    where = report.recipe or report.fs or "a directory"
    target = report.target.describe if report.target else ""
    resumed = " (resumed)" if report.resumed else ""
    # the profile's name is a captured tree's directory name; recipe and target name files: text
    console.print(Text.assemble(("aged", "bold"), " with profile ", (visible(report.profile), "bold"),
                                f" (seed {report.seed}) on ", (visible(where), "bold"), f" {visible(target)}{resumed}"))
    style = {"enospc": "yellow", "cancelled": "yellow", "no_room": "yellow"}.get(report.stop_reason or "", "green")
    console.print(f"stopped: [{style}]{report.stop_reason}[/] — {report.stop_note}", highlight=False)
    bound = report.convergence_ops
    console.print(
        f"{report.ops:,} ops ({report.session_ops:,} this session) in "
        f"{report.elapsed_s:.1f} s = [bold]{report.ops_per_s:,.0f}[/] ops/s · "
        f"fullness [bold]{format_pct(report.fullness, '-')}[/] (target {format_pct(report.target_fullness, '-')}) · "
        + (f"allocated {report.allocated_capacity_turnover or 0:.2f}× capacity (--fallocate: nothing "
           "written) · " if report.fallocate else f"overwrites {report.overwrites:.2f}× · ")
        + f"{report.live_files:,} live files ({format_bytes(report.live_bytes)})"
        + (f" · convergence bound T = {bound:,} ops" if bound else ""), highlight=False)


def _render_fresh_vs_aged(fresh: Measurement | None, aged: Measurement | None, console: Console) -> None:
    table = Table(title="fragmentation: fresh vs aged", title_justify="left")
    for col in ("", "fresh", "aged", "aged / fresh"):
        table.add_column(col, justify="right", no_wrap=True)
    for row in frag_table(fresh, aged):
        table.add_row(*row)
    console.print(table)
    if fresh and fresh.from_run:
        console.print(f"[dim]fresh numbers from run {fresh.from_run} (this run resumed the aged image)[/]")
    render_histograms([("fresh", fresh), ("aged", aged)], console, "free-space extent histogram")
    render_errors("fresh", fresh, console)
    render_errors("aged", aged, console)


def _render_kept(report: Report, console: Console) -> None:
    """What stays on disk: the snapshot (or why none), the aged image."""
    snap = report.snapshot
    if snap and snap.method:
        console.print(f"snapshot: [bold]{snap.path}[/] ({snap.method}, {format_bytes(snap.size_bytes)} "
                      f"apparent, {format_bytes(snap.allocated_bytes)} allocated, {snap.seconds or 0:.1f} s) — "
                      f"measure on it with --from-snapshot {snap.path}", highlight=False)
    elif snap and snap.skipped:
        console.print(f"[yellow]no snapshot[/]: {snap.skipped}")
    if report.image and report.target and report.target.kind == "image":
        console.print(f"aged image kept (unmounted): {report.image} — age further with --resume",
                      highlight=False)


def _render_notes(report: Report, console: Console) -> None:
    for note in report.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    if report.stop_reason == "enospc":
        console.print("[yellow]note:[/] the file system filled up before the plan did — a normal outcome: some "
                      "file systems cannot sustain some profiles at some fullness (metadata, block rounding). "
                      "The aged tree is consistent and usable.", highlight=False)
    if report.workers > 1:
        console.print(f"[dim]note: {report.workers} workers ran the same seeded operation sequence (same op-log "
                      "hash); their interleaving on disk differs between runs, so block placement may too[/]")
    if report.fallocate:
        console.print("[dim]note: --fallocate allocated blocks without writing data: unwritten extents, no delayed "
                      "allocation or writeback merging; copy-on-write/log-structured layouts not exercised as by "
                      "writes[/]")


def render_profile(profile, console: Console) -> None:
    from fsscope.aging.profile import distributions

    # a profile's name, description and provenance may quote a captured tree's path: text
    console.print(Text.assemble((f"profile {visible(profile.name)}", "bold"),
                                f": default fullness {profile.fullness:.0%}"))
    if profile.description:
        console.print(Text(f"  {visible(profile.description)}"))
    if profile.provenance:
        console.print(Text(f"  {visible(profile.provenance)}", style="dim"))
    for key, rows in distributions(profile).items():
        table = Table(title=TITLES[key], title_justify="left")
        table.add_column("bucket", justify="right", no_wrap=True)
        table.add_column("share", justify="right", no_wrap=True)
        if key == "depth":
            table.add_column("subdirs", justify="right", no_wrap=True)
        table.add_column("", no_wrap=True)
        top = max(r["fraction"] for r in rows)
        for r in rows:
            cells = [r["label"], format_pct(r["fraction"], "-")]
            if key == "depth":
                cells.append(str(r["subdirs"]))
            table.add_row(*cells, _bar(r["fraction"], top, "cyan"))
        console.print(table)
