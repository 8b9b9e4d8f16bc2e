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
def wheel(tmp_path_factory) -> Path:
    """fsscope's wheel, built from this checkout."""
    wheels = tmp_path_factory.mktemp("install") / "wheels"
    # build isolation: setuptools>=68 as pyproject.toml asks (from PyPI or pip's cache)
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps",
                "--disable-pip-version-check", "-q", "-w", wheels, CHECKOUT)
    assert built.returncode == 0, built.stderr
    (found,) = wheels.glob("fsscope-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel) -> tuple[Path, Path]:
    """(the fresh venv's fsscope script, a working directory outside the checkout)."""
    base = wheel.parent.parent
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


def test_the_wheel_carries_recipes_profiles_spaces_and_themes(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("fsscope/data/recipes/ext4-default.toml", "fsscope/data/recipes/aging/small.toml",
                 "fsscope/data/recipes/spaces/small.toml", "fsscope/data/themes/dark.tcss",
                 "fsscope/tui/app.tcss", "fsscope/workloads/personalities/native/loops.c"):
        assert name in names, name


def test_a_checkout_reads_recipes_and_themes_at_its_top_level():
    """recipes/ and themes/ are at the repository's top level (issue 33); an editable install
    and the tests read them there, through the same trusted path an installed wheel uses."""
    located = run(sys.executable, "-c", "from fsscope import paths, trust; "
                  "print(paths.recipes_dir()); print(paths.themes_dir()); print(trust.SHIPPED_RECIPES)",
                  env={k: v for k, v in os.environ.items() if k != "FSSCOPE_RECIPES"})
    assert located.returncode == 0, located.stderr
    assert located.stdout.split() == [str(CHECKOUT / "recipes"), str(CHECKOUT / "themes"),
                                      str(CHECKOUT / "recipes")], located.stdout
    assert not (CHECKOUT / "fsscope" / "data" / "recipes").exists()
    assert (CHECKOUT / "recipes" / "aging" / "small.toml").is_file()
    assert (CHECKOUT / "themes" / "dark.tcss").is_file()


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


@pytest.fixture(scope="module")
def core_installed(wheel, tmp_path_factory) -> tuple[Path, Path]:
    """``pip install fsscope`` as a user does it (dependencies resolved from PyPI, pip's cache
    warm): (that venv's fsscope script, a working directory outside the checkout)."""
    base = tmp_path_factory.mktemp("core")
    venv = base / "venv"
    made = run(sys.executable, "-m", "venv", venv)
    assert made.returncode == 0, made.stderr
    put = run(venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", "-q", wheel)
    assert put.returncode == 0, put.stderr[-3000:]
    outside = base / "elsewhere"
    outside.mkdir()
    return venv / "bin" / "fsscope", outside


# What the TUI's setup screen says when the user starts explore without the study extra.
TUI_START_EXPLORE = """
import asyncio
from fsscope.tui import AppConfig, make_app

async def main():
    app = make_app(AppConfig(is_root=False, jobs=("explore",)))
    async with app.run_test(size=(140, 45), notifications=True) as pilot:
        while app.focused is None:
            await pilot.pause()
        await pilot.press("ctrl+r")
        while not app._notifications:
            await pilot.pause()
        print(app.current_mode)
        print(*(n.message for n in app._notifications), sep="\\n")

asyncio.run(main())
"""


def test_the_core_install_brings_no_study_engine_and_explore_says_how_to_add_it(core_installed):
    """The core is what `pip install fsscope` brings (513 MB with Dask, SALib, pandas and
    matplotlib before); explore and study variation, on the command line and in the TUI,
    say in one line how to add the study extra, and nothing else is missing."""
    script, cwd = core_installed
    python = script.parent / "python"
    listed = run(python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check")
    names = {line.split("==")[0].lower() for line in listed.stdout.splitlines()}
    assert not names & {"pandas", "matplotlib", "distributed", "dask", "salib"}, sorted(names)
    assert {"textual", "rich", "psutil", "numpy", "scipy", "pyroute2", "sh", "msgspec"} <= names, sorted(names)
    helped = fsscope(core_installed, "--help")
    assert helped.returncode == 0 and "explore" in helped.stdout, helped.stderr
    for args in (("explore",), ("study", "variation", "--configurations", "2")):
        said = fsscope(core_installed, *args)
        lines = said.stderr.strip().splitlines()
        assert said.returncode == 2 and len(lines) == 1, (args, said.stdout, said.stderr)
        assert "pip install 'fsscope[study]'" in lines[0] and "distributed, SALib" in lines[0], lines
    tui = run(python, "-c", TUI_START_EXPLORE, cwd=cwd, env=clean_env(cwd))
    assert tui.returncode == 0, tui.stderr[-3000:]
    mode, *notice = tui.stdout.strip().splitlines()
    assert mode == "setup" and any("pip install 'fsscope[study]'" in line for line in notice), tui.stdout
    target = cwd / "target"
    target.mkdir()
    probe = fsscope(core_installed, "probe", "--dir", target, "--files", "50", "--runs", "2")
    assert probe.returncode == 0, probe.stdout[-2000:] + probe.stderr[-2000:]
