"""Audit readers on a FAKE /proc + /sys + /etc root: states this machine cannot produce (a VM
without cpufreq or thermal counters, no swap, no cgroup limits) are written as files into a
temporary directory and handed to the pure readers. Nothing here reads the real machine."""

from __future__ import annotations

import os
from pathlib import Path

from msgspec.structs import replace

from fsscope.check import system as S
from fsscope.check import target as T
from fsscope.check.findings import Finding, rank
from fsscope.check.job import Report
from fsscope.check.system import Root
from fsscope.check.verdict import Calibration, CalibrationRunFigures, decide


def fake_root(tmp_path: Path, files: dict[str, str]) -> Root:
    for rel, text in files.items():
        path = tmp_path / "fake" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "fake").mkdir(exist_ok=True)
    return Root(str(tmp_path / "fake"))


def test_fake_governor_powersave_warns_performance_is_ok(tmp_path):
    root = fake_root(tmp_path, {f"sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor": g
                                for i, g in enumerate(["powersave", "performance"])})
    f = S.cpu_governor(root)
    assert f.severity == "warn" and "powersave" in f.title
    assert "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor" in f.evidence and "powersave (1 CPUs)" in f.evidence
    assert "performance" in f.fix
    ok = S.cpu_governor(fake_root(tmp_path / "b", {"sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance"}))
    assert ok.severity == "ok"


def test_fake_missing_files_are_unknown_with_the_reason_never_ok(tmp_path):
    root = fake_root(tmp_path, {})
    for reader in (S.cpu_governor, S.turbo, S.load, S.thermal, S.thp, S.dirty_settings, S.dirty_pending,
                   S.swap, lambda r: S.page_cache_fit(r, 1 << 30), lambda r: S.cgroup_io_limit(r, "7:0"),
                   S.periodic_jobs):
        f = reader(root)
        assert f.severity == "unknown", f
        assert f.evidence  # the reason
    t = T.TargetInfo("/x", "/x", "ext4", "/dev/loop9", (), "7:9", "loop9", "loop9", "/img", None)
    for reader in (T.io_scheduler, T.read_ahead, T.write_cache, T.loop_direct_io):
        assert reader(root, t).severity == "unknown"


def test_fake_turbo(tmp_path):
    on = fake_root(tmp_path, {"sys/devices/system/cpu/intel_pstate/no_turbo": "0"})
    assert S.turbo(on).severity == "warn" and "no_turbo = 0" in S.turbo(on).evidence
    off = fake_root(tmp_path / "b", {"sys/devices/system/cpu/cpufreq/boost": "0"})
    assert S.turbo(off).severity == "ok"


def test_fake_thermal_counts_and_growth(tmp_path):
    files = {f"sys/devices/system/cpu/cpu{i}/thermal_throttle/{k}_throttle_count": "0"
             for i in range(2) for k in ("core", "package")}
    root = fake_root(tmp_path, files)
    assert S.thermal(root).severity == "ok"
    before = S.throttle_counts(root)
    (Path(root.path) / "sys/devices/system/cpu/cpu1/thermal_throttle/core_throttle_count").write_text("7")
    f = S.thermal(root, before)
    assert f.severity == "bad" and f.values["during_check"] == 7
    assert S.thermal(root).severity == "warn"  # since boot only


def test_fake_load(tmp_path):
    busy = fake_root(tmp_path, {"proc/loadavg": "3.50 2.00 1.00 4/300 999", "sys/devices/system/cpu/online": "0-1"})
    f = S.load(busy)
    assert f.severity == "bad" and f.values == {"load1": 3.5, "runnable_others": 3, "cpus": 2}
    idle = fake_root(tmp_path / "b", {"proc/loadavg": "0.10 0.1 0.1 1/300 999", "sys/devices/system/cpu/online": "0-3"})
    assert S.load(idle).severity == "ok"


