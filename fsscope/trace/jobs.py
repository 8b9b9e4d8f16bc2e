"""Tracing inside jobs: which runs are traced, and what the kernel's events add to reports.

:class:`JobTrace` traces a job's runs (one tracefs instance each); :class:`ProbeTrace` adds
the kernel evidence per probe flag, :class:`BenchTrace` the per-window counts of a
throughput run (journal commits, writeback starts, bytes written) and annotated dips.

Probe: ``--trace off|attribute|all`` (ProbeSpec.trace):

- ``attribute`` (default): the measured runs stay untraced -- their latencies carry no
  observer effect -- and one extra run, on a fresh file system like the others, is traced to
  attribute the flags. Its latencies are kept apart (``trace_latency_ns``).
- ``all``: every measured run is traced (``N/N runs`` evidence; bench/trace_overhead.py
  measures what it costs).
- ``off``: nothing is traced.

Without root or tracefs a job says why once and runs untraced.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from fsscope.errors import FsscopeError
from fsscope.explain.slab import SlabCache, read_slabinfo
from fsscope.trace import attribute
from fsscope.trace.attribute import RunCalls
from fsscope.trace.session import Tracer, TraceResult
from fsscope.trace.tracefs import unavailable_reason

MODES = ("off", "attribute", "all")


def finding_indices(finding) -> list[int]:
    """The call indices a finding stands for (a series: every member; linear growth: its range)."""
    if hasattr(finding, "stride"):
        return [finding.start + k * finding.stride for k in range(finding.count)]
    if hasattr(finding, "end"):
        return list(range(int(finding.start), int(finding.end)))
    if hasattr(finding, "index"):
        return [int(finding.index)]
    return [int(finding.start)]


class JobTrace:
    """The traced stretches of one job (runs), each through its own tracefs instance. Without
    root or tracefs it says why once (a log line) and the job runs untraced."""

    def __init__(self, ctx, enabled: bool, job: str, *, pid: int | None):
        self.ctx = ctx
        self.job = job
        self.pid = pid
        self.reason = unavailable_reason() if enabled else "tracing off"
        if enabled and self.reason:
            ctx.log(f"kernel tracing off: {self.reason}; the {job} runs untraced")
        self.enabled = enabled
        self.results: list[tuple[int, TraceResult]] = []

    @property
    def active(self) -> bool:
        return self.enabled and not self.reason

    @contextmanager
    def run(self, fs, run: int) -> Iterator[None]:
        """Trace the body (one run) when tracing is active; its result lands in ``results``."""
        if not self.active:
            yield
            return
        raw_dir = Path(self.ctx.run_dir.path) / f"trace-raw-{run}"
        # a directory target: the device holding it (tmpfs has none, so no block events)
        tracer = Tracer(raw_dir, fs=fs.fs, job=self.job, pid=self.pid, device=fs.device or fs.workdir,
                        avoid_cpu=next(iter(os.sched_getaffinity(0))) if self.pid else None,
                        journal=getattr(self.ctx.target, "journal", None))
        try:
            tracer.__enter__()
        except FsscopeError as exc:
            self.reason = str(exc)
            self.ctx.log(f"kernel tracing off: {exc}; the {self.job} runs untraced")
            yield
            return
        failed = True
        try:
            yield
            failed = False
        finally:
            try:
                tracer.__exit__(RuntimeError if failed else None, None, None)
            except FsscopeError as exc:  # the measurement stands; only its trace is lost
                self.ctx.log(f"trace of run {run + 1} lost: {exc}")
        if tracer.result is not None:
            result = tracer.result
            result.events["run"] = run
            self.results.append((run, result))
            if result.missing:
                self.ctx.log("trace: not on this kernel: " + ", ".join(result.missing))
            if result.lost:
                self.ctx.log(f"trace of run {run + 1}: {result.overrun} overrun, "
                             f"{result.dropped} dropped events -- the record is incomplete")

    def summary(self) -> dict:
        """The report's ``trace`` block: mode, what was enabled, losses, names, comms."""
        out = {"active": bool(self.results), "reason": self.reason}
        if not self.results:
            return out
        first = self.results[0][1]
        comms: dict[int, str] = {}
        for _, r in self.results:
            comms.update(r.comms)
        return out | {
            "runs_traced": [run for run, _ in self.results], "event_names": first.names,
            "comms": {str(k): v for k, v in comms.items()}, "pid": self.pid,
            "enabled": first.enabled, "missing": first.missing, "filter_errors": first.filter_errors,
            "events": int(sum(len(r.events) for _, r in self.results)),
            "overrun": sum(r.overrun for _, r in self.results),
            "dropped": sum(r.dropped for _, r in self.results),
            "complete": all(not r.lost for _, r in self.results),
            "events_per_s": round(max(r.events_per_s for _, r in self.results), 1)}


