"""Who may give a study's Dask cluster work: only a client holding the job's credentials.

A study's scheduler and workers run as root and run whatever a client submits (a pickled
function), and root's client unpickles what the scheduler sends back. Every local user can
reach a port on 127.0.0.1, so the cluster speaks nothing but mutual TLS:

- a LocalCluster (no ``--scheduler``) gets credentials made for its job: a CA and one
  certificate with its key signed by that CA (``openssl``, the same commands the README gives
  for a real cluster), files 0600 in a private directory (0700, unguessable name) under
  fsscope's state directory, journalled and removed when the study ends. A client or worker
  without a certificate that CA signed fails the handshake; a plain ``tcp://`` one finds no
  listener that speaks it. No dashboard and no HTTP server listens: Dask starts one in the
  scheduler and in every worker whatever ``dashboard_address`` says (metrics, task and worker
  pages, without authentication); their routes are emptied and the servers stopped once up
  (:data:`NO_HTTP`, :func:`stop_http`, :class:`~fsscope.study.no_http.NoHttp`). The workers'
  ``local_directory`` (and Dask's ``temporary-directory``, used by the scheduler) is in the
  same private directory: Dask puts it first on ``sys.path``, so a ``$TMPDIR/dask-scratch-space``
  another user made first would let them plant modules root imports.
- a real cluster (``--scheduler tls://HOST:PORT``) is given the client's credentials in a
  small TOML file (``--security FILE``: ``ca``, ``cert``, ``key``, paths relative to the
  file), each of them a file no other user could have written; the key readable by no one else.
- a plain ``tcp://`` scheduler is refused unless the user says ``--insecure-scheduler``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsscope import paths, tomlsafe, tools, trust
from fsscope.errors import FsscopeError
from fsscope.targets import identity
from fsscope.targets.journal import Journal

INSECURE_NOTE = (
    "--insecure-scheduler: the Dask scheduler is reached over plain tcp:// with no authentication; "
    "anyone who can reach its port runs code as root on every worker, and can forge the results "
    "this study records (and what root's client unpickles)")
SECURITY_KEYS = ("ca", "cert", "key")
CERT_DAYS = 2  # a job's credentials outlive no study by much: the directory goes with the job


def check_scheduler(scheduler: str, security: str, insecure: bool) -> None:
    """Refuse, in one line, a scheduler root would trust without authenticating it: only
    ``tls://`` with ``--security FILE`` (checked here), or ``tcp://`` the user called insecure."""
    if not scheduler:
        if security:
            raise FsscopeError("--security is for --scheduler tls://HOST:PORT (a local study makes its own credentials)")
        return
    scheme = scheduler.split("://", 1)[0] if "://" in scheduler else "tcp"
    if scheme == "tls":
        if not security:
            raise FsscopeError(f"--scheduler {scheduler}: give --security FILE (a TOML file naming the "
                               "cluster's CA and this client's certificate and key: ca, cert, key)")
        load_security_file(security)
        return
    if scheme == "tcp" and insecure:
        if security:
            raise FsscopeError(f"--security is for a tls:// scheduler, not {scheduler}")
        return
    if scheme == "tcp":
        raise FsscopeError(f"--scheduler {scheduler}: a plain tcp:// scheduler lets anyone who reaches its port "
                           "run code as root on the workers; use tls://HOST:PORT with --security FILE "
                           "(see README), or say --insecure-scheduler")
    raise FsscopeError(f"--scheduler {scheduler}: only tls://HOST:PORT (with --security FILE) is supported")


@dataclass(frozen=True)
class Credentials:
    """PEM files: the CA that signs every member of the cluster, and one certificate + key."""

    ca: str
    cert: str
    key: str

    def security(self) -> Any:
        """A ``distributed.security.Security`` for every role (scheduler, workers, client):
        mutual TLS, nothing unencrypted."""
        from distributed.security import Security

        return Security(require_encryption=True, tls_ca_file=self.ca,
                        tls_client_cert=self.cert, tls_client_key=self.key,
                        tls_scheduler_cert=self.cert, tls_scheduler_key=self.key,
                        tls_worker_cert=self.cert, tls_worker_key=self.key)


