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

from fsscope import __version__, paths
from fsscope.errors import FsscopeError, os_error_line

COMMAND_MODULES = ["targets_cmds", "runs_cmds", "job_cmds", "probe_cmd", "tui_cmd", "bench_cmd", "syncwrite_cmd", "age_cmd",
                   "compare_cmd", "check_cmd", "explore_cmd", "study_cmd", "replicate_cmd", "scan_cmd",
                   "watch_cmd", "replay_cmd"]

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


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="fsscope", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"fsscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(f"fsscope.cli.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # No subcommand: the investigator, with any options given (`fsscope --ram --recipe x`).
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["tui", *argv]
    args = parser.parse_args(argv)
    try:
        paths.check_home()
        return int(args.func(args) or 0)
    except FsscopeError as exc:
        print(f"fsscope: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except OSError as exc:
        print(f"fsscope: error: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fsscope: interrupted", file=sys.stderr)
        return 130
