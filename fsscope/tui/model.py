"""What the live and replay views show, as plain data (numpy + dataclasses, no Textual).

The job worker turns events into messages; handlers feed them into these objects; widgets
read from them. Keeping the state here means a replayed run (from its run directory) and a
live run go through exactly the same code.
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fsscope.engine.events import Finding, finding_from_dict, findings_from_report
from fsscope.format import format_bytes, visible
from fsscope.records import SpecRecord, plain

NOT_MEASURED = -1
SPARK_POINTS = 240  # points kept per sparkline


def number(value: Any) -> float | None:
    """A record's number as a float; None when missing, not a number, or not finite."""
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


# --------------------------------------------------------------------------------------------
# Jobs: phase, progress, time


@dataclass
class JobState:
    """One job of a plan as the progress panel shows it."""

    index: int
    job: str
    spec: SpecRecord | None = None  # the job's Spec (None: a recorded spec that no longer decodes)
    spec_data: dict = field(default_factory=dict)  # the same as plain data, for the models that read a dict
    run_id: str = ""
    run_path: str = ""
    phase: str = "waiting"
    done: float = 0.0
    total: float | None = None
    unit: str = ""
    status: str = "waiting"  # waiting | running | ok | failed | cancelled | interrupted
    error: str | None = None
    report: Any = None  # its Report record (a dict for a job whose report is not typed yet)
    started_s: float | None = None  # time.monotonic() in the UI process
    ended_s: float | None = None
    recorded_elapsed_s: float | None = None  # replay: from the event times
    progress_elapsed_s: float | None = None  # elapsed when the fraction last moved (the estimate's basis)
    estimate: tuple[float, float] | None = None  # (seconds left, elapsed then): the job's model's own
    stopping: str = ""  # "cancelling" or "killing" once the user asked, until the job has ended

    def __post_init__(self) -> None:
        if self.spec is not None and not self.spec_data:
            self.spec_data = plain(self.spec)

    @property
    def finished(self) -> bool:
        return self.status not in ("waiting", "running")

    def start(self, now_s: float | None = None) -> None:
        self.started_s = time.monotonic() if now_s is None else now_s
        self.status = "running"
        self.phase = "starting"

    def finish(self, status: str, now_s: float | None = None) -> None:
        self.status = status
        self.ended_s = time.monotonic() if now_s is None else now_s

    def elapsed_s(self, now_s: float | None = None) -> float:
        if self.recorded_elapsed_s is not None:
            return self.recorded_elapsed_s
        if self.started_s is None:
            return 0.0
        end = self.ended_s if self.ended_s is not None else (time.monotonic() if now_s is None else now_s)
        return max(0.0, end - self.started_s)

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return max(0.0, min(1.0, self.done / self.total))

    def set_progress(self, done: float, total: float | None, unit: str = "", now_s: float | None = None) -> None:
        moved = (done, total) != (self.done, self.total)
        self.done, self.total, self.unit = done, total, unit
        if moved:
            self.progress_elapsed_s = self.elapsed_s(now_s)

    def set_estimate(self, remaining_s: float, now_s: float | None = None) -> None:
        """The job's model knows better than the bar's fraction (the ager: ops left at its rate)."""
        self.estimate = (remaining_s, self.elapsed_s(now_s))

    def remaining_s(self, now_s: float | None = None) -> float | None:
        """The job model's estimate when it gave one, else a linear estimate from progress so
        far; None when nothing can be said yet. Between two reports it counts down from the
        last estimate (recomputed from the clock, it grew while a coarse bar sat at 50 %);
        0.0 once past it."""
        if self.finished:
            return 0.0
        if self.estimate is not None:
            left, at = self.estimate
            return max(0.0, left - (self.elapsed_s(now_s) - at))
        frac = self.fraction
        if frac is None or frac <= 0.0:
            return None
        elapsed = self.elapsed_s(now_s)
        basis = self.progress_elapsed_s if self.progress_elapsed_s is not None else elapsed
        return max(0.0, basis / frac - elapsed)


# --------------------------------------------------------------------------------------------
# Latency matrix: runs x files


