"""Where the investigator's exports go, and the flags of a run as Markdown.

Every export (``ctrl+s``/``x`` for the screen as SVG, ``m`` for the flags as Markdown, ``s`` on a
table for its rows as CSV) lands in
one folder, ``<fsscope home>/exports``, whatever the screen; the file name carries the run id
so exports of several runs sit side by side."""

from __future__ import annotations

import time
from pathlib import Path

from fsscope import paths, trust
from fsscope.tui.model import flags_markdown, spec_words
from fsscope.tui.replay import RunRecord


def export_dir() -> Path:
    directory = paths.home() / "exports"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def stamped(stem: str, suffix: str) -> str:
    return f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}{suffix}"


def _write(name: str, text: str) -> Path:
    """``text`` as export ``name``, through the checked descriptor every output goes through
    (never through a link planted in its place)."""
    path = export_dir() / name
    trust.write_output(path, text, "the export")
    return path


def write_flags(flags, run_id: str, context: list[str], error: str | None = None) -> Path:
    return _write(f"flags-{run_id or 'run'}.md",
                  flags_markdown(flags, heading=f"fsscope flags — {run_id}", context=context, error=error))


def write_csv(name: str, run_id: str, text: str) -> Path:
    """A table's rows (``name``: the table's id) of a run, or stamped when no run is on screen."""
    return _write(f"{name}-{run_id}.csv" if run_id else stamped(name, ".csv"), text)


def write_record_flags(record: RunRecord) -> Path:
    """The flags of a recorded run (the runs and compare screens)."""
    job = record.job
    context = [f"run: {record.run.id}", f"target: {record.target}", f"recipe: {record.recipe}",
               f"job: {job.job} ({spec_words(job.spec_data)})", f"status: {job.status}"]
    return write_flags(record.flags, record.run.id, context, error=job.error if job.status == "failed" else None)
