"""fsscope installed as a package (what pip and pipx do) has everything it ships (issue 27):
the wheel is built from this checkout, installed into a fresh venv, and run from a directory
outside the checkout. The venv gets no network: its dependencies are the test venv's own
(a .pth line; the checkout's editable install there is not activated by it)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent


def run(*args, **kw) -> subprocess.CompletedProcess:
    """A command with no path into the checkout (PYTHONPATH) unless ``env`` says otherwise."""
    kw.setdefault("env", {k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kw)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh venv's fsscope script, a working directory outside the checkout)."""
    base = tmp_path_factory.mktemp("install")
    wheels = base / "wheels"
    # build isolation: setuptools>=68 as pyproject.toml asks (from PyPI or pip's cache)
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps",
                "--disable-pip-version-check", "-q", "-w", wheels, CHECKOUT)
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("fsscope-*.whl")
    venv = base / "venv"
    made = run(sys.executable, "-m", "venv", venv)  # pip from ensurepip: no network
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    put = run(python, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check", "-q", wheel)
    assert put.returncode == 0, put.stderr
    # the dependencies: the test venv's (added after the install, so pip never saw its editable fsscope)
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    outside = base / "elsewhere"
    outside.mkdir()
    return venv / "bin" / "fsscope", outside


def clean_env(cwd: Path) -> dict:
    """No path into the checkout (PYTHONPATH) and the shipped recipes (no FSSCOPE_RECIPES)."""
    env = {k: v for k, v in os.environ.items() if k not in ("FSSCOPE_RECIPES", "PYTHONPATH")}
    env["FSSCOPE_HOME"] = str(cwd / "home")
    return env


def fsscope(installed, *args) -> subprocess.CompletedProcess:
    script, cwd = installed
    return run(script, *args, cwd=cwd, env=clean_env(cwd), stdin=subprocess.DEVNULL)


def test_the_wheel_carries_recipes_profiles_spaces_and_themes(installed):
    (wheel,) = (installed[1].parent / "wheels").glob("fsscope-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("fsscope/data/recipes/ext4-default.toml", "fsscope/data/recipes/aging/small.toml",
                 "fsscope/data/recipes/spaces/small.toml", "fsscope/data/themes/dark.tcss",
                 "fsscope/tui/app.tcss", "fsscope/workloads/personalities/native/loops.c"):
        assert name in names, name


def test_installed_fsscope_runs_outside_the_checkout(installed):
    script, cwd = installed
    located = run(script.parent / "python", "-c", "import fsscope, fsscope.paths as p; "
                  "print(fsscope.__file__); print(p.DATA_DIR)", cwd=cwd, env=clean_env(cwd))
    assert located.returncode == 0, located.stderr
    module_file, data_dir = located.stdout.split()
    assert not module_file.startswith(str(CHECKOUT)) and not data_dir.startswith(str(CHECKOUT)), located.stdout
    listed = fsscope(installed, "recipes")
    assert listed.returncode == 0, listed.stderr
    for name in ("ext4-default", "xfs-default", "btrfs-default"):
        assert name in listed.stdout, listed.stdout
    profiles = fsscope(installed, "profile", "list")
    assert profiles.returncode == 0, profiles.stderr
    assert "agrawal" in profiles.stdout and "small" in profiles.stdout, profiles.stdout
    themes = run(script.parent / "python", "-c", "from fsscope.tui.themes import theme_names; print(theme_names())",
                 cwd=cwd, env=clean_env(cwd))
    assert "fsscope-dark" in themes.stdout, themes.stdout + themes.stderr
    target = cwd / "target"
    target.mkdir()
    probe = fsscope(installed, "probe", "--dir", target, "--files", "50", "--runs", "2")
    assert probe.returncode == 0, probe.stdout[-2000:] + probe.stderr[-2000:]
    assert "50" in probe.stdout, probe.stdout


def test_setup_says_what_it_is_doing():
    """scripts/setup ran 77 s without a word on a fresh machine: now one line per step (here,
    the venv being current, the tool check and that it is already set up)."""
    done = run("bash", CHECKOUT / "scripts" / "setup", "--test", cwd=CHECKOUT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and all(line.startswith("setup: ") for line in lines), done.stdout
    assert "checking the system tools" in lines[0] and ("already set up" in lines[-1] or "done" in lines[-1]), lines
