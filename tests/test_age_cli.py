"""``fsscope age`` and ``fsscope profile`` as a user runs them: real mkfs on RAM/loop images.

Checked: the JSON contract, fresh vs aged fragmentation, the same seed giving the same op log
on fresh file systems, --resume on a kept image (no mkfs), ENOSPC as a normal outcome, Ctrl-C
with the same summary, bad input as one line with exit 2 and nothing formatted, and profile
capture/show/list.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fsscope import paths
from fsscope.aging.profile import load_profile
from fsscope.targets.journal import loops_backing

REQUIRED_KEYS = {"profile", "seed", "ops", "ops_per_s", "fullness", "stop_reason", "op_log_sha256", "fit"}


def blkid_type(path: Path) -> str:
    out = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", str(path)], capture_output=True, text=True)
    return out.stdout.strip()


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.privileged
def test_age_ram_image_reports_the_contract_and_fresh_vs_aged(cli, tmp_path):
    out = tmp_path / "age.json"
    proc = cli("age", "--ram", "--size", "128M", "--profile", "small", "--confidence", "0.5",
               "--json", str(out), timeout_s=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert set(report) >= REQUIRED_KEYS
    assert report["profile"] == "small" and report["seed"] == 1
    assert report["stop_reason"] == "confidence", report["stop_note"]
    assert re.fullmatch(r"[0-9a-f]{64}", report["op_log_sha256"])
    assert report["fullness"] == pytest.approx(0.5, abs=0.05)
    # the progress the user saw never ran backwards and said what it was based on
    events = paths.runs_dir() / report["run_id"] / "events.ndjson"
    progress = [e for e in map(json.loads, events.read_text().splitlines()) if e.get("kind") == "progress"]
    assert progress and all(e["total"] == 100 and e["progress_basis"] for e in progress)
    done = [e["done"] for e in progress]
    assert done == sorted(done), done
    for name in ("size", "depth", "age"):
        fit = report["fit"][name]
        assert {"target", "actual", "p_value"} <= set(fit)
        assert len(fit["target"]) == len(fit["actual"]) and fit["p_value"] >= 0.5
    # fresh vs aged side by side: same test-file size, more free extents once aged
    fresh, aged = report["fresh"], report["aged"]
    assert fresh["test_file"]["size_bytes"] == aged["test_file"]["size_bytes"]
    assert aged["free_space"]["free_extent_count"] > fresh["free_space"]["free_extent_count"]
    assert aged["space"]["fullness"] > fresh["space"]["fullness"] + 0.3
    assert report["snapshot"] is None  # a RAM target is removed afterwards; no default snapshot
    # the printed summary: distributions, fit, fresh-vs-aged table
    for text in ("file size", "directory depth", "relative age", "fresh vs aged", "free extents", "op log sha256"):
        assert text in proc.stdout, text


@pytest.mark.privileged
def test_same_seed_same_op_log_on_fresh_images(cli, tmp_path):
    hashes = []
    for seed in (7, 7, 8):
        out = tmp_path / f"s{len(hashes)}.json"
        proc = cli("age", "--ram", "--size", "64M", "--profile", "small", "--seed", str(seed),
                   "--max-overwrites", "0.8", "--json", str(out), timeout_s=120)
        assert proc.returncode == 0, proc.stderr
        report = json.loads(out.read_text())
        assert report["stop_reason"] == "overwrites"
        hashes.append((report["op_log_sha256"], report["ops"]))
    assert hashes[0] == hashes[1]
    assert hashes[2][0] != hashes[0][0]


@pytest.mark.privileged
def test_resume_continues_on_the_kept_image_without_mkfs(cli, scratch):
    image = scratch / "aged.img"
    first = scratch / "first.json"
    proc = cli("age", "--image", str(image), "--size", "64M", "--profile", "small",
               "--max-overwrites", "0.3", "--no-snapshot", "--json", str(first), timeout_s=120)
    assert proc.returncode == 0, proc.stderr
    a = json.loads(first.read_text())
    assert a["stop_reason"] == "overwrites" and a["phase"] == "rapid"
    # kept on disk, unmounted and detached, with the aged file system on it
    assert image.is_file() and not loops_backing(str(image)) and blkid_type(image) == "ext4"
    assert not Path(str(image) + ".aged").exists()

    second = scratch / "second.json"
    proc = cli("age", "--image", str(image), "--resume", "--max-overwrites", "1.0", "--json", str(second),
               timeout_s=120)
    assert proc.returncode == 0, proc.stderr
    b = json.loads(second.read_text())
    assert b["resumed"] and b["profile"] == "small" and b["seed"] == a["seed"]
    assert b["ops"] > a["ops"] and b["session_ops"] == b["ops"] - a["ops"]
    assert b["overwrites"] >= 1.0 and b["phase"] == "stable"
    assert b["fresh"]["from_run"] == run_id_of(a)  # fresh numbers from the run that formatted it
    commands = [c["argv"][0] for c in json.loads(
        (Path(os.environ["FSSCOPE_HOME"]) / "runs" / b["run_id"] / "manifest.json").read_text())["target"]["commands"]]
    assert "mkfs.ext4" not in commands and "mount" in commands
    assert Path(b["snapshot"]["path"]) == Path(str(image) + ".aged")  # default snapshot next to the image
    assert b["snapshot"]["method"] in ("copy", "reflink")


def run_id_of(report: dict) -> str:
    return report["run_id"]


@pytest.mark.privileged
def test_enospc_is_exit_0_with_the_reason_explained(cli, scratch):
    out = scratch / "full.json"
    proc = cli("age", "--image", str(scratch / "tiny.img"), "--size", "16M", "--mkfs-opts", "-N 64",
               "--profile", "small", "--no-snapshot", "--json", str(out), timeout_s=120)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["stop_reason"] == "enospc"
    assert "ran out of space" in report["stop_note"]
    assert any("out of inodes" in note for note in report["notes"])
    assert "enospc" in proc.stdout and "normal outcome" in proc.stdout


@pytest.mark.privileged
@pytest.mark.parametrize("jobs", ["1", "2"])  # 2: the worker processes must outlive the cancel's SIGTERM
def test_ctrl_c_stops_cleanly_with_the_summary(scratch, jobs):
    out = scratch / "cancel.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "fsscope", "age", "--image", str(scratch / "c.img"), "--size", "512M",
         "--mkfs-opts", "-i 4096", "--fullness", "0.8", "--profile", "small", "--jobs", jobs,
         "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()
    run_dir = Path(first.split("run ", 1)[1].strip())
    deadline = time.monotonic() + 60
    # a progress event after the aging phase began: operations have been done
    while not _aging_progressed(run_dir / "events.ndjson"):
        assert time.monotonic() < deadline and proc.poll() is None, "aging never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    report = json.loads(out.read_text())
    assert report["stop_reason"] == "cancelled" and report["ops"] > 0
    assert "stopped: cancelled" in stdout and "file size" in stdout
    assert report["snapshot"]["skipped"]
    assert not loops_backing(str(scratch / "c.img"))


def _aging_progressed(path: Path) -> bool:
    """A progress event after the "aging: rapid" phase began in the run's events.ndjson."""
    kinds = []
    for line in _read(path).splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # the line being written
        kinds.append("rapid" if event.get("name") == "aging: rapid" else event.get("kind"))
    return "progress" in kinds[kinds.index("rapid"):] if "rapid" in kinds else False


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def test_bad_profile_and_fullness_are_one_line_exit_2(cli, tmp_path):
    image = tmp_path / "never.img"
    line = one_line_error(cli("age", "--image", str(image), "--profile", "no-such-profile"))
    assert "unknown aging profile 'no-such-profile'" in line
    line = one_line_error(cli("age", "--image", str(image), "--profile", "small", "--fullness", "1.5"))
    assert "--fullness" in line and "must be less than 1, not 1.5" in line
    line = one_line_error(cli("age", "--image", str(image), "--confidence", "0"))
    assert "--confidence" in line
    bad = tmp_path / "bad.toml"
    text = (Path(load_profile("small").source).read_text()
            .replace("weights = [4, 3, 2, 1]", "weights = [4, 3, -2, 1]"))
    bad.write_text(text)
    line = one_line_error(cli("age", "--image", str(image), "--profile", str(bad)))
    assert "bad.toml" in line and "size" in line and "weights" in line
    line = one_line_error(cli("age", "--ram", "--resume"))
    assert "--resume" in line
    line = one_line_error(cli("age", "--image", str(image), "--resume"))
    assert "no such image" in line
    assert not image.exists()  # nothing was formatted


