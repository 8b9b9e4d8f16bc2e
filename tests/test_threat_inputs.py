"""What a local user can hand root's fsscope: recipes, spaces, profiles and run records they
wrote, mkfs and mount options that name another device, and fsscope run as themselves.
Nothing of it may touch a device other than the target, pass as "ok" having measured nothing,
or end in a traceback: one line and exit 2. The attacks are made as a real unprivileged user
(``local_user``); fsscope runs as root unless the test says otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest
from test_study_engine import (  # noqa: F401 - dask_cluster: a fixture
    dask_cluster,
    drive_study,
    small_plan,
    study_leftovers,
    treatment_fn,
)

import fsscope
from fsscope import fsoptions, recipes
from fsscope.errors import FsscopeError, RecipeError
from fsscope.study.explore import ExploreRow

REPO = Path(fsscope.__file__).resolve().parent.parent


def signature(dev: str) -> str:
    out = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", dev], capture_output=True, text=True)
    return out.stdout.strip()


def one_line_refusal(proc: subprocess.CompletedProcess, says: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-1500:], proc.stderr[-1500:])
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert says in proc.stderr, proc.stderr


def by_sudo(user) -> dict[str, str]:
    """The environment of root's fsscope started by ``user`` through sudo: their own files are
    theirs to hand it (``trust.trusted_uids``), so what is tested is how it bounds them. Started
    by root alone, a file the user wrote is not read at all (test_files_another_user_wrote_are_not_read)."""
    return os.environ | {"SUDO_UID": str(user.uid)}


def write_as(user, path: Path, text: str) -> None:
    """``path`` written by ``user`` (it owns the file)."""
    user.python(f"open({str(path)!r}, 'w').write({text!r})")
    assert path.stat().st_uid == user.uid


# ---------------------------------------------------------------- 7: options naming a device

# (recipe fs, where the option goes, the option with {dev} for the other device)
DEVICE_OPTIONS = [
    ("btrfs", "mkfs_opts", ["{dev}"]),                       # a second btrfs device
    ("btrfs", "mkfs_opts", ["-f", "--", "{dev}"]),
    ("btrfs", "mkfs_opts", ["--rootdir={dev}"]),
    ("xfs", "mkfs_opts", ["-l", "logdev={dev},size=16m"]),    # the external log on it
    ("xfs", "mkfs_opts", ["-r", "rtdev={dev}"]),
    ("xfs", "mkfs_opts", ["-d", "name={dev}"]),
    ("ext4", "mkfs_opts", ["-J", "device={dev}"]),
    ("ext4", "mkfs_opts", ["-Fd{dev}"]),                     # a clustered flag with a value
    ("ext4", "mkfs_opts", ["-b"]),                           # the target would become -b's value
    ("f2fs", "mkfs_opts", ["-c", "{dev}"]),
    ("btrfs", "mount_opts", ["device={dev}"]),
    ("xfs", "mount_opts", ["logdev={dev}"]),
    ("ext4", "mount_opts", ["journal_path={dev}"]),
    ("ext4", "mount_opts", ["noatime,loop={dev}"]),
    ("ext4", "mount_opts", ["X-mount.mkdir"]),
]


@pytest.mark.parametrize("fs, key, opts", DEVICE_OPTIONS, ids=[f"{fs}-{' '.join(o)}" for fs, _, o in DEVICE_OPTIONS])
def test_options_that_name_a_device_are_refused(fs, key, opts):
    dev = "/dev/loop3"
    filled = [o.format(dev=dev) for o in opts]
    with pytest.raises(RecipeError) as err:
        recipes.parse({"fs": fs, key: filled}, name="evil", source="evil.toml")
    assert str(err.value).startswith(f"evil.toml: {key}: ") and "\n" not in str(err.value)


def test_an_unclosed_quote_in_options_is_one_line():
    with pytest.raises(RecipeError, match="--mkfs-opts \"-b: No closing quotation"):
        recipes.load("ext4-default").with_extra('"-b')
    with pytest.raises(RecipeError, match="evil.toml: mkfs_opts: No closing quotation"):
        recipes.parse({"fs": "ext4", "mkfs_opts": "-L 'x"}, name="evil", source="evil.toml")


def test_the_options_fsscope_ships_and_makes_pass():
    """Every shipped recipe, and the options the variation study and the disk states add."""
    from fsscope.study.variation import configure

    assert recipes.available() and all(r.name for r in recipes.available())
    assert len(recipes.available()) == len(list((REPO / "recipes").glob("*.toml")))
    for fs in ("ext4", "xfs", "btrfs"):
        configure(fs, {"ext4_block_size": 1024, "xfs_agcount": 8, "btrfs_data": "nodatacow"}, 2 << 30)
    for fs, opts in [("ext4", ["-b", "4096", "-I", "256", "-E", "lazy_itable_init=0", "-N", "256", "-c", "-Fq",
                               "-b4096", "-O", "^has_journal", "-M", "/mnt/x", "-L", "lbl"]),
                     ("xfs", ["-b", "size=4096", "-i", "size=512", "-d", "agcount=4,su=64k,sw=2", "-m", "crc=1",
                              "-l", "size=64m,internal", "-K", "-n", "ftype=1"]),
                     ("btrfs", ["-n", "16384", "--nodesize=4096", "-m", "single", "--data", "dup", "-O",
                                "no-holes", "--csum", "xxhash", "-K"]),
                     ("f2fs", ["-O", "extra_attr,compression", "-s", "2", "-l", "x"])]:
        fsoptions.check_mkfs(fs, opts, "ok")
    fsoptions.check_mount("btrfs", ["subvol=/a/b,compress=zstd:3", "nodatacow"], "ok")
    fsoptions.check_mount("ext4", ["data=journal", "noatime", "commit=30"], "ok")



@pytest.mark.privileged
@pytest.mark.parametrize("fs, key, opts", [DEVICE_OPTIONS[0], DEVICE_OPTIONS[3], DEVICE_OPTIONS[10]])
def test_a_users_recipe_cannot_make_root_format_another_device(local_user, loop_device, cli, fs, key, opts):
    """The user's recipe names a device fsscope would only format with --yes-destroy (it
    carries ext4): root's run on a RAM image is refused before anything is made, and the
    device keeps its ext4 (before: a two-device btrfs, or the external XFS log, and "ok")."""
    dev = loop_device("512M")
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    recipe = local_user.home / "fast.toml"
    write_as(local_user, recipe, f'fs = "{fs}"\n{key} = {json.dumps([o.format(dev=dev) for o in opts])}\n')
    args = ("probe", "--recipe", str(recipe), "--ram", "--size", "512M", "--files", "20", "--runs", "1")
    one_line_refusal(cli(*args), f"is owned by uid {local_user.uid}")  # not even read
    proc = cli(*args, env=by_sudo(local_user))  # the user's own sudo: read, and its options refused
    one_line_refusal(proc, f"{recipe}: {key}: ")
    assert dev in proc.stderr and "refused" in proc.stderr
    assert signature(dev) == "ext4"


@pytest.mark.privileged
def test_mkfs_opts_on_the_command_line_cannot_name_another_device(loop_device, cli):
    dev = loop_device("512M")
    subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
    proc = cli("probe", "--recipe", "btrfs-default", "--ram", "--size", "512M", "--mkfs-opts", dev,
               "--files", "20", "--runs", "1")
    one_line_refusal(proc, f"--mkfs-opts: '{dev}' is a positional argument")
    proc = cli("probe", "--recipe", "xfs-default", "--ram", "--size", "512M", "--mount-opts", f"logdev={dev}",
               "--files", "20", "--runs", "1")
    one_line_refusal(proc, f"--mount-opts: 'logdev={dev}'")
    assert signature(dev) == "ext4"


# ---------------------------------------------------------------- 10: studies that measure nothing

def as_user_fsscope(user, *args: str) -> subprocess.CompletedProcess:
    """fsscope run by ``user`` (the system interpreter on this checkout and its packages)."""
    import local_user as lu

    probe = subprocess.run([lu.USER_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
                           capture_output=True, text=True)
    if probe.stdout.strip() != str(sys.version_info[:2]):
        pytest.skip(f"{lu.USER_PYTHON} is not this Python {sys.version_info[:2]}: it cannot load the packages")
    env = [f"PYTHONPATH={REPO}:{sysconfig.get_paths()['purelib']}", f"FSSCOPE_HOME={user.home / 'fsscope'}",
           f"FSSCOPE_RAM_DIR={user.home}"]
    return user.run("env", *env, lu.USER_PYTHON, "-m", "fsscope", *args, check=False)


@pytest.mark.privileged
def test_explore_without_root_is_refused_up_front(local_user):
    """Before: 0 of 2 treatments ("Permission denied" each), exit 0, "ok"."""
    proc = as_user_fsscope(local_user, "explore", "--treatments", "2", "--workers", "1")
    one_line_refusal(proc, "explore attaches, formats and mounts disk images on this host: it needs root")
    assert not (local_user.home / "fsscope" / "runs").exists() or not any((local_user.home / "fsscope" / "runs").iterdir())
    proc = as_user_fsscope(local_user, "study", "variation", "--configurations", "2", "--runs", "2", "--duration", "1")
    assert proc.returncode == 2 and "study variation attaches, formats and mounts" in proc.stderr, proc.stderr


@pytest.mark.privileged
def test_a_study_where_every_treatment_failed_is_not_ok(local_user, cli):
    """The user's recipe cannot work on the explore disk states (XFS needs 300 MiB, the states
    are 64 MiB): every treatment fails, so the study fails -- its report and table kept."""
    recipe = local_user.home / "xfs-small.toml"
    write_as(local_user, recipe, 'fs = "xfs"\n')
    proc = cli("explore", "--treatments", "2", "--workers", "1", "--recipes", str(recipe),
               "--factor", "DiskSize=64M", "--factor", "UsedRatio=0", env=by_sudo(local_user))
    assert proc.returncode == 2, (proc.stdout[-1500:], proc.stderr[-1500:])
    assert "every treatment failed (2 of 2)" in proc.stderr and "Filesystem must be larger than 300MB" in proc.stderr
    from fsscope import store

    where = next(ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("recorded in "))
    assert where.endswith("(failed)"), where
    run = store.RunDir(Path(where.split()[2]))
    assert run.manifest()["status"] == "failed" and run.report()["completed"] == 0
    assert (run.path / "treatments.csv").exists()


# ---------------------------------------------------------------- 11: records and TOML of the wrong shape

@pytest.fixture
def records_home(local_user):
    """A root-owned fsscope home whose runs directory holds one record directory the user
    owns (as a shared results directory would): root reads what the user wrote there."""
    home = Path(tempfile.mkdtemp(prefix="fsscope-records-", dir="/var/tmp"))
    try:
        home.chmod(0o755)
        runs = home / "runs"
        runs.mkdir(mode=0o755)

        def record(name: str, manifest, report=None) -> Path:
            path = runs / name
            path.mkdir()
            os.chown(path, local_user.uid, local_user.gid)
            write_as(local_user, path / "manifest.json", json.dumps(manifest))
            if report is not None:
                write_as(local_user, path / "report.json", json.dumps(report))
            return path

        yield home, record
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=False)


def test_wrong_shaped_records_are_one_line_each_and_the_rest_are_listed(records_home, cli):
    home, record = records_home
    env = os.environ | {"FSSCOPE_HOME": str(home)}
    good = {"job": "probe", "status": "ok", "started": "2026-01-01T00:00:00+0000",
            "target": {"spec": {"kind": "ram", "path": ""}}, "recipe": {"name": "ext4-default"}}
    record("20260101-000000-probe", good, {"x": 1})                      # a probe report without its keys
    record("20260101-000001-bench", good | {"job": "bench"}, {"runs": "bad", "personality": "varmail"})
    record("20260101-000002-bench", good | {"job": "bench"}, {"runs": "bad", "personality": "varmail"})
    record("20260101-000003-probe", ["not", "an", "object"])
    record("20260101-000004-probe", good | {"target": {"spec": "ram"}})
    record("20260101-000005-probe", good | {"job": 5})
    record("20260101-000006-probe", good | {"status": "running", "pid": "me"})
    record("20260101-000007-probe", good)

    listed = cli("runs", env=env)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
    unreadable = [ln for ln in listed.stderr.splitlines() if ln.startswith("unreadable run record")]
    assert len(unreadable) == len(listed.stderr.strip().splitlines())
    assert [ln.split()[3].rstrip(":") for ln in unreadable] == [
        "20260101-000003-probe", "20260101-000004-probe", "20260101-000005-probe", "20260101-000006-probe"]
    assert "holds a JSON list, not an object" in unreadable[0] and "target.spec is str" in unreadable[1]
    for kept in ("20260101-000000-probe", "20260101-000002-bench", "20260101-000007-probe"):
        assert f"│ {kept}" in listed.stdout

    one_line_refusal(cli("report", "20260101-000000-probe", env=env), "20260101-000000-probe")
    one_line_refusal(cli("report", "20260101-000001-bench", env=env), "not in the shape fsscope writes")
    one_line_refusal(cli("report", "20260101-000003-probe", env=env), "manifest.json holds a JSON list")
    one_line_refusal(cli("compare", "20260101-000001-bench", "20260101-000002-bench", env=env),
                     "the report of run 20260101-000001-bench or of run 20260101-000002-bench")
    proc = cli("report", "20260101-000007-probe", env=env)
    assert proc.returncode == 0 and "no report" in proc.stdout, proc.stderr


@pytest.mark.parametrize("kind, args", ids=["recipe", "space", "profile"], argvalues=[
    ("recipe", ["probe", "--ram", "--recipe"]), ("space", ["explore", "--space"]), ("profile", ["profile", "show"])])
def test_files_another_user_wrote_are_not_read(local_user, cli, kind, args):
    """A recipe, space or profile decides what root formats, mounts and writes: one the user
    wrote, handed to root's fsscope, is refused before it is parsed."""
    shipped = {"recipe": "ext4-default.toml", "space": "spaces/small.toml", "profile": "aging/small.toml"}[kind]
    path = local_user.home / f"mine-{kind}.toml"
    write_as(local_user, path, (REPO / "recipes" / shipped).read_text())
    one_line_refusal(cli(*args, str(path)), f"is owned by uid {local_user.uid}")


