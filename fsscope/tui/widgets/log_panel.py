"""Every external command the job ran (mkfs, mount, losetup, …) with its result, and the
job's own messages."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

from fsscope.format import visible


class LogPanel(RichLog):
    DEFAULT_CSS = """
    LogPanel { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None):
        # wrapped: at 80 columns the log is 38 wide and its lines lost their ends ("…page cach")
        super().__init__(id=id, max_lines=5000, wrap=True, min_width=20, markup=False, highlight=False)
        self.lines_written: list[str] = []

    def command(self, line: str, stderr: str = "") -> None:
        failed = "→ exit " in line and "→ exit 0 " not in line and not line.rstrip().endswith("→ exit 0")
        # a command line or message may quote a path someone else named: text, controls visible
        text = Text(visible(line), style="bold red" if failed else "")
        self.lines_written.append(line)
        self.write(text)
        for err in stderr.splitlines()[-6:]:
            self.lines_written.append("    " + err)
            self.write(Text("    " + visible(err), style="dim red" if failed else "dim"))

    def note(self, line: str, style: str = "dim") -> None:
        self.lines_written.append(line)
        self.write(Text(visible(line), style=style))
