"""The study cluster on a machine other users share (issue #32, items 1 and 2). A study's
scheduler and workers run as root and run whatever a client submits: as a real unprivileged
user (``local_user``), connect to every port a root study job listens on -- plainly, over TLS
without a certificate, and with a certificate of the user's own CA -- and try to make a worker
write a file; plant a module in ``$TMPDIR/dask-scratch-space`` before a study starts. Neither
may run anything. A plain ``tcp://`` scheduler is refused in one line; the README's multi-host
recipe (mutual TLS) runs a study on a real scheduler and two workers here."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import dask_tls
import psutil
import pytest
from local_user import USER_PYTHON
from test_study_engine import OVERRIDES, drive_study, study_leftovers, treatment_fn

from fsscope.study import player
from fsscope.study import space as spaces
from fsscope.study.explore import ExploreRow
from fsscope.study.plan import Plan
from fsscope.targets.journal import Journal

pytestmark = pytest.mark.privileged

SITE = sysconfig.get_paths()["purelib"]  # the attacker's Dask: the same version as root's


def tiny_plan() -> Plan:
    space = spaces.load("small", player.EXPLORE_SCHEMA).with_levels(OVERRIDES, player.EXPLORE_SCHEMA)
    return Plan.make(space, 2, seed=5)


def as_user(user, code: str, *args: str, timeout_s: float = 240) -> subprocess.CompletedProcess:
    """``code`` run by the user's Python (isolated; Dask from root's virtualenv, read-only)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(user.home), "LC_ALL": "C"}
    return subprocess.run([USER_PYTHON, "-I", "-c", code, *args], user=user.uid, group=user.gid, extra_groups=[],
                          env=env, cwd=user.home, capture_output=True, text=True, timeout=timeout_s)


def own_ca(user) -> dict[str, str]:
    """A CA and a certificate it signed, made by the user with the README's commands."""
    d = user.home / "mine"
    user.run("mkdir", str(d))
    for line in dask_tls.recipe():
        if line.startswith("openssl"):
            user.run("bash", "-c", f"cd {d} && {line}")
    return {"cert": str(d / "cert.pem"), "key": str(d / "key.pem")}


ATTACK = r"""
import asyncio, json, os, ssl, sys, threading, time
sys.path.append(SITE)
from distributed import Client
from distributed.comm import connect
from distributed.security import Security

cfg = json.loads(sys.argv[1])
WAYS = {"tcp": None, "tls without a certificate": {}, "tls with the user's own CA": cfg["own"]}


def connection_args(way):
    # the attacker checks nothing of the server: only the server's checks can stop them
    if WAYS[way] is None:
        return "tcp", {}
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if WAYS[way]:
        ctx.load_cert_chain(WAYS[way]["cert"], WAYS[way]["key"])
    return "tls", {"ssl_context": ctx, "require_encryption": True, "extra_conn_args": {}}


async def talk(port, way):
    scheme, kw = connection_args(way)
    async def ask():
        comm = await connect(f"{scheme}://127.0.0.1:{port}", timeout=4, **kw)
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()

    try:  # a TLS hello to a plain server can wait for ever: no answer in 15 s is none
        return f"answered {str(await asyncio.wait_for(ask(), 15))[:60]}"
    except Exception as exc:
        return f"refused ({type(exc).__name__})"


async def talk_all():
    pairs = [(p, w) for p in cfg["ports"] for w in WAYS]
    return dict(zip([f"{p} {w}" for p, w in pairs], await asyncio.gather(*(talk(p, w) for p, w in pairs))))


def write_file(path):
    with open(path, "w") as fh:
        fh.write(f"uid {os.getuid()}\n")
    return os.getuid()


def submit(port, way, out):
    scheme, kw = connection_args(way)
    try:
        with Client(f"{scheme}://127.0.0.1:{port}", timeout=4, security=Secure(kw)) as client:
            uid = client.submit(write_file, cfg["marker"], pure=False).result(timeout=20)
        out[f"{port} {way}"] = f"ran as uid {uid}"
    except Exception as exc:
        out[f"{port} {way}"] = f"refused ({type(exc).__name__})"


class Secure(Security):
    def __init__(self, kw):
        super().__init__()
        self.kw = kw

    def get_connection_args(self, role):
        return self.kw


out = {"talk": asyncio.run(talk_all()), "submit": {}}
tries = [threading.Thread(target=submit, args=(p, w, out["submit"]), daemon=True) for p in cfg["ports"] for w in WAYS]
for t in tries:
    t.start()
deadline = time.monotonic() + 90
for t in tries:
    t.join(max(0.0, deadline - time.monotonic()))
print(json.dumps(out), flush=True)
os._exit(0)  # a Client still trying does not keep the attack waiting
""".replace("SITE", repr(SITE))


