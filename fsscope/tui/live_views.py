"""Kept for code written before :mod:`fsscope.tui.job_ui` (the one registry of a job's panel,
view and model); new code registers there."""

from __future__ import annotations

from fsscope.tui.job_ui import register, view_class, view_classes

__all__ = ["register_view", "view_class", "view_classes"]


def register_view(job: str, view: type) -> None:
    register(job, view=view)
