"""Issue 32's red-team pass, by someone who did not write the fixes: what still broke, as a
real unprivileged user (``local_user``) against root's fsscope (``cli``). Names the user
chooses -- a directory captured as an aging profile, a file a loop device is attached over, the
name of a process writing on the checked device -- reached root's terminal through renderers
the first round did not cover: ``profile list`` (a MarkupError traceback, exit 1, from a
description quoting ``big[/]x``), the age report's head and the TUI's aging view (the
profile's name, escapes intact), ``devices`` (a backing file's path) and ``check``'s other-I/O
finding (/proc/PID/comm). And a user's link named as the tree to scan (``~/tree`` -> a
root-only directory) had root scan and capture its own private tree."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import pytest
from local_user import USER_PYTHON

pytestmark = pytest.mark.privileged

CLEAR = "\x1b[2J"
OSC52 = "\x1b]52;c;aWQ+L3RtcC9wd24K\x07"


def _shown(text: str) -> str:
    from fsscope.format import visible

    return visible(text)


def _users_dir(user, *parts: str) -> Path:
    """``parts`` made as directories by the user under their home, a file in the last."""
    path = user.home.joinpath(*parts)
    user.python(f"import os; os.makedirs({str(path)!r}); open({str(path / 'f')!r}, 'w').write('x' * 100)")
    return path


def _terminal_safe(out: subprocess.CompletedProcess) -> None:
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "MarkupError" not in out.stderr
    assert "\x1b" not in out.stdout + out.stderr, out.stdout


def test_profile_list_shows_a_profile_captured_from_a_users_tree_as_text(local_user, scratch, cli):
    """The user's directory ``big[`` / ``]x<ESC>[2J``: root captures it into its profiles
    (FSSCOPE_RECIPES/aging); the profile's description quotes the path, ``[/]`` and all."""
    tree = _users_dir(local_user, "big[", f"]x{CLEAR}{OSC52}")
    recipes = scratch / "recipes"
    (recipes / "aging").mkdir(parents=True)
    env = os.environ | {"FSSCOPE_RECIPES": str(recipes)}
    out = cli("profile", "capture", str(tree), "-o", str(recipes / "aging" / "captured.toml"), env=env)
    _terminal_safe(out)
    out = cli("profile", "list", env=env | {"COLUMNS": "400"})
    _terminal_safe(out)
    assert _shown(tree.name) in out.stdout and _shown(str(tree)) in out.stdout, out.stdout


async def test_the_age_report_names_a_captured_profile_as_text(local_user, scratch, cli):
    """The profile's name is the user's directory name: the CLI's report and the TUI's replay
    of the same run (its aging view's status line) show its escapes, send none."""
    from pilot_wait import setup_ready, until
    from test_tui import SIZE, assert_clean, job_view, open_replay

    from fsscope import store
    from fsscope.tui import AppConfig, make_app
    from fsscope.tui.widgets.aging_view import AgingView

    tree = _users_dir(local_user, f"e{CLEAR}x[link=x.example]click{OSC52}")
    profile = scratch / "captured.toml"
    _terminal_safe(cli("profile", "capture", str(tree), "-o", str(profile)))
    out_json = scratch / "age.json"
    out = cli("age", "--ram", "--size", "64M", "--profile", str(profile), "--max-minutes", "0.1",
              "--json", str(out_json), env=os.environ | {"COLUMNS": "400"})
    _terminal_safe(out)
    assert out_json.exists()
    head = out.stdout.splitlines()[0]
    assert head.startswith(f"aged with profile {_shown(tree.name)} "), head
    run_id = store.list_runs()[-1].id
    app = make_app(AppConfig())
    async with app.run_test(size=SIZE) as pilot:
        await setup_ready(pilot, app)
        replay = await open_replay(pilot, app, run_id)
        view = job_view(replay, AgingView)
        await until(pilot, lambda: "profile" in view.status_text, "the aging view's status")
        assert f"profile {_shown(tree.name)}" in view.status_text and "\x1b" not in view.status_text
        await pilot.press("escape")
    assert_clean()
    assert not app.worker_errors


