"""The note of the selected flag: what was found, where, and what it means -- and, when the
job traced the kernel, the events that fired inside that call, each with what it means."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from fsscope.engine.events import KernelEvidence
from fsscope.format import visible
from fsscope.trace.catalog import lookup
from fsscope.tui.model import KIND_WORDS, Flag, prose

# ↑↓ move the heatmap's cursor while it has the focus: the flags list is reached with Tab
PLACEHOLDER = "Tab to the Flags list and pick a flag with ↑↓ (or click it) to read its note here."


class NotesPanel(VerticalScroll):
    DEFAULT_CSS = """
    NotesPanel { height: 1fr; }
    NotesPanel > Static { width: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static(PLACEHOLDER, id="note-text")

    @property
    def text(self) -> str:
        return str(self.query_one("#note-text", Static).content)

    def show(self, flag: Flag | None) -> None:
        static = self.query_one("#note-text", Static)
        if flag is None:
            static.update(PLACEHOLDER)
            return
        body = Text()
        if flag.withdrawn:
            body.append(f"Withdrawn: {flag.withdrawn}. What follows is what the runs so far had shown.\n\n",
                        style="bold yellow")
        elif flag.finding.provisional:
            body.append(f"Provisional: {flag.finding.provisional}.\n\n", style="yellow")
        body.append(visible(flag.title) + "\n", style="bold")
        structure = flag.finding.structure
        detail = [KIND_WORDS.get(flag.kind, flag.kind), flag.where,
                  # the structure, for searching the docs, unless the title names it already
                  f"structure {structure}" if structure and structure not in flag.title else ""]
        if flag.where:
            body.append(" · ".join(visible(part) for part in detail if part) + "\n\n", style="dim")
        body.append(prose(flag.note) if flag.note else "(no note)")
        if flag.finding.kernel is not None:
            body.append("\n\n")
            body.append_text(kernel_text(flag.finding.kernel))
        static.update(body)
        self.scroll_home(animate=False)


def kernel_text(kernel: KernelEvidence) -> Text:
    """The kernel's side of one flag: each event with the runs it fired in and its meaning,
    the block I/O the call issued, and what kept it off the CPU."""
    runs, members, calls = kernel.runs_traced, kernel.members or {}, kernel.calls
    where = f"these {calls} calls" if members else "this call"
    out = Text()
    out.append(f"Kernel events inside {where} ({runs} traced run{'s' if runs != 1 else ''})\n",
               style="bold")
    if not kernel.events:
        out.append("  none: the kernel did no traced work inside this call\n", style="dim")

    def order(item: tuple[str, int]) -> tuple:  # format changes first, then the most frequent
        entry = lookup(item[0])
        return (not (entry and entry.exclusive), -members.get(item[0], item[1]), item[0])

    for name, seen in sorted(kernel.events.items(), key=order):
        entry = lookup(name)
        meaning = entry.meaning if entry else ("a block read (metadata not in memory)" if name == "block_read" else "")
        out.append(f"  {name}", style="bold cyan")
        out.append(f"  {members.get(name, 0)}/{calls} calls" if members else f"  {seen}/{runs}")
        if meaning:
            out.append(f"  {meaning}", style="dim")
        out.append("\n")
    if kernel.io_requests:
        out.append(f"  block I/O: {kernel.io_requests} request{'s' if kernel.io_requests != 1 else ''}, "
                   f"{kernel.io_bytes / 1024:.0f} KiB\n")
    for cause in kernel.off_cpu:
        out.append(f"  {cause}\n")
    return out
