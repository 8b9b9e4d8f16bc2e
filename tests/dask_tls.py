"""The README's multi-host Dask recipe, read from the README itself: the tests make their
certificates and start their schedulers and workers with its very commands (only the host,
port and directories changed), so a recipe that stops working fails a test."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def recipe() -> list[str]:
    """The commands of the README's Dask-cluster recipe (its indented code lines from the
    first ``openssl`` to the ``fsscope explore`` that uses them)."""
    lines = [ln[4:] for ln in README.read_text().splitlines() if ln.startswith("    ")]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("openssl req -x509"))
    end = next(i for i, ln in enumerate(lines) if i > start and ln.startswith("fsscope explore --scheduler tls://"))
    return [ln for ln in lines[start:end + 1] if ln.strip()]


def command(prefix: str) -> str:
    return next(ln for ln in recipe() if ln.startswith(prefix))


def make_certs(directory: Path) -> Path:
    """Run the README's openssl, chmod and printf lines in ``directory``; the ``--security`` file."""
    for line in recipe():
        if line.split()[0] in ("openssl", "chmod", "printf"):
            subprocess.run(["bash", "-c", line], cwd=directory, check=True, capture_output=True, timeout=60)
    return directory / "dask.toml"


def environment(scratch: Path) -> dict[str, str]:
    """The README's ``export`` line, its scratch directory replaced by ``scratch``."""
    line = command("export ")
    env = dict(os.environ)
    for word in shlex.split(line)[1:]:
        key, _, value = word.partition("=")
        env[key] = str(scratch) if key == "DASK_TEMPORARY_DIRECTORY" else value
    return env


def argv(prefix: str, dask: Path, certs: Path, replace: dict[str, str]) -> list[str]:
    """The README's command starting with ``prefix`` as an argv: ``.venv/bin/dask`` is ``dask``,
    the certificate files are in ``certs``, and each ``replace`` key's text is replaced."""
    line = command(prefix)
    for old, new in replace.items():
        assert old in line, (old, line)
        line = line.replace(old, new)
    words = shlex.split(line)
    words[0] = str(dask)
    return [str(certs / w) if w in ("ca.pem", "cert.pem", "key.pem") else w for w in words]
