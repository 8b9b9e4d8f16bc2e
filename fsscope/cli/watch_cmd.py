"""``fsscope watch``: a running workload's file-system calls, why the slow ones were slow, and
what repeats (see :mod:`fsscope.watch`)."""

from __future__ import annotations

import argparse
import os
import re
import shutil

from fsscope import paths
from fsscope.cli.common import STDOUT_NAMES, output_path, positive_int
from fsscope.cli.headless import run_job
from fsscope.cli.render.watch import render_watch
from fsscope.cli.spec_options import add_spec_options, spec_from_args
from fsscope.errors import FsscopeError
from fsscope.targets import TargetSpec

DESCRIPTION = """\
Attach to running tasks -- a process (--pid, with --children its descendants), every process
of a cgroup (--cgroup, a service), or a command started here (-- COMMAND ARGS...) -- and record
each of their file-system calls: open/openat/creat, mkdir, unlink/rmdir, rename, the stat
family, getdents64, read/write/pread64/pwrite64/readv/writev/preadv/pwritev,
fsync/fdatasync/sync_file_range, fallocate, truncate/ftruncate, lseek, dup/dup2/dup3, fcntl(F_DUPFD*),
close; with its thread,
start, duration, result, bytes and the file or directory it touched. Forks are followed; a
task that exits is kept.

Files are named from what the kernel records (the syscall events carry only pointers): XFS's
directory-entry events (name + inode), ext4's inode events, a read-only walk of the watched
tree (--tree, default the watched process's working directory) mapping inodes to paths,
and the descriptors held at attach and opened (or dup'ed) since. A call that cannot be named
says so.

A call is slow against calls of its own kind on the same file or directory (the median of up
to 8 such calls on each side of it; a file or directory with fewer than 9 is judged against
every call of that kind, marked "(op)", and one with 3-8 is inconclusive where its own few
calls and the op's disagree; --slow-factor, --slow-floor-us). For each slow call,
the kernel events on its thread inside it and the device's at the time name the cause: a
directory changing format (with the rules' arithmetic), block or inode allocation, a journal
commit or XFS log force, writeback throttling, a page-cache miss, another process's I/O on the
device (pid and command), waiting for a CPU (with --sched: the scheduling events cost cheap
calls the most, so they are off by default). What repeats per file and directory is flagged.
Events the ring buffer lost are counted and reported, never paired across; the events kept
are bounded (--max-events-mb).

Needs root and tracefs (two tracefs instances of its own, removed afterwards; `fsscope
cleanup` removes them after a crash). No kprobes, BPF or hist triggers are used. Ends after
--for, when the watched process or command exits, or at Ctrl-C (the record is kept).
"""

EPILOG = """\
examples:
  fsscope watch --pid 1234 --for 30s                one process for 30 s
  fsscope watch --pid 1234 --children --tree /var/spool/mail
  fsscope watch --cgroup system.slice/postfix.service --for 1m --json w.json
  fsscope watch -- tar xf linux.tar                 a command from its first call to its exit
  fsscope watch --capture mail.oplog.gz --anonymize --pid 1234 --for 1m   an op log for `fsscope replay`
"""

_UNITS_S = {"": 1.0, "s": 1.0, "ms": 1e-3, "m": 60.0, "min": 60.0, "h": 3600.0}


def duration_s(text: str) -> float:
    """argparse type: '30', '30s', '500ms', '2m', '1h'."""
    found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|min|m|h)?\s*", text)
    if found is None:
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration (e.g. 30s, 2m, 500ms)")
    value = float(found.group(1)) * _UNITS_S[found.group(2) or ""]
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def refusal() -> str | None:
    """Why watch cannot run here (one line), or None."""
    from fsscope.trace.tracefs import unavailable_reason

    if os.geteuid() != 0:
        return "fsscope watch needs root: tracefs instances and set_event_pid are root-only"
    reason = unavailable_reason()
    return f"fsscope watch needs tracefs: {reason}" if reason else None


