"""A real unprivileged local user for the threat-model tests (issue: a root tool on a shared
machine). The fixture ``local_user`` (conftest) makes one per test with useradd and removes it,
its processes and its directories afterwards; attacks are made *as that user* through
``run``/``python``, fsscope runs as root (the test process)."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

USERADD = shutil.which("useradd") or "/usr/sbin/useradd"
USERDEL = shutil.which("userdel") or "/usr/sbin/userdel"
# The test's own interpreter may live under root's 0700 home (pyenv): the user gets the system's.
USER_PYTHON = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.access(p, os.X_OK)), sys.executable)


@dataclass(frozen=True)
class LocalUser:
    name: str
    uid: int
    gid: int
    home: Path      # a directory the user owns (0755), like a home directory
    shared: Path    # a sticky world-writable directory (1777), like /tmp or /dev/shm

    def run(self, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        """Run a command as this user (no supplementary groups, a minimal environment)."""
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.home), "LC_ALL": "C"}
        return subprocess.run(list(args), user=self.uid, group=self.gid, extra_groups=[], env=env,
                              cwd=self.home, capture_output=True, text=True, check=check, timeout=60, **kw)

    def python(self, code: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run Python code as this user (isolated mode: no user site, no PYTHON* variables)."""
        return self.run(USER_PYTHON, "-I", "-c", code, check=check)


def make(prefix: str) -> LocalUser:
    """A new system user ``prefix`` + random suffix with its own group and no login shell."""
    name = f"{prefix}{secrets.token_hex(3)}"
    subprocess.run([USERADD, "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin",
                    name], check=True, capture_output=True)
    import pwd

    entry = pwd.getpwnam(name)
    home = Path(tempfile.mkdtemp(prefix=f"{name}-home-", dir="/var/tmp"))
    os.chown(home, entry.pw_uid, entry.pw_gid)
    home.chmod(0o755)
    shared = Path(tempfile.mkdtemp(prefix=f"{name}-shared-", dir="/var/tmp"))
    shared.chmod(0o1777)
    return LocalUser(name, entry.pw_uid, entry.pw_gid, home, shared)


def remove(user: LocalUser) -> None:
    """Kill the user's processes, delete the user and both directories."""
    subprocess.run(["pkill", "-KILL", "-u", str(user.uid)], check=False, capture_output=True)
    subprocess.run([USERDEL, user.name], check=False, capture_output=True)
    for path in (user.home, user.shared):
        shutil.rmtree(path, ignore_errors=True)


def users_with_prefix(prefix: str) -> list[str]:
    import pwd

    return [p.pw_name for p in pwd.getpwall() if p.pw_name.startswith(prefix)]