def _cell(table: str, first: str, column: int) -> str:
    """The cell of a printed Rich table in the row whose first cell is ``first``, its folded
    lines joined."""
    cells, inside = [], False
    for line in table.splitlines():
        parts = [p.strip() for p in line.split("│")]
        if len(parts) <= column:
            inside = False
            continue
        if parts[1] == first:
            inside = True
        elif parts[1]:
            inside = False
        if inside:
            cells.append(parts[column])
    return "".join(cells)


def test_devices_lists_a_loop_device_over_a_users_file_as_text(local_user, cli):
    """A loop device over the user's file (as ``udisksctl loop-setup`` makes for a desktop
    user): its backing file's path is theirs, ``[/]``, escapes and all."""
    image = local_user.home / f"o{OSC52}z[" / f"]x{CLEAR}.img"
    local_user.python(f"import os\nos.mkdir({str(image.parent)!r})\nwith open({str(image)!r}, 'w') as fh:\n"
                      "    fh.truncate(8 << 20)\n")
    dev = subprocess.run(["losetup", "--find", "--show", str(image)], check=True, capture_output=True,
                         text=True).stdout.strip()
    try:
        out = cli("devices", env=os.environ | {"COLUMNS": "600"})
        _terminal_safe(out)
        assert _cell(out.stdout, dev, 3).endswith(_shown(str(image))), out.stdout
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)


@pytest.fixture
def root_only():
    """A root-only directory (0700, like /root) with a directory inside."""
    import shutil
    import tempfile

    where = Path(tempfile.mkdtemp(prefix="fsscope-private-", dir="/var/tmp"))
    where.chmod(0o700)
    (where / "root-secret-dir" / "inner").mkdir(parents=True)
    (where / "root-secret-file").write_bytes(b"s" * 12345)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def test_a_tree_named_through_a_users_link_is_not_scanned_or_captured(local_user, root_only, scratch, cli):
    """``~/tree`` is the user's link to a root-only directory: root scans (or captures) "the
    user's tree" and must not read root's own instead. One line, exit 2, nothing written."""
    local_user.python(f"import os; os.symlink({str(root_only)!r}, 'tree'); os.mkdir('real')")
    tree = local_user.home / "tree"
    out_json = scratch / "scan.json"
    out = cli("scan", str(tree), "--no-free-space", "--json", str(out_json))
    assert out.returncode == 2 and not out_json.exists(), out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert f"{tree} is a symbolic link of uid {local_user.uid}'s" in line and "secret" not in out.stdout + line
    out = cli("profile", "capture", str(tree), "-o", str(scratch / "p.toml"))
    assert out.returncode == 2 and not (scratch / "p.toml").exists(), out.stdout + out.stderr
    assert "symbolic link" in out.stderr and "secret" not in out.stdout + out.stderr
    # the user's own directory, and a link root made to it, are scanned as before
    (scratch / "roots-link").symlink_to(local_user.home / "real")
    out = cli("scan", str(scratch / "roots-link"), "--no-free-space", "--no-aging", "--json", str(out_json))
    assert out.returncode == 0, out.stderr
    assert json.loads(out_json.read_text())["path"] == str(local_user.home / "real")


