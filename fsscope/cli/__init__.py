"""The fsscope command line: ``fsscope`` opens the investigator; subcommands run headless.

Each subcommand lives in its own module under ``fsscope/cli/`` exposing
``add_parser(subparsers)``; the parser's ``func(args) -> int`` does the work. Any
:class:`~fsscope.errors.FsscopeError` becomes one line on stderr and exit status 2, and so
does an OSError (a full or read-only file system, a missing or unreadable file): this is
the one place where such errors reach the user, so deeper code does not wrap them.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from fsscope import __version__
from fsscope.engine import jobs
from fsscope.errors import FsscopeError, os_error_line
from fsscope.format import visible_lines

# The commands that are not one job's (a job's command is named by its descriptor, ``Job.command``
# and ``Job.command_help`` in fsscope.engine.jobs): its module under fsscope/cli (whose
# ``add_parser(sub)`` adds it, with the other commands of that module) and the line ``fsscope
# --help`` lists for it.
OTHER_COMMANDS: dict[str, tuple[str, str]] = {
    "devices": ("targets_cmds", "list block devices and whether fsscope would format them"),
    "recipes": ("targets_cmds", "list the file-system recipes"),
    "prepare": ("targets_cmds", "format and mount a target with a recipe; print the mount point"),
    "release": ("targets_cmds", "unmount a prepared target and detach/remove what fsscope made"),
    "cleanup": ("targets_cmds", "undo the mounts and loop devices that killed fsscope jobs left behind"),
    "runs": ("runs_cmds", "list recorded runs"),
    "report": ("runs_cmds", "print a recorded run's report again"),
    "run": ("job_cmds", "run any job headless (parameters as -p KEY=VALUE)"),
    "tui": ("tui_cmd", "open the terminal investigator (what plain 'fsscope' does)"),
    "profile": ("age_cmd", "aging profiles: list, show, capture from a real tree"),
    "compare": ("compare_cmd", "two recorded runs of one job side by side, with ratios B/A"),
    "study": ("study_cmd", "studies on the plan/treatment engine (variation: Cao et al.)"),
    "replicate": ("replicate_cmd", "run a seed paper's headline findings and judge each one"),
}
# Every command, the jobs' first: only the module of the command given is imported, so `fsscope
# --help` imports no command and `fsscope probe` only probe's (a command module brings its job's
# models: scipy, numpy, seconds on a busy machine); the job descriptors are read, not imported.
COMMANDS: dict[str, tuple[str, str]] = {
    **{job.name: (job.command, job.command_help) for job in jobs.DESCRIPTORS if job.command},
    **OTHER_COMMANDS}
COMMAND_MODULES = list(dict.fromkeys(module for module, _ in COMMANDS.values()))

DESCRIPTION = """\
fsscope investigates Linux file-system performance. It formats and mounts a target safely
(a block device, a loop image, a RAM-backed image, or a plain directory), runs measured
jobs on it in a background process, records every run, and explains what it finds.

Run without a subcommand to open the terminal investigator on the default target.
"""

EPILOG = """\
examples:
  fsscope devices                                   which disks could be formatted, and why not
  fsscope recipes                                   the shipped file-system recipes
  fsscope prepare --recipe xfs-default --ram        format + mount a RAM image, print the mount point
  fsscope probe --recipe ext4-bench --image /var/tmp/t.img --files 2000 --runs 5
  fsscope runs && fsscope report latest             what was recorded
  fsscope cleanup                                   undo whatever a crashed run left mounted/attached
"""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the message and where to read more, no usage dump),
    options whose value may start with '-' (see :func:`fsscope.cli.common.dash_value`), and
    descriptions and epilogs printed as written (their examples keep their lines)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def parse_known_args(self, args=None, namespace=None):
        if args is not None:
            takes_dash = {s for a in self._actions if getattr(a, "dash_value", False) for s in a.option_strings}
            joined, i = [], 0
            while i < len(args):
                value = args[i + 1] if i + 1 < len(args) else ""
                # "-c" is a value; "--ram" (an option of ours) means the value was forgotten
                if args[i] in takes_dash and value.startswith("-") \
                        and value.split("=", 1)[0] not in self._option_string_actions:
                    joined.append(f"{args[i]}={value}")  # argparse would read "-c" as an option
                    i += 2
                    continue
                joined.append(args[i])
                i += 1
            args = joined
        return super().parse_known_args(args, namespace)


class Commands(argparse._SubParsersAction):
    """The subcommands: each one's line in ``fsscope --help`` is its entry in :data:`COMMANDS`."""

    def add_parser(self, name, **kwargs):
        if name in COMMANDS:
            kwargs.setdefault("help", COMMANDS[name][1])
        return super().add_parser(name, **kwargs)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command (``command`` None), or the one of ``command`` with the others
    listed but not built ("": none built, for ``fsscope --help``): only the modules of the
    commands built are imported."""
    parser = Parser(prog="fsscope", description=DESCRIPTION, epilog=EPILOG)
    parser.register("action", "parsers", Commands)
    parser.add_argument("--version", action="version", version=f"fsscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    wanted = COMMAND_MODULES if command is None else [COMMANDS[command][0]] if command in COMMANDS else []
    for name in wanted:
        importlib.import_module(f"fsscope.cli.{name}").add_parser(sub)
    for name in COMMANDS:
        if name not in sub.choices:
            sub.add_parser(name)  # listed in the help; its module is not imported
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # No subcommand: the investigator, with any options given (`fsscope --ram --recipe x`).
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["tui", *argv]
    parser = build_parser("" if argv[0].startswith("-") else argv[0])
    args = parser.parse_args(argv)
    from fsscope import paths  # after parsing: --help needs none of it

    try:
        paths.check_home()
        return int(args.func(args) or 0)
    except FsscopeError as exc:
        print(f"fsscope: error: {visible_lines(exc)}", file=sys.stderr)
        return exc.exit_status
    except OSError as exc:
        print(f"fsscope: error: {visible_lines(os_error_line(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fsscope: interrupted", file=sys.stderr)
        return 130
