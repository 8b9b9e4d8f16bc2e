"""The Lab: the seed papers' findings as lessons that check themselves.

Pick a scenario or one of its findings (left), read what the paper saw and why (right), press
**r** to run it (the finding's probes only, or the whole scenario, in the quick version) in a
thread worker -- the engine jobs are child processes, the UI never waits -- and watch its
progress lines, then each finding's paper number, today's expectation, the measurement and
the verdict with its reason. **o** replays the runs it recorded in the usual views (heatmap,
flags, figures). A result is kept with the runs it made (``lab.json``, :func:`replicate.keep`):
the table shows the highlighted scenario's or finding's last result, after a restart too."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Header, Log, Markdown, Tree

from fsscope import replicate, store
from fsscope.errors import FsscopeError
from fsscope.format import format_measure
from fsscope.replicate.base import Result
from fsscope.tui.replay import load_run
from fsscope.tui.screens.base import AppScreen
from fsscope.tui.screens.live import LiveScreen
from fsscope.tui.widgets.fit_footer import FitFooter
from fsscope.tui.widgets.table_export import Table

VERDICT_STYLE = {"agree": "bold green", "disagree": "bold red", "inconclusive": "bold yellow"}


class LabScreen(AppScreen):
    """Scenarios and findings; run one quick and see its verdict."""

    DEFAULT_CSS = """
    LabScreen #lab-body { height: 1fr; }
    LabScreen #lab-tree { width: 46; border: round $primary; }
    LabScreen #lab-right { width: 1fr; }
    LabScreen #lab-text { height: 1fr; border: round $primary; }
    LabScreen #lab-log { height: 8; border: round $secondary; }
    LabScreen #lab-verdicts { height: auto; max-height: 14; border: round $secondary; }
    """
    BINDINGS = [
        Binding("r", "run", "Run (quick)"),
        Binding("o", "open_runs", "Replay runs"),
        Binding("escape", "app.pop_screen", "Back"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.lessons = {s["name"]: s for s in replicate.lessons()}
        self.running: str | None = None
        """What is running (a scenario or scenario/finding), None when idle."""
        self.result: Result | None = None
        """The result in the table, as ``fsscope replicate --json`` writes it."""
        self.kept: dict[str, tuple[str, Result]] = {}
        """Each selection's last result and a run it made (kept in the run records)."""
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="lab-body"):
            tree: Tree[tuple[str, str | None]] = Tree("seed papers", id="lab-tree")
            tree.show_root = False
            for name, lesson in self.lessons.items():
                node = tree.root.add(f"{name}  (~{lesson['quick_cost_s'] / 60:.0f} min quick)",
                                     data=(name, None), expand=True)
                for finding in lesson["findings"]:
                    node.add_leaf(finding["id"], data=(name, finding["id"]))
            yield tree
            with Vertical(id="lab-right"):
                with VerticalScroll(id="lab-text"):
                    yield Markdown(id="lab-lesson")
                yield Log(id="lab-log", auto_scroll=True)
                table: DataTable = Table(id="lab-verdicts", cursor_type="row", zebra_stripes=True)
                yield table
        yield FitFooter()

    def on_mount(self) -> None:
        self.title = "fsscope — Lab: the seed papers' findings, checked here"
        table = self.query_one("#lab-verdicts", DataTable)
        # the verdict first, and why beside it: the numbers behind it follow (off screen at 160
        # columns, the verdict was what a reader missed)
        table.add_columns("verdict", "finding", "why", "measured", "expected today", "paper")
        tree = self.query_one("#lab-tree", Tree)
        tree.focus()
        try:
            self.kept = replicate.kept()
        except OSError:  # an unreadable runs directory: no results to show again, the Lab still runs
            self.kept = {}
        self._show(*self.selected())

    # -- reading -----------------------------------------------------------------------------
    def selected(self) -> tuple[str, str | None]:
        node = self.query_one("#lab-tree", Tree).cursor_node
        return node.data if node is not None and node.data else (next(iter(self.lessons)), None)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        if event.node.data:
            self._show(*event.node.data)

    def _show(self, name: str, finding_id: str | None) -> None:
        lesson = self.lessons[name]
        parts = [f"# {lesson['title']}", f"*{lesson['paper']}*", "", lesson["lesson"], ""]
        findings = [f for f in lesson["findings"] if finding_id in (None, f["id"])]
        for f in findings:
            parts += [f"## {f['id']}", f"**The paper saw:** {f['claim']}", "", f"**Why:** {f['why']}", ""]
        parts += ["## Setup", *[f"- {line}" for line in lesson["setup"]], ""]
        what = f"finding **{finding_id}**" if finding_id else "the whole scenario"
        cost = next(f["quick_cost_s"] for f in findings) if finding_id else lesson["quick_cost_s"]
        parts.append(f"Press **r** to run {what} (quick, about {max(cost, 1)} s on a quiet machine).")
        self.query_one("#lab-lesson", Markdown).update("\n".join(parts))
        if not self.running:
            self._show_kept(self._key(name, finding_id))

    @staticmethod
    def _key(name: str, finding_id: str | None) -> str:
        return f"{name}/{finding_id}" if finding_id else name

    def _show_kept(self, key: str) -> None:
        """The selection's last result in the table (or an empty table saying there is none)."""
        kept = self.kept.get(key)
        if kept is None:
            self.result = None
            table = self.query_one("#lab-verdicts", DataTable)
            table.clear()
            table.border_title = f"{key}: no result yet (r runs it)"
            return
        run_id, result = kept
        self._fill(result, f"{key}: last result, run {run_id}")

    # -- running -----------------------------------------------------------------------------
    def action_run(self) -> None:
        if self.running:
            self.notify(f"{self.running} is still running.", severity="warning", timeout=4)
            return
        if any(not c.done.is_set() for c in self.fs_app.plan_controls):
            # two measured jobs at once on a small machine would each distort the other
            self.notify("A job is running on the live screen: let it end (or cancel it) first.",
                        severity="warning", timeout=5)
            return
        name, finding_id = self.selected()
        self.running = self._key(name, finding_id)
        self.result, self.error = None, None
        self.query_one("#lab-verdicts", DataTable).clear()
        self.query_one("#lab-verdicts", DataTable).border_title = f"{self.running}: running"
        log = self.query_one("#lab-log", Log)
        log.clear()
        log.write_line(f"running {self.running} (quick)…")
        self._run(name, [finding_id] if finding_id else None)

    @work(thread=True, exclusive=True, group="lab-run", description="running a replication")
    def _run(self, name: str, only: list[str] | None) -> None:
        log = self.query_one("#lab-log", Log)
        try:
            result = replicate.run(name, quick=True, only=only, progress=lambda line: self._to_ui(log.write_line, line))
            try:  # kept with its runs, so reopening the Lab shows it again
                replicate.keep(result, self._key(name, only[0] if only else None))
            except OSError as exc:
                self._to_ui(log.write_line, f"not kept across restarts: {exc.strerror or exc}")
        except FsscopeError as exc:  # a job that ended badly: one line, in the log
            self._to_ui(self._failed, str(exc))
            return
        except BaseException as exc:
            self._to_ui(self._failed, f"{type(exc).__name__}: {exc}")
            raise
        self._to_ui(self._finished, result)

    def _to_ui(self, callback, *args) -> None:
        """Hand a line or a result to the UI; once the app has gone (quit mid-run) drop it, so
        the engine job is still followed to its end (it cleans up) instead of abandoned."""
        try:
            self.app.call_from_thread(callback, *args)
        except RuntimeError:  # the app is no longer running
            pass

    def _failed(self, error: str) -> None:
        self.running, self.error = None, error
        self.query_one("#lab-log", Log).write_line(f"error: {error}")
        self.notify(error, title="Lab run failed", severity="error", timeout=8)

    def _finished(self, result: Result) -> None:
        key, self.running = self.running or result.scenario, None
        run_ids = [Path(r.run_dir).name for r in result.runs.values() if r.run_dir]
        self.kept[key] = (run_ids[0] if run_ids else "?", result)
        self._fill(result, f"{key}: kept with run{'s' if len(run_ids) > 1 else ''} {', '.join(run_ids)}")
        log = self.query_one("#lab-log", Log)
        for f in result.findings:
            log.write_line(f"{f.id}: {f.verdict} — {f.why}")
        log.write_line("done: o replays the recorded runs (heatmap, flags)")

    def _fill(self, result: Result, title: str) -> None:
        self.result = result
        table = self.query_one("#lab-verdicts", DataTable)
        table.clear()
        table.border_title = title
        for f in result.findings:
            table.add_row(Text(f.verdict, style=VERDICT_STYLE[f.verdict]), f.id, f.why,
                          *(format_measure(v, "—") for v in (f.measured, f.expected_today, f.paper)), key=f.id)

    # -- replaying -----------------------------------------------------------------------------
    def run_dirs(self) -> list[str]:
        return [r.run_dir for r in self.result.runs.values() if r.run_dir] if self.result else []

    def action_open_runs(self) -> None:
        dirs = self.run_dirs()
        if not dirs:
            self.notify("Nothing recorded yet: run a finding first (r).", timeout=4)
            return
        self._replay(dirs)

    @work(thread=True, exclusive=True, group="lab-replay", description="reading the lab's runs")
    def _replay(self, dirs: list[str]) -> None:
        try:
            records = [load_run(store.RunDir(Path(d))) for d in dirs]
        except FsscopeError as exc:
            self.app.call_from_thread(self.notify, str(exc), title="Unreadable run record", severity="error")
            return
        for record in reversed(records):  # the first run on top; escape goes to the next
            self.app.call_from_thread(self.app.push_screen, LiveScreen(record=record))