def test_fake_memory_swap_dirty_thp(tmp_path):
    root = fake_root(tmp_path, {
        "proc/meminfo": "MemTotal: 4194304 kB\nMemAvailable: 2097152 kB\nDirty: 524288 kB\nWriteback: 0 kB\n",
        "proc/swaps": "Filename Type Size Used Priority\n/swapfile file 1048576 2048 -2\n",
        "proc/vmstat": "pswpin 10\npswpout 20\n",
        "proc/sys/vm/swappiness": "60",
        "sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never",
        "proc/sys/vm/dirty_ratio": "40", "proc/sys/vm/dirty_background_ratio": "10",
    })
    assert S.dirty_pending(root).severity == "bad"            # 512 MiB dirty
    assert S.swap(root).severity == "warn"                    # 2 MiB swapped out, not moving
    assert S.swap(root, {"pswpin": 0, "pswpout": 0}, 2.0).severity == "bad"   # 30 pages moved
    assert S.thp(root).severity == "warn"
    d = S.dirty_settings(root)
    assert d.severity == "warn" and "dirty_ratio" in d.title and "vm.dirty_ratio=20" in d.fix
    # dataset vs 2 GiB available / 4 GiB total
    assert S.page_cache_fit(root, 1 << 30).severity == "bad"
    assert S.page_cache_fit(root, 6 << 30).severity == "warn"
    assert S.page_cache_fit(root, 9 << 30).severity == "ok"
    assert S.page_cache_fit(root, None).severity == "unknown"


def _cgroup_files(limit_line: str) -> dict[str, str]:
    return {"proc/self/cgroup": "0::/bench/job\n",
            "proc/self/mountinfo": "41 31 0:38 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
            "sys/fs/cgroup/bench/job/io.max": "",
            "sys/fs/cgroup/bench/io.max": limit_line}


def test_fake_cgroup_io_limit_on_an_ancestor(tmp_path):
    root = fake_root(tmp_path, _cgroup_files("7:3 rbps=max wbps=1048576 riops=max wiops=max\n"))
    f = S.cgroup_io_limit(root, "7:3")
    assert f.severity == "bad" and "wbps=1048576" in f.title and "/sys/fs/cgroup/bench/io.max" in f.evidence
    assert S.cgroup_io_limit(root, "8:0").severity == "warn"   # a limit, but on another device
    free = fake_root(tmp_path / "b", _cgroup_files("7:3 rbps=max wbps=max riops=max wiops=max\n"))
    assert S.cgroup_io_limit(free, "7:3").severity == "ok"


def test_fake_periodic_jobs(tmp_path):
    files = {"etc/systemd/system/timers.target.wants/fstrim.timer": "",
             "etc/systemd/system/timers.target.wants/man-db.timer": "",
             "lib/systemd/system/fstrim.timer": "[Timer]\nOnCalendar=weekly\nRandomizedDelaySec=6000\nPersistent=true\n",
             "etc/cron.d/e2scrub_all": "10 3 * * * root e2scrub_all -A -r\n"}
    root = fake_root(tmp_path, files | {"run/systemd/system/.keep": ""})
    f = S.periodic_jobs(root)
    assert f.severity == "warn" and "fstrim.timer" in f.title and "systemctl stop fstrim.timer" in f.fix
    assert "OnCalendar=weekly" in f.evidence and "e2scrub_all" not in f.title   # no cron daemon runs
    assert "[inactive here]" in f.evidence
    with_cron = fake_root(tmp_path / "c", files | {"proc/77/comm": "cron\n"})   # cron, but no systemd
    g = S.periodic_jobs(with_cron)
    assert g.severity == "warn" and g.values["active_heavy"] == ["e2scrub_all"] and not g.values["systemd"]
    light = fake_root(tmp_path / "b", {"etc/systemd/system/timers.target.wants/man-db.timer": ""})
    assert S.periodic_jobs(light).severity == "ok"


def _target(**kw) -> T.TargetInfo:
    base = dict(path="/mnt", mountpoint="/mnt", fs="ext4", source="/dev/sdz1", options=("rw", "relatime"),
                devno="8:1", block="sdz1", disk="sdz")
    return T.TargetInfo(**(base | kw))


