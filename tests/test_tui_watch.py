"""The Watch job in the TUI (issue 36): Setup lists the processes doing file-system I/O now and
the services, a real writer is picked from the list and watched on a real file system (real
tracefs), without the Setup target being made; the live view shows the report's tables and
the run is recorded and replays."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pilot_wait import setup_ready, until, wait_for
from test_tui import SIZE, assert_clean, job_view, open_replay, run_plan, set_param
from test_watch import WRITER

from fsscope.engine import registry
from fsscope.errors import FsscopeError
from fsscope.targets import TargetSpec
from fsscope.tui import AppConfig, make_app
from fsscope.tui.watch_model import WatchModel
from fsscope.tui.widgets.watch_params import NOT_FORMATTED, WatchParams
from fsscope.tui.widgets.watch_view import WatchView
from fsscope.watch.active import busy_processes, services


def paced_writer(where: Path) -> subprocess.Popen:
    """A maildir delivery still going (a message every 2 ms) in ``where``, its working directory."""
    return subprocess.Popen([sys.executable, str(WRITER), str(where / "mail"), "1000000", "--pace-ms=2"], cwd=where)


def delivering(where: Path) -> None:
    """Await the writer's first message (its I/O is under way)."""
    wait_for(lambda: (where / "mail" / "new").is_dir() and any((where / "mail" / "new").iterdir()),
             "the writer's first message")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _task_flags(pid: int) -> int:
    """The task's flags from /proc (0 once it has exited: the list is the whole machine's, and
    another process can end between the sample and this read)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[6])
    except (FileNotFoundError, ProcessLookupError):
        return 0


def test_busy_processes_ranks_a_writer_and_services_are_cgroups(scratch):
    writer = paced_writer(scratch)
    try:
        delivering(scratch)
        busy = busy_processes(0.5, skip=frozenset({os.getpid()}))
        mine = [b for b in busy if b.pid == writer.pid]
        assert mine and mine[0].calls_bytes_per_s > 512 and mine[0].comm.startswith("python")
        assert [b.rate_bytes_per_s for b in busy] == sorted((b.rate_bytes_per_s for b in busy), reverse=True)
        kthreads = [b.pid for b in busy if _task_flags(b.pid) & 0x00200000]  # PF_KTHREAD
        assert not kthreads  # a kworker flushing pages makes no system call to watch
        assert all(b.pid != os.getpid() for b in busy)
    finally:
        stop(writer)


@pytest.mark.privileged
def test_services_are_the_v2_cgroups_holding_processes(scratch):
    from fsscope import proctree

    parent = proctree.job_cgroup_parent()
    if parent is None:
        pytest.fail("no cgroup v2 directory to make a test cgroup in")
    group = parent / f"fsscope-{os.getpid()}-servicetest"
    group.mkdir()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (group / "cgroup.procs").write_text(str(sleeper.pid))
        listed = dict(services())
        name = str(group.relative_to(Path("/sys/fs/cgroup")))
        assert listed.get(name) == 1, listed
        for path, count in listed.items():  # v2 cgroups below a root, never a v1 hierarchy or a root
            cgroup = Path("/sys/fs/cgroup") / path
            # (the listing is the whole machine's: a cgroup another session removed since is gone)
            assert ((cgroup / "cgroup.events").is_file() or not cgroup.exists()) and count > 0
    finally:
        stop(sleeper)
        group.rmdir()


@pytest.mark.privileged
async def test_watch_a_picked_writer_from_setup_without_making_the_target(scratch, made_fs):
    mnt = made_fs("ext4")
    image = scratch / "never-made.img"  # the Setup target: watch must not create, format or mount it
    writer = paced_writer(mnt)
    app = make_app(AppConfig(target=TargetSpec("image", str(image), 256 * 2**20), jobs=("watch",)))
    try:
        delivering(mnt)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await setup_ready(pilot, app)
            panel = app.screen.query_one("#params-watch", WatchParams)
            assert NOT_FORMATTED in str(panel.query_one("#watch-note").render()).replace("\n", " ")
            # nothing picked yet: Start refuses in one line, nothing starts
            await pilot.press("ctrl+r")
            await until(pilot, lambda: any("pick one process" in str(n.message) for n in app._notifications),
                        "the refusal")
            await until(pilot, lambda: f"pid:{writer.pid}" in panel.listed, "the writer listed as doing I/O")
            pick = panel.query_one("#watch-pick")
            pick.focus()
            pick.highlighted = pick.get_option_index(f"pid:{writer.pid}")
            await pilot.press("enter")
            await until(pilot, lambda: panel.query_one("#param-watch-pid").value == str(writer.pid),
                        "the pid filled in")
            await set_param(pilot, app, "param-watch-duration_s", "2")
            live, job = await run_plan(pilot, app, "the watch", 180)
            report = job.report
            assert report.calls > 0 and report.watched.startswith(f"pid {writer.pid}")
            assert {"rename", "write"} <= {o.op for o in report.ops}, report.ops
            assert report.fs == "ext4" and report.tree == str(mnt)

            def tables_show_the_report(screen) -> None:
                view = job_view(screen, WatchView)
                ops = view.query_one("#watch-ops")
                assert ops.row_count == len(report.ops)
                assert [str(ops.get_row_at(r)[0]) for r in range(ops.row_count)] == [o.op for o in report.ops]
                assert view.query_one("#watch-slow").row_count == len(report.slow)
                assert f"{report.calls:,} file-system calls" in str(view.query_one("#watch-summary").render())

            tables_show_the_report(live)
            # the flags are the job's findings (repeats, format changes, lost events), with notes
            assert len(live.views[0].flags) == len(report.repeats) + len(report.format_changes) + bool(report.lost_total)
            busiest = max(report.ops, key=lambda o: o.calls)
            assert str(live.query_one("#spark-row-p50 .spark-label").render()) == f"p50 {busiest.op}"
            assert len(busiest.p50_us_by_window) == len(live.query_one("#spark-p50").data) >= 2
            assert any("watch on no target" in line for line in live.log_panel.lines_written)
            model = live.views[0].data
            assert isinstance(model, WatchModel) and model.elapsed_s  # the live progress came through
            assert not image.exists()  # the target was not made
            replay = await open_replay(pilot, app, job.run_id)
            tables_show_the_report(replay)
    finally:
        stop(writer)
    assert_clean()
    assert not app.worker_errors


def test_a_plan_of_watch_alone_touches_no_target():
    """Watch formats nothing: on a device target a plan of watch alone is not destructive (no
    confirmation to wipe it) and the job runs on a directory, with no recipe."""
    from fsscope import paths, recipes
    from fsscope.records import build
    from fsscope.tui.config import JobRequest, RunPlan
    from fsscope.watch.job import Spec

    watch = JobRequest("watch", build(Spec, pid=os.getpid(), duration_s=1.0))
    plan = RunPlan(TargetSpec("device", "/dev/does-not-exist"), recipes.load("ext4-default"), (watch,))
    assert not plan.uses_target and not plan.destructive
    assert plan.job_target(watch) == (TargetSpec("dir", str(paths.ram_dir(checked=False))), None)
    with_probe = RunPlan(plan.target, plan.recipe, (watch, JobRequest("probe", build(registry.spec_type("probe")))))
    assert with_probe.uses_target and with_probe.destructive
    assert with_probe.job_target(with_probe.jobs[1]) == (plan.target, plan.recipe)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_the_watch_panel_shows_its_note_and_list_on_setup(size, scratch):
    """Highlighting watch on Setup shows, without scrolling, that it formats nothing, and the
    list of what can be watched (at 80x24 too)."""
    app = make_app(AppConfig(target=TargetSpec("image", "/nonexistent/never.img", 256 * 2**20),
                             jobs=("probe", "watch"), discover_devices=lambda: []))
    writer = paced_writer(scratch)  # something doing I/O, whatever else the machine does
    try:
        delivering(scratch)
        await _panel_shows(app, size, writer.pid)
    finally:
        stop(writer)


async def test_a_process_name_is_text_in_the_watch_list(scratch):
    """A process names itself (``comm``): ``[/]`` and ``[b]`` in it are shown as they are, never
    read as markup (a MarkupError would end the Setup screen)."""
    name = "[/]x[b]y"
    code = (f"open('/proc/self/comm', 'w').write({name!r}); import runpy, sys; "
            f"sys.argv = [{str(WRITER)!r}, {str(scratch / 'mail')!r}, '1000000', '--pace-ms=2']; "
            f"runpy.run_path({str(WRITER)!r}, run_name='__main__')")
    writer = subprocess.Popen([sys.executable, "-c", code], cwd=scratch)
    app = make_app(AppConfig(target=TargetSpec("image", "/nonexistent/never.img", 256 * 2**20),
                             jobs=("probe", "watch"), discover_devices=lambda: []))
    try:
        delivering(scratch)
        assert Path(f"/proc/{writer.pid}/comm").read_text().strip() == name
        await _panel_shows(app, (160, 48), writer.pid, shown=name)
    finally:
        stop(writer)


async def _panel_shows(app, size: tuple[int, int], pid: int, shown: str = "") -> None:
    async with app.run_test(size=size) as pilot:
        await setup_ready(pilot, app)
        app.screen.query_one("#job-list").focus()
        await pilot.press("down")
        await until(pilot, lambda: app.screen.query("#params-watch"), "the watch panel")
        panel = app.screen.query_one("#params-watch", WatchParams)
        await until(pilot, lambda: f"pid:{pid}" in panel.listed, "the writer listed")
        screen = app.screen.region
        for part in ("#watch-note", "#watch-pick"):
            region = panel.query_one(part).region
            assert region.height >= 2 and screen.contains_region(region), (part, region, screen)
        pick = panel.query_one("#watch-pick")
        assert pick.option_count == len(panel.listed)
        if shown:
            from textual.visual import visualize

            await pilot.pause()  # drawn, so a prompt read as markup would have failed by now
            prompt = pick.get_option_at_index(pick.get_option_index(f"pid:{pid}")).prompt
            assert f"{pid} {shown} " in visualize(pick, prompt).plain  # as it is drawn: the name as given


async def test_a_plan_of_watch_alone_ignores_a_wrong_setup_target(scratch):
    """Setup's target and recipe are unused by watch alone: a wrong target field (an image with
    no path) does not refuse it, and the plan runs where watch is told; with a job that
    formats, the same field is still one line of refusal."""
    app = make_app(AppConfig(target=TargetSpec("image", "/nonexistent/never.img", 256 * 2**20),
                             jobs=("watch",), discover_devices=lambda: []))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.screen.query("#params-watch"), "the watch panel")
        await set_param(pilot, app, "param-watch-pid", str(os.getpid()))
        app.screen.query_one("#target-path").value = ""
        await pilot.pause()
        plan = app.screen.build_plan()
        assert [r.job for r in plan.jobs] == ["watch"] and not plan.uses_target
        assert plan.job_target(plan.jobs[0])[0].kind == "dir"
    app2 = make_app(AppConfig(target=TargetSpec("image", "/nonexistent/never.img", 256 * 2**20),
                              jobs=("probe",), discover_devices=lambda: []))
    async with app2.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app2.screen.query("#job-picker"), "the setup screen")
        app2.screen.query_one("#target-path").value = ""
        await pilot.pause()
        with pytest.raises(FsscopeError, match="target needs a path"):
            app2.screen.build_plan()
