"""Issue 32, items 3-6, as a local user against root's fsscope: a directory swapped for a link
while root scans the user's tree; names carrying terminal escapes and Rich markup through the
scan's command line, its TUI view and the CSV export; a compiler planted on PATH; a semaphore
and a journal entry that are not fsscope's own. Attacks as the user (``local_user``), fsscope
as root (this process, or ``cli``)."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from pilot_wait import until

from fsscope import records

pytestmark = pytest.mark.privileged

#: what a name may carry to root's terminal: clear screen, an OSC 52 clipboard write, a Rich
#: closing tag with nothing to close (a MarkupError lost the --json report), a disguised link
CLEAR = "\x1b[2J"
OSC52 = "\x1b]52;c;aWQ+L3RtcC9wd24K\x07"
CLOSE = "big[/]x"
LINK = "c[link=x.example]click[/link]"


@pytest.fixture
def root_only():
    """A root-only directory (0700, like /root) holding a directory and a file whose names and
    size must never reach a report of someone else's tree."""
    where = Path(tempfile.mkdtemp(prefix="fsscope-private-", dir="/var/tmp"))
    where.chmod(0o700)
    (where / "root-secret-dir").mkdir()
    (where / "root-secret-dir" / "inner-secret").mkdir()
    (where / "root-secret-file").write_bytes(b"s" * 12345)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def _users_tree(user) -> Path:
    """The user's tree: a few directories and files, ``victim/`` the one they will swap."""
    user.python("import os\n"
                "for d in ('tree/a/b', 'tree/victim/v', 'tree/z'):\n"
                "    os.makedirs(d)\n"
                "for f in ('tree/a/f', 'tree/victim/g', 'tree/z/h'):\n"
                "    open(f, 'w').write('x' * 10)\n")
    return user.home / "tree"


class _SwapOnOpen:
    """Swap ``victim`` for a link to ``target``, as the user, just before root's walk opens
    it: the moment an audit hook sees the open (``os.open``'s audit event, raised before the
    call). Deterministic, and blind to how the walk opens it (by path or from a descriptor)."""

    hooked = False
    current: _SwapOnOpen | None = None

    def __init__(self, user, tree: Path, target: Path):
        self.user, self.tree, self.target, self.done = user, tree, target, False

    def __enter__(self) -> _SwapOnOpen:
        if not _SwapOnOpen.hooked:  # an audit hook stays for the process: install one, once
            sys.addaudithook(_SwapOnOpen._audit)
            _SwapOnOpen.hooked = True
        _SwapOnOpen.current = self
        return self

    def __exit__(self, *exc) -> None:
        _SwapOnOpen.current = None

    @staticmethod
    def _audit(event: str, args: tuple) -> None:
        swap = _SwapOnOpen.current
        if event != "open" or swap is None or swap.done or not isinstance(args[0], (str, bytes)):
            return
        if os.path.basename(os.fsdecode(args[0])) != "victim" or not (args[2] or 0) & os.O_DIRECTORY:
            return
        swap.done = True
        tree = str(swap.tree)
        swap.user.python(f"import os; os.rename({tree + '/victim'!r}, {tree + '/moved'!r}); "
                         f"os.symlink({str(swap.target)!r}, {tree + '/victim'!r})")


def test_scan_reports_a_directory_swapped_for_a_link_and_never_follows_it(local_user, root_only):
    from rich.console import Console

    from fsscope.cli.render.scan import render_scan
    from fsscope.scan import scan
    from fsscope.scan.job import Report

    tree = _users_tree(local_user)
    with _SwapOnOpen(local_user, tree, root_only) as swap:
        report = Report.of(scan(tree, free_space=False, aging=True))
    assert swap.done, "the walk never opened victim/"
    text = records.dumps(report)
    assert "secret" not in text and str(root_only) not in text, [d.path for d in report.dirs]  # nothing of root's
    assert all(d.path == str(tree) or d.path.startswith(str(tree) + "/") for d in report.dirs)
    assert 12345 not in [d.size_bytes for d in report.dirs]
    assert report.swapped_count == 1 and len(report.swapped) == 1
    assert f"{tree}/victim" in report.swapped[0] and "not followed" in report.swapped[0]
    out = io.StringIO()
    render_scan(report, Console(file=out, width=200))
    lines = [line for line in out.getvalue().splitlines() if "swapped" in line]
    assert len(lines) == 1 and f"{tree}/victim" in lines[0], out.getvalue()


