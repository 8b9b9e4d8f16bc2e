"""Code hygiene the suite enforces: the architecture contracts in pyproject.toml
([tool.importlinter]: layers point down, Textual only in fsscope.tui, Rich only in cli/tui,
analysis/targets/layout import no job or UI module), ruff's lint rules ([tool.ruff]) and
mypy's type check ([tool.mypy]).

import-linter reads the source, so it also sees imports made inside functions."""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _run(tool: str, *args: str) -> subprocess.CompletedProcess:
    exe = BIN / tool
    if not exe.exists():
        pytest.fail(f"{tool} is not installed in {BIN}: run scripts/setup --test")
    return subprocess.run([str(exe), *args], cwd=ROOT, capture_output=True, text=True)


def test_import_contracts_hold():
    out = _run("lint-imports", "--no-cache")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


def test_every_tui_model_is_in_the_plain_models_contract():
    """import-linter's wildcards stand for whole module names, so ``*_model`` is listed by hand."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    plain = next(c for c in contracts if c["name"].startswith("The TUI's models are plain Python"))
    models = {f"fsscope.tui.{p.stem}" for p in (ROOT / "fsscope" / "tui").glob("*_model.py")}
    assert models and models <= set(plain["source_modules"]), models - set(plain["source_modules"])


def test_ruff_finds_nothing():
    out = _run("ruff", "check", "--no-cache", ".")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_mypy_finds_no_type_error():
    """Every module outside [tool.mypy]'s ignore_errors list type-checks (the cache lives in
    .mypy_cache: a warm run takes a few seconds)."""
    out = _run("mypy")
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert "Success: no issues found" in out.stdout


def test_the_type_check_ignore_list_names_only_modules_that_exist():
    """A module split, renamed or removed leaves the list (it only shrinks), so an entry never
    silently exempts a new module that takes the old name."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    ignored = [m for o in config["overrides"] if o.get("ignore_errors") for m in o["module"]]
    assert ignored, "the ignore_errors block is gone: remove this test with it"
    missing = [m for m in ignored
               if not (ROOT / f"{m.replace('.', '/')}.py").is_file()
               and not (ROOT / m.replace(".", "/") / "__init__.py").is_file()]
    assert missing == [], f"in the mypy ignore list but not in the tree: {missing}"
