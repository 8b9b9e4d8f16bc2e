"""What starting fsscope imports (issue 33), as Harlequin tests it: in a fresh interpreter, the
command line's parser with ``--help``, and the TUI to its first painted Setup screen, must not pull
in scipy.stats, the study engine (distributed, SALib, pandas) or a job's TUI model -- `fsscope
--help` took 7 s importing every job, the Setup screen 11 s. How long they take is measured in
bench/startup.py against references; this test names what may not be loaded."""

from __future__ import annotations

import json
import subprocess
import sys

from fsscope.engine.jobs import JOBS

HEAVY = ("scipy.stats", "distributed", "dask", "SALib", "pandas", "matplotlib")

CLI_HELP = """
import contextlib, io, json, sys
import fsscope.cli
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        fsscope.cli.main(["--help"])
    except SystemExit:
        pass
assert "probe" in out.getvalue() and "explore" in out.getvalue(), out.getvalue()
print(json.dumps(sorted(sys.modules)))
"""

SETUP_SCREEN = """
import json, sys
from fsscope.tui import AppConfig, make_app
from fsscope.tui.screens.setup import SetupScreen

app = make_app(AppConfig(is_root=False))

async def drive(pilot):
    while not (isinstance(app.screen, SetupScreen) and app.screen.is_mounted):
        await pilot.pause()
    await pilot.pause()
    assert app.screen.query_one("#job-picker").selected == ["probe"]
    app.exit(sorted(sys.modules))

print(json.dumps(app.run(headless=True, size=(160, 48), auto_pilot=drive)))
"""

# what is loaded at the Setup screen's first complete frame (the job's panel mounted), where
# bench/startup.py stops: the device discovery the screen starts after it is not counted. As root
# (the bench's case), whose default target is an image; a user's is a directory, whose note says
# what file system holds it (the mount table: fsscope.targets.existing, identity)
SETUP_FIRST_FRAME = """
import json, os, sys
from fsscope.tui import AppConfig, make_app
from fsscope.tui.screens.setup import SetupScreen

app = make_app(AppConfig(is_root=True))
display = app._display  # every frame goes here (Textual 8)

def first_frame(screen, renderable):
    display(screen, renderable)
    if (renderable is not None and isinstance(screen, SetupScreen) and screen.is_mounted
            and screen.query_one("#job-picker").ready):
        os.write(1, (json.dumps(sorted(sys.modules)) + "\\n").encode())
        os._exit(0)

app._display = first_frame
app.run(headless=True, size=(160, 48))
"""


def modules_after(code: str, tmp_path) -> set[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={"FSSCOPE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"})
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def job_models(loaded: set[str]) -> list[str]:
    """The TUI's per-job models (``fsscope/tui/*_model.py``) that are loaded."""
    return sorted(m for m in loaded if m.startswith("fsscope.tui.") and m.endswith("_model"))


def test_help_imports_no_job(tmp_path):
    loaded = modules_after(CLI_HELP, tmp_path)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    jobs = sorted(loaded & {job.module for job in JOBS.values()})
    assert not jobs and not job_models(loaded), (jobs, job_models(loaded))
    commands = sorted(m for m in loaded if m.startswith("fsscope.cli."))
    assert not commands, commands  # the listing is cli.COMMANDS; no command module is imported
    # the jobs' commands are read from their descriptors (engine/jobs.py), which import no record,
    # no numpy and no job
    assert "fsscope.engine.jobs" in loaded and not loaded & {"numpy", "msgspec", "fsscope.engine.registry"}


def test_the_setup_screen_imports_no_heavy_module_and_only_the_shown_jobs_spec(tmp_path):
    loaded = modules_after(SETUP_SCREEN, tmp_path)
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert not job_models(loaded), job_models(loaded)
    jobs = loaded & {job.module for job in JOBS.values()}
    # the probe's panel is shown (its Spec); the highlight passes over the first job listed
    assert jobs <= {JOBS["probe"].module, JOBS["smoke"].module}, sorted(jobs)
    for screen in ("live", "runs", "lab", "compare", "help"):
        assert f"fsscope.tui.screens.{screen}" not in loaded, screen


def test_the_setup_screens_first_frame_loads_the_targets_spec_only(tmp_path):
    """The targets package loads its spec with it; the journal, Target, images, the device list
    and the mount table load on first use (a preflight, the discovery started after this frame):
    they took ~50 M instructions of the Setup screen's start (issue 33)."""
    loaded = modules_after(SETUP_FIRST_FRAME, tmp_path)
    assert {"fsscope.targets", "fsscope.targets.spec", "fsscope.tui.screens.setup"} <= loaded
    making = {f"fsscope.targets.{name}" for name in ("journal", "target", "devices", "existing", "identity", "image")}
    assert not loaded & (making | {"fsscope.proctree"}), sorted(loaded & (making | {"fsscope.proctree"}))


def test_the_study_jobs_specs_import_without_the_study_extra():
    """The Setup screen and `--help` read explore's and variation's specs from their job modules,
    and a core install has no Dask: those modules (and the credentials check they call) import
    with distributed, dask and SALib missing; only starting a cluster needs them."""
    code = ("import sys\n"
            "for name in ('distributed', 'dask', 'SALib'):\n"
            "    sys.modules[name] = None  # as if not installed: importing it raises ImportError\n"
            "import fsscope.study.explore, fsscope.study.variation\n"
            "from fsscope.engine import registry\n"
            "print(registry.spec_type('explore').__name__, registry.spec_type('variation').__name__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [registry_spec_name("explore"), registry_spec_name("variation")]


def registry_spec_name(job: str) -> str:
    from fsscope.engine import registry

    return registry.spec_type(job).__name__
