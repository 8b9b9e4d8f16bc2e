"""The real ``fsscope`` binary in a real terminal (tmux), driven by keys as a person would:
open it, read the help, start the probe, watch it finish, look at the recorded runs, quit."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (scripts/setup installs it)")

FSSCOPE = Path(sys.executable).parent / "fsscope"


SOCKET = f"fsscope-test-{os.getpid()}"  # our own tmux server: no options or environment of others


def tmux(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", SOCKET, "-f", "/dev/null", *args], capture_output=True, text=True,
                          check=check)


class Pane:
    def __init__(self, session: str):
        self.session = session

    def text(self) -> str:
        return tmux("capture-pane", "-p", "-t", self.session, check=False).stdout

    def keys(self, *keys: str) -> None:
        tmux("send-keys", "-t", self.session, *keys)

    def wait_for(self, needle: str, timeout_s: float = 30) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.text()
            if needle in text:
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} did not appear in {timeout_s} s; the pane shows:\n{text}")
            time.sleep(0.2)

    def wait_gone(self, needle: str, timeout_s: float = 30) -> str:
        """The pane's text once ``needle`` no longer shows (the footer redraws a moment after
        the screen it describes)."""
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.text()
            if needle not in text:
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} still shows after {timeout_s} s; the pane shows:\n{text}")
            time.sleep(0.2)

    def alive(self) -> bool:
        return tmux("has-session", "-t", self.session, check=False).returncode == 0


@pytest.fixture
def pane(scratch):
    session = f"fsscope-smoke-{os.getpid()}"
    workdir = scratch / "measure-here"
    workdir.mkdir()
    home = scratch / "home"  # its own record of runs, so the runs screen shows exactly this one
    command = (f"env FSSCOPE_HOME={home} TERM=xterm-256color "
               f"{FSSCOPE} tui --dir {workdir}")
    tmux("new-session", "-d", "-s", session, "-x", "150", "-y", "48", command)
    p = Pane(session)
    p.workdir = workdir
    try:
        yield p
    finally:
        if p.alive():
            tmux("kill-session", "-t", session, check=False)
        tmux("kill-server", check=False)


def test_fsscope_in_a_terminal(pane):
    screen = pane.wait_for("1 · Target")
    assert "Start" in screen and "^r" in screen  # the footer shows the keys
    pane.keys("F1")
    pane.wait_for("how to read it")
    pane.keys("Escape")
    pane.wait_for("1 · Target")
    pane.keys("C-r")
    # what shows at any pane size (the log panel, with "probe started", needs room that a
    # terminal tmux sizes 80x24 does not give): the header names the job, the row says ok
    pane.wait_for("fsscope — probe", 60)
    screen = pane.wait_for("in all", 600)  # the default probe syncs before each file: a slow disk is slow, not wrong
    assert "Flags" in screen and "Latency per file" in screen
    # the job has ended: nothing to cancel, so not offered (once the plan's end reaches the screen)
    pane.wait_gone("Cancel job")
    pane.keys("t")  # another theme: still the same screen
    pane.wait_for("Latency per file")
    pane.keys("F4")
    screen = pane.wait_for("Runs (1)")
    assert "probe" in screen and "ok" in screen
    pane.keys("q")
    deadline = time.monotonic() + 30
    while pane.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pane.alive(), "fsscope did not exit on q"
    assert list(pane.workdir.iterdir()) == []  # the job's scratch subdirectory is gone
