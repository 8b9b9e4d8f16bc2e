"""Test session setup: an isolated fsscope home, privileged-test policy, and the leftover check.

- Every session gets its own FSSCOPE_HOME (runs, journal, mount points) and FSSCOPE_RAM_DIR,
  set before anything imports fsscope, so job child processes inherit them.
- Tests marked ``privileged`` need root and loop devices. Without them they skip with the
  reason — unless FSSCOPE_REQUIRE_PRIVILEGED=1 (CI), where that skip is a failure.
- At the end the session FAILS if anything it made is still mounted or attached: journal
  entries, loop devices backed by files under the session's directories, mounts below them,
  tracefs instances its jobs made (their names carry the session home's tag).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

BASE = Path(tempfile.mkdtemp(prefix="fsscope-test-", dir="/var/tmp"))
RAM_BASE = Path(tempfile.mkdtemp(prefix="fsscope-test-", dir="/dev/shm")) if os.path.isdir("/dev/shm") else BASE / "ram"
RAM_BASE.mkdir(exist_ok=True)
os.environ["FSSCOPE_HOME"] = str(BASE / "home")
os.environ["FSSCOPE_RAM_DIR"] = str(RAM_BASE)

REQUIRE_PRIVILEGED = os.environ.get("FSSCOPE_REQUIRE_PRIVILEGED") == "1"


def privileged_problem() -> str | None:
    if os.geteuid() != 0:
        return "needs root (formats loop images)"
    if not os.path.exists("/dev/loop-control"):
        return "needs loop devices (/dev/loop-control missing)"
    if shutil.which("losetup") is None and not os.path.exists("/usr/sbin/losetup"):
        return "needs losetup (util-linux)"
    return None


def pytest_runtest_setup(item):
    if item.get_closest_marker("privileged") is None:
        return
    problem = privileged_problem()
    if problem is None:
        return
    if REQUIRE_PRIVILEGED:
        pytest.fail(f"FSSCOPE_REQUIRE_PRIVILEGED=1 but this test {problem}")
    pytest.skip(problem)


def _under(path: str, roots: list[Path]) -> bool:
    return any(path == str(r) or path.startswith(str(r) + "/") for r in roots)


def leftovers() -> list[str]:
    roots = [BASE, RAM_BASE]
    found = []
    journal = BASE / "home" / "state" / "journal"
    if journal.is_dir():
        found += [f"journal entry {p.name}" for p in journal.glob("*.json")]
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            name = backing.read_text().strip().removesuffix(" (deleted)")
        except OSError:
            continue
        if _under(name, roots):
            found.append(f"/dev/{backing.parent.parent.name} backed by {name}")
    for line in Path("/proc/self/mounts").read_text().splitlines():
        mountpoint = line.split()[1]
        if _under(mountpoint, roots):
            found.append(f"mount {mountpoint}")
    from fsscope.trace.tracefs import fsscope_instances
    found += [f"tracefs instance {p}" for p in fsscope_instances(home=BASE / "home")]
    return found


@pytest.fixture(scope="session", autouse=True)
def no_leftovers():
    """Fail the session if it leaves a mount or loop device behind (then clean up anyway)."""
    yield
    left = leftovers()
    if left:
        subprocess.run([sys.executable, "-m", "fsscope", "cleanup", "--force", "--prepared"], capture_output=True)
        pytest.fail("the tests left these behind (a bug to fix): " + "; ".join(left))
    shutil.rmtree(RAM_BASE, ignore_errors=True)
    shutil.rmtree(BASE, ignore_errors=True)


@pytest.fixture
def scratch(tmp_path_factory) -> Path:
    """A directory under the session base (leftover checks cover it)."""
    return Path(tempfile.mkdtemp(dir=BASE))


def fsscope_cli(*args: str, timeout_s: float = 300, **kw) -> subprocess.CompletedProcess:
    """Run the real fsscope command line, as a user would."""
    return subprocess.run([sys.executable, "-m", "fsscope", *args], capture_output=True, text=True,
                          timeout=timeout_s, **kw)


@pytest.fixture
def cli():
    return fsscope_cli


@pytest.fixture
def loop_device(scratch):
    """Factory: a loop device over a fresh sparse image that the TEST made (not fsscope), so
    safety checks see a device fsscope did not create. Detached (and unmounted) afterwards."""
    made: list[tuple[str, Path]] = []

    def make(size: str = "512M") -> str:
        image = scratch / f"dev{len(made)}.img"
        subprocess.run(["truncate", "-s", size, str(image)], check=True)
        dev = subprocess.run(["losetup", "--find", "--show", str(image)], check=True,
                             capture_output=True, text=True).stdout.strip()
        made.append((dev, image))
        return dev

    yield make
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    for dev, _ in made:
        for line in mounts:
            if line.split()[0] == dev:
                subprocess.run(["umount", line.split()[1]], check=False)
        subprocess.run(["losetup", "-d", dev], check=False)


@pytest.fixture
def fresh_fs():
    """Factory: a formatted, mounted RAM image with a recipe (real mkfs + mount), released
    after the test. Returns the MountedFS; ``fresh_fs.targets[-1]`` is its Target."""
    from fsscope import recipes
    from fsscope.targets import Target, TargetSpec

    targets = []

    def make(recipe: str = "ext4-default", *, size_bytes: int = 512 * 2**20, mkfs_opts: str = "",
             mount_opts: str = ""):
        r = recipes.load(recipe).with_extra(mkfs_opts, mount_opts)
        target = Target(TargetSpec("ram", size_bytes=size_bytes), r)
        targets.append(target)
        target.open()
        return target.format_and_mount()

    make.targets = targets
    yield make
    for target in targets:
        target.close()


def run_to_end(job: str, spec: dict, where: Path) -> str:
    """Run ``job`` on a directory target through the engine until it ends; its run id (the
    run must have a report: the child's log tail says why not)."""
    from fsscope.engine import runner
    from fsscope.targets import TargetSpec

    handle = runner.start(job, spec, TargetSpec("dir", str(where)), None)
    for _event in handle.events():
        pass
    assert handle.run_dir.report() is not None, (handle.run_dir.path / "child.log").read_text()[-2000:]
    return handle.run_dir.id


@pytest.fixture
def recorded_run():
    return run_to_end

