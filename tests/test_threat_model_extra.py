"""More of issue 23's attacks, as a local user against root's fsscope: the files root writes
on request (``--json PATH``, ``profile capture -o FILE``) planted as links in a sticky
world-writable directory. Attack as the user (``local_user``), fsscope as root."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest
from local_user import USER_PYTHON

pytestmark = pytest.mark.privileged


def _victim(where: Path) -> tuple[Path, str]:
    """A root-only file (0600 in a 0700 directory) and its sha256."""
    where.mkdir(mode=0o700)
    victim = where / "victim"
    victim.write_bytes(b"root's data\n" * 64)
    victim.chmod(0o600)
    return victim, hashlib.sha256(victim.read_bytes()).hexdigest()


def _refused_in_one_line(out, *needles: str) -> None:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, (out.returncode, out.stdout, out.stderr)
    assert all(n in lines[0] for n in needles), lines[0]


def _plant_link(user, link: Path, target: Path) -> None:
    user.python(f"import os; os.symlink({str(target)!r}, {str(link)!r})")


def _smoke(cli, scratch: Path, json_path: Path):
    """A short root job in root's own directory that writes its report to ``json_path``."""
    work = scratch / "work"
    work.mkdir(exist_ok=True)
    return cli("run", "smoke", "-p", "duration_s=0.2", "--dir", str(work), "--json", str(json_path))


def _capture(cli, scratch: Path, dest: Path, *extra: str):
    """Root's ``profile capture`` of a small tree of its own, written to ``dest``."""
    tree = scratch / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "f").write_bytes(b"x" * 4096)
    return cli("profile", "capture", str(tree), "-o", str(dest), *extra)


def test_json_through_a_users_link_in_a_sticky_dir_does_not_clobber_a_root_file(local_user, scratch, cli):
    victim, before = _victim(scratch / "private")
    out_json = local_user.shared / "report.json"
    _plant_link(local_user, out_json, victim)
    out = _smoke(cli, scratch, out_json)
    _refused_in_one_line(out, str(out_json), "symbolic link")
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == before


def test_json_to_a_users_file_in_a_sticky_dir_is_refused(local_user, scratch, cli):
    """Not a link but the user's own file: root would write where the user chose what is
    there (a FIFO, a file they read back); refuse, say why."""
    out_json = local_user.shared / "report.json"
    local_user.python(f"open({str(out_json)!r}, 'w').close()")
    out = _smoke(cli, scratch, out_json)
    _refused_in_one_line(out, str(out_json), f"owned by uid {local_user.uid}")
    assert out_json.read_text() == ""


def test_json_new_in_a_sticky_dir_and_in_roots_own_dir_still_works(local_user, scratch, cli):
    for out_json in (local_user.shared / "new.json", scratch / "mine.json"):
        out = _smoke(cli, scratch, out_json)
        assert out.returncode == 0, out.stderr
        st = os.lstat(out_json)
        assert st.st_uid == 0 and not st.st_mode & 0o022 and out_json.read_text().startswith("{")
    # root's own file is overwritten, as before
    (scratch / "mine.json").write_text("old")
    out = _smoke(cli, scratch, scratch / "mine.json")
    assert out.returncode == 0 and (scratch / "mine.json").read_text().startswith("{"), out.stderr


def test_json_below_a_users_directory_is_refused(local_user, scratch, cli):
    """The user owns the directory: they can swap the name between the check and the write."""
    out = _smoke(cli, scratch, local_user.home / "r.json")
    _refused_in_one_line(out, str(local_user.home), f"owned by uid {local_user.uid}")
    assert not (local_user.home / "r.json").exists()


def test_profile_capture_through_a_users_link_does_not_clobber_a_root_file(local_user, scratch, cli):
    """capture wrote ``FILE.tmp`` (following a link there) and renamed it to FILE: the user
    plants ``p.toml.tmp`` -> a root-only file, which root then overwrote."""
    victim, before = _victim(scratch / "private")
    dest = local_user.shared / "p.toml"
    _plant_link(local_user, dest.with_name("p.toml.tmp"), victim)
    out = _capture(cli, scratch, dest)
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == before
    assert out.returncode == 0, out.stderr  # dest is new: written, as root's own file
    assert os.lstat(dest).st_uid == 0 and "fullness" in dest.read_text()


def test_profile_capture_force_through_a_users_link_is_refused(local_user, scratch, cli):
    victim, before = _victim(scratch / "private")
    dest = local_user.shared / "p.toml"
    _plant_link(local_user, dest, victim)
    out = _capture(cli, scratch, dest, "--force")
    _refused_in_one_line(out, str(dest), "symbolic link")
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == before


_SWAP_WORKDIR = """
import os, sys, time
d, victim, suffix = sys.argv[1], sys.argv[2], sys.argv[3]
open(os.path.join(d, "ready"), "w").close()
deadline = time.monotonic() + 50
while time.monotonic() < deadline:
    for name in os.listdir(d):
        if name.startswith("fsscope-") and name.endswith(suffix):
            os.rename(os.path.join(d, name), os.path.join(d, name + ".moved"))
            os.symlink(victim, os.path.join(d, name))
            print("swapped", name)
            sys.exit(0)
sys.exit(1)
"""


