"""Rendering job reports in the terminal; each job may add a renderer here."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Console

RENDERERS: dict[str, Callable[[dict, Console], None]] = {}


def render_report(job: str, report: dict, console: Console) -> None:
    renderer = RENDERERS.get(job)
    if renderer is None:
        console.print_json(data=report)
    else:
        renderer(report, console)