NESTED = "[" * 1000 + "]" * 1000  # tomllib: RecursionError


@pytest.mark.parametrize("kind, text, args", ids=["recipe", "space", "profile"], argvalues=[
    ("recipe", f'fs = "ext4"\nmkfs_opts = {NESTED}\n', ["probe", "--ram", "--recipe"]),
    ("space", f"name = 'x'\n[factors]\nFileSize = {NESTED}\n", ["explore", "--space"]),
    ("profile", f"fullness = 0.5\n[size]\nbytes = [1]\nweights = {NESTED}\n",
     ["profile", "show"]),
])
def test_deeply_nested_toml_is_one_line(local_user, cli, kind, text, args):
    path = local_user.home / f"deep-{kind}.toml"
    write_as(local_user, path, text)
    one_line_refusal(cli(*args, str(path), env=by_sudo(local_user)), "nested more than 16 levels deep")


@pytest.mark.parametrize("line, says", ids=["1e308", "beyond-int64"], argvalues=[
    ("weights = [1e308, 1e308, 1, 1]", "size.weights: entry 0 is 1e+308, more than the sane maximum"),
    ("weights = [1, 1, 1, 100000000000000000000000]", "does not fit 64 bits"),
])
def test_profile_weights_are_bounded(local_user, cli, line, says):
    """Before: two weights of 1e308 summed to inf, every fraction was NaN, and aging said "ok"."""
    small = (REPO / "recipes" / "aging" / "small.toml").read_text()
    path = local_user.home / "huge.toml"
    write_as(local_user, path, small.replace("weights = [4, 3, 2, 1]", line))
    one_line_refusal(cli("profile", "show", str(path), env=by_sudo(local_user)), says)


