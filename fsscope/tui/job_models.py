"""Kept for code written before :mod:`fsscope.tui.job_ui` (the one registry of a job's panel,
view and model); new code registers there."""

from __future__ import annotations

from typing import Any

from fsscope.tui.job_ui import JobModel, model_for, model_from_run, register

__all__ = ["JobModel", "model_for", "model_from_run", "register_model"]


def register_model(job: str, model: Any) -> None:
    register(job, model=model)
