"""fsscope as root on a machine other users share: nothing a local user can write may steer
what root formats, mounts, deletes or runs. Each attack is made as a real unprivileged user
(the ``local_user`` fixture), fsscope runs as root."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from local_user import USER_PYTHON

from fsscope import recipes
from fsscope.errors import FsscopeError, SafetyRefusal
from fsscope.records import plain
from fsscope.study import diskstate
from fsscope.targets import Journal, Target, TargetSpec, identity, image

pytestmark = pytest.mark.privileged


def test_the_local_user_is_real_and_unprivileged(local_user, scratch):
    secret = scratch / "root-only"
    secret.write_text("x")
    secret.chmod(0o600)
    out = local_user.python(f"open({str(secret)!r}).read()", check=False)
    assert out.returncode != 0 and "Permission denied" in out.stderr
    made = local_user.python(f"import os; os.symlink('/etc/passwd', {str(local_user.shared / 'link')!r}); print(os.getuid())")
    assert int(made.stdout) == local_user.uid != 0
    assert os.lstat(local_user.shared / "link").st_uid == local_user.uid


# -- helpers ------------------------------------------------------------------------------------
def _one_line_refusal(out, *needles: str) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, (out.returncode, out.stdout, out.stderr)
    assert all(n in lines[0] for n in needles), lines[0]
    return lines[0]


def _victim_file(where: Path, size_bytes: int = 32 * 2**20) -> tuple[Path, str]:
    """A root-only file (0600) with content, and its sha256."""
    victim = where / "victim.img"
    with open(victim, "wb") as fh:
        fh.write(b"root's data\n" * 4096)
        fh.truncate(size_bytes)
    victim.chmod(0o600)
    return victim, _sha(victim)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _no_loop_on(path: Path) -> bool:
    return identity.loops_backed_by(identity.file_id(path)) == []


# -- 1. explore's disk-state cache --------------------------------------------------------------
def test_a_planted_disk_state_cache_is_refused_and_its_lock_link_not_followed(local_user, scratch):
    """The user makes the cache directory first, with the lock file a link to a root-only
    file: root's explore must neither truncate that file nor build images in their directory."""
    victim, before = _victim_file(scratch, 4096)
    state = diskstate.DiskState(recipes.load("ext4-default"), 64 * 2**20, 0.5, 6)
    cache = local_user.shared / "fsscope-study-20260101-000000"
    local_user.python(f"import os; os.mkdir({str(cache)!r}, 0o777); "
                      f"os.symlink({str(victim)!r}, {str(cache / (state.name + '.lock'))!r})")
    with pytest.raises(SafetyRefusal, match="not the private directory fsscope made"):
        diskstate.base_image(state, cache)
    assert _sha(victim) == before
    assert sorted(p.name for p in cache.iterdir()) == [state.name + ".lock"]  # nothing built there


def test_the_disk_state_cache_is_private_and_its_name_unguessable(scratch):
    from fsscope.study import explore

    names = set()
    for _ in range(2):  # the name explore gives its cache: the run id and a random part
        spec = explore.Spec(space="small", treatments=2)
        plan = explore.make_plan(spec)
        treatment = explore.ExploreTreatment({n: plain(recipes.load(n)) for n in plan.recipes}, {},
                                             f"fsscope-study-run-{os.urandom(16).hex()}")
        names.add(treatment.cache_name)
    assert len(names) == 2
    made = diskstate.private_dir(scratch / "cache")
    assert stat.S_IMODE(os.lstat(made).st_mode) == 0o700 and os.lstat(made).st_uid == 0
    assert diskstate.private_dir(made) == made  # another worker of the same job: the same dir


# -- 2. the sidecar mark -------------------------------------------------------------------------
def test_a_planted_sidecar_does_not_make_a_root_file_fsscopes_image(local_user, cli):
    """A root file in a shared directory, a .fsscope sidecar and a link planted by the user."""
    victim, before = _victim_file(local_user.shared)
    link = local_user.shared / "link.img"
    local_user.python(f"import os; open({str(victim) + '.fsscope'!r}, 'w').write('created by fsscope\\n'); "
                      f"open({str(link) + '.fsscope'!r}, 'w').write('created by fsscope\\n'); "
                      f"os.symlink({str(victim)!r}, {str(link)!r})")
    for path in (link, victim):
        out = cli("prepare", "--recipe", "ext4-default", "--image", str(path), "--size", "32M")
        _one_line_refusal(out, "refusing" if path == victim else "symbolic link")
    assert not image.is_fsscope_image(victim)  # xattrs work here: a sidecar never counts
    assert _sha(victim) == before and _no_loop_on(victim)