class LatencyMatrix:
    """runs x files int64 ns, -1 = not measured; grows as samples arrive.

    ``version`` changes on every write, so views can cache what they derived from it."""

    def __init__(self, runs: int = 1, files: int = 0):
        self._values = np.full((max(1, runs), max(16, files)), NOT_MEASURED, dtype=np.int64)
        self.runs = max(1, runs)
        self.files = max(0, files)
        self.version = 0
        self.measured = 0

    @classmethod
    def from_array(cls, array: np.ndarray) -> LatencyMatrix:
        values = np.asarray(array, dtype=np.int64)
        if values.ndim == 1:
            values = values.reshape(1, -1)
        out = cls(values.shape[0], values.shape[1])
        out._values[:, : values.shape[1]] = values
        out.files = values.shape[1]
        out.measured = int((values >= 0).sum())
        out.version = 1
        return out

    @property
    def values(self) -> np.ndarray:
        """The measured part, runs x files (a view)."""
        return self._values[: self.runs, : self.files]

    def put(self, run: int, start: int, latency_ns: Iterable[int]) -> tuple[int, int, int]:
        """Write a batch of run ``run`` starting at file ``start``; returns (run, start, stop)."""
        batch = np.asarray(latency_ns, dtype=np.int64)
        stop = start + batch.size
        rows, cols = self._values.shape
        if run >= rows or stop > cols:
            new_rows = max(rows, run + 1)
            new_cols = max(cols, stop if stop <= cols else max(stop, cols * 2))
            grown = np.full((new_rows, new_cols), NOT_MEASURED, dtype=np.int64)
            grown[:rows, :cols] = self._values
            self._values = grown
        self._values[run, start:stop] = batch
        self.runs = max(self.runs, run + 1)
        self.files = max(self.files, stop)
        self.measured += int((batch >= 0).sum())
        self.version += 1
        return run, start, stop

    def value(self, run: int, index: int) -> int:
        if 0 <= run < self.runs and 0 <= index < self.files:
            return int(self._values[run, index])
        return NOT_MEASURED

    def all_measured(self) -> np.ndarray:
        v = self.values
        return v[v >= 0]


# --------------------------------------------------------------------------------------------
# Sparkline series


