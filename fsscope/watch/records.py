"""The watch report and its events: typed records (msgspec), light to import (the CLI's
renderer and the TUI read them without the job's numpy work)."""

from __future__ import annotations

from fsscope.engine.events import DataRecord
from fsscope.records import Record, ReportRecord


class CauseRow(Record, frozen=True, kw_only=True):
    kind: str   # format | alloc | journal | writeback | cache-miss | other-io | kernel-io | cpu | blocked | none | sched-unknown | lost
    text: str


class SlowCall(Record, frozen=True, kw_only=True):
    """One slow call: who, what, when (s since the watch began), how long against its baseline,
    on which file or directory (None: could not be named), and why."""

    index: int
    tid: int
    comm: str = ""
    op: str
    start_s: float
    duration_us: float
    baseline_us: float
    local_baseline: bool = True   # False: its group was too small; judged against every call of its kind
    result: int = 0
    bytes: int = 0
    file: str | None = None
    dir: str | None = None
    causes: list[CauseRow] = []


class FormatChange(Record, frozen=True, kw_only=True):
    """A directory changing format where the kernel's own event marked it, with the rules'
    arithmetic for the names it held."""

    dir: str | None
    event: str
    call: int
    op: str
    entries_before: int           # names in the directory before the call (-1: not known)
    name_bytes: int               # the directory's typical name length, for the arithmetic
    predicted: int | None = None  # the names the arithmetic says it held when it changed
    matches: bool | None = None   # None: the rules give no exact index (a hash-dependent split)
    arithmetic: str = ""
    duration_us: float = 0.0
    slow: bool = False


class Repeat(Record, frozen=True, kw_only=True):
    """Slow calls that recur: ``op`` calls on ``where`` slow every ``stride`` calls."""

    op: str
    where: str | None
    calls: int
    slow: int
    stride: int
    hits: int                 # gaps between slow calls that were the stride
    cause: str = ""           # the cause most of them share
    title: str = ""


class OpSummary(Record, frozen=True, kw_only=True):
    op: str
    calls: int
    p50_us: float
    p99_us: float
    max_us: float
    slow: int
    bytes: int = 0
    unnamed: int = 0          # calls whose file or directory could not be named
    inconclusive: int = 0     # calls in a group of 3-8 whose own and op-wide baselines disagree
    # per time window of Report.window_s from the first call (None: no call of this op then):
    # the TUI's sparklines of the op over the watch
    p50_us_by_window: list[float | None] = []
    p99_us_by_window: list[float | None] = []
    calls_by_window: list[int] = []


class Loss(Record, frozen=True, kw_only=True):
    """What one tracefs instance's ring buffer lost (never dropped silently)."""

    instance: str
    overrun: int = 0
    dropped: int = 0
    pages_with_loss: int = 0


class WatchProgress(DataRecord, frozen=True, kw_only=True, tag="watch_progress"):
    """Every second while watching: how long, and how much the kernel has recorded so far."""

    elapsed_s: float
    raw_bytes: int
    tasks: int


class Report(ReportRecord, frozen=True, kw_only=True):
    watched: str = ""                 # "pid 123 (postfix)", "cgroup …", "command …"
    tids: list[int] = []              # the threads watched at attach
    comms: dict[str, str] = {}        # tid -> command (what the kernel recorded)
    fs: str = ""
    device: str | None = None
    tree: str = ""
    duration_s: float = 0.0
    exit_status: int | None = None    # watch -- COMMAND: the command's own
    calls: int = 0
    across_loss: int = 0              # entry/exit pairs with lost events between: not made calls
    unpaired_enters: int = 0
    unpaired_exits: int = 0
    unnamed: int = 0
    events: int = 0
    ops: list[OpSummary] = []
    window_s: float = 0.0             # the length of OpSummary's windows (0: none)
    slow_total: int = 0
    inconclusive_total: int = 0       # neither slow nor not: more calls on their file would decide
    slow: list[SlowCall] = []         # the slowest first, at most Spec.show_slow
    format_changes: list[FormatChange] = []
    repeats: list[Repeat] = []
    lost: list[Loss] = []
    lost_total: int = 0
    causes: dict[str, int] = {}       # slow calls per cause kind
    missing: list[str] = []           # events this kernel does not have
    notes: list[str] = []
