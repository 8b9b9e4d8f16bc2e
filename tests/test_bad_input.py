"""Bad input to every command: one line on stderr, exit status 2, no traceback, and no run
record made (nothing formatted, nothing lost).

The table runs the real CLI in-process (``fsscope.cli.main``): every case fails before a job
child or an mkfs, so the whole table takes seconds. A case per command at least, and a test
that the table covers every command ``fsscope --help`` lists.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys

import pytest

from fsscope import paths
from fsscope.cli import build_parser, main

# The words after `fsscope` (split as a shell would) → the fragment expected in the one error
# line. "{name}" fields are files the `files` fixture makes: bin (a binary file), broken (bad
# TOML), huge (a 90.9 TiB profile bucket), big (a 4 GiB bucket), adir (an empty directory),
# run (a recorded run).
TABLE = """\
devices --bogus                                       → unrecognized arguments
devices extra                                         → unrecognized arguments
recipes --bogus                                       → unrecognized arguments
prepare --recipe ext4-default --ram --size -5M        → cannot be negative
prepare --recipe ext4-default --ram --size 12Q        → is not a size
prepare --recipe {bin} --ram                          → not a text file
prepare --recipe {broken} --ram                       → not valid TOML
prepare --recipe no-such-recipe --ram                 → unknown recipe
prepare --image /tmp/x.img --ram                      → not allowed with
prepare --recipe ext4-default --size --ram            → expected one argument
release                                               → required: mountpoint
release /nonexistent/mnt                              → not a mount point fsscope made
cleanup --bogus                                       → unrecognized arguments
runs --last -3                                        → at least 1
runs --last abc                                       → not a whole number
report no-such-run                                    → no run 'no-such-run'
report                                                → required: run
run nosuchjob                                         → invalid choice
run smoke -p seconds=abc                              → must be a number
run smoke -p bogus=1                                  → unknown
run probe -p fresh_fs=1                               → true or false
run probe -p op=chmod                                 → choose one of creat, mkdir
probe --files abc                                     → is not a whole number
probe --files 0                                       → at least 1
probe --cpu 999                                       → cpu 999
probe --cpu -1                                        → at least 0
probe --name-length 300                               → at most 255
probe --runs 3 --max-runs 2                           → at least 3
probe --json /nonexistent-dir/x.json                  → no such directory
probe --recipe {bin}                                  → not a text file
probe --from-snapshot /nonexistent.img                → no such file
probe --files 100000000000 --name-length 12 --runs 5  → not enough room
tui --bogus                                           → unrecognized arguments
tui --theme nope                                      → no such theme
tui --ram --size -1                                   → cannot be negative
tui --ram --recipe {broken}                           → not valid TOML
bench --mem-limit 1K                                  → below the minimum
bench --mem-limit -1K                                 → cannot be negative
bench --files 1000000000                              → does not fit
bench --personality nope                              → invalid choice
bench --runs 0                                        → at least 1
bench --threshold 20                                  → at most 10
bench --workers 0                                     → at least 1
bench --recipes ext4-default,{bin}                    → not a text file
syncwrite --mode nope                                 → invalid choice
syncwrite --repeats 0                                 → at least 1
syncwrite --duration 0                                → more than 0 s
syncwrite --bytes-per-point -1M                       → cannot be negative
syncwrite --recipe {broken}                           → not valid TOML
age --profile {bin}                                   → not a text file
age --profile {huge}                                  → size.bytes: entry 1 is 90.9 TiB
age --profile {big} --ram --size 1G                   → no such file fits
age --dir {adir} --capacity 1000T                     → free in
age --capacity -3G                                    → cannot be negative
age --fullness 2                                      → must be less than 1
age --confidence 0                                    → must be more than 0
age --jobs 0                                          → at least 1
age --test-file 1K                                    → at least 4 KiB
frag --test-file -1M                                  → cannot be negative
frag --from-snapshot /nonexistent.img                 → no such file
profile                                               → required
profile show {bin}                                    → not a text file
profile show {huge}                                   → sane maximum
profile capture /nonexistent                          → not a directory
check --precision abc                                 → not a percentage
check --budget 0                                      → must be positive
check --json /nonexistent-dir/c.json                  → no such directory
check --recipe {bin} --ram                            → not a text file
explore --space {bin}                                 → not a text file
explore --space /nonexistent.toml                     → no such file or space
explore --treatments 0                                → at least 1
study nope                                            → invalid choice
replicate nosuch                                      → invalid choice: 'nosuch'
replicate                                             → name a scenario
scan /nonexistent                                     → No such file or directory
study variation --space /nonexistent.toml             → no such file or space
study variation --space {bin}                         → not a text file
study variation --configurations 0                    → at least 1
compare {run}                                         → required: RUN_B
compare no-such-a no-such-b                           → no run
compare {run} {run} --json /nonexistent-dir/c.json    → no such directory
replay /nonexistent.oplog.gz                          → cannot read it
replay {bin}                                          → not an fsscope op log
replay {bin} --runs 0                                 → at least 1
replay {bin} --pace slow                              → invalid choice
replay {bin} --slow-factor 0.5                       → must be more than 1
replay {bin} --buffer-kb 1                            → at least 4
watch --anonymize -- true                             → goes with --capture LOG
watch --capture - -- true                             → needs a file
watch --slow-factor 1 -- true                         → must be more than 1
watch --buffer-kb 2 -- true                           → at least 4
watch --for 0 -- true                                 → must be positive
"""
CASES = [(shlex.split(words), expected) for words, expected in (row.split("  → ") for row in TABLE.splitlines())]


PROFILE = """name = "p"
fullness = 0.5
[size]
bytes = [512, {big}]
weights = [1, 1]
[depth]
depths = [0]
weights = [1]
subdirs = [0]
[age]
cutoffs = [1]
weights = [1]
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad-input")
    (root / "bin.toml").write_bytes(bytes(range(256)) * 8)
    (root / "broken.toml").write_text('fs = "ext4"\nmkfs_opts = [1, 2\n')
    (root / "huge.toml").write_text(PROFILE.format(big=100_000_000_000_000))
    (root / "big.toml").write_text(PROFILE.format(big=4 << 30))
    (root / "adir").mkdir()
    run = paths.runs_dir() / "19990101-000000-probe"  # a record for compare to find
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.json").write_text('{"job": "probe", "status": "ok"}')
    return {"bin": root / "bin.toml", "broken": root / "broken.toml", "huge": root / "huge.toml",
            "big": root / "big.toml", "adir": root / "adir", "run": run}


