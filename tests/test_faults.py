"""Fault injection: kill the CLI, the job child or a workload worker at each phase of a real
bench job on a small RAM loop image, and check that nothing is left (process, loop device,
mount, journal entry, cgroup — tests/conftest.py's LEFTOVER_CHECKS) and that every value the
job measured before the kill is readable from its run record.

Each case waits on a FACT before killing (a badblocks/mkfs process in the job's process group,
a live journalled mount, a phase or log line in events.ndjson) — never on a fixed sleep.

What must hold, by whom:
- CLI killed (SIGKILL): the job child sees its event pipe lose its reader, stops, cleans up
  and records "interrupted" — within seconds, with nobody waiting for it.
- CLI SIGTERM, or Ctrl-C once: the job is cancelled, cleans up, the CLI exits 130.
- Ctrl-C twice: the CLI kills the job's whole process tree and undoes what it left before
  it exits; it says what it killed.
- job child killed (SIGKILL): the CLI kills what the child left running (mkfs, badblocks,
  the forkserver, workers) before undoing mounts and loop devices, and says so truthfully.
- a worker killed: the run goes on without it and records a note.
- everything killed at once: `fsscope cleanup` kills the orphans (the job's cgroup) before it
  detaches the loop device they hold.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
from conftest import fsscope_cli, leftovers, wait_for_no_leftovers
from pilot_wait import wait_for

from fsscope import proctree, store
from fsscope.targets.journal import Journal, cleanup

pytestmark = pytest.mark.privileged


class Cli:
    """``fsscope bench`` in its own session (as a shell would start it), stderr collected."""

    def __init__(self, *extra: str, duration_s: float = 30):
        argv = [sys.executable, "-m", "fsscope", "bench", "--runs", "1", "--duration", str(duration_s),
                "--files", "300", "--workers", "2", "--ram", "--size", "256M",
                "--recipe", "ext4-default", "-v", *extra]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.run = store.RunDir(Path(wait_for(lambda: next(
            (ln.split(None, 1)[1] for ln in self.lines if ln.startswith("run /")), None))))

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def child_pid(self) -> int:
        return wait_for(lambda: self.run.manifest().get("pid"))

    def finish(self, timeout_s: float = 60) -> int:
        rc = self.proc.wait(timeout_s)
        self._reader.join(timeout_s)
        return rc


def job_processes(child_pid: int) -> list[psutil.Process]:
    """The job child's process group (it leads its own session): what it started."""
    out = []
    for proc in psutil.process_iter(["name"]):
        try:
            if os.getpgid(proc.pid) == child_pid and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (OSError, psutil.Error):
            continue
    return out


def logged(run: store.RunDir, test) -> bool:
    return any(test(event) for event in run.events())


# -- the facts each phase waits on ----------------------------------------------------------------

def at_mkfs(cli: Cli) -> None:
    child = cli.child_pid()
    wait_for(lambda: any(p.info["name"] in ("badblocks", "mkfs.ext4") for p in job_processes(child)))


def at_mount(cli: Cli) -> None:
    wait_for(lambda: any(e.kind == "mount" and os.path.ismount(e.fields["mountpoint"])
                         for e in Journal().entries()))


def at_populate(cli: Cli) -> None:
    wait_for(lambda: logged(cli.run, lambda e: e["kind"] == "phase" and "populate" in e["name"]))


def at_measure(cli: Cli) -> None:
    wait_for(lambda: logged(cli.run, lambda e: e["kind"] == "progress" and "ops/s" in e.get("info", "")))


def at_unmount(cli: Cli) -> None:
    wait_for(lambda: logged(cli.run, lambda e: e["kind"] == "log" and e["line"].startswith("$ umount")))


PHASES = {"mkfs": at_mkfs, "mount": at_mount, "populate": at_populate, "measure": at_measure,
          "unmount": at_unmount}


# -- the kills ------------------------------------------------------------------------------------

def kill_cli(cli: Cli) -> None:
    cli.proc.kill()


def term_cli(cli: Cli) -> None:
    cli.proc.send_signal(signal.SIGTERM)