def load_security_file(path: str) -> Credentials:
    """The credentials a ``--security FILE`` names (TOML: ``ca``, ``cert``, ``key``; relative
    paths are relative to the file). Each must be a file no other user could have written
    (they choose whom root trusts), the key readable by no one else (whoever reads it joins the
    cluster). One line saying what is wrong."""
    what = "--security"
    try:
        trust.check_input_file(path, what)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FsscopeError(f"{what} {path}: no such file") from None
    with os.fdopen(fd, "rb") as fh:
        text = fh.read(tomlsafe.MAX_TEXT_BYTES + 1).decode("utf-8", "replace")
    doc = tomlsafe.loads(text, f"{what} {path}")
    unknown = sorted(set(doc) - set(SECURITY_KEYS))
    if unknown:
        raise FsscopeError(f"{what} {path}: unknown key {unknown[0]!r} (expected {', '.join(SECURITY_KEYS)})")
    base = os.path.dirname(os.path.abspath(path))
    found: dict[str, str] = {}
    for key in SECURITY_KEYS:
        value = doc.get(key)
        if not isinstance(value, str) or not value:
            raise FsscopeError(f"{what} {path}: '{key}' must name a PEM file (ca, cert and key are all needed)")
        full = os.path.join(base, value)
        try:
            trust.check_input_file(full, f"{what} {path}: {key}")
            st = os.stat(full)
        except FileNotFoundError:
            raise FsscopeError(f"{what} {path}: {key} {full}: no such file") from None
        if not stat.S_ISREG(st.st_mode):
            raise FsscopeError(f"{what} {path}: {key} {full}: not a regular file")
        if key == "key" and st.st_mode & 0o077:
            raise FsscopeError(f"{what} {path}: key {full} is mode {stat.S_IMODE(st.st_mode):o}: others may read it "
                               "and join the cluster as root's client; chmod 600 it")
        found[key] = full
    return Credentials(**found)


def make_credentials(directory: Path) -> Credentials:
    """A CA and a certificate + key it signed, made in ``directory`` (private: see
    :class:`PrivateDir`) with the README's openssl commands (EC P-256: quick to make)."""
    openssl = tools.require("openssl")
    ca, ca_key = directory / "ca.pem", directory / "ca-key.pem"
    cert, key, csr = directory / "cert.pem", directory / "key.pem", directory / "cert.csr"
    old = os.umask(0o077)  # every file 0600 from its first byte
    try:
        tools.run(openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", str(ca_key), "-out", str(ca), "-days", str(CERT_DAYS), "-subj", "/CN=fsscope study CA")
        tools.run(openssl, "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", str(key), "-out", str(csr), "-subj", "/CN=fsscope study")
        tools.run(openssl, "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
                  "-set_serial", str(secrets.randbits(63)), "-out", str(cert), "-days", str(CERT_DAYS))
    finally:
        os.umask(old)
    ca_key.unlink()  # nothing more is signed: no one can mint a member of this cluster
    csr.unlink()
    return Credentials(str(ca), str(cert), str(key))


NO_HTTP: dict[str, list[str]] = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
"""Dask config for a LocalCluster: its HTTP servers serve nothing while they are up."""


async def stop_http(server: Any) -> None:
    """Stop a Dask server's HTTP listener (on its event loop)."""
    if getattr(server, "http_server", None) is not None:
        server.http_server.stop()


CLUSTER_GROUP = "study-cluster-"  # a journal group under execute.STUDY_GROUP_PREFIX


class PrivateDir:
    """This job's cluster directory: ``state/clusters/job-XXXX`` (0700, a name made with
    O_EXCL), holding the credentials and the workers' scratch space (``scratch``).
    Journalled with its identity, so ``fsscope cleanup`` removes it after a kill."""

    def __init__(self) -> None:
        base = paths.state_dir() / "clusters"
        trust.check_private_dir(base, "study cluster directory",
                                "remove it; fsscope makes it (owned by root, mode 0700)")
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix="job-", dir=base))  # 0700, O_EXCL
        self.journal = Journal()
        self.entry = self.journal.record("workdir", CLUSTER_GROUP + self.path.name[4:], path=str(self.path),
                                         ident=identity.path_id(self.path))
        try:
            self.scratch = self.path / "scratch"
            self.scratch.mkdir(mode=0o700)
            self.credentials = make_credentials(self.path)
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self.journal.forget(self.entry)