def test_the_sidecar_counts_only_without_xattrs_root_owned_and_naming_the_inode(local_user):
    """On a file system with no user xattrs (ramfs) fsscope's mark is the sidecar; one the
    user wrote, or root's own beside another file, marks nothing."""
    where = local_user.shared / "ramfs"  # where the user can reach (the session's dirs are 0700)
    where.mkdir()
    subprocess.run(["mount", "-t", "ramfs", "ramfs", str(where)], check=True)
    try:
        where.chmod(0o1777)
        mine = where / "mine.img"
        fd = image.new_file(mine)  # as create_image makes it (ramfs reports no free space)
        image.mark(mine, fd)
        os.close(fd)
        assert (where / "mine.img.fsscope").exists() and image.is_fsscope_image(mine)
        victim, _ = _victim_file(where, 4096)
        text = (where / "mine.img.fsscope").read_text()
        st = os.stat(victim)
        forged = f"created by fsscope: dev {st.st_dev} ino {st.st_ino}\n"
        local_user.python(f"open({str(victim) + '.fsscope'!r}, 'w').write({forged!r})")
        assert not image.is_fsscope_image(victim)  # the right inode, but the user's sidecar
        os.unlink(str(victim) + ".fsscope")
        (where / "victim.img.fsscope").write_text(text)  # root's, but naming another inode
        assert not image.is_fsscope_image(victim)
    finally:
        subprocess.run(["umount", str(where)], check=True)


# -- 3. a dangling link at --image ---------------------------------------------------------------
def test_a_dangling_link_at_image_creates_nothing_where_it_points(local_user, cli, scratch):
    aimed = scratch / "nologin"  # a root-only directory: think /etc/nologin
    link = local_user.shared / "new.img"
    local_user.python(f"import os; os.symlink({str(aimed)!r}, {str(link)!r})")
    out = cli("prepare", "--recipe", "ext4-default", "--image", str(link), "--size", "64M")
    _one_line_refusal(out, "symbolic link", str(link))
    assert not os.path.lexists(aimed)


# -- 4. check-then-use of --image ----------------------------------------------------------------
def test_swapping_the_image_link_never_gets_a_root_file_attached(local_user, scratch):
    """The user flips a link between their own marked image and a root file while root opens
    the target again and again: the root file must never be attached (nor the user's)."""
    victim, before = _victim_file(scratch)
    mine, link = local_user.home / "mine.img", local_user.shared / "img"
    proc = subprocess.Popen(
        [USER_PYTHON, "-I", "-c",
         f"import os\nopen({str(mine)!r}, 'wb').truncate(32 << 20)\n"
         f"os.setxattr({str(mine)!r}, 'user.fsscope.image', b'1')\n"
         f"tmp = {str(link) + '.tmp'!r}\n"
         f"os.symlink({str(mine)!r}, {str(link)!r})\n"
         "print('ready', flush=True)\n"
         "while True:\n"
         f"    for t in ({str(mine)!r}, {str(victim)!r}):\n"
         f"        os.symlink(t, tmp); os.replace(tmp, {str(link)!r})\n"],
        user=local_user.uid, group=local_user.gid, extra_groups=[], cwd=local_user.home,
        env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE, text=True)
    attached, refused = 0, 0
    try:
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 20
        tries = 0
        while tries < 150 and time.monotonic() < deadline and proc.poll() is None:
            tries += 1
            target = Target(TargetSpec("image", str(link), 32 * 2**20), recipes.load("ext4-default"))
            try:
                target.open()
            except FsscopeError:
                refused += 1
                continue
            try:
                attached += 1
                assert identity.loop_backing(target.device) != identity.file_id(victim), "the root file got attached"
            finally:
                target.close()
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -9  # the flipper ran until killed
    assert attached == 0 and refused == tries, (attached, refused, tries)
    assert _sha(victim) == before and _no_loop_on(victim)