def test_profile_capture_counts_no_file_of_a_swapped_in_directory(local_user, root_only):
    from fsscope.aging.profile import profile_from_scan, scan_tree

    tree = _users_tree(local_user)
    with _SwapOnOpen(local_user, tree, root_only) as swap:
        got = scan_tree(tree)
    assert swap.done
    assert 12345 not in got.size_bytes.tolist() and sorted(got.size_bytes.tolist()) == [10, 10]
    assert len(got.swapped) == 1 and f"{tree}/victim" in got.swapped[0]
    assert "1 directories swapped during the walk not followed" in profile_from_scan(got).provenance


def _named_tree(scratch: Path) -> Path:
    """A tree whose own path and whose directories carry every hostile name."""
    root = scratch / f"t{CLEAR}{OSC52}"
    for name in (CLOSE, LINK, f"e{CLEAR}cleared", f"o{OSC52}z"):
        (root / name).mkdir(parents=True)
    (root / CLOSE / "f").write_bytes(b"x" * 100)
    return root


def _shown(text: str) -> str:
    return text.replace("\x1b", "\\x1b").replace("\x07", "\\x07")


def test_names_with_escapes_and_markup_print_as_text_through_scan(scratch, cli):
    tree = _named_tree(scratch)
    out_json = scratch / "scan.json"
    out = cli("scan", str(tree), "--json", str(out_json), "--no-free-space")
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout  # no terminal sequence reached it
    assert "\x1b" not in out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith(_shown(str(tree)) + " on "), first  # the escapes, shown as text
    # the table folds a long path over lines: its first column, joined up again
    cells = "".join(line.split("│")[1].strip() for line in out.stdout.splitlines() if line.startswith("│"))
    assert "big[/]x" in cells and "[link=x.example]click[/link]" in cells
    report = json.loads(out_json.read_text())  # written, with the names as they are
    paths = [d["path"] for d in report["dirs"]]
    for name in (CLOSE, LINK, f"e{CLEAR}cleared", f"o{OSC52}z"):  # ("/" in a name: one more level)
        assert str(tree / name) in paths, (name, paths)


async def test_names_in_the_tui_scan_view_and_its_csv_are_text(scratch):
    from test_tui import SIZE, assert_clean, job_view, run_plan

    from fsscope import paths
    from fsscope.targets import TargetSpec
    from fsscope.tui import AppConfig, make_app
    from fsscope.tui.widgets.scan_view import ScanView

    tree = _named_tree(scratch)
    app = make_app(AppConfig(target=TargetSpec("dir", str(tree)), jobs=("scan",)))
    async with app.run_test(size=SIZE) as pilot:
        live, job = await run_plan(pilot, app, "scan", 120)
        view = job_view(live, ScanView)
        summary = str(view.query_one("#scan-summary").content)
        assert summary.startswith(_shown(str(tree)) + " on "), summary
        table = view.query_one("#scan-dirs")
        cells = [str(cell) for i in range(table.row_count) for cell in table.get_row_at(i)]
        for name in (CLOSE, LINK, f"e{CLEAR}cleared", f"o{OSC52}z"):
            assert _shown(str(tree / name)) in cells, (name, cells)
        assert not any("\x1b" in c or "\x07" in c for c in cells)
        screen = app.export_screenshot()  # what the terminal shows: the escapes as text
        assert _shown(f"{CLEAR}{OSC52}/bi") in screen and "\x1b" not in screen and "\x07" not in screen
        before = set((paths.home() / "exports").glob("scan-dirs-*.csv"))
        table.focus()
        await pilot.press("s")
        await until(pilot, lambda: set((paths.home() / "exports").glob("scan-dirs-*.csv")) - before,
                    "the CSV export")
        (saved,) = set((paths.home() / "exports").glob("scan-dirs-*.csv")) - before
        rows = list(csv.reader(io.StringIO(saved.read_text())))
        flat = [c for row in rows for c in row]
        assert _shown(str(tree / CLOSE)) in flat and _shown(str(tree / f"e{CLEAR}cleared")) in flat
        assert not any("\x1b" in c for c in flat)
    assert_clean()
    assert not app.worker_errors


def test_csv_cells_a_spreadsheet_would_run_are_guarded():
    from fsscope.tui.widgets.table_export import csv_text

    hostile = ["=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0",
               "@SUM(1+1)*cmd|' /C calc'!A0", "\tq", "\rq", f"{CLEAR}x"]
    plain = ["-", "-1.5", "-12.3%", "+2 ms", "d201", "1,013"]
    rows = list(csv.reader(io.StringIO(csv_text(["cell"], [[c] for c in hostile + plain]))))[1:]
    got = [r[0] for r in rows]
    for cell, shown in zip(hostile, got):
        assert shown[0] not in "=+-@\t\r", (cell, shown)
    assert got[-len(plain):] == plain
    assert "\x1b" not in "".join(got)