def _runs() -> set[str]:
    root = paths.runs_dir()
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


def _main(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own errors
        return int(exc.code or 0)


@pytest.mark.parametrize("words,expected", CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_input_is_one_line_and_exit_2(words, expected, files, capsys):
    argv = [w.format(**files) for w in words]
    before = _runs()
    status = _main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    assert expected in lines[0], lines[0]
    assert _runs() == before, "a refused command made a run record"


def test_the_table_covers_every_command():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    tried = {words[0] for words, _ in CASES}
    assert set(sub.choices) <= tried, f"no bad-input case for {sorted(set(sub.choices) - tried)}"


def test_option_values_may_start_with_a_dash():
    """`--mkfs-opts "-c"` and `--size -5M` work without the '=' form (the latter is refused
    as negative, not as a missing argument)."""
    args = build_parser().parse_args(["probe", "--mkfs-opts", "-c", "--mount-opts", "-o", "--ram"])
    assert (args.mkfs_opts, args.mount_opts, args.ram) == ("-c", "-o", True)
    args = build_parser().parse_args(["bench", "--mkfs-opts", "-N 256", "--files", "10"])
    assert (args.mkfs_opts, args.nfiles) == ("-N 256", 10)  # --files: the Spec's nfiles


def test_the_real_command_line_too(files):
    """The installed entry point, as a user runs it: one line, exit 2, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "fsscope", "prepare", "--recipe", str(files["bin"]), "--ram"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "not a text file" in proc.stderr, proc.stderr


def test_a_corrupt_run_record_is_one_line(capsys):
    """report.json that is not a JSON object, and a binary manifest: no traceback, one line
    saying what is wrong with which record (exit 2), nothing half-printed."""
    run = paths.runs_dir() / "19990101-000001-bench"
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.json").write_bytes(bytes(range(256)))
    (run / "report.json").write_text("[1, 2]")
    assert _main(["report", str(run)]) == 2
    out = capsys.readouterr()
    assert "Traceback" not in out.err and not out.out, out
    assert "manifest.json is not JSON" in out.err and len(out.err.strip().splitlines()) == 1, out
    (run / "manifest.json").write_text('{"job": "bench", "status": "ok"}')
    assert _main(["report", str(run)]) == 2
    assert "report.json holds a JSON list, not an object" in capsys.readouterr().err