def _swapper(user, d: Path, victim: Path, suffix: str) -> subprocess.Popen:
    """The user, watching their directory ``d``: the first ``fsscope-*SUFFIX`` root makes
    there is moved aside and replaced by a link to ``victim``. Returns once it watches."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(user.home)}
    attacker = subprocess.Popen([USER_PYTHON, "-I", "-c", _SWAP_WORKDIR, str(d), str(victim), suffix], user=user.uid,
                                group=user.gid, extra_groups=[], env=env, stdout=subprocess.PIPE, text=True)
    while not (d / "ready").exists():
        assert attacker.poll() is None
        time.sleep(0.01)
    return attacker


def test_dir_in_a_users_directory_is_refused(local_user, scratch, cli):
    """``--dir`` in a directory the user owns: root makes its work directory there and the
    user swaps it for a link to a root-only directory while the job writes into it."""
    private = scratch / "private"
    private.mkdir(mode=0o700)
    victim = private / "f000000"
    victim.write_bytes(b"root's data\n" * 1024)
    victim.chmod(0o600)
    before = hashlib.sha256(victim.read_bytes()).hexdigest()
    d = local_user.home / "d"
    local_user.python(f"import os; os.mkdir({str(d)!r})")
    attacker = _swapper(local_user, d, private, "-1")
    try:
        out = cli("run", "smoke", "-p", "duration_s=1", "--dir", str(d))
    finally:
        attacker.kill()
        swapped = attacker.communicate()[0]
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == before, swapped
    assert sorted(p.name for p in private.iterdir()) == ["f000000"], swapped
    _refused_in_one_line(out, str(d), f"owned by uid {local_user.uid}")


def test_a_study_clone_in_a_users_ram_dir_is_refused(local_user, scratch, monkeypatch):
    """FSSCOPE_RAM_DIR set to a directory a user owns: explore's clone made the image there
    (O_EXCL), then copied the base into it *by name*; the user swapped the name for a link
    to a root-only file in between, and cp overwrote that file with the base image."""
    from fsscope import recipes
    from fsscope.errors import FsscopeError, SafetyRefusal
    from fsscope.study import diskstate

    victim, before = _victim(scratch / "private")
    base = scratch / "base.img"
    base.write_bytes(b"base" * 2**18)
    d = local_user.home / "ram"
    local_user.python(f"import os; os.mkdir({str(d)!r})")
    monkeypatch.setenv("FSSCOPE_RAM_DIR", str(d))
    attacker = _swapper(local_user, d, victim, ".img")
    refused = None
    try:
        for _ in range(40):  # a race: the user needs the moment between create and copy
            try:
                with diskstate.clone(base, recipes.load("ext4-default"), {}):
                    pass
            except SafetyRefusal as exc:
                refused = exc
                break
            except (FsscopeError, OSError):  # base is no file system: the mount fails, after the copy
                if attacker.poll() is not None:
                    break
    finally:
        attacker.kill()
        swapped = attacker.communicate()[0]
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == before, swapped
    assert refused is not None and f"owned by uid {local_user.uid}" in str(refused)


def test_age_snapshot_in_a_users_directory_is_refused(local_user, scratch, cli):
    """``age --snapshot`` into a directory the user owns: root made ``NAME.<pid>.partial``
    there (O_EXCL) and then copied the aged image into it *by name*; the user swapped the
    name for a link to a root-only file and cp overwrote that file."""
    victim, before = _victim(scratch / "private")
    d = local_user.home / "snaps"
    local_user.python(f"import os; os.mkdir({str(d)!r})")
    attacker = _swapper(local_user, d, victim, ".partial")
    try:
        out = cli("age", "--ram", "--size", "128M", "--profile", "small", "--confidence", "0.5",
                  "--snapshot", str(d / "fsscope-aged.img"), timeout_s=240)
    finally:
        attacker.kill()
        swapped = attacker.communicate()[0]
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == before, swapped
    _refused_in_one_line(out, str(d), f"owned by uid {local_user.uid}")


def test_resuming_a_study_in_a_users_directory_is_refused(local_user, scratch, cli):
    """``explore --resume DIR`` takes a run directory: root then appends its rows to (and
    writes its table into) DIR. The user's DIR, with ``treatments.ndjson`` a link to a
    root-only file, had root write into that file."""
    from fsscope.study import explore

    victim, before = _victim(scratch / "private")
    made = scratch / "plan"
    made.mkdir()
    explore.make_plan(explore.Spec(treatments=1)).save(made)
    study = local_user.home / "study"
    local_user.python(f"import os; os.mkdir({str(study)!r}); "
                      f"open({str(study / 'plan.json')!r}, 'w').write({(made / 'plan.json').read_text()!r}); "
                      f"os.symlink({str(victim)!r}, {str(study / 'treatments.ndjson')!r})")
    out = cli("explore", "--resume", str(study), "--workers", "1", timeout_s=300)
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == before
    _refused_in_one_line(out, str(study), f"owned by uid {local_user.uid}")


def test_a_users_snapshot_is_not_restored_and_mounted(local_user, scratch, cli):
    """``--from-snapshot`` restores a file-system image and mounts it, no mkfs: a user's own
    image (made with mke2fs as that user; debugfs can set root-owned setuid files and device
    nodes in it) would be mounted by root, without nosuid or nodev."""
    snap = local_user.shared / "snap.img"
    local_user.run("/usr/sbin/mkfs.ext4", "-q", "-F", str(snap), "64M")
    out = cli("probe", "--image", str(scratch / "t.img"), "--size", "64M", "--from-snapshot", str(snap),
              "--files", "10", "--runs", "1", timeout_s=240)
    _refused_in_one_line(out, str(snap), f"owned by uid {local_user.uid}")
    assert not (scratch / "t.img").exists()
