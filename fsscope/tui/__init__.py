"""The Textual investigator. Only this package imports Textual.

    from fsscope.tui import make_app
    make_app(theme="fsscope-light").run()
"""

from __future__ import annotations

from fsscope.tui.config import AppConfig, JobRequest, RunPlan


def make_app(config: AppConfig | None = None, **overrides):
    from fsscope.tui.app import make_app as _make_app  # Textual: only when the app runs, not for AppConfig

    return _make_app(config, **overrides)


__all__ = ["AppConfig", "JobRequest", "RunPlan", "make_app"]
