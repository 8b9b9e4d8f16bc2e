"""The command line as a whole: every subcommand teaches with --help; bad input is one line."""

from __future__ import annotations

import pytest

from fsscope.cli import COMMAND_MODULES, build_parser

SUBCOMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)  # noqa: SLF001


def test_every_command_module_is_present():
    assert len(SUBCOMMANDS) >= len(COMMAND_MODULES)
    for name in ("devices", "recipes", "prepare", "release", "cleanup", "runs", "report", "run",
                 "probe", "tui", "bench", "age", "compare"):
        assert name in SUBCOMMANDS


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_teaches(cli, command):
    out = cli(command, "--help")
    assert out.returncode == 0, out.stderr
    assert f"usage: fsscope {command}" in out.stdout
    parser = build_parser()._subparsers._group_actions[0].choices[command]  # noqa: SLF001
    assert parser.description and len(parser.description.split()) >= 8, "a description, not a usage line"
    assert parser.description.split()[0] in out.stdout
    undocumented = [a.dest for a in parser._actions if a.option_strings and a.help is None]  # noqa: SLF001
    assert not undocumented, f"options without help: {undocumented}"
    assert "example" in out.stdout.lower(), "an example of the command in use"


def test_top_level_help_lists_commands_and_examples(cli):
    out = cli("--help")
    assert out.returncode == 0
    for name in ("probe", "prepare", "cleanup", "age", "bench"):
        assert name in out.stdout
    assert "examples:" in out.stdout


@pytest.mark.parametrize("argv", [["--bogus"], ["probe", "--files", "many"], ["report"], ["nosuchcommand"]])
def test_bad_arguments_are_one_line_exit_2(cli, argv):
    out = cli(*argv)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_options_without_a_subcommand_go_to_the_investigator(cli):
    out = cli("--ram", "--recipe", "xfs-default", "--help")
    assert out.returncode == 0 and "usage: fsscope tui" in out.stdout


def test_runs_at_80_columns_keeps_whole_run_ids(cli, scratch):
    """`fsscope runs` in an 80-column terminal: every run id whole (report/compare take it)."""
    import os

    from fsscope import store

    env = {**os.environ, "COLUMNS": "80"}
    made = cli("run", "smoke", "-p", "seconds=0.2", "--dir", str(scratch), env=env)
    assert made.returncode == 0, made.stderr
    listing = cli("runs", "--last", "5", env=env)
    assert listing.returncode == 0 and all(len(line) <= 80 for line in listing.stdout.splitlines())
    cells = {cell.strip() for line in listing.stdout.splitlines() for cell in line.split("│")}
    recorded = [run.id for run in store.list_runs()][-5:]
    assert recorded and all(run_id in cells for run_id in recorded), (recorded, listing.stdout)


def test_chatter_lines_keep_whole_paths_in_a_narrow_terminal(cli, scratch):
    """`run …` and `recorded in …` name the run directory: a narrow terminal must not break it,
    since scripts grep it and users paste it (a long $HOME once split it in CI)."""
    import os
    import re

    made = cli("run", "smoke", "-p", "seconds=0.2", "--dir", str(scratch), env={**os.environ, "COLUMNS": "30"})
    assert made.returncode == 0, made.stderr
    started = re.search(r"^run (\S+)$", made.stderr, re.M)
    assert started and re.search(rf"^recorded in {re.escape(started.group(1))} \(ok\)$", made.stderr, re.M), made.stderr