class ProbeTrace(JobTrace):
    """Collects the traced runs of one probe job and turns them into report fields."""

    pid: int  # the probe traces its own process

    def __init__(self, ctx, mode: str, op: str):
        super().__init__(ctx, mode != "off", "probe", pid=os.getpid())
        self.mode = mode
        self.op = op
        self.rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.calls: list[attribute.RunCalls] = []  # the traced runs' calls, once attributed
        self.slabs: dict[str, SlabCache] = {}       # /proc/slabinfo at the first traced run
        self.used_slabs: dict[str, SlabCache | None] = {}  # the caches a flag was explained by

    @contextmanager
    def run_calls(self, fs, run: int, latency_row: np.ndarray, start_row: np.ndarray) -> Iterator[None]:
        """Trace one run (:meth:`run`), keeping its calls' latencies and starts to attribute
        the events to (the rows fill in while the body runs)."""
        self.rows[run] = (latency_row, start_row)
        if not self.slabs:  # the slab caches' geometry as this kernel has it at the run
            self.slabs = read_slabinfo()
        with super().run(fs, run):
            yield

    def waited_on_others_ns(self, run: int) -> np.ndarray | None:
        """Per call of traced run ``run``: the time it was blocked on another process (see
        :func:`attribute.waited_on_others_ns`); None when that run was not traced."""
        result = dict(self.results).get(run)
        if result is None or run not in self.rows:
            return None
        latency_row, start_row = self.rows[run]
        calls = attribute.attribute_run(result.events, result.names, np.asarray(start_row),
                                        np.asarray(latency_row), pid=self.pid, run=run, comms=result.comms,
                                        texts=result.texts)
        return attribute.waited_on_others_ns(calls, len(latency_row))

    def attribute(self, report: dict, findings: list, flags: list[dict]) -> None:
        """Add the kernel's side to the report: per flag, structural events, the
        prediction/kernel/latency table, causes of one-off noise, and the event arrays."""
        report["trace"] = {"mode": self.mode} | self.summary()
        if not self.results:
            return
        names = self.results[0][1].names
        events = np.concatenate([r.events for _, r in self.results])
        comms = {int(k): v for k, v in report["trace"]["comms"].items()}
        self.ctx.run_dir.save_array("trace_events", events)
        runs = []
        for run, result in self.results:
            latency_row, start_row = self.rows[run]
            runs.append(attribute.attribute_run(result.events, names, np.asarray(start_row),
                                                np.asarray(latency_row), pid=self.pid, run=run, comms=comms,
                                                texts=result.texts))
        flagged: set[int] = set()
        for finding in findings:
            if not hasattr(finding, "slope_ns_per_file"):
                flagged.update(finding_indices(finding))
        self.calls = runs
        structural = attribute.structural_events(runs, flagged)
        report["structural_events"] = structural
        rows = attribute.structure_table(report.get("predictions", []), structural, flagged,
                                         report["trace"]["enabled"], runs)
        rows += self._in_memory(runs, findings, flags)
        # a prediction the kernel contradicted is no structure of this run: kept apart, in the JSON
        report["structures"] = [r for r in rows if not r["verdict"].startswith("contradicted")]
        report["contradicted"] = [r for r in rows if r["verdict"].startswith("contradicted")]
        report["slabs"] = [cache for cache in self.used_slabs.values() if cache is not None]
        # an in-memory row may hold several series of one cache: each flag's note says its own numbers
        verdicts = {row["structure"]: row["verdict"] for row in report["structures"]
                    if not row["structure"].startswith(attribute.IN_MEMORY)}
        for flag, finding in zip(flags, findings):
            kernel = attribute.kernel_evidence(runs, finding_indices(finding))
            flag["kernel"] = kernel
            sentence = attribute.evidence_sentence(kernel, self.op)
            if flag.get("structure") in verdicts:  # the table's verdict, word for word
                flag["kernel_verdict"] = verdicts[flag["structure"]]
                sentence = ". ".join(filter(None, [sentence, "Kernel vs prediction: "
                                                   + verdicts[flag["structure"]]]))
            if sentence:
                flag["note"] = f"{flag.get('note', '')} {sentence}.".strip()
        report["noise"] = attribute.noise(runs, flagged)

    def _in_memory(self, runs: list[RunCalls], findings: list, flags: list[dict]) -> list[dict]:
        """Series no geometry rule explains, explained by the kernel's in-memory structures
        (:func:`attribute.in_memory`): the flag takes the structure, its note the arithmetic and
        the kernel's evidence; one structures-table row each. The caches used go to ``slabs``."""
        rows: list[dict] = []
        explained: list[tuple] = []  # (the series, what explained it)
        for flag, finding in zip(flags, findings):
            if flag.get("structure") or not hasattr(finding, "stride"):
                continue
            members = list(finding.members) or finding_indices(finding)
            found = attribute.in_memory(runs, members, finding.stride, self.slabs)
            if found is None:
                continue
            flag["structure"] = found["structure"]
            flag["note"] = f"{found['note']}. Measured: {len(members)} slow files every {finding.stride} from file " \
                           f"{finding.start}."
            flag["title"] = f"{flag.get('title', '').rsplit(' — ', 1)[0]} — {found['title']}"
            seen = [i for i in members if any(rc.events.get(i, {}).get(attribute.NEW_SLAB + found["cache"])
                                              or found["objects_per_slab"] is None for rc in runs)]
            verdict = f"explained by the kernel: {found['arithmetic']}"
            row = next((r for r in rows if r["structure"] == found["structure"]), None)
            if row is None:
                rows.append({"structure": found["structure"], "events": [found["event"]], "predicted": [],
                             "seen": seen[:50], "slow": members[:50], "verdict": verdict})
            else:  # two series of one cache: one row (a structure is named once in the table)
                row["seen"] = sorted(set(row["seen"]) | set(seen))[:50]
                row["slow"] = sorted(set(row["slow"]) | set(members))[:50]
                if verdict not in row["verdict"]:
                    row["verdict"] += f"; {found['arithmetic']}"
            self.used_slabs[found["cache"]] = self.slabs.get(found["cache"])
            explained.append((finding, found))
        # a repeatable outlier that is a member of such a series is that series' structure too
        for flag, finding in zip(flags, findings):
            if flag.get("structure") or not hasattr(finding, "runs_flagged"):
                continue
            owners = [(series, found) for series, found in explained if finding.index in series.members]
            # a file in two explained series (a slab's and the directory index's) takes the one
            # whose cache shows in its own call's kernel events, else the first
            # (the flags' kernel evidence is filled in after this, so it is read here from the runs)
            own = flag.get("kernel") or attribute.kernel_evidence(runs, [finding.index])
            events_text = " ".join(str(k) for k in (own.get("events") or {}))
            owners.sort(key=lambda owner: owner[1]["cache"] not in events_text)
            for series, found in owners[:1]:
                flag["structure"] = found["structure"]
                flag["note"] = (f"a member of the series every {series.stride} files from {series.start}: "
                                f"{found['note']}.")
                flag["title"] = f"{flag.get('title', '').rsplit(' — ', 1)[0]} — {found['title']}"
        return rows

    def thresholds(self, flags: list[dict], structures: list[dict], measured_ns: np.ndarray) -> list[dict]:
        """The report's ``thresholds``: the explained flags (latency, with the kernel's word
        where its event fired inside them) and the predicted structures only the kernel marks."""
        latency = [{k: v for k, v in f.items() if k != "title"}
                   | {"evidence": attribute.threshold_evidence(f, structures)}
                   for f in flags if f.get("structure")]
        taken = {(f["structure"], i) for f in latency if f["evidence"] == "kernel+latency"
                 for i in (f.get("index"), f.get("predicted_index")) if i is not None}
        kernel = attribute.kernel_thresholds(structures, self.calls, measured_ns, self.op, taken)
        return sorted(latency + kernel, key=lambda f: (f.get("index") is None, f.get("index") or 0))


class BenchTrace(JobTrace):
    """Every run of a throughput job traced (device, journal, writeback; no pid filter: the
    workers are many processes), counted per Throughput-N window."""

    def __init__(self, ctx, enabled: bool):
        super().__init__(ctx, enabled, "bench", pid=None)

    def windows(self, run: int, start_ns: int, window_s: float, n_windows: int) -> dict | None:
        """Kernel counts per window of run ``run`` (None: that run was not traced); the
        run's events are saved as ``run{r}_trace_events.npy``."""
        result = dict(self.results).get(run)
        if result is None or not start_ns:
            return None
        self.ctx.run_dir.save_array(f"run{run}_trace_events", result.events)
        counts = attribute.window_counts(result.events, result.names, start_ns,
                                         int(window_s * 1e9), n_windows)
        return {"window_s": window_s, "start_ns": int(start_ns), **counts}