def double_sigint(cli: Cli) -> None:
    cli.proc.send_signal(signal.SIGINT)
    wait_for(lambda: "cancelling" in cli.stderr)
    cli.proc.send_signal(signal.SIGINT)


def kill_child(cli: Cli) -> None:
    os.kill(cli.child_pid(), signal.SIGKILL)


KILLS = {"cli-SIGKILL": kill_cli, "cli-SIGTERM": term_cli, "cli-2xSIGINT": double_sigint,
         "child-SIGKILL": kill_child}


def measured_bins_are_kept(run: store.RunDir) -> None:
    """Every 1-s bin the job reported (a logged progress event: ops/s of the bin just
    aggregated) is in run0_counts.npy with at least that many operations (a bin shown before
    a lagging worker reported it may grow afterwards)."""
    reported = [e for e in run.events() if e["kind"] == "progress" and "ops/s" in e.get("info", "")]
    counts = run.load_array("run0_counts")
    assert reported and counts.ndim == 2
    for event in reported:
        b = round(event["done"]) - 1
        ops = int(event["info"].split()[-2].replace(",", ""))
        assert counts[:, b].sum() >= ops, (b, ops, counts.sum(axis=0))


# Every kill at every phase, but a cancel at the unmount phase (it races the job's own end) and
# a SIGTERM while measuring (the first half of the double Ctrl-C there): 17 cases.
CASES = [(kill, phase) for kill in KILLS for phase in PHASES
         if (kill, phase) not in {("cli-SIGTERM", "unmount"), ("cli-2xSIGINT", "unmount"),
                                  ("cli-SIGTERM", "measure")}]


@pytest.mark.parametrize(("kill", "phase"), CASES, ids=[f"{k}-{p}" for k, p in CASES])
def test_a_kill_at_any_phase_leaves_nothing_and_keeps_what_was_measured(phase, kill):
    extra = {"mkfs": ("--mkfs-opts=-c -c",),                           # badblocks: a mkfs long enough to hit
             "populate": ("--files", "10000", "--mean-file-size", "4K")}  # a populate long enough to hit
    cli = Cli(*extra.get(phase, ()), duration_s=1 if phase == "unmount" else 30)
    try:
        PHASES[phase](cli)
        KILLS[kill](cli)
        rc = cli.finish()
    finally:
        if cli.proc.poll() is None:
            cli.proc.kill()
    # at the unmount phase the job may finish before the kill lands
    finished = {"ok"} if phase == "unmount" else set()
    if kill == "cli-SIGKILL":
        # nobody waits for the job: it must notice, stop and clean up on its own (the bound is
        # this file's other waits', 60 s: a loaded CI's unmount and detach took seconds)
        assert wait_for_no_leftovers(timeout_s=60) == [], cli.run.manifest()
        status = wait_for(lambda: cli.run.status() if cli.run.status() != "running" else None)
        assert status in {"interrupted"} | finished
        assert status == "ok" or "started it died" in cli.run.manifest()["error"]
    else:
        # the CLI undoes everything before it exits, and says what happened
        assert leftovers() == [], cli.stderr
        status = cli.run.status()
        assert rc == 130 or rc == 0 and status == "ok", cli.stderr  # ok: it ended before the signal
        if kill == "child-SIGKILL":
            assert status in {"interrupted"} | finished  # at unmount the job may have ended first
            if status == "interrupted":
                assert "cleaned up after the killed job: " in cli.stderr, cli.stderr
            assert "still in use" not in cli.stderr  # "detached" was true
        else:
            assert status in {"cancelled", "interrupted"} | finished, cli.stderr
            assert "cancelling" in cli.stderr
        if kill == "cli-2xSIGINT" and phase == "populate":
            assert "killed the job and every process it started: " in cli.stderr, cli.stderr
            if status != "cancelled":  # the usual case: the second Ctrl-C lands before the job recorded its end
                assert cli.run.manifest()["error"] == "killed by a second Ctrl-C", cli.stderr
                assert "killed the job and every process it started: python" in cli.stderr
        if kill == "cli-SIGTERM" and phase in ("mount", "populate", "measure"):  # it went on showing the job
            assert "$ umount" in cli.stderr.split("cancelling", 1)[1], cli.stderr
        if kill == "cli-SIGTERM" and phase == "mkfs":  # mkfs stopped by the cancel: no recipe failure
            assert status == "interrupted" and "it was cancelled" in cli.run.manifest()["error"]
    if phase in ("measure", "unmount"):
        measured_bins_are_kept(cli.run)
    if phase == "measure" and kill == "child-SIGKILL":  # no report: 'fsscope report' shows what was kept
        out = fsscope_cli("report", cli.run.id)
        ops = int(cli.run.load_array("run0_counts").sum())
        assert out.returncode == 0 and f"run 1: {ops:,} operations in" in out.stdout, out.stdout