# ---------------------------------------------------------------- 12: zram, a dead scheduler

@pytest.mark.privileged
def test_an_unconfigured_zram_device_is_refused(cli):
    """A zram device of size 0 (hot-added, never given a disksize) is not usable."""
    control = Path("/sys/class/zram-control")
    if not (control / "hot_add").exists():
        pytest.skip("no zram-control (zram module not loaded)")
    index = int((control / "hot_add").read_text())
    dev = f"/dev/zram{index}"
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(dev) and time.monotonic() < deadline:
            time.sleep(0.05)  # udev makes the node
        assert Path(f"/sys/block/zram{index}/disksize").read_text().strip() == "0"
        proc = cli("probe", "--device", dev, "--recipe", "ext4-default", "--files", "20", "--runs", "1")
        one_line_refusal(proc, f"refusing to format {dev}: its size is 0 (an unconfigured zram device")
    finally:
        (control / "hot_remove").write_text(str(index))


@pytest.mark.privileged
def test_a_dead_dask_scheduler_is_named_with_the_way_to_resume(dask_cluster, tmp_path):  # noqa: F811
    """Before: 'in <TCP (closed) ConnectionPool.gather …>: Stream is closed' (or Dask's
    'Futures cancelled'), naming neither the scheduler nor what to do."""
    from fsscope.study import execute
    from fsscope.targets.journal import Journal

    address, procs, security = dask_cluster
    plan = small_plan()
    hold = tmp_path / "hold"
    hold.write_text("treatments wait here, mounted, while this file exists\n")
    fn = treatment_fn(plan, "fsscope-study-deadsched", str(hold))
    (tmp_path / "study").mkdir()
    driver, result = drive_study(plan, fn, tmp_path / "study", ExploreRow, scheduler=address, security=security)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(
            e.kind == "mount" and e.group.startswith("study-") for e in Journal().entries()):
        time.sleep(0.05)
    procs[0].kill()   # the scheduler
    procs[0].wait(10)
    hold.unlink()
    driver.join(120)
    assert not driver.is_alive()
    err = result.get("error")
    assert isinstance(err, FsscopeError), result
    assert f"lost the Dask scheduler {address}" in str(err) and "--resume latest" in str(err), err
    assert f"of {len(plan.treatments())} treatments are recorded in {tmp_path / 'study'}" in str(err)
    for proc in procs[1:]:  # the workers: their treatments release what they mounted
        proc.terminate()
        proc.wait(60)
    execute.cleanup_study_leftovers()
    fn.drop_cache()  # as the explore job does when run_study raises
    assert study_leftovers() == []



