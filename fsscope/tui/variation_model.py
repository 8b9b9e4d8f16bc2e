"""What the variation-study view shows, as plain data (no Textual): the paper's figures (Cao et
al., FAST'17) recomputed from the study's rows -- one row per configuration x personality, as
``treatments.ndjson`` holds it (per-run ops per 1-s bin and sparse per-op latency histograms).

Live, the job sends each row as it is recorded (a ``variation_row`` event); a replay reads the
same rows from the study's ``treatments.ndjson``. Both go through :meth:`add_row`, and every
figure is a function of the rows alone, so a replay shows what the live view showed.

- Fig. 1: per personality, each configuration's runs (cumulative ops/s) as a range, sorted by
  the relative range; and mean ops/s vs relative range, one point per configuration.
- Fig. 2: the same configurations across the personalities (relative range, mean ops/s).
- Fig. 6: per personality and file system, the CDF of the Throughput-N relative range over
  all windows of all configurations, per window size.
- Fig. 7: one configuration's Throughput-N over time, each run normalised by its maximum.
- Fig. 8: one configuration's per-op latency distribution per run, and the K-S range per op.
- Fig. 9: across configurations, the PCC of each op's latency K-S range with the throughput
  relative range (with its p-value), per personality and file system.
- Knob levels: the flagged configurations (relative range above the threshold), and per knob
  level the mean relative range and how many of its configurations are flagged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fsscope.analysis.levels import knob_levels, pearson_with_p
from fsscope.analysis.variation.grid import bucket_mid_ns
from fsscope.analysis.variation.metrics import (
    Bands,
    relative_range_cdf,
    throughput_bands,
    throughput_n,
    window_relative_ranges,
)
from fsscope.engine.events import Event, Finding
from fsscope.format import format_pct
from fsscope.study.execute import ROWS_FILE, load_rows
from fsscope.study.plan import Failed
from fsscope.study.space import Level
from fsscope.study.variation import BIN_S, Report, RowDone, Spec, TreatmentDone, VariationRow, configuration_stats
from fsscope.tui.model import Flag, note_flags
from fsscope.tui.report_model import spec_of

FIGURES = ("1", "2", "6", "7", "8", "9", "k")
FIGURE_TITLES = {  # short enough for the ~60-column body beside the flags
    "1": "Fig. 1 · each run's throughput per configuration, by range",
    "2": "Fig. 2 · the same configurations across workloads",
    "6": "Fig. 6 · CDF of the Throughput-N relative range per window",
    "7": "Fig. 7 · Throughput-N over time / each run's maximum",
    "8": "Fig. 8 · per-op latency CDF of each run, K-S range",
    "9": "Fig. 9 · latency K-S range vs throughput range (PCC)",
    "k": "Flagged configurations and their knob levels",
}
WINDOWS_S = (1, 2, 5, 10, 30, 60, 120, 400)  # Throughput-N sizes shown when they fit the runs
QUANTILES = np.linspace(0.0, 1.0, 41)  # the latency CDF of a run, kept as quantiles (every 2.5 %)
STRONG_PCC = 0.7  # the paper's line for a strong correlation



@dataclass
class Configuration:
    """One configuration x personality (a study row), with its statistics."""

    id: str
    label: str           # fs-row: the same configuration under every personality
    fs: str
    personality: str
    knobs: dict[str, Level]
    ops_per_s: list[float]                      # per run (cumulative throughput)
    mean_ops_per_s: float
    relative_range: float | None
    ks_range: float | None                      # largest over ops
    ks_range_per_op: dict[str, float | None]
    counts_per_bin: list[np.ndarray]            # per run, ops per 1-s bin
    latency_quantiles_ns: dict[str, list[list[float]]] = field(default_factory=dict)  # op -> per run
    mkfs_opts: list[str] = field(default_factory=list)
    mount_opts: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The configuration in words: "ext4 configuration 3 under varmail" (its id,
        ext4:varmail-2-r0, is the study's key: a code name, not a label)."""
        number = self.label.rsplit("-", 1)[-1]
        shown = int(number) + 1 if number.isdigit() else number
        return f"{self.fs} configuration {shown} under {self.personality}"