def test_a_killed_worker_does_not_stop_the_run():
    # 8 s: the first window's progress can arrive 2 s in on a loaded machine, and the workers
    # must still be measuring then (with 2 s they had sometimes already finished)
    cli = Cli(duration_s=8)
    try:
        at_measure(cli)
        child = cli.child_pid()
        forkserver = next(p for p in job_processes(child) if "forkserver" in " ".join(p.cmdline()))
        worker = wait_for(lambda: next(iter(forkserver.children()), None))
        worker.kill()
        rc = cli.finish()
    finally:
        if cli.proc.poll() is None:
            cli.proc.kill()
    assert leftovers() == []
    assert rc == 0, cli.stderr
    assert cli.run.status() == "ok"
    notes = json.dumps(cli.run.report()["runs"][0]["notes"])
    assert f"pid {worker.pid}) exited with code -9" in notes
    measured_bins_are_kept(cli.run)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (scripts/setup installs it)")
def test_a_killed_tui_leaves_no_job_running(scratch):
    """The TUI (in a real terminal) starts a probe; SIGKILL of the TUI stops the job child,
    which cleans up on its own and records why."""
    from test_tui_tmux import FSSCOPE, Pane, tmux

    workdir, home = scratch / "measure-here", scratch / "home"
    workdir.mkdir()
    session = f"fsscope-faults-{os.getpid()}"
    tmux("new-session", "-d", "-s", session, "-x", "150", "-y", "48",
         f"env FSSCOPE_HOME={home} TERM=xterm-256color {FSSCOPE} tui --dir {workdir}")
    pane = Pane(session)
    try:
        tui = psutil.Process(int(tmux("list-panes", "-t", session, "-F", "#{pane_pid}").stdout.split()[0]))
        pane.wait_for("1 · Target")
        pane.keys("C-r")
        # the run's directory, not the log's "probe started": tmux sometimes gives the pane
        # 80x24 whatever -x/-y say, and there the log's few lines scroll it away within a second
        run = store.RunDir(wait_for(lambda: next(iter((home / "runs").glob("*-probe")), None),
                                    "the probe's run directory", timeout_s=60))
        child = psutil.Process(wait_for(lambda: run.manifest().get("pid")))
        wait_for(lambda: any(workdir.iterdir()))  # the job is measuring in its fresh subdirectory
        tui.kill()
        child.wait(timeout=15)  # it noticed, stopped and cleaned up on its own
    finally:
        tmux("kill-session", "-t", session, check=False)
        tmux("kill-server", check=False)
    assert run.status() == "interrupted" and "started it died" in run.manifest()["error"]
    assert list(workdir.iterdir()) == []
    assert list((home / "state" / "journal").glob("*.json")) == []
    assert wait_for_no_leftovers() == []