async def test_the_investigator_names_an_unreadable_record_and_keeps_going(records_home):
    """The runs screen lists a record whose manifest is of the wrong shape as "unreadable";
    opening it is one notification, not a crash of the app (before: ValueError in load_run)."""
    from pilot_wait import until

    from fsscope.tui import AppConfig, make_app
    from fsscope.tui.screens.runs import RunsScreen

    home, record = records_home
    record("20260101-000000-probe", {"job": "probe", "status": "ok", "spec": ["files", 200]})
    app = make_app(AppConfig(start_screen="runs", runs_root=home / "runs"))
    async with app.run_test(size=(140, 45), notifications=True) as pilot:
        await until(pilot, lambda: isinstance(app.screen, RunsScreen) and app.screen.listed, "the runs listed")
        table = app.screen.query_one("#runs-table")
        assert "unreadable" in [str(c) for c in table.get_row("20260101-000000-probe")]
        table.focus()
        await pilot.press("enter")
        await until(pilot, lambda: app._notifications, "the notification")
        message = str(next(iter(app._notifications)).message)
        assert "run 20260101-000000-probe cannot be read: manifest.json: spec is list" in message, message
        assert isinstance(app.screen, RunsScreen)


@pytest.mark.parametrize("change, says", ids=["runs", "duration", "per-personality"], argvalues=[
    (("runs = 3", "runs = 1000000000000"), "settings.runs: expected a whole number in 1..10,000"),
    (("duration_s = 5", "duration_s = -1"), "settings.duration_s: expected a number in 0.1..86,400"),
    (("nfiles = 200", "nfiles = 200\nnfiles_per_personality = {varmail = 0}"),
     "settings.nfiles_per_personality.varmail: expected a whole number in 1..10,000,000"),
])
def test_a_spaces_settings_are_bounded(local_user, cli, change, says):
    """Before: a space with 10^12 runs was planned (48,000,000,000,000 runs, 2.8 billion days)."""
    small = (REPO / "recipes" / "spaces" / "cao-small.toml").read_text()
    assert change[0] in small
    path = local_user.home / "space.toml"
    write_as(local_user, path, small.replace(change[0], change[1], 1))
    one_line_refusal(cli("study", "variation", "--space", str(path), "--dry-run", env=by_sudo(local_user)), f"{path}: {says}")


