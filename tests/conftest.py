"""Test session setup: an isolated fsscope home, privileged-test policy, and the leftover check.

- Every session gets its own FSSCOPE_HOME (runs, journal, mount points) and FSSCOPE_RAM_DIR,
  set before anything imports fsscope, so job child processes inherit them.
- Tests marked ``privileged`` need root and loop devices. Without them they skip with the
  reason — unless FSSCOPE_REQUIRE_PRIVILEGED=1 (CI), where that skip is a failure.
- At the end the session FAILS if anything it made is left (see LEFTOVER_CHECKS): journal
  entries, loop devices backed by files under the session's directories, mounts below them,
  processes it started, cgroups fsscope made for its jobs, named semaphores of its jobs, tracefs instances its jobs made
  (their names carry the session home's tag).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

BASE = Path(tempfile.mkdtemp(prefix="fsscope-test-", dir="/var/tmp"))
RAM_BASE = Path(tempfile.mkdtemp(prefix="fsscope-test-", dir="/dev/shm")) if os.path.isdir("/dev/shm") else BASE / "ram"
RAM_BASE.mkdir(exist_ok=True)
os.environ["FSSCOPE_HOME"] = str(BASE / "home")
os.environ["FSSCOPE_RAM_DIR"] = str(RAM_BASE)
os.environ["FSSCOPE_DISK_DIR"] = str(BASE / "disk")   # a study's device = "disk" images
(BASE / "disk").mkdir()

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


def leftover_journal_entries() -> list[str]:
    journal = BASE / "home" / "state" / "journal"
    return [f"journal entry {p.name}" for p in journal.glob("*.json")] if journal.is_dir() else []


def leftover_loop_devices() -> list[str]:
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            name = backing.read_text().strip().removesuffix(" (deleted)")
        except OSError:
            continue
        if _under(name, [BASE, RAM_BASE]):
            found.append(f"/dev/{backing.parent.parent.name} backed by {name}")
    return found


def leftover_tracefs_instances() -> list[str]:
    from fsscope.trace.tracefs import fsscope_instances

    return [f"tracefs instance {p}" for p in fsscope_instances(home=BASE / "home")]


def leftover_mounts() -> list[str]:
    return [f"mount {line.split()[1]}" for line in Path("/proc/self/mounts").read_text().splitlines()
            if _under(line.split()[1], [BASE, RAM_BASE])]


def _session_procs() -> list:
    """Processes the session started that still run: its descendants, and any process whose
    environment carries an FSSCOPE_HOME in the session's directory (a job child, mkfs, a
    forkserver, a worker: all inherit it, even once orphaned) or whose working directory is in
    the session's directories."""
    import psutil

    me = os.getpid()
    found = {p.pid: p for p in psutil.Process(me).children(recursive=True)}
    for helper in psutil.Process(me).children():  # this process's own forkserver / resource
        try:                                       # tracker (tests run workloads in-process):
            if any(f"from multiprocessing.{m} import" in " ".join(helper.cmdline())  # they go
                   for m in ("forkserver", "resource_tracker")):                   # when it exits
                found.pop(helper.pid)
        except psutil.Error:
            continue
    for pid_dir in Path("/proc").glob("[0-9]*"):
        pid = int(pid_dir.name)
        if pid == me or pid in found or psutil.pid_exists(pid) and _ppid(pid) == me:
            continue
        try:
            env = (pid_dir / "environ").read_bytes().split(b"\0")
            homes = [v.split(b"=", 1)[1].decode(errors="replace") for v in env if v.startswith(b"FSSCOPE_HOME=")]
            if any(_under(h, [BASE]) for h in homes) or _under(os.readlink(pid_dir / "cwd"), [BASE, RAM_BASE]):
                found[pid] = psutil.Process(pid)
        except (OSError, psutil.Error):
            continue
    alive = []
    for proc in found.values():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.Error:
            continue
    return alive


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def session_processes() -> list[str]:
    out = []
    for proc in _session_procs():
        try:
            out.append(f"process {proc.pid} ({' '.join(proc.cmdline())[:80] or proc.name()})")
        except Exception:  # noqa: BLE001 - gone meanwhile
            continue
    return out