def test_cleanup_after_everything_was_killed_at_mkfs_kills_the_orphans_first():
    """CLI and job child both SIGKILLed while badblocks runs: the orphaned badblocks holds the
    loop device, so 'fsscope cleanup' must kill it (the job's cgroup) before it detaches — and
    say 'detached' only once it is true."""
    cli = Cli("--mkfs-opts=-c -c")
    try:
        child = cli.child_pid()
        wait_for(lambda: any(p.info["name"] == "badblocks" for p in job_processes(child)))
        cli.proc.send_signal(signal.SIGSTOP)  # so it cannot clean up, nor the child notice, meanwhile
        os.kill(child, signal.SIGKILL)
        cli.proc.kill()
        cli.finish()
    finally:
        if cli.proc.poll() is None:
            cli.proc.kill()
    wait_for(lambda: not psutil.pid_exists(child))  # dead and reaped: its journal entries are orphans
    # mkfs and badblocks may run on, holding the loop device (or die of SIGPIPE on their own)
    out = fsscope_cli("cleanup")
    assert out.returncode == 0, out.stderr
    assert leftovers() == [], out.stdout
    # (the orphans may die on their own meanwhile: their output pipes lost their reader)
    assert "killed what the job left running: mkfs.ext4" in out.stdout or not job_processes(child)
    assert "detached" in out.stdout and "still in use" not in out.stdout


def test_kill_job_reaches_a_process_that_left_the_process_group():
    """setsid escapes a process-group kill, not the job's cgroup."""
    journal = Journal()
    script = ("import os, subprocess, sys; from fsscope import proctree; from fsscope.targets.journal import Journal; "
              "proctree.enter_job_cgroup(Journal()); "
              "p = subprocess.Popen(['setsid', 'sleep', '600']); print(p.pid, flush=True); os.pause()")
    job = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        escaped = psutil.Process(int(job.stdout.readline()))
        wait_for(lambda: os.getpgid(escaped.pid) != job.pid)  # setsid has run: out of the job's group
        entry = next(e for e in journal.entries() if e.kind == "cgroup" and e.owner_pid == job.pid)
        killed = proctree.kill_job(Path(entry.fields["path"]), job.pid)
        assert any(f"(pid {escaped.pid})" in k for k in killed), killed
        escaped.wait(5)
        job.wait(5)
    finally:
        if job.poll() is None:
            job.kill()
        job.stdout.close()
    assert cleanup(owner_pid=job.pid) == []  # nothing was left running: its cgroup goes quietly
    assert leftovers() == []


def test_a_killed_job_leaves_no_memory_cgroup():
    """bench --mem-limit moves its workers into a memory cgroup of their own: killing the job
    child must not leave it behind."""
    cli = Cli("--mem-limit", "256M")
    try:
        at_measure(cli)
        kill_child(cli)
        rc = cli.finish()
    finally:
        if cli.proc.poll() is None:
            cli.proc.kill()
    assert rc == 130 and leftovers() == [], cli.stderr
    measured_bins_are_kept(cli.run)


MAKES_SEMAPHORES = """
import multiprocessing as mp, sys
from fsscope import proctree
proctree.name_semaphores_after_job()
keep = mp.get_context("forkserver").Event()  # a Condition and Semaphores: named, in /dev/shm
print("ready", flush=True)
sys.stdin.read()
"""


def test_cleanup_sweeps_the_named_semaphores_of_a_killed_job_and_only_those():
    """Killed with its resource tracker (a job's process group), a process leaves its named
    semaphores; 'fsscope cleanup' removes those of dead processes, never a live one's."""
    def start():
        proc = subprocess.Popen([sys.executable, "-c", MAKES_SEMAPHORES], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert proc.stdout.readline().strip() == "ready"
        return proc, sorted(proctree.SEM_DIR.glob(f"sem.fsscope-{proc.pid}-*"))

    dead, dead_sems = start()
    live, live_sems = start()
    try:
        assert dead_sems and live_sems
        os.killpg(dead.pid, signal.SIGKILL)   # the process and its resource tracker: nobody can unlink
        dead.wait()
        assert all(p.exists() for p in dead_sems)                 # left behind: nobody unlinked them
        out = fsscope_cli("cleanup")
        removed = re.search(r"removed (\d+) named semaphore\(s\)", out.stdout)
        # at least ours: the sweep is machine-wide, and a reused runner may hold older dead ones
        assert out.returncode == 0 and removed and int(removed[1]) >= len(dead_sems), out.stdout
        assert not any(p.exists() for p in dead_sems) and all(p.exists() for p in live_sems)
    finally:
        for proc in (dead, live):
            if proc.poll() is None:
                proc.stdin.close()
                proc.wait(10)
    assert not any(p.exists() for p in live_sems)                # the live one cleaned up after itself