def window_calls_for(files: int, runs: int) -> int:
    """Calls per sparkline window: about 100 windows over the whole job, 16..4096 calls."""
    return int(min(4096, max(16, (max(1, files) * max(1, runs)) // 100)))


class WindowStats:
    """Latency percentiles per window of consecutive calls, and calls/s per batch.

    Sparklines scale min..max, so one spike would flatten the rest: the series they get are
    log10 of µs (``*_log``) and plain Python lists, never numpy arrays.
    """

    def __init__(self, window_calls: int = 64, points: int = SPARK_POINTS):
        self.window_calls = window_calls
        self.p50_us: deque[float] = deque(maxlen=points)
        self.p99_us: deque[float] = deque(maxlen=points)
        self.calls_per_s: deque[float] = deque(maxlen=points)
        self._pending: list[np.ndarray] = []
        self._pending_n = 0
        self._last_t: dict[int, float] = {}

    def add(self, latency_ns: np.ndarray, *, run: int = 0, t_s: float | None = None) -> None:
        values = latency_ns[latency_ns >= 0]
        if t_s is not None:
            last = self._last_t.get(run)
            if last is not None and t_s > last and values.size:
                self.calls_per_s.append(values.size / (t_s - last))
            self._last_t[run] = t_s
        if not values.size:
            return
        self._pending.append(values)
        self._pending_n += values.size
        if self._pending_n < self.window_calls:
            return
        joined = np.concatenate(self._pending)
        full = (joined.size // self.window_calls) * self.window_calls
        if full:
            windows = joined[:full].reshape(-1, self.window_calls)
            p50, p99 = np.percentile(windows, [50, 99], axis=1)
            self.p50_us.extend((p50 / 1e3).tolist())
            self.p99_us.extend((p99 / 1e3).tolist())
        rest = joined[full:]
        self._pending = [rest] if rest.size else []
        self._pending_n = rest.size

    @staticmethod
    def log_series(values: Iterable[float]) -> list[float]:
        return [math.log10(max(v, 1e-3)) for v in values]

    @classmethod
    def from_matrix(cls, matrix: np.ndarray, window_calls: int | None = None) -> WindowStats:
        """A replay's series: the runs' calls in order, cut into windows."""
        runs, files = matrix.shape if matrix.ndim == 2 else (1, matrix.size)
        stats = cls(window_calls or window_calls_for(files, runs), points=10_000)
        for row in np.atleast_2d(matrix):
            stats.add(np.asarray(row))
        return stats


class Series:
    """A latest-values series for a gauge sparkline (IOPS, MB/s, CPU)."""

    def __init__(self, points: int = SPARK_POINTS):
        self.values: deque[float] = deque(maxlen=points)

    def add(self, value: float) -> None:
        self.values.append(float(value))

    @property
    def last(self) -> float | None:
        return self.values[-1] if self.values else None


# --------------------------------------------------------------------------------------------
# Flags (findings)


@dataclass(frozen=True)
class Flag:
    """A finding as the flags panel shows it: what, where (file indices) and why (note);
    ``finding`` the record it came from (its structure, kernel side, numbers)."""

    title: str
    note: str
    kind: str
    indices: tuple[int, ...]
    finding: Finding
    withdrawn: str = ""
    """Why a flag raised while the job ran did not survive its final test (empty: it stands)."""

    @property
    def where(self) -> str:
        if not self.indices:
            return ""
        if len(self.indices) == 1:
            return f"file {self.indices[0]}"
        if len(self.indices) <= 4:
            return "files " + ", ".join(str(i) for i in self.indices)
        return f"files {self.indices[0]}…{self.indices[-1]} ({len(self.indices)})"


def flag_from_event(event: Finding | Mapping[str, Any]) -> Flag:
    """The flags panel's entry for a finding (a record, or its wire dict)."""
    if not isinstance(event, Finding):
        event = finding_from_dict({k: v for k, v in event.items() if k not in ("t", "kind")})
    title, note = event.title, event.note
    before, after = number(event.fields.get("before_ns")), number(event.fields.get("after_ns"))
    if event.flag == "levelshift" and before is not None and after is not None and 0 < after < before \
            and not event.structure:
        # calls got faster: no slowdown to explain ("repeatable, unexplained" read as a problem)
        title = (f"calls {(1 - after / before):.0%} faster from file {event.index} on: "
                 f"{before / 1e3:.1f} → {after / 1e3:.1f} µs — a speed-up, not a slowdown")
        note = ("From this file on, every run's calls are faster than before it: a step down in "
                "latency, repeatable across runs. Nothing here is slow; a cache or a data structure "
                "that warmed up (or a faster path the file system took) is the usual reason."
                + (f" ({note})" if note and note != "repeatable, unexplained" else ""))
    if event.flag == "verdict" and note:
        # check's verdict: each fix line starts with its audit item's id ("[other-io] …", what
        # the command line's output names); here the item in words, as the check table does
        note = _FIX_ITEM.sub(lambda m: m.group(1).replace("-", " ").replace("_", " ") + ": ", note)
    return Flag(title=title, note=note, kind=event.flag, indices=event.file_indices(), finding=event)


_FIX_ITEM = re.compile(r"^\[([a-z0-9_-]+)\] ", re.MULTILINE)


def with_withdrawn(streamed: list[Flag], final: list[Flag], why: str) -> list[Flag]:
    """The final flags, then each streamed one the final test did not keep, marked with
    ``why``: a flag that vanished without a word read as if the screen had lost it."""
    kept = {flag_key(f) for f in final}
    gone = [replace(f, withdrawn=why) for f in streamed if flag_key(f) not in kept and not f.withdrawn]
    return list(final) + gone


def flag_key(flag: Flag) -> tuple:
    """What stays the same when a flag is recomputed with more runs (its title and numbers
    change): kind, where it starts, its stride, its window, its structure, what it names (``id``:
    a study's configuration)."""
    f = flag.finding
    return (flag.kind, flag.indices[0] if flag.indices else None, f.stride, f.window_s, f.structure, f.id)


def note_flags(notes: Iterable[str]) -> list[Flag]:
    """A study's conclusions as flags (the flags panel and the notes are where a user looks;
    in the log they were cut-off lines beside "Flags (0)"): its first clause is the title."""
    out = []
    for note in notes:
        head = note.split(":")[0].split(". ")[0]
        title = head if len(head) <= 70 else head[:69].rsplit(" ", 1)[0] + "…"
        out.append(Flag(title=title, note=note, kind="note", indices=(), finding=Finding(flag="note", title=title, note=note)))
    return out


def flags_from_report(report: Any) -> list[Flag] | None:
    """The FINAL flags of a job's report, or None if it has none (see
    :func:`fsscope.engine.events.findings_from_report`)."""
    findings = findings_from_report(report)
    return None if findings is None else [flag_from_event(f) for f in findings]


PROSE = ((" -> ", " → "), ("->", "→"), (" -- ", " — "), (" // ", " ÷ "), (") // ", ") ÷ "))
"""Programmer's ASCII in notes (the explain rules write formulas in it), as people read it."""

KIND_WORDS = {"outlier": "repeatable outlier", "series": "series", "levelshift": "level shift",
              "lineargrowth": "linear growth", "threshold": "predicted threshold", "variation": "variation",
              "warmup": "warm-up", "periodic": "periodic", "window_disagrees": "windows disagree",
              "stop": "why it stopped", "stopped": "why it stopped", "note": "note",
              "other-io": "another process's I/O"}
"""A flag's kind in words (the notes panel and exports showed the internal name: levelshift)."""


def prose(text: str) -> str:
    for ascii_form, shown in PROSE:
        text = text.replace(ascii_form, shown)
    return text


def spec_words(spec: Mapping[str, Any], runs_made: int | None = None, sep: str = ", ") -> str:
    """A job's parameters as people read them: "files 777, runs 3, op creat" (not a dict);
    byte counts and seconds with their unit ("write 4 KiB", not "write bytes 4096"), yes/no
    (not True). ``runs_made``: the runs a probe made when its sequential test added some to
    those asked ("runs 8 (5 asked, up to 15)", as many as the heatmap's rows)."""
    words = []
    for key, value in spec.items():
        if value in (None, "", [], ()):
            continue
        name = key.replace("_", " ")
        if key.endswith("_bytes") and isinstance(value, int) and not isinstance(value, bool):
            text = f"{name.removesuffix(' bytes')} {format_bytes(value)}"
        elif key.endswith("_s") and isinstance(value, (int, float)) and not isinstance(value, bool):
            text = f"{name.removesuffix(' s')} {value:g} s"
        elif key == "runs" and runs_made is not None and runs_made != value:
            text = f"runs {runs_made} ({value} asked" + (f", up to {spec['max_runs']})" if spec.get("max_runs") else ")")
        else:
            text = f"{name} {_md_value(value)}"
        words.append(text)
    return sep.join(words)


def flags_markdown(flags: list[Flag], *, heading: str = "fsscope flags", context: list[str] | None = None,
                   error: str | None = None) -> str:
    """The flags with their notes as Markdown (the 'export flags' action); a job that failed
    says so and why (its export read "No flags were raised." and nothing else)."""
    lines = [f"# {md_text(heading)}", ""]
    for line in context or []:  # the run's target and recipe: names, shown as text
        lines.append(f"- {md_text(line)}")
    if context:
        lines.append("")
    if error:
        lines += [f"**The job failed:** {md_text(error)}", ""]
    if not flags:
        lines.append("No flags were raised" + (" (it stopped before its analysis)." if error else "."))
        return "\n".join(lines) + "\n"
    for n, flag in enumerate(flags, 1):
        if flag.withdrawn:
            lines.append(f"## {n}. ~~{flag.title}~~ (withdrawn: {flag.withdrawn})")
        else:
            lines.append(f"## {n}. {flag.title}")
        lines.append("")
        if flag.where:
            lines.append(f"*{KIND_WORDS.get(flag.kind, flag.kind)}* — {flag.where}")
            lines.append("")
        lines.append(prose(flag.note) if flag.note else "(no note)")
        extra = {k: v for k, v in plain(flag.finding.wire()).items() if k not in ("t", "kind", "title", "note", "indices")}
        if extra:
            lines.append("")
            lines.append("| field | value |")
            lines.append("|---|---|")
            for key, value in extra.items():
                lines.append(f"| {key} | {_md_cell(value)} |")
        lines.append("")
    return "\n".join(lines)


def _md_value(value: Any) -> str:
    """Numbers as people read them (0.4578, not 0.457769996761658); lists item by item."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_md_value(v) for v in value)
    return str(value)


def _md_cell(value: Any) -> str:
    text = _md_value(value)
    if len(text) > 120:
        text = text[:117] + "…"
    return md_text(text.replace("\n", " "))


_MD_ACTIVE = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|#!~"})


def md_text(text: object) -> str:
    """Text that may quote a name someone else chose, as Markdown shows it literally: control
    characters visible (``format.visible``), Markdown's own characters escaped (no link, no
    HTML, no heading or table cell made by a name)."""
    return visible(text).translate(_MD_ACTIVE)


# --------------------------------------------------------------------------------------------
# Comparing two runs


@dataclass(frozen=True)
class Summary:
    measured: int
    median_ns: float
    p99_ns: float
    max_ns: float

    @classmethod
    def of(cls, values_ns: np.ndarray) -> Summary:
        v = values_ns[values_ns >= 0]
        if not v.size:
            return cls(0, float("nan"), float("nan"), float("nan"))
        p50, p99 = np.percentile(v, [50, 99])
        return cls(int(v.size), float(p50), float(p99), float(v.max()))


# --------------------------------------------------------------------------------------------
# One job's view state


@dataclass
class JobView:
    """What one job has produced so far, live or replayed: per-file latencies (probe-shaped
    jobs), the flags, and the job's own model (``data``: a BenchModel, SyncWriteModel…, from
    :mod:`fsscope.tui.job_ui`; None for jobs shown through the latency matrix)."""

    matrix: LatencyMatrix
    windows: WindowStats
    flags: list[Flag] = field(default_factory=list)
    data: Any = None
    job: str = ""