def session_cgroups() -> list[str]:
    return [f"cgroup {path}" for path in _session_cgroup_dirs()]


def _session_job_pids() -> set[int]:
    """This process and every job child recorded in one of this session's runs."""
    pids = {os.getpid()}
    for manifest in (BASE / "home" / "runs").glob("*/manifest.json"):
        try:
            pids.add(int(json.loads(manifest.read_text()).get("pid") or 0))
        except (OSError, ValueError):
            continue
    return pids


def session_semaphores() -> list[str]:
    """Named semaphores of this session's jobs (/dev/shm/sem.fsscope-PID-*): a killed job's
    resource tracker dies with it, and the runner must sweep what it left."""
    from fsscope import proctree

    pids = _session_job_pids()
    return [f"named semaphore {path}" for pid, path in proctree.job_semaphores() if pid in pids]


def _session_cgroup_dirs() -> list[Path]:
    """cgroups fsscope made for this session's jobs (fsscope-job-PID, and the memory cgroups
    fsscope-PID-N of --mem-limit), PID being a job child recorded in a run, or this process."""
    from fsscope import proctree
    from fsscope.workloads import cgroup

    pids = _session_job_pids()
    found = []
    for parent in {proctree.job_cgroup_parent(), cgroup.detect().parent} - {None}:
        for path in parent.glob("fsscope-*"):
            number = path.name.removeprefix(proctree.JOB_PREFIX).removeprefix("fsscope-").split("-")[0]
            if path.is_dir() and number.isdigit() and int(number) in pids:
                found.append(path)
    return found


# The threat-model tests' local users are named after the session (useradd caps names at 32).
USER_PREFIX = "fsx" + BASE.name.removeprefix("fsscope-test-")[:6].lower().replace("_", "x") + "-"


def session_users() -> list[str]:
    import local_user

    return [f"local user {name}" for name in local_user.users_with_prefix(USER_PREFIX)]


# One function per kind of resource; each returns a line per leftover. Add new kinds here.
LEFTOVER_CHECKS = [leftover_journal_entries, leftover_loop_devices, leftover_mounts,
                   leftover_tracefs_instances, session_processes, session_cgroups, session_semaphores,
                   session_users]


def leftovers() -> list[str]:
    return [line for check in LEFTOVER_CHECKS for line in check()]