def test_directory_target_ages_to_a_capacity(cli, tmp_path):
    out = tmp_path / "dir.json"
    proc = cli("age", "--dir", str(tmp_path), "--capacity", "2M", "--profile", "small", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["stop_reason"] == "convergence_bound" and report["capacity_bytes"] == 2 * 2**20
    assert report["fresh"] is None and report["aged"] is None  # no file system of its own: no fragmentation
    assert one_line_error(cli("age", "--dir", str(tmp_path))).count("--capacity") == 1


def test_profile_capture_show_list(cli, tmp_path):
    tree = tmp_path / "tree"
    for i in range(40):
        sub = tree / f"a{i % 3}" / ("b" if i % 2 else "")
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}").write_bytes(b"x" * (100 * (i + 1)))
    (tree / "link").symlink_to(tree / "a0")
    out = tmp_path / "captured.toml"
    proc = cli("profile", "capture", str(tree), "-o", str(out), "--name", "mytree")
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout
    assert "40 files" in proc.stderr and "1 symlinks not followed" in proc.stderr
    profile = load_profile(out)
    assert profile.name == "mytree" and sum(profile.size_weights) == 40
    assert cli("profile", "capture", str(tree), "-o", str(out)).returncode == 2  # no overwrite without --force
    shown = cli("profile", "show", str(out))
    assert shown.returncode == 0 and "file size" in shown.stdout and "█" in shown.stdout
    listed = cli("profile", "list")
    assert listed.returncode == 0 and "small" in listed.stdout and "agrawal" in listed.stdout
    assert "unknown aging profile" in one_line_error(cli("profile", "show", "nope"))