def _check_watched(spec) -> None:
    """What is to be watched exists: one line now, before a run record, if not."""
    from fsscope.watch import tasks

    if spec.pid is not None:
        tasks.process_tids(spec.pid, with_children=False)
    elif spec.cgroup:
        tasks.cgroup_tids(spec.cgroup)
    elif not (shutil.which(spec.command[0]) if "/" not in spec.command[0]
              else os.access(spec.command[0], os.X_OK)):
        raise FsscopeError(f"watch: {spec.command[0]}: no such command")


def cmd_watch(args) -> int:
    from fsscope.watch.job import Spec

    command = list(args.command or [])
    if command[:1] == ["--"]:
        command = command[1:]
    spec = spec_from_args(args, Spec, SPEC_OPTIONS, pid=args.pid, children=args.children, cgroup=args.cgroup or "",
                          command=command, cwd=os.getcwd() if command else "",
                          tree=os.path.abspath(args.tree) if args.tree else "",
                          capture=os.path.abspath(args.capture) if args.capture else "", anonymize=args.anonymize)
    if args.anonymize and not args.capture:
        raise FsscopeError("watch --anonymize goes with --capture LOG")
    if args.capture in STDOUT_NAMES:
        raise FsscopeError("watch --capture needs a file (the op log is binary; --json - prints the report)")
    why = refusal()
    if why:
        raise FsscopeError(why)
    if args.tree and not os.path.isdir(args.tree):
        raise FsscopeError(f"--tree {args.tree}: not a directory")
    if args.tree:
        from fsscope import trust

        trust.real_tree(args.tree, "watch --tree")  # never through a link another user made: one line now
    _check_watched(spec)
    target = TargetSpec("dir", str(paths.ram_dir(checked=False)))  # nothing is made there
    return run_job("watch", spec, target, None, json_path=args.json, verbose=args.verbose, render=render_watch)


SPEC_OPTIONS = ("duration_s", "slow_factor", "slow_floor_us", "buffer_kb", "max_events_mb", "sched", "io_names")
"""watch's options that are its Spec's fields, as the Spec declares them (bounds, units, help)."""


def add_parser(sub) -> None:
    p = sub.add_parser("watch", help="attach to a process, cgroup or command: its slow file-system calls, "
                                     "why, and what repeats (root)",
                       description=DESCRIPTION, epilog=EPILOG)
    who = p.add_mutually_exclusive_group()
    who.add_argument("--pid", type=positive_int, metavar="PID", help="watch this process (all its threads)")
    who.add_argument("--cgroup", metavar="PATH", help="watch every process of this cgroup (v2; a path "
                                                      "under /sys/fs/cgroup or relative to it)")
    p.add_argument("--children", action="store_true", help="with --pid: its descendants too")
    p.add_argument("--tree", metavar="PATH", help="the tree whose inodes name files (read-only walk; "
                                                  "default the watched process's working directory)")
    from fsscope.watch.job import Spec

    add_spec_options(p, Spec, SPEC_OPTIONS, flags={"duration_s": "--for"},
                     readers={"duration_s": ("DURATION", duration_s), "slow_floor_us": ("US", float),
                              "buffer_kb": ("KB", int), "max_events_mb": ("MB", int)})
    p.add_argument("--capture", type=output_path, metavar="LOG",
                   help="also write the calls as an op log (gzip; `fsscope replay LOG` plays it on other "
                        "file systems; the format: pydoc fsscope.oplog)")
    p.add_argument("--anonymize", action="store_true",
                   help="with --capture: every name as a same-length pseudonym (keyed hash); no contents, "
                        "commands or paths kept")
    p.add_argument("--json", type=output_path, metavar="PATH", help="also write the report as JSON")
    p.add_argument("-v", "--verbose", action="store_true", help="show the job's log lines")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS...]",
                   help="a command to start and watch from its first call")
    p.set_defaults(func=cmd_watch)