# -- 5. --mountpoint -----------------------------------------------------------------------------
def test_a_link_or_a_non_empty_directory_at_mountpoint_is_refused(local_user, cli, scratch):
    aimed = scratch / "etc"
    aimed.mkdir()
    (aimed / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    link = local_user.shared / "mnt"
    local_user.python(f"import os; os.symlink({str(aimed)!r}, {str(link)!r})")
    out = cli("prepare", "--recipe", "ext4-default", "--ram", "--size", "32M", "--mountpoint", str(link))
    _one_line_refusal(out, "symbolic link")
    out = cli("prepare", "--recipe", "ext4-default", "--ram", "--size", "32M", "--mountpoint", str(aimed))
    _one_line_refusal(out, "not empty")
    theirs = local_user.shared / "theirs"  # a directory the user owns in a sticky directory
    local_user.python(f"import os; os.mkdir({str(theirs)!r})")
    out = cli("prepare", "--recipe", "ext4-default", "--ram", "--size", "32M", "--mountpoint", str(theirs))
    _one_line_refusal(out, "owned by uid")
    out = cli("prepare", "--recipe", "ext4-default", "--ram", "--size", "32M",
              "--mountpoint", str(local_user.home / "mnt"))  # in a directory the user may change
    _one_line_refusal(out, f"owned by uid {local_user.uid}")
    assert identity.top_mount(str(aimed)) is None and (aimed / "passwd").exists()
    assert Journal().entries() == []


# -- 6. the data directory, the C loops, journal identities -------------------------------------
def test_a_data_directory_another_user_can_write_is_refused(local_user, cli, scratch):
    """The user's own fsscope home (sudo keeping HOME) with a planted journal: root's cleanup
    refuses it in one line and deletes nothing."""
    victim_file, before = _victim_file(scratch, 4096)
    victim_dir = scratch / "precious"
    victim_dir.mkdir()
    (victim_dir / "keep").write_text("x")
    home = local_user.home / "fsscope"
    entries = [{"id": "1-a", "kind": "image", "group": "g", "owner_pid": None, "path": str(victim_file)},
               {"id": "2-b", "kind": "workdir", "group": "g", "owner_pid": None, "path": str(victim_dir)}]
    local_user.python(
        f"import json, os; d = {str(home / 'state' / 'journal')!r}; os.makedirs(d)\n"
        f"for e in {entries!r}: open(os.path.join(d, e['id'] + '.json'), 'w').write(json.dumps(e))")
    env = os.environ | {"FSSCOPE_HOME": str(home)}
    for argv in (["cleanup", "--prepared"], ["cleanup", "--force", "--prepared"]):
        line = _one_line_refusal(cli(*argv, env=env), "fsscope data directory", f"owned by uid {local_user.uid}")
        assert "chown" in line  # how to fix it
    assert _sha(victim_file) == before and (victim_dir / "keep").exists()
    group_writable = scratch / "home"
    group_writable.mkdir(mode=0o777)
    group_writable.chmod(0o777)
    _one_line_refusal(cli("cleanup", env=os.environ | {"FSSCOPE_HOME": str(group_writable)}),
                      "writable by everyone")


def test_the_c_loops_are_loaded_only_from_a_root_owned_library(local_user, scratch):
    """A .so the user built (its constructor would create a file as root) is not loaded."""
    from fsscope.workloads.personalities import native

    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    marker = local_user.shared / "ran-as-root"
    src, lib = local_user.home / "evil.c", local_user.home / "evil.so"
    local_user.python(f"open({str(src)!r}, 'w').write('''#include <stdio.h>\n"
                      f"__attribute__((constructor)) static void own(void) {{ fopen(\"{marker}\", \"w\"); }}\n"
                      f"int fsscope_fileserver(void *s, long e) {{ return 0; }}\\n''')")
    local_user.run("cc", "-shared", "-fPIC", "-o", str(lib), str(src))
    code = "import sys; from fsscope.workloads.personalities import native; native.load(sys.argv[1], 'fileserver')"
    out = subprocess.run([sys.executable, "-c", code, str(lib)], capture_output=True, text=True)
    assert out.returncode != 0 and "C loops library" in out.stderr and "not loaded" in out.stderr, out.stderr
    assert not marker.exists()
    planted = scratch / "home"  # a root-owned home whose lib/ the user may write
    (planted / "lib").mkdir(parents=True)
    (planted / "lib").chmod(0o777)
    os.environ["FSSCOPE_HOME"], saved = str(planted), os.environ["FSSCOPE_HOME"]
    try:
        with pytest.raises(SafetyRefusal, match="writable by everyone"):
            native.library_path()
    finally:
        os.environ["FSSCOPE_HOME"] = saved
    assert not marker.exists()


def test_cleanup_undoes_a_path_only_while_it_is_still_what_fsscope_made(scratch):
    """Every kind that deletes names its inode: a workdir, an image and a mount point replaced
    by something else (a directory a user made meanwhile, a file of root's) are left alone."""
    journal = Journal()
    made = Target(TargetSpec("dir", str(scratch)), None, journal=journal)
    made.open()
    workdir = made.format_and_mount().workdir
    ram = Target(TargetSpec("ram", size_bytes=32 * 2**20), recipes.load("ext4-default"), journal=journal)
    ram.open()
    try:
        img = ram.image_path
        for path, is_dir in ((workdir, True), (img, False)):  # swapped for another inode
            os.rename(path, str(path) + ".moved")
            if is_dir:
                path.mkdir()
                (path / "theirs").write_text("x")
            else:
                path.write_text("root's other file")
        lines = made.close() + ram.close()
        assert (workdir / "theirs").exists() and img.read_text() == "root's other file"
        assert any("left" in line and str(workdir) in line for line in lines), lines
        assert any("left" in line and str(img) in line for line in lines), lines
    finally:
        ram.close()
        made.close()
        img.unlink(missing_ok=True)
        os.unlink(str(img) + ".moved")
    assert journal.entries() == []


# -- 8. one job per image ------------------------------------------------------------------------
def test_a_second_job_on_an_image_in_use_is_refused(cli, scratch):
    snapshot = scratch / "aged.img"
    subprocess.run(["truncate", "-s", "32M", str(snapshot)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(snapshot)], check=True)
    img = scratch / "one.img"
    first = Target(TargetSpec("image", str(img), 32 * 2**20, snapshot=str(snapshot)), recipes.load("ext4-default"))
    first.open()  # holds the image; with a snapshot, attached only when it restores
    try:
        out = cli("prepare", "--recipe", "ext4-default", "--image", str(img), "--size", "32M")
        _one_line_refusal(out, "in use by another fsscope job")
        second = Target(TargetSpec("image", str(img), 32 * 2**20), recipes.load("ext4-default"))
        with pytest.raises(FsscopeError, match="in use by another fsscope job"):
            second.open()
        first.format_and_mount()  # the first job goes on, alone
    finally:
        first.close()
    out = cli("prepare", "--recipe", "ext4-default", "--image", str(img), "--size", "32M")
    assert out.returncode == 0, out.stderr  # free again once the first ended
    assert cli("release", out.stdout.strip()).returncode == 0


def test_two_jobs_started_at_once_on_one_image_one_runs_the_other_is_refused(scratch):
    """The issue's race: both jobs used to pass the checks, attach, format and mount it."""
    img = scratch / "both.img"
    argv = [sys.executable, "-m", "fsscope", "run", "smoke", "-p", "duration_s=1", "--recipe", "ext4-default",
            "--image", str(img), "--size", "64M"]
    for _ in range(3):
        procs = [subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(2)]
        outs = [(p.wait(timeout=300), *p.communicate()) for p in procs]
        assert sorted(rc for rc, _, _ in outs) == [0, 2], outs
        _, out, err = next(o for o in outs if o[0] == 2)
        assert err.strip().splitlines() == [f"fsscope: error: --image {img} is in use by another fsscope job: "
                                            "wait for it to end (or give this job another image)"], err
        assert not out.strip()  # no run record, nothing started
    assert Journal().entries() == []


# -- 9. a malformed journal ----------------------------------------------------------------------
def test_a_malformed_journal_file_is_skipped_and_reported(cli):
    journal = Journal()
    journal.directory.mkdir(parents=True, exist_ok=True)
    bad = {"0-list": "[]", "0-empty": "{}", "0-garbage": "\x00not json", "0-kind": '{"id": "x", "kind": "mount", '
           '"group": "g", "owner_pid": null}', "0-pid": '{"id": "y", "kind": "image", "group": "g", '
           '"owner_pid": "1", "path": "/etc/passwd"}'}
    for name, text in bad.items():
        (journal.directory / f"{name}.json").write_text(text)
    try:
        out = cli("cleanup")
        assert out.returncode == 0, out.stderr
        skipped = [line for line in out.stdout.splitlines() if line.startswith("skipped:")]
        assert len(skipped) == len(bad) and "Traceback" not in out.stderr, out.stdout
        with Target(TargetSpec("ram", size_bytes=32 * 2**20), recipes.load("ext4-default")) as target:
            mounted = target.format_and_mount()  # a later job's teardown still works
        assert identity.top_mount(mounted.mountpoint) is None and not target.image_path.exists()
        assert not os.path.exists(mounted.mountpoint)  # unmounted, detached, removed
        assert os.path.exists("/etc/passwd")
    finally:
        for name in bad:
            (journal.directory / f"{name}.json").unlink()
    assert journal.entries() == []


def test_what_fsscope_mounts_is_nosuid_and_nodev_whatever_the_recipe_says(fresh_fs):
    """A measured image is never a way to a setuid binary or a device node: fsscope mounts it
    nosuid,nodev, after the recipe's own options (a recipe's 'suid' or 'dev' cannot undo it)."""
    mounted = fresh_fs("ext4-default", size_bytes=64 * 2**20, mount_opts="suid,dev")
    line = next(x for x in Path("/proc/self/mounts").read_text().splitlines()
                if x.split()[1] == str(mounted.mountpoint))
    options = line.split()[3].split(",")
    assert "nosuid" in options and "nodev" in options, line
    # a device node made there does not open, not even for root
    node = Path(mounted.mountpoint) / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    with pytest.raises(PermissionError):
        node.open("rb")
