"""The kernel's events under the bench's throughput chart: per Throughput-N window of the
drawn run, journal commits (J), writeback starts (w) and the bytes written to the device
(a bar per window), so a dip in the chart can be read against what the kernel did then."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from fsscope.tui.widgets.throughput_chart import BLOCKS, resample

if TYPE_CHECKING:
    from fsscope.workloads.bench_records import KernelWindows

LABEL = 9  # "journal  "


def strip_text(kernel: KernelWindows | None, columns: int) -> Text:
    """Three lines (journal commits, writeback starts, bytes written) resampled to
    ``columns`` columns."""
    if kernel is None:
        return Text("kernel: not traced", style="dim")
    width = max(8, columns - LABEL)
    out = Text()
    for label, counts, mark in (("journal", kernel.journal_commits, "J"), ("writebk", kernel.writeback_starts, "w")):
        values = resample([float(v) for v in counts], width)
        out.append(f"{label:<{LABEL}}", style="dim")
        out.append("".join(mark if (v or 0) > 0 else "·" for v in values) + "\n",
                   style="bold yellow" if mark == "J" else "bold cyan")
    written = resample([float(v) for v in kernel.bytes_written], width)
    top = max((v or 0 for v in written), default=0) or 1.0
    out.append(f"{'written':<{LABEL}}", style="dim")
    out.append("".join(BLOCKS[min(len(BLOCKS) - 1, round((v or 0) / top * (len(BLOCKS) - 1)))]
                       for v in written), style="green")
    out.append(f"  max {top / 2**20:.1f} MiB/{kernel.window_s:g} s", style="dim")
    return out


class KernelStrip(Static):
    DEFAULT_CSS = """
    KernelStrip { height: 3; padding: 0 1; display: none; }
    """

    def show(self, kernel: KernelWindows | None) -> None:
        """Draw the run's kernel windows; an untraced run hides the strip (the chart keeps
        its height)."""
        self.kernel = kernel
        self.display = kernel is not None
        self.update(strip_text(kernel, self.size.width or 80))

    @property
    def text(self) -> str:
        return str(self.content)