# --- item 6: the compiler, the semaphore sweep, a journal entry without identity -----------------

def _plant_compilers(user, marker: Path) -> Path:
    """``cc`` and ``gcc`` of the user's, first on root's PATH: each leaves ``marker`` if run."""
    user.python("import os\n"
                "os.mkdir('bin')\n"
                "for name in ('cc', 'gcc'):\n"
                f"    open('bin/' + name, 'w').write('#!/bin/sh\\ntouch {marker}\\nexit 1\\n')\n"
                "    os.chmod('bin/' + name, 0o755)\n")
    return user.home / "bin"


def _c_source(scratch: Path, token: str) -> Path:
    """C code no earlier build cached (fsscope names a build by its source's hash)."""
    source = scratch / f"answer_{token}.c"
    source.write_text(f"/* {token} {os.urandom(8).hex()} */\nint fsscope_test_answer(void) {{ return 42; }}\n")
    return source


def test_a_compiler_planted_on_path_or_named_by_cc_is_never_run(local_user, scratch, monkeypatch):
    from fsscope import native

    marker = local_user.home / "ran-as-root"
    user_bin = _plant_compilers(local_user, marker)
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", f"{user_bin}:/usr/local/bin:/usr/bin:/bin")
    lib, how = native.library_path(_c_source(scratch, "path"), "the test library")
    assert not marker.exists()  # passed over for the system's compiler, later on PATH
    assert lib is not None, how
    assert native.load(lib, "the test library").fsscope_test_answer() == 42
    monkeypatch.setenv("CC", str(user_bin / "cc"))
    lib, how = native.library_path(_c_source(scratch, "cc"), "the test library")
    assert lib is None and not marker.exists()
    assert len(how.splitlines()) == 1 and str(user_bin / "cc") in how and f"uid {local_user.uid}" in how, how


def test_cleanup_sweeps_only_fsscopes_own_semaphores(local_user, cli):
    """A file in /dev/shm named as a dead job's semaphore but another user's is not fsscope's:
    kept. Root's own of the same dead job is swept."""
    from fsscope import proctree

    gone = subprocess.Popen(["true"])
    gone.wait()  # a dead pid
    planted = proctree.SEM_DIR / f"sem.fsscope-{gone.pid}-usr0001"
    own = proctree.SEM_DIR / f"sem.fsscope-{gone.pid}-own0001"
    try:
        local_user.python(f"open({str(planted)!r}, 'w').close()")
        own.write_bytes(b"")
        out = cli("cleanup")
        assert out.returncode == 0, out.stderr
        assert planted.exists() and os.lstat(planted).st_uid == local_user.uid  # not fsscope's: kept
        assert not own.exists()  # root's, of a dead job: swept
    finally:
        for path in (planted, own):
            path.unlink(missing_ok=True)


def test_a_journal_entry_without_identity_is_listed_by_cleanup_never_removed(scratch, cli):
    from fsscope.targets import Journal

    roots = scratch / "roots-own-dir"
    (roots / "inside").mkdir(parents=True)
    (roots / "inside" / "data").write_text("root's data")
    entry = Journal().record("workdir", "fsscope-test-noident", persistent=True, path=str(roots))
    try:
        out = cli("cleanup", "--prepared")
        assert out.returncode == 0, out.stderr
        assert (roots / "inside" / "data").read_text() == "root's data"
        lines = [line for line in out.stdout.splitlines() if str(roots) in line]
        assert len(lines) == 1 and "left" in lines[0] and "no identity" in lines[0], out.stdout
    finally:
        Journal().forget(entry)


def test_profile_capture_of_a_hostile_name_prints_text_and_saves_a_profile_that_loads(scratch, cli):
    """The profile's name is the tree's (a directory name): shown as text, written as TOML that
    reads back the same (a newline in it ended a comment line: the next line was TOML)."""
    from fsscope.aging.profile import load_profile

    tree = scratch / f"p{CLEAR}{CLOSE}\nname = 'evil'"
    tree.mkdir(parents=True)
    (tree / "f").write_bytes(b"x" * 100)
    out_toml = scratch / "captured.toml"
    out = cli("profile", "capture", str(tree), "-o", str(out_toml))
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout + out.stderr
    assert out.stdout.startswith(f"profile {_shown(tree.name)}".replace("\n", "\\x0a")), out.stdout
    profile = load_profile(out_toml)
    assert profile.name == tree.name and profile.description == f"captured from {tree}"