def hist_quantiles_ns(sparse: list[list[int]], quantiles: Sequence[float] | np.ndarray = QUANTILES) -> list[float]:
    """Latency (bucket middle) at each quantile of a sparse histogram on the shared grid
    ([[bucket, count], ...] in bucket order, as the rows keep it)."""
    pairs = np.asarray(sparse, dtype=np.int64).reshape(-1, 2)
    cum = np.cumsum(pairs[:, 1])
    if pairs.size == 0 or cum[-1] == 0:
        return [math.nan] * len(quantiles)
    ranks = np.maximum(1, np.ceil(np.asarray(quantiles) * cum[-1])).astype(np.int64)
    return [float(v) for v in bucket_mid_ns(pairs[np.searchsorted(cum, ranks), 0])]


def quantile_at(quantiles_ns: list[float], fraction: float) -> float:
    """A run's latency at ``fraction`` (one of :data:`QUANTILES`) from its kept quantiles."""
    return quantiles_ns[int(round(fraction * (len(quantiles_ns) - 1)))]


class VariationModel:
    kind = "variation"

    def __init__(self, spec: Spec | dict[str, Any] | None = None):
        self.spec = spec_of(Spec, spec)
        self.threshold = self.spec.threshold
        self.configs: list[Configuration] = []
        self.failed: list[tuple[str, str]] = []
        self.report: Report | None = None
        self.notes: list[str] = []
        self.version = 0
        self.telemetry: list[tuple[float, float, float]] = []
        self._seen: set[str] = set()
        self._cdfs: tuple[int, list[tuple[str, str, int, dict[float, np.ndarray]]]] | None = None
        # what the view shows: the figure, the configuration, the window (Fig. 7), the op (Fig. 8)
        self.figure = "1"
        self.selected_id: str | None = None  # by id: rows arriving live must not move it (None: the first)
        self.window_index = 0
        self.op_index = 0

    # -- rows in -------------------------------------------------------------------------------
    def feed(self, event: Event) -> bool:
        if isinstance(event, RowDone):
            return self.add_row(event.row)
        if isinstance(event, TreatmentDone) and event.error is not None:
            return self.add_row(Failed(id=event.id, row=0, recipe="", repeat=0, factors={}, error=event.error))
        return False

    def add_row(self, row: VariationRow | Failed) -> bool:
        """One study row (a treatment's record); the same row twice counts once."""
        if row.id in self._seen:
            return False
        self._seen.add(row.id)
        if isinstance(row, Failed) or not row.runs:
            self.failed.append((row.id, row.error if isinstance(row, Failed) else "no runs"))
        else:
            self.configs.append(self._configuration(row))
            self.configs.sort(key=lambda c: c.id)
        self._update_notes()
        self.version += 1
        return True

    @staticmethod
    def _configuration(row: VariationRow) -> Configuration:
        stats = configuration_stats(row)
        runs = row.runs
        quantiles = {op: [hist_quantiles_ns(r.latency_hist[i]) for r in runs] for i, op in enumerate(runs[0].op_names)}
        return Configuration(
            id=stats.id, label=stats.configuration, fs=stats.fs, personality=stats.personality,
            knobs=dict(stats.knobs), ops_per_s=[r.ops_per_s for r in runs],
            mean_ops_per_s=stats.mean_ops_per_s, relative_range=stats.relative_range,
            ks_range=stats.ks_range, ks_range_per_op=dict(stats.ks_range_per_op),
            counts_per_bin=[np.asarray(r.counts_per_bin, dtype=np.float64) for r in runs],
            latency_quantiles_ns=quantiles, mkfs_opts=list(row.mkfs_opts), mount_opts=list(row.mount_opts))

    def finish(self, report: Report | None) -> None:
        """The job's report: kept for its totals (planned, time share). A resumed study's
        earlier rows were recorded by another run: read them from its study directory."""
        if report is not None:
            self.report = report
            if report.study_dir and report.completed > len(self.configs) and Path(report.study_dir).is_dir():
                self.add_rows(report.study_dir)
        self._update_notes()
        self.version += 1

    def add_rows(self, study_dir: str) -> None:
        """The rows a study directory recorded (``treatments.ndjson``)."""
        for row in load_rows(Path(study_dir), VariationRow):
            self.add_row(row)

    @classmethod
    def from_run(cls, run_dir: Any, spec: dict[str, Any], report: Report | None) -> VariationModel:
        """A recorded study: its rows from the run's own directory when it holds them (a run
        directory copied or moved elsewhere still replays), else from the study directory it
        recorded (the one it resumed)."""
        model = cls(spec)
        own = Path(run_dir.path)
        recorded = (report.study_dir if report is not None else "") or run_dir.info().study_dir
        model.add_rows(str(own) if (own / ROWS_FILE).exists() or not recorded else recorded)
        model.finish(report)
        return model

    # -- selection (the view's keys) -------------------------------------------------------------
    def _step(self, name: str, delta: int, count: int) -> None:
        if count:
            setattr(self, name, (getattr(self, name) + delta) % count)
            self.version += 1

    def show_figure(self, figure: str) -> None:
        if figure in FIGURES and figure != self.figure:
            self.figure = figure
            self.version += 1

    def next_figure(self, delta: int = 1) -> None:
        self.figure = FIGURES[(FIGURES.index(self.figure) + delta) % len(FIGURES)]
        self.version += 1

    @property
    def selected(self) -> int:
        """The position of the configuration shown (in id order)."""
        ids = [c.id for c in self.configs]
        return ids.index(self.selected_id) if self.selected_id in ids else 0

    def select(self, delta: int) -> None:
        if self.configs:
            self.select_id(self.configs[(self.selected + delta) % len(self.configs)].id)

    def next_window(self) -> None:
        self._step("window_index", 1, len(self._current_windows()))

    def next_op(self) -> None:
        self._step("op_index", 1, len(self.op_names()))

    def select_id(self, config_id: str) -> None:
        """Show this configuration (a flag picked in the flags panel)."""
        if config_id != self.selected_id and any(c.id == config_id for c in self.configs):
            self.selected_id = config_id
            self.version += 1

    @property
    def current(self) -> Configuration | None:
        return self.configs[self.selected] if self.configs else None

    def _current_windows(self) -> tuple[float, ...]:
        return self.windows_s(self.current.personality) if self.current is not None else ()

    @property
    def window_s(self) -> float | None:
        """Fig. 7's window (``w`` cycles the sizes that fit the shown configuration's workload)."""
        windows = self._current_windows()
        return windows[self.window_index % len(windows)] if windows else None

    @property
    def op(self) -> str | None:
        ops = self.op_names()
        return ops[self.op_index % len(ops)] if ops else None

    # -- what the figures draw ---------------------------------------------------------------------
    def personalities(self) -> list[str]:
        return sorted({c.personality for c in self.configs})

    def file_systems(self) -> list[str]:
        return sorted({c.fs for c in self.configs})

    def flagged(self, c: Configuration) -> bool:
        return c.relative_range is not None and c.relative_range > self.threshold

    def by_range(self, personality: str) -> list[Configuration]:
        """Fig. 1: one personality's configurations, the most variable first."""
        mine = [c for c in self.configs if c.personality == personality]
        return sorted(mine, key=lambda c: (-(c.relative_range if c.relative_range is not None else -1.0), c.id))

    def across_workloads(self) -> list[tuple[str, dict[str, Configuration]]]:
        """Fig. 2: each configuration (fs-row) with its row per personality."""
        out: dict[str, dict[str, Configuration]] = {}
        for c in self.configs:
            out.setdefault(c.label, {})[c.personality] = c
        return sorted(out.items())

    def windows_s(self, personality: str | None = None) -> tuple[float, ...]:
        """Throughput-N sizes: the spec's, else those of :data:`WINDOWS_S` that fit the
        shortest run (in whole 1-s bins) -- of one personality's configurations, when given
        (workloads may run for different times: the paper's varmail 2,000 s, others 800 s)."""
        bins = min((len(r) for c in self.configs if personality in (None, c.personality)
                    for r in c.counts_per_bin), default=0)
        given = tuple(float(w) for w in self.spec.window_sizes_s if w > 0)
        return tuple(w for w in given or WINDOWS_S if w * 1.0 <= bins * BIN_S)

    def window_cdfs(self) -> list[tuple[str, str, int, dict[float, np.ndarray]]]:
        """Fig. 6: per (personality, file system), the sorted relative ranges of every
        Throughput-N window of every configuration, per window size (the CDF's x values;
        F = rank / count). Also the number of configurations."""
        if self._cdfs is not None and self._cdfs[0] == len(self.configs):
            return self._cdfs[1]  # rows only ever arrive: the same count is the same answer
        out: list[tuple[str, str, int, dict[float, np.ndarray]]] = []
        for p in self.personalities():
            windows = self.windows_s(p)
            for fs in self.file_systems():
                mine = [c for c in self.configs if c.personality == p and c.fs == fs]
                if not mine:
                    continue
                cdf = relative_range_cdf([c.counts_per_bin for c in mine], BIN_S, windows)
                out.append((p, fs, len(mine), {w: cdf[w][0] for w in windows}))
        self._cdfs = (len(self.configs), out)
        return out

    def normalised_series(self, c: Configuration, window_s: float) -> list[list[float]]:
        """Fig. 7: per run, Throughput-N divided by that run's largest value."""
        out = []
        for counts in c.counts_per_bin:
            tn = throughput_n(counts, BIN_S, window_s)
            top = float(tn.max()) if tn.size else 0.0
            out.append([float(v) / top if top > 0 else 0.0 for v in tn])
        return out

    def window_ranges(self, c: Configuration, window_s: float) -> list[float]:
        """Fig. 7's companion: the relative range across runs of each Throughput-N window."""
        rr = window_relative_ranges(c.counts_per_bin, BIN_S, window_s)
        return [float(v) for v in rr if np.isfinite(v)]

    def band(self, c: Configuration, window_s: float) -> Bands:
        """The paper's Fig. 5: Throughput-N per window across the runs (min, mean, max)."""
        return throughput_bands([throughput_n(r, BIN_S, window_s) for r in c.counts_per_bin], window_s)

    def op_names(self) -> list[str]:
        c = self.current
        return list(c.latency_quantiles_ns) if c is not None else []

    def pcc_table(self) -> list[tuple[str, str, str, int, float | None, float | None]]:
        """Fig. 9: (personality, fs, op, configurations, r, p) -- the PCC across
        configurations of the op's K-S range with the throughput relative range."""
        out: list[tuple[str, str, str, int, float | None, float | None]] = []
        for p in self.personalities():
            for fs in self.file_systems():
                mine = [c for c in self.configs if c.personality == p and c.fs == fs and c.relative_range is not None]
                ops = sorted({op for c in mine for op in c.ks_range_per_op})
                for op in ops:
                    pairs = [(rr, ks) for c in mine if (rr := c.relative_range) is not None
                             and (ks := c.ks_range_per_op.get(op)) is not None]
                    r, pv = pearson_with_p([a for a, _ in pairs], [b for _, b in pairs])
                    out.append((p, fs, op, len(pairs), r, pv))
        return out

    def range_pairs(self) -> list[tuple[Configuration, float, float]]:
        """Fig. 9's scatter: (configuration, throughput relative range, K-S range)."""
        return [(c, c.relative_range, c.ks_range) for c in self.configs
                if c.relative_range is not None and c.ks_range is not None]

    def overall_pcc(self) -> tuple[float | None, float | None, int]:
        """The report's PCC: throughput range vs the largest K-S range, all configurations."""
        pairs = self.range_pairs()
        r, p = pearson_with_p([a for _, a, _ in pairs], [b for _, _, b in pairs])
        return r, p, len(pairs)

    def level_effects(self) -> list[tuple[str, str, list[tuple[object, float | None, int, int, bool]]]]:
        """Per (fs, knob that varied): per level (level, mean relative range, configurations,
        flagged, shared by every flagged configuration of that fs)."""
        out: dict[tuple[str, str], list] = {}
        for lv in knob_levels([(c.fs, c.knobs, c.relative_range, self.flagged(c)) for c in self.configs]):
            if lv.varied:
                out.setdefault((lv.fs, lv.knob), []).append(
                    (lv.level, lv.mean_relative_range, lv.configurations, lv.flagged, lv.shared))
        return [(fs, knob, cells) for (fs, knob), cells in out.items()]

    def config_notes(self, c: Configuration) -> list[str]:
        """What to say about one configuration beside the figure."""
        out = []
        if c.relative_range is not None:
            verdict = "flagged: above" if self.flagged(c) else "within"
            out.append(f"relative range {c.relative_range:.1%} across {len(c.ops_per_s)} runs ({verdict} the "
                       f"{self.threshold:.0%} threshold)")
        worst = max(((op, v) for op, v in c.ks_range_per_op.items() if v is not None), key=lambda p: p[1],
                    default=None)
        if worst is not None:
            out.append(f"latency varies most on {worst[0]}: K-S range {worst[1]:.2f} (largest distance between "
                       "two runs' CDFs)")
        others = [o for o in self.configs if o.label == c.label and o.personality != c.personality
                  and o.relative_range is not None]
        for o in others:
            out.append(f"under {o.personality}: relative range {o.relative_range:.1%}")
        return out

    def final_flags(self) -> list[Flag] | None:
        """The flags panel at the end (the same as while rows arrive)."""
        return self.live_flags() if self.report is not None else None

    def live_flags(self) -> list[Flag]:
        """The flags panel: each configuration above the threshold (most variable first;
        picking one shows it in the figures), then the study's notes -- redone per row."""
        flags = [Flag(title=f"{c.label} {c.personality} varies {format_pct(c.relative_range)}",
                      note="\n".join([f"{c.name} (code name {c.id}): "
                                      f"{', '.join(f'{k}={v}' for k, v in c.knobs.items())}",
                                      *self.config_notes(c)]),
                      kind="variation", indices=(),
                      finding=Finding(flag="variation", id=str(c.id), fields={"relative_range": c.relative_range}))
                 for c in sorted(self.configs, key=lambda c: -(c.relative_range or 0.0)) if self.flagged(c)]
        flags += note_flags(self.notes)
        return flags

    def _update_notes(self) -> None:
        """The study's conclusions so far (the live screen logs them when the job ends)."""
        notes = []
        done = [c for c in self.configs if c.relative_range is not None]
        if done:
            hot = [c for c in done if self.flagged(c)]
            notes.append(f"{len(hot)} of {len(done)} configurations vary more than {self.threshold:.0%} "
                         "(relative range of the runs' throughput)")
        for fs, knob, cells in self.level_effects():
            for level, _, n, n_hot, shared in cells:
                if shared and n_hot:
                    notes.append(f"{fs}: every flagged configuration has {knob} = {level} "
                                 f"({n_hot} of {n} at that level flagged)")
        r, p, n = self.overall_pcc()
        if r is not None:
            strength = "strong" if r > STRONG_PCC else "weak" if r > 0.4 else "no clear"
            notes.append(f"latency K-S range vs throughput range: PCC r = {r:.2f} (p = {p:.2g}, "
                         f"{n} configurations): {strength} correlation")
        if self.failed:
            notes.append(f"{len(self.failed)} treatment(s) failed: {self.failed[0][0]}: {self.failed[0][1]}")
        self.notes = notes