def test_a_busy_process_the_check_names_is_text(local_user, loop_device, scratch):
    """The user names their process (``/proc/self/comm``: an OSC 52 clipboard write) and
    writes on the device root checks: the other-I/O finding names it, escapes shown."""
    import shutil
    import tempfile

    from rich.console import Console
    from test_check_real import WRITER, measure_other_io

    from fsscope.cli.render.check import _render_finding

    dev = loop_device("256M")
    subprocess.run(["mkfs.ext4", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev], check=True)
    where = Path(tempfile.mkdtemp(prefix="fsscope-check-", dir="/var/tmp"))  # root's, 0755: the user reaches it
    where.chmod(0o755)
    mnt = where / "m"
    mnt.mkdir()
    subprocess.run(["mount", dev, str(mnt)], check=True)
    os.chown(mnt, local_user.uid, local_user.gid)
    comm = "\x1b]52;c;aWQK\x07"
    code = f"open('/proc/self/comm', 'w').write({comm!r})\n" + WRITER
    env = {"PATH": "/usr/bin:/bin", "HOME": str(local_user.home)}
    writer = subprocess.Popen([USER_PYTHON, "-I", "-c", code, str(mnt / "busy.dat")], user=local_user.uid,
                              group=local_user.gid, extra_groups=[], env=env, cwd=mnt)
    try:
        _, f = measure_other_io(writer.pid, mnt)
    finally:
        writer.kill()
        writer.wait()
        subprocess.run(["umount", str(mnt)], check=False)
        shutil.rmtree(where, ignore_errors=True)
    mine = [p for p in f.values["processes"] if p["pid"] == writer.pid]
    assert mine and mine[0]["name"] == _shown(comm), f.values["processes"]
    assert "\x1b" not in f.title + f.evidence + f.fix
    out = io.StringIO()
    _render_finding(f, Console(file=out, width=300))
    assert "\x1b" not in out.getvalue() and _shown(comm) in out.getvalue()


async def test_a_notification_quoting_a_name_is_text():
    """Textual reads a notification as markup by default: a job's error quoting a user's name
    ("big[/]x", "[link=…]", ESC) would raise MarkupError or draw a disguised link. The app's
    notify shows it as text, its escapes visible, whichever screen or widget calls it."""
    from pilot_wait import until

    from fsscope.tui import AppConfig, make_app

    app = make_app(AppConfig(is_root=False))
    async with app.run_test(size=(160, 48)) as pilot:
        name = f"/home/u/big[/]x{CLEAR}[link=https://x.example]click[/link]"
        app.screen.notify(f"failed: {name}", title=f"probe {OSC52}", severity="error")
        await until(pilot, lambda: len(app._notifications) == 1, "the notification")
        (shown,) = list(app._notifications)
        assert shown.message == "failed: /home/u/big[/]x\\x1b[2J[link=https://x.example]click[/link]"
        assert "\x1b" not in shown.title and "\\x1b]52" in shown.title and not shown.markup
        await pilot.pause()  # drawn without a MarkupError
        assert not app.worker_errors


def test_a_recipe_another_user_could_write_is_not_used(local_user, scratch, cli):
    """FSSCOPE_RECIPES (a site's own set) naming a directory the user owns, or root's directory
    holding a recipe file the user owns: the recipe decides mkfs and mount options, so root
    neither lists it nor formats with it -- one line, exit 2."""
    text = (Path(__file__).parents[1] / "recipes" / "ext4-default.toml").read_text()
    theirs = local_user.home / "recipes"
    local_user.python(f"import os; os.makedirs({str(theirs)!r}); open({str(theirs / 'evil.toml')!r}, 'w').write({text!r})")
    ours = scratch / "recipes"
    ours.mkdir()
    (ours / "ok.toml").write_text(text)
    (ours / "evil.toml").write_text(text)
    os.chown(ours / "evil.toml", local_user.uid, -1)
    for recipes in (theirs, ours):
        env = os.environ | {"FSSCOPE_RECIPES": str(recipes), "COLUMNS": "400"}
        listed = cli("recipes", env=env)
        assert listed.returncode == 0 and "evil" not in listed.stdout, listed.stdout
        out = cli("probe", "--ram", "--size", "64M", "--recipe", "evil", "--files", "10", env=env)
        assert out.returncode == 2, out.stdout + out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and f"uid {local_user.uid}" in lines[0], out.stderr
    assert "ok" in cli("recipes", env=os.environ | {"FSSCOPE_RECIPES": str(ours), "COLUMNS": "400"}).stdout