def test_an_explore_space_cannot_ask_for_a_huge_directory_tree(local_user, cli):
    """Before: dir_depth = 40 planned treatments that each make 2^41 directories."""
    small = (REPO / "recipes" / "spaces" / "small.toml").read_text()
    path = local_user.home / "space.toml"
    write_as(local_user, path, small.replace("dir_depth = 4", "dir_depth = 40", 1))
    one_line_refusal(cli("explore", "--space", str(path), env=by_sudo(local_user)), f"{path}: settings.dir_depth: expected a whole number in 0..12")


@pytest.mark.parametrize("plan", ids=["list", "space-list"], argvalues=["[]", '{"space": [], "seed": 1}'])
def test_resuming_a_plan_of_the_wrong_shape_is_one_line(local_user, cli, scratch, plan):
    study = local_user.home / "study"
    local_user.python(f"import os; os.mkdir({str(study)!r})")
    write_as(local_user, study / "plan.json", plan)
    # the user's study directory is not one root resumes at all (it could swap its files)
    one_line_refusal(cli("explore", "--resume", str(study)), "another user could change it")
    # the same plan in root's own directory: read, and refused for its shape, in one line
    own = scratch / "study"
    own.mkdir()
    (own / "plan.json").write_text(plan)
    one_line_refusal(cli("explore", "--resume", str(own)), f"{own / 'plan.json'}: not a readable plan")