def listening(pids: set[int]) -> set[int]:
    """The TCP ports processes ``pids`` listen on."""
    ports = set()
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.NoSuchProcess:
            continue
        ports |= {c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN}
    return ports


def job_processes() -> set[int]:
    me = psutil.Process()
    return {me.pid} | {p.pid for p in me.children(recursive=True)}


def wait_mounted(timeout_s: float = 180) -> None:
    """Until a treatment holds its clone mounted: the cluster is up and working."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(e.kind == "mount" and e.group.startswith("study-") for e in Journal().entries()):
            return
        time.sleep(0.05)
    raise AssertionError("no treatment started")


# -- 1. the running study's ports ---------------------------------------------------------------
def test_no_port_of_a_running_study_takes_work_from_another_user(local_user, tmp_path):
    """Before: ``Client("tcp://127.0.0.1:PORT").submit(...)`` ran as uid 0 on the job's workers."""
    marker = local_user.shared / "ran-as-root"
    own = own_ca(local_user)
    before = listening(job_processes())
    plan = tiny_plan()
    hold = tmp_path / "hold"
    hold.write_text("treatments wait here while this file exists\n")
    fn = treatment_fn(plan, "fsscope-study-attacked", str(hold))
    (tmp_path / "study").mkdir()
    driver, result = drive_study(plan, fn, tmp_path / "study", ExploreRow, workers=1, teardown=fn.drop_cache)
    try:
        wait_mounted()
        ports = sorted(listening(job_processes()) - before)
        assert len(ports) >= 3, ports  # the scheduler, the nanny, the worker (and nothing more: no dashboard)
        attack = as_user(local_user, ATTACK, json.dumps({"ports": ports, "marker": str(marker), "own": own}))
    finally:
        hold.unlink()
        driver.join(240)
    assert attack.returncode == 0, attack.stderr[-3000:]
    out = json.loads(attack.stdout)
    assert all(v.startswith("refused") for v in out["talk"].values()), out["talk"]
    assert len(out["submit"]) <= 3 * len(ports) and not any(v.startswith("ran") for v in out["submit"].values()), out
    assert any(v.startswith("refused") for v in out["submit"].values()), out  # the attempts were made
    assert not marker.exists()
    assert not driver.is_alive() and "error" not in result, result
    assert all(isinstance(r, ExploreRow) for r in result["rows"]), result["rows"]  # the job still measured
    assert study_leftovers() == []
    assert not any((Path(os.environ["FSSCOPE_HOME"]) / "state" / "clusters").iterdir())  # credentials gone


# -- 2. a planted dask-scratch-space ------------------------------------------------------------
PLANT = r"""
import os, sys
d = os.path.join(sys.argv[1], "dask-scratch-space")
os.makedirs(os.path.join(d, "fsscope"), mode=0o777)
os.chmod(d, 0o777)
with open(os.path.join(d, "fsscope", "__init__.py"), "w") as fh:
    fh.write("import os\nopen(%r, 'a').write('imported as uid %%d\\n' %% os.getuid())\n" % sys.argv[2])
"""


def test_a_dask_scratch_space_planted_in_tmpdir_is_never_used(local_user, tmp_path, monkeypatch):
    """Before: workers adopted ``$TMPDIR/dask-scratch-space``, put it first on ``sys.path``
    and imported the user's ``fsscope`` from it as root."""
    marker = local_user.shared / "imported-as-root"
    as_user(local_user, PLANT, str(local_user.shared), str(marker))
    planted = local_user.shared / "dask-scratch-space"
    made = sorted(p.name for p in planted.iterdir())
    monkeypatch.setenv("TMPDIR", str(local_user.shared))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    plan = tiny_plan()
    fn = treatment_fn(plan, "fsscope-study-planted")
    (tmp_path / "study").mkdir()
    driver, result = drive_study(plan, fn, tmp_path / "study", ExploreRow, workers=1, teardown=fn.drop_cache)
    driver.join(240)
    assert not driver.is_alive() and "error" not in result, result
    assert all(isinstance(r, ExploreRow) for r in result["rows"]), result["rows"]
    assert not marker.exists(), marker.read_text()
    assert sorted(p.name for p in planted.iterdir()) == made  # root made nothing in it
    assert not any(p.startswith(str(local_user.shared)) for p in sys.path)
    assert study_leftovers() == []


# -- 3. a plain tcp:// scheduler ----------------------------------------------------------------
def one_line(proc: subprocess.CompletedProcess, *says: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr)
    assert all(s in lines[0] for s in says), lines[0]
    return lines[0]