def test_fake_block_queue(tmp_path):
    root = fake_root(tmp_path, {"sys/block/sdz/queue/scheduler": "mq-deadline kyber [bfq] none",
                                "sys/block/sdz/queue/read_ahead_kb": "0",
                                "sys/block/sdz/queue/rotational": "0", "sys/block/sdz/queue/zoned": "host-managed",
                                "sys/block/sdz/queue/write_cache": "write through",
                                "sys/block/sdz/device/scsi_disk/0:0:0:0/cache_type": "write through"})
    t = _target()
    assert T.io_scheduler(root, t).severity == "warn" and T.io_scheduler(root, t).values["scheduler"] == "bfq"
    assert T.read_ahead(root, t).severity == "warn"
    assert T.rotational(root, t).severity == "warn" and "zoned" in T.rotational(root, t).title
    assert "queue/write_cache = write through" in T.write_cache(root, t).evidence
    assert "/sys/block/sdz/device/scsi_disk/0:0:0:0/cache_type = write through" in T.write_cache(root, t).evidence


def test_fake_mount_options():
    assert T.discard(_target(options=("rw", "discard"))).severity == "warn"
    assert T.discard(_target(options=("rw", "discard=async"), fs="btrfs")).severity == "warn"
    assert T.discard(_target()).severity == "ok"
    assert T.atime(_target(options=("rw", "strictatime"))).severity == "warn"
    assert T.atime(_target(options=("rw", "noatime"))).values["atime"] == "noatime"


def test_fake_lazy_init_states(tmp_path):
    dump = "Group descriptor size: 64\nGroup 0: (Blocks 0-32767) csum 0x1 [ITABLE_ZEROED]\n" \
           "Group 1: (Blocks 32768-65535) csum 0x2 [INODE_UNINIT, BLOCK_UNINIT]\n"
    assert T.unzeroed_groups(dump) == (1, 2)
    running = fake_root(tmp_path, {"proc/123/comm": "ext4lazyinit\n", "proc/1/comm": "init\n"})
    idle = fake_root(tmp_path / "b", {"proc/1/comm": "init\n"})
    assert T.lazyinit_threads(running) == [123]
    assert T.ext4_lazy_init(running, _target(), dump).severity == "bad"
    assert T.ext4_lazy_init(idle, _target(), dump).severity == "warn"
    zeroed = dump.replace("[INODE_UNINIT, BLOCK_UNINIT]", "[ITABLE_ZEROED]")
    assert T.ext4_lazy_init(idle, _target(), zeroed).severity == "ok"
    assert T.ext4_lazy_init(running, _target(), zeroed).severity == "warn"   # another fs is being initialised
    assert T.ext4_lazy_init(idle, _target(), None, "not root").severity == "unknown"
    assert T.ext4_lazy_init(idle, _target(fs="xfs"), None).severity == "ok"


def test_fake_fullness():
    vfs = os.statvfs_result((4096, 4096, 1000, 50, 50, 1000, 900, 900, 0, 255, 0))
    f = T.fullness(_target(), vfs)
    assert f.severity == "bad" and f.values["use_percent"] == 95 and f.title == "95% full (blocks, as df counts)"
    # df's Use%: blocks reserved for root are neither used nor available (100 x 600 / (600 + 300))
    reserved = os.statvfs_result((4096, 4096, 1000, 400, 300, 1000, 900, 900, 0, 255, 0))
    f = T.fullness(_target(), reserved)
    assert f.values["use_percent"] == 67 and f.values["reserved_bytes"] == 100 * 4096 and f.severity == "ok"
    assert "reserved for root" in f.evidence
    # inode use is its own number, labelled, when it is the fuller one
    inodes = os.statvfs_result((4096, 4096, 1000, 700, 700, 1000, 50, 50, 0, 255, 0))
    f = T.fullness(_target(), inodes)
    assert f.title == "inodes 95% used; blocks 30% (df)" and f.severity == "bad"


def test_fake_other_io_never_gives_a_process_more_than_its_device_moved(tmp_path):
    """/proc/PID/io counts a buffered write when it is dirtied; the device moves it at
    writeback: over one interval a writer can count 10x what the device did."""
    root = fake_root(tmp_path, {})
    idle = (0,) * 11
    busy = (0, 0, 0, 0, 100, 0, 19_531, 0, 0, 0, 0)   # 10 MB written in the second
    before = T.Snapshot(0.0, {"sdz1": idle, "sdz": idle}, {4242: ("writer", 0, 0, 0, 0)}, {}, {}, [], 3)
    after = T.Snapshot(1.0, {"sdz1": busy, "sdz": busy}, {4242: ("writer", 0, 100_000_000, 0, 0)}, {}, {}, [], 3)
    f = T.other_io(root, _target(), before, after)
    (writer,) = f.values["processes"]
    device = f.values["disks"]["sdz1"]["bytes_per_s"]
    assert writer["bytes_per_s"] <= device < writer["counted_bytes_per_s"]
    assert "counted 100.00 MB/s, dirtied ahead of writeback" in f.evidence
    if os.geteuid() == 0:   # root is not told to run as root
        assert "run as root" not in f.evidence and "even to root" in f.evidence


