"""A test session killed with SIGTERM (as ``timeout`` or a cancelled CI job kills it) still
tears down its fixtures: the loop device and mount a test made are gone afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.privileged


def test_a_session_killed_by_sigterm_unmounts_and_detaches_what_it_made():
    here = Path(__file__).parent
    session = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                                str(here / "killed_session.py")], cwd=here.parent, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=os.environ | {"FSSCOPE_TEST_CPU_HOGS": ""})
    try:
        assert session.stdout is not None
        held = ""
        deadline = time.monotonic() + 120
        while not held and time.monotonic() < deadline:
            line = session.stdout.readline()
            if not line:
                break
            if "HOLDING " in line:
                held = line
        assert held, "the session never mounted its device"
        _, mnt = held.split("HOLDING ", 1)[1].split()
        assert any(m.split()[1] == mnt for m in Path("/proc/self/mounts").read_text().splitlines())
        session.send_signal(signal.SIGTERM)
        out, _ = session.communicate(timeout=120)
    finally:
        if session.poll() is None:
            session.kill()
            session.wait()
    assert not any(m.split()[1] == mnt for m in Path("/proc/self/mounts").read_text().splitlines()), out
    attached = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert str(Path(mnt).parent) not in attached, attached  # its loop device over the test's image
    assert "KeyboardInterrupt" in out and "signal SIGTERM" in out, out[-2000:]