def wait_for_no_leftovers(timeout_s: float = 10.0) -> list[str]:
    """Leftovers that are still there after ``timeout_s`` (processes take a moment to die)."""
    deadline = time.monotonic() + timeout_s
    while (left := leftovers()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def clean_up_leftovers() -> None:
    """Undo whatever the session left: its processes, cgroups, journal, semaphores."""
    from fsscope import proctree

    for proc in _session_procs():
        proc.kill()
    for path in _session_cgroup_dirs():
        proctree.kill_and_remove(path)
    subprocess.run([sys.executable, "-m", "fsscope", "cleanup", "--force", "--prepared"], capture_output=True)
    for pid in _session_job_pids() - {os.getpid()}:
        proctree.sweep_semaphores(pid)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        item.fsscope_failed = True
    return report


@pytest.fixture(autouse=True)
def clean_up_after_a_failure(request):
    """A failed test may leave a mount or a loop device: undo it, so the next tests do not
    fail on the same leftovers (one bug, one failure). Passing tests are checked at the end."""
    yield
    if getattr(request.node, "fsscope_failed", False) and leftovers():
        clean_up_leftovers()


@pytest.fixture(scope="session", autouse=True)
def no_leftovers():
    """Fail the session if it leaves anything behind (then clean up anyway)."""
    yield
    left = wait_for_no_leftovers()
    if left:
        clean_up_leftovers()
        pytest.fail("the tests left these behind (a bug to fix): " + "; ".join(left))
    shutil.rmtree(RAM_BASE, ignore_errors=True)
    shutil.rmtree(BASE, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def session_cpu_hogs(no_leftovers):
    """FSSCOPE_TEST_CPU_HOGS=N: the whole session shares the machine with N spinning processes
    (``all``: one per CPU), e.g. to check that the probe's verdicts hold on a busy machine.
    Killed and reaped before the leftover check."""
    wanted = os.environ.get("FSSCOPE_TEST_CPU_HOGS", "")
    if not wanted:
        yield []
        return
    import machine_load

    count = None if wanted == "all" else int(wanted)
    with machine_load.cpu_hogs(count) as procs:
        yield procs


@pytest.fixture
def cpu_hogs():
    """Factory: a context manager running a CPU hog per core (or ``count``) for its block."""
    import machine_load

    return machine_load.cpu_hogs


@pytest.fixture
def device_writer():
    """Factory: a context manager with a process writing a device the test made."""
    import machine_load

    return machine_load.writer


SESSION_PID = os.getpid()


def _interrupted(signum, frame):
    if os.getpid() != SESSION_PID:  # a child forked from the session: it dies as it would have
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def pytest_configure(config):
    """A session ended by SIGTERM or SIGHUP (``timeout``, a closed terminal, CI cancelling it)
    ends as Ctrl-C does: pytest then tears down every fixture still set up, so the loop
    devices, mounts and processes the tests made are undone and checked, not left behind."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupted)


def pytest_sessionfinish(session, exitstatus):
    """A session that ran no test (a path that does not exist, a collection error) never
    reached ``no_leftovers``: its directories hold nothing, remove them."""
    if session.testscollected == 0:
        shutil.rmtree(RAM_BASE, ignore_errors=True)
        shutil.rmtree(BASE, ignore_errors=True)


@pytest.fixture
def scratch(tmp_path_factory) -> Path:
    """A directory under the session base (leftover checks cover it)."""
    return Path(tempfile.mkdtemp(dir=BASE))


def fsscope_cli(*args: str, timeout_s: float = 300, **kw) -> subprocess.CompletedProcess:
    """Run the real fsscope command line, as a user would -- from a script: no terminal on any
    stream, as in CI (rich sizes its output from a terminal on stdin too, so a developer's
    terminal would otherwise hide a wrap that CI's 80 columns show)."""
    if "input" not in kw:
        kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run([sys.executable, "-m", "fsscope", *args], capture_output=True, text=True,
                          timeout=timeout_s, **kw)


@pytest.fixture
def cli():
    return fsscope_cli


@pytest.fixture
def local_user():
    """A real unprivileged user (useradd) for the threat-model tests: make attacks as this
    user (``local_user.run``/``.python``), run fsscope as root. Removed with its processes and
    directories afterwards, even on failure."""
    import local_user as lu

    if os.geteuid() != 0 or shutil.which("useradd") is None and not os.path.exists(lu.USERADD):
        if REQUIRE_PRIVILEGED:
            pytest.fail("FSSCOPE_REQUIRE_PRIVILEGED=1 but the local-user tests need root and useradd")
        pytest.skip("needs root and useradd")
    user = lu.make(USER_PREFIX)
    try:
        yield user
    finally:
        lu.remove(user)


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
def made_fs(loop_device, scratch):
    """Factory: a loop device the test made, formatted with ``mkfs.<fs>`` and mounted by hand
    (the loop fixture unmounts and detaches it)."""

    def make(fs: str) -> Path:
        dev = loop_device("512M")
        subprocess.run([f"mkfs.{fs}", "-q", *(["-f"] if fs == "xfs" else []), dev], check=True)
        mnt = scratch / f"mnt-{fs}"
        mnt.mkdir()
        subprocess.run(["mount", dev, str(mnt)], check=True)
        return mnt

    return make


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
    """Run ``job`` (its spec given as plain fields) on a directory target through the engine
    until it ends; its run id (the run must have a report: the child's log tail says why not)."""
    from fsscope.engine import registry, runner
    from fsscope.targets import TargetSpec

    handle = runner.start(job, registry.spec_from_data(job, spec), TargetSpec("dir", str(where)), None)
    handle.drain()
    assert handle.run_dir.report() is not None, (handle.run_dir.path / "child.log").read_text()[-2000:]
    return handle.run_dir.id


@pytest.fixture
def recorded_run():
    return run_to_end