@pytest.mark.parametrize("job", [["explore"], ["study", "variation"]])
def test_a_plain_tcp_scheduler_is_refused_in_one_line(cli, job):
    one_line(cli(*job, "--scheduler", "tcp://127.0.0.1:8786"), "tcp://127.0.0.1:8786", "--insecure-scheduler",
             "run code as root")
    one_line(cli(*job, "--scheduler", "127.0.0.1:8786"), "--insecure-scheduler")  # Dask's default is tcp
    one_line(cli(*job, "--scheduler", "tls://127.0.0.1:8786"), "--security FILE")


def test_insecure_scheduler_says_what_it_means(cli):
    with socket.socket() as s:  # a port no scheduler listens on: nothing to run
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = cli("explore", "--scheduler", f"tcp://127.0.0.1:{port}", "--insecure-scheduler", "--treatments", "2")
    assert "anyone who can reach its port runs code as root on every worker" in proc.stderr, proc.stderr
    assert "forge the results" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode != 0 and "cannot reach the Dask scheduler" in proc.stderr, proc.stderr


def test_security_files_another_user_could_have_written_are_refused(local_user, cli, tmp_path):
    certs = tmp_path / "certs"
    certs.mkdir(mode=0o700)
    good = dask_tls.make_certs(certs)
    theirs = local_user.shared / "dask.toml"
    local_user.python(f"open({str(theirs)!r}, 'w').write({good.read_text()!r})")
    one_line(cli("explore", "--scheduler", "tls://127.0.0.1:8786", "--security", str(theirs)),
             str(theirs), f"owned by uid {local_user.uid}")
    (certs / "key.pem").chmod(0o644)
    one_line(cli("explore", "--scheduler", "tls://127.0.0.1:8786", "--security", str(good)), "key.pem", "chmod 600")
    (certs / "key.pem").chmod(0o600)
    (certs / "dask.toml").write_text('ca = "ca.pem"\ncert = "cert.pem"\n')
    one_line(cli("explore", "--scheduler", "tls://127.0.0.1:8786", "--security", str(good)), "'key'")


# -- 4. the README's multi-host recipe ----------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen) -> None:
    """A process started in its own session, and everything it started."""
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            continue
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _group_alive(proc.pid):
            time.sleep(0.1)
        if not _group_alive(proc.pid):
            break


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_readme_multi_host_recipe_runs_a_study_over_tls(cli, tmp_path):
    from distributed import Client

    from fsscope.study.credentials import load_security_file

    certs = tmp_path / "certs"
    certs.mkdir(mode=0o700)
    security = dask_tls.make_certs(certs)
    scratch = tmp_path / "dask-scratch"
    scratch.mkdir(mode=0o700)
    env = dask_tls.environment(scratch)
    dask, port = Path(sys.executable).parent / "dask", free_port()
    address = f"tls://127.0.0.1:{port}"
    scheduler = dask_tls.argv(".venv/bin/dask scheduler", dask, certs,
                              {"--host 0.0.0.0 --port 8786": f"--host 127.0.0.1 --port {port}"})
    workers = dask_tls.argv(".venv/bin/dask worker", dask, certs,
                            {"tls://SCHEDULER:8786": address, "--nthreads 1": "--nthreads 1 --host 127.0.0.1"})
    procs = []
    try:
        for argv in (scheduler, workers):
            procs.append(subprocess.Popen(argv, env=env, start_new_session=True,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(address, timeout="60s", security=load_security_file(str(security)).security()) as client:
            client.wait_for_workers(2, timeout=120)
            worker_pids = set(client.run(os.getpid).values())
        with pytest.raises(OSError):  # no way in without the cluster's credentials
            Client(f"tcp://127.0.0.1:{port}", timeout="3s")
        explore = dask_tls.command("fsscope explore").replace("tls://SCHEDULER:8786", address)
        argv = explore.split()[1:]
        argv = argv[:argv.index("--space")]  # the README's, without its 5000 treatments
        out = tmp_path / "explore.json"
        proc = cli(*argv, "--treatments", "2", *[f"--factor={k}={v}" for k, v in OVERRIDES.items()],
                   "--json", str(out), cwd=certs)  # --security dask.toml: relative to where it is run
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = json.loads(out.read_text())
        assert len(report["treatments"]) == 2 and not report.get("failed"), report["treatments"]
        rows = [json.loads(line) for line in Path(report["study_dir"], "treatments.ndjson").read_text().splitlines()]
        assert {r["pid"] for r in rows} <= worker_pids, (rows, worker_pids)  # measured by the README's workers
    finally:
        for p in reversed(procs):
            stop_group(p)
    assert sorted(p.name for p in scratch.iterdir()) == ["dask-scratch-space"]  # the workers' scratch space
    assert study_leftovers() == []