def test_verdict_ranks_and_blocks():
    def finding(id, sev, **values):
        return Finding(id, sev, id, "ev", "effect", f"fix {id}", values)
    cal = Calibration(runs=[CalibrationRunFigures(ops_per_s=1)] * 3, runs_needed=8, cv=0.04, precision=0.05,
                      duration_s_needed=12.0, window_s_needed=20.0, run_s=30)
    assert decide([finding("load", "ok")], cal).verdict == "fit"
    assert decide([finding("load", "ok")], cal).headline == "fit: benchmark with ≥ 8 runs of ≥ 20 s each"
    caution = decide([finding("thp", "bad"), finding("load", "bad")], cal)
    assert caution.verdict == "caution" and caution.fix_first[0].startswith("[load]")  # larger effect first
    assert decide([finding("other-io", "bad")], cal).verdict == "unfit"
    assert decide([finding("other-io", "bad", kernel_only=True)], cal).verdict == "caution"
    assert decide([finding("ext4-lazy-init", "bad")], cal).verdict == "caution"   # ends by itself; a recipe avoids it
    assert decide([], replace(cal, runs_needed=500, cv=0.5)).verdict == "unfit"
    assert decide([], replace(cal, duration_s_needed=None)).verdict == "caution"
    both = decide([], replace(cal, duration_s_needed=None, runs_needed=40, cv=0.15))
    assert both.verdict == "caution" and len(both.fix_first) == 2 and "±5 %" in both.fix_first[0]
    assert decide([finding("load", "warn")], None).headline.startswith("fit: no bad findings (calibration skipped")
    assert sorted([finding("thp", "warn"), finding("swap", "bad")], key=rank)[0].id == "swap"


def test_fake_bench_pointer_only_when_a_fast_item_is_bad(tmp_path):
    from fsscope.cli.check_pointer import bad_pointer

    busy = fake_root(tmp_path, {"proc/loadavg": "9.00 2.00 1.00 9/300 999", "sys/devices/system/cpu/online": "0-1"})
    line = bad_pointer(busy)
    assert line.startswith("note:") and "load: busy machine" in line and "fsscope check" in line
    idle = fake_root(tmp_path / "b", {"proc/loadavg": "0.01 0.0 0.0 1/300 999", "sys/devices/system/cpu/online": "0-1",
                                      "proc/meminfo": "MemTotal: 100 kB\nDirty: 0 kB\nWriteback: 0 kB\n",
                                      "proc/swaps": "Filename Type Size Used Priority\n"})
    assert bad_pointer(idle) is None


def test_render_of_a_fit_report_lists_the_warnings_worth_a_look():
    import io

    from rich.console import Console

    from fsscope.cli.render.check import render_check

    warn = Finding("thp", "warn", "transparent huge pages: always", "/sys/kernel/mm/... = [always]", "stalls", "echo madvise")
    cal = Calibration(personality="fileserver", runs=[CalibrationRunFigures(ops_per_s=1000.0, stable_after_s=12.0)] * 3,
                      cv=0.02, precision=0.05, confidence=0.95, runs_needed=3, duration_s_needed=12.0,
                      window_s_needed=10.0, run_s=30, criterion="c", window_criterion="w", runs_needed_method="t")
    verdict = decide([warn], cal)
    assert verdict.verdict == "fit"
    out = io.StringIO()
    render_check(Report(verdict=verdict.verdict, headline=verdict.headline, fix_first=list(verdict.fix_first),
                        findings=[warn], calibration=cal), Console(file=out, width=200))
    text = out.getvalue()
    assert "fit: benchmark with ≥ 3 runs of ≥ 12 s each" in text and "worth a look" in text
    assert "[thp] transparent huge pages: always" in text and "settled per run: 12 s, 12 s, 12 s" in text
