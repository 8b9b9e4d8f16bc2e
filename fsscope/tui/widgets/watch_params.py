"""The watch job's panel: what to watch -- a process doing file-system I/O now (listed by
rate, as iotop does) or a cgroup (a service), picked from the list or typed -- and for how
long. Watch formats and mounts nothing: the Setup target and recipe are not used for it (its
descriptor's ``uses_target``), and the panel says so."""

from __future__ import annotations

import os

from textual import work
from textual.app import ComposeResult
from textual.content import Content
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

from fsscope.engine import registry
from fsscope.errors import FsscopeError
from fsscope.format import format_bytes, visible
from fsscope.records import SpecRecord
from fsscope.tui.widgets.job_params import JobParams

NOT_FORMATTED = ("Watch formats and mounts nothing (target and recipe unused): it watches the file "
                 "system the process already uses.")


class WatchParams(JobParams):
    FIELDS = ("pid", "cgroup", "duration_s", "tree", "children")
    DEFAULTS = {"duration_s": 10.0}
    LABELS = {"pid": "process id", "duration_s": "seconds", "cgroup": "cgroup"}
    HINTS = {
        "pid": "pick one in the list above, or type it",
        "cgroup": "a service: a cgroup path under /sys/fs/cgroup (instead of a process)",
        "duration_s": "how long to watch (empty: until the process ends or c on the live screen)",
        "tree": "the tree whose files are named (empty: the process's working directory)",
    }

    DEFAULT_CSS = JobParams.DEFAULT_CSS + """
    WatchParams #watch-note { color: $warning; padding: 0 0 1 0; }
    WatchParams #watch-pick { height: auto; max-height: 8; }
    WatchParams #watch-refresh { min-width: 12; height: 1; border: none; }
    """

    def compose(self) -> ComposeResult:
        yield Static(NOT_FORMATTED, id="watch-note")
        yield OptionList(Option("listing the processes doing I/O…", disabled=True), id="watch-pick")
        yield Button("↻ list again", id="watch-refresh", compact=True)
        yield from super().compose()

    def on_mount(self) -> None:
        pick = self.query_one("#watch-pick", OptionList)
        pick.border_title = "doing I/O now · services"
        pick.border_subtitle = "device's B/s, else calls'"
        self.list_targets()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "watch-refresh":
            event.stop()
            self.list_targets()

    @work(thread=True, exclusive=True, group="watch-list")
    def list_targets(self) -> None:
        """The processes doing I/O (rates over half a second) and the services, read off the
        app thread (the interval sleeps) and shown there."""
        from fsscope.watch.active import busy_processes, services

        busy = busy_processes(0.5, skip=frozenset({os.getpid()}))
        groups = services()
        self.app.call_from_thread(self._show_targets, busy, groups)

    def _show_targets(self, busy, groups) -> None:
        pick = self.query_one("#watch-pick", OptionList)
        pick.clear_options()
        # names are the processes' own (procio made their escapes visible) and cgroups' paths:
        # prompts are Content, text, never markup (Textual reads a plain str prompt as markup)
        # one short line each (a narrow column wraps a long prompt into three): the device's
        # bytes when it moved any, else what the calls moved (page cache, unflushed writes)
        options = [Option(Content(f"{b.pid} {b.comm} {format_bytes(b.rate_bytes_per_s)}/s"),
                          id=f"pid:{b.pid}") for b in busy]
        options += [Option(Content(f"cgroup {visible(path)} ({count})"), id=f"cgroup:{path}") for path, count in groups]
        pick.add_options(options or [Option("no process did I/O in the last half second", disabled=True)])
        self.listed = [o.id for o in options]

    listed: list[str | None] = []
    """The options shown (``pid:N``, ``cgroup:PATH``), once listed (tests wait for them)."""

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        kind, _, value = (event.option.id or "").partition(":")
        if kind not in ("pid", "cgroup"):
            return
        self.query_one(f"#{self._param_id('pid')}", Input).value = value if kind == "pid" else ""
        self.query_one(f"#{self._param_id('cgroup')}", Input).value = value if kind == "cgroup" else ""

    def validated(self) -> SpecRecord:
        """The Spec, refused in Setup's words where watch cannot run here or has nothing to
        watch (the CLI's checks, before anything starts)."""
        from fsscope.trace.tracefs import unavailable_reason
        from fsscope.watch import tasks

        if os.geteuid() != 0:
            raise FsscopeError("watch needs root: tracefs instances and set_event_pid are root-only")
        reason = unavailable_reason()
        if reason:
            raise FsscopeError(f"watch needs tracefs: {reason}")
        data = self.spec_dict()
        if (data.get("pid") is None) == (not data.get("cgroup")):
            raise FsscopeError("watch: pick one process or service in the list (or type a process id "
                               "or a cgroup path, not both)")
        if data.get("tree"):
            data["tree"] = os.path.abspath(data["tree"])
            if not os.path.isdir(data["tree"]):
                raise FsscopeError(f"watch: tree {data['tree']}: not a directory")
        if data.get("pid") is not None:
            tasks.process_tids(int(data["pid"]), with_children=False)
        else:
            tasks.cgroup_tids(str(data["cgroup"]))
        return registry.spec_from_data(self.job, data)
