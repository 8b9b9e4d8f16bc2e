"""Kept for code written before :mod:`fsscope.tui.job_ui` (the one registry of a job's panel,
view and model); new code registers there."""

from __future__ import annotations

from fsscope.tui.job_ui import panel_for, register

__all__ = ["panel_for", "register_panel"]


def register_panel(job: str, panel: type) -> None:
    register(job, panel=panel)
