"""The file-system calls ``watch`` records, and the kernel events it traces beside them.

On this kernel every ``syscalls/sys_enter_*`` event carries the call's arguments as numbers: a
path argument is a user-space pointer, never the string (``events/syscalls/sys_enter_openat/
format``), so a call's file is named from elsewhere (:mod:`fsscope.watch.names`). The entry
event gives the descriptor (``arg``), the size asked for (``bytes``) and open flags
(``flags``); the exit event gives the result (``arg``: ``ret``).
"""

from __future__ import annotations

from dataclasses import dataclass

from fsscope.trace import catalog
from fsscope.trace.catalog import CatalogEvent


@dataclass(frozen=True)
class Syscall:
    name: str        # the tracefs name: sys_enter_<name>
    op: str          # what watch calls it (several syscalls share one: openat and open are "open")
    fd: str = ""     # the descriptor argument, if the call takes one
    size: str = ""   # the byte count argument
    flags: str = ""  # open flags
    offset: str = ""  # the file position argument (kept in the event's ``sector`` column: the op log's offset)


SYSCALLS = (
    Syscall("open", "open", flags="flags"), Syscall("openat", "open", flags="flags"),
    Syscall("creat", "open"),
    Syscall("mkdir", "mkdir"), Syscall("mkdirat", "mkdir"),
    Syscall("unlink", "unlink"), Syscall("unlinkat", "unlink"), Syscall("rmdir", "rmdir"),
    Syscall("rename", "rename"), Syscall("renameat", "rename"), Syscall("renameat2", "rename"),
    Syscall("newstat", "stat"), Syscall("newlstat", "stat"), Syscall("newfstat", "stat", fd="fd"),
    Syscall("newfstatat", "stat"), Syscall("statx", "stat"),
    Syscall("getdents64", "getdents", fd="fd", size="count"),
    Syscall("read", "read", fd="fd", size="count"),
    Syscall("pread64", "read", fd="fd", size="count", offset="pos"),
    Syscall("readv", "read", fd="fd"), Syscall("preadv", "read", fd="fd"),
    Syscall("write", "write", fd="fd", size="count"),
    Syscall("pwrite64", "write", fd="fd", size="count", offset="pos"),
    Syscall("writev", "write", fd="fd"), Syscall("pwritev", "write", fd="fd"),
    Syscall("fsync", "fsync", fd="fd"), Syscall("fdatasync", "fdatasync", fd="fd"),
    Syscall("sync_file_range", "sync_file_range", fd="fd"),
    Syscall("fallocate", "fallocate", fd="fd", size="len", offset="offset"),
    Syscall("truncate", "truncate", size="length"), Syscall("ftruncate", "truncate", fd="fd", size="length"),
    Syscall("close", "close", fd="fd"),
    # last, so the ops before keep their indexes: the op log's file positions (whence in ``flags``)
    Syscall("lseek", "lseek", fd="fd", flags="whence", offset="offset"),
    # descriptors made from others (the result names the same file); fcntl's command is kept
    # in ``flags``, and only F_DUPFD/F_DUPFD_CLOEXEC are kept (FILTERS)
    Syscall("dup", "dup", fd="fildes"), Syscall("dup2", "dup", fd="oldfd"), Syscall("dup3", "dup", fd="oldfd"),
    Syscall("fcntl", "fcntl", fd="fd", flags="cmd"),
)

#: Every op, in a fixed order: a call record's ``op`` indexes it.
OPS = tuple(dict.fromkeys(s.op for s in SYSCALLS))
#: Ops that add a name to a directory (or may: an open with O_CREAT).
ADDING_OPS = frozenset({"open", "mkdir", "rename"})
#: Ops that work on a descriptor's file.
FD_OPS = frozenset({s.op for s in SYSCALLS if s.fd}) - {"stat"}
#: Ops whose baseline is their directory (they change or list it), not a file.
DIR_OPS = frozenset({"mkdir", "unlink", "rmdir", "rename", "getdents"})
#: fcntl commands that return a new descriptor for the same file (include/uapi/linux/fcntl.h).
F_DUPFD, F_DUPFD_CLOEXEC = 0, 1030
#: The tasks' instance keeps only these of an event (a kernel filter, so the rest cost no
#: record): fcntl's dup commands, not its locks -- SQLite takes six per commit, and tracing
#: them doubled the events of its commits. The exit cannot be filtered by the command: one
#: returning a descriptor above stderr is kept, a lock's 0 or -1 and F_GETFD's 0/1 are not.
FILTERS = {"syscalls/sys_enter_fcntl": f"cmd == {F_DUPFD} || cmd == {F_DUPFD_CLOEXEC}",
           "syscalls/sys_exit_fcntl": "ret >= 2"}
#: Syscalls whose entries are filtered: an exit of theirs without an entry is not "unpaired".
ENTRY_FILTERED = frozenset({"fcntl"})
#: Ops whose result is a byte count.
BYTE_OPS = frozenset({"read", "write", "getdents"})
O_CREAT = 0o100


def enter_event(s: Syscall) -> CatalogEvent:
    columns = {"arg": s.fd, "bytes": s.size, "flags": s.flags, "sector": s.offset}
    return CatalogEvent(f"syscalls/sys_enter_{s.name}", "syscall", "pid", f"{s.name}() entered",
                        columns={k: v for k, v in columns.items() if v})


def exit_event(s: Syscall) -> CatalogEvent:
    return CatalogEvent(f"syscalls/sys_exit_{s.name}", "syscall", "pid", f"{s.name}() returned",
                        columns={"arg": "ret"})


def _pid(event: str, kind: catalog.Kind, meaning: str, columns: dict[str, str],
         texts: dict[str, str] | None = None) -> CatalogEvent:
    return CatalogEvent(event, kind, "pid", meaning, columns=columns, texts=texts or {})


def _xfs_name(name: str, meaning: str) -> CatalogEvent:
    """An XFS directory-entry event: the directory (``arg``), the entry's inode (``bytes``) and
    its name (``sector``: an index in the decoded texts)."""
    return _pid(f"xfs/{name}", "structure", meaning, {"dev": "dev", "arg": "ino", "bytes": "inumber"},
                {"sector": "name"})


#: Events that name what a call touched (a directory entry, an inode) or did (an allocation);
#: fired in the watched task's own context, so the tasks' filter keeps them. Their ``arg`` is
#: a directory's inode, ``bytes`` a file's (as the probe catalog's ``arg`` is the inode an
#: XFS directory event or an ext4 allocation is about).
NAMING = (
    *(_xfs_name(f"xfs_dir2_{form}_addname", f"XFS added a name to a {form}-format directory")
      for form in ("sf", "block", "leaf", "node")),
    *(_xfs_name(f"xfs_dir2_{form}_removename", f"XFS removed a name from a {form}-format directory")
      for form in ("sf", "block", "leaf", "node")),
    _pid("xfs/xfs_lookup", "structure", "XFS looked a name up in a directory (a dcache miss)",
         {"dev": "dev", "arg": "dp_ino"}, {"sector": "name"}),
    _pid("xfs/xfs_file_fsync", "journal", "XFS fsync of an inode", {"dev": "dev", "bytes": "ino"}),
    *(_pid(f"xfs/xfs_file_buffered_{rw}", "cache", f"XFS buffered {rw} of an inode",
           {"dev": "dev", "bytes": "ino"}) for rw in ("read", "write")),
    *(_pid(f"ext4/ext4_{kind}write_begin", "cache", "ext4 begins a buffered write to an inode",
           {"dev": "dev", "bytes": "ino"}) for kind in ("da_", "")),
    _pid("ext4/ext4_allocate_inode", "alloc", "ext4 allocated an inode (a create) in a directory",
         {"dev": "dev", "bytes": "ino", "arg": "dir"}),
    _pid("ext4/ext4_unlink_enter", "structure", "ext4 removes a name from a directory",
         {"dev": "dev", "bytes": "ino", "arg": "parent"}),
    _pid("ext4/ext4_sync_file_enter", "journal", "ext4 fsync of an inode",
         {"dev": "dev", "bytes": "ino", "arg": "parent"}),
    _pid("ext4/ext4_mark_inode_dirty", "structure", "ext4 changed an inode (a directory written to, "
         "a file's size or times)", {"dev": "dev", "bytes": "ino"}),
    _pid("filemap/mm_filemap_add_to_page_cache", "cache",
         "a page entered the page cache: a read that missed it, or a write to a new page",
         {"dev": "s_dev", "bytes": "i_ino", "sector": "index"}),
    _pid("writeback/balance_dirty_pages", "writeback",
         "the task was throttled for dirtying pages faster than writeback cleans them "
         "(balance_dirty_pages)", {"arg": "pause", "bytes": "dirty"}),
    _pid("sched/sched_wakeup", "sched", "the task was woken (runnable, waiting for a CPU)", {"arg": "pid"}),
    _pid("sched/sched_process_exec", "sched", "the task ran a new program (its command changed)",
         {"arg": "pid"}, {"sector": "filename"}),
    # fired in the parent's context (so the tasks' filter keeps it): the new task and its clone
    # flags, whose CLONE_THREAD says a thread of the parent's process, not a process of its own
    _pid("task/task_newtask", "sched", "a watched task made a thread or a process",
         {"arg": "pid", "sector": "clone_flags"}),
)

#: The directory-format and allocation events of each file system (the probe's catalog).
STRUCTURE = {fs: tuple(e for e in events if e.scope == "pid") for fs, events in catalog.BY_FS.items()}

#: The device's events, whoever fires them (the jbd2 thread, an interrupt, another process):
#: traced in a second instance, filtered by the device only.
DEVICE = (
    # queued in the submitter's own context (a process's direct or synchronous I/O, the
    # flusher's writeback, the jbd2 thread), so its comm says who asked; a request's issue
    # may run from a block-layer worker instead
    CatalogEvent("block/block_bio_queue", "io", "dev",
                 "a process submitted I/O to the device (sector, 512-byte sectors, READ/WRITE/SYNC flags)",
                 columns={"dev": "dev", "sector": "sector", "bytes": "nr_sector", "flags": "rwbs"},
                 texts={"arg": "comm"}),
    *catalog.JBD2,
    CatalogEvent("xfs/xfs_log_force", "journal", "dev", "XFS forced its log to disk (fsync, a sync "
                 "transaction, or the log worker)", columns={"dev": "dev", "sector": "lsn"}),
)


#: The tasks' scheduling: about two events each time a watched call blocks (a SQLite commit's
#: fdatasync blocks several times), which only the "waiting for a CPU" and "blocked" causes use.
SCHEDULING = frozenset({"sched/sched_switch", "sched/sched_wakeup"})


#: The naming events fired by a call on a descriptor (a read, a write, an fsync; a page entering
#: the cache): they name its file only when its descriptor is not named otherwise (an open of a
#: cached file, which fires no entry event), and a page-cache miss's pages.
IO_NAMING = frozenset({"xfs/xfs_file_fsync", "xfs/xfs_file_buffered_read", "xfs/xfs_file_buffered_write",
                       "ext4/ext4_da_write_begin", "ext4/ext4_write_begin", "ext4/ext4_sync_file_enter",
                       "filemap/mm_filemap_add_to_page_cache"})
#: Watch's events by what they are for, so each group's cost can be measured alone
#: (bench/watch_overhead.py --groups) and a group left out: ``calls`` (every watched call's entry
#: and exit), ``names`` (directory entries and inodes; writeback throttling), ``io-names``
#: (:data:`IO_NAMING`), ``structure`` (the file system's format and allocation events),
#: ``sched`` (:data:`SCHEDULING`) and ``device`` (the second instance: :data:`DEVICE`). The
#: tasks' forks and execs (:data:`TASKS`: rare, and what follows the tasks) are never left out.
GROUPS = ("calls", "names", "io-names", "structure", "sched", "device")
TASKS = frozenset({"sched/sched_process_exec", "task/task_newtask"})


def group_of(event: str) -> str:
    """The group (:data:`GROUPS`) of one of the tasks' events."""
    if event.startswith("syscalls/"):
        return "calls"
    if event in SCHEDULING:
        return "sched"
    if event in IO_NAMING:
        return "io-names"
    if event in TASKS:
        return "tasks"
    return "names" if event in {e.event for e in NAMING} else "structure"


def leaving_out(*, sched: bool, io_names: bool) -> frozenset[str]:
    """The groups a watch leaves out, from its ``sched`` and ``io_names`` switches."""
    return frozenset({"sched"} if not sched else ()) | frozenset({"io-names"} if not io_names else ())


def task_events(fs: str, *, leave_out: frozenset[str] = frozenset()) -> tuple[CatalogEvent, ...]:
    """What the watched tasks' own instance traces: every watched call's entry and exit, the
    events that name files, the file system's structure events, and their scheduling; less
    the groups in ``leave_out`` (:data:`GROUPS`)."""
    calls = tuple(e for s in SYSCALLS for e in (enter_event(s), exit_event(s)))
    own = tuple(e for e in STRUCTURE.get(fs, ()) if e.event not in {n.event for n in NAMING})
    return tuple(e for e in calls + NAMING + own + catalog.SCHED if group_of(e.event) not in leave_out)


def syscall_codes(names: list[str]) -> tuple[dict[int, int], dict[int, int], dict[int, Syscall]]:
    """From an event-name list: enter code -> op index, exit code -> op index, code -> Syscall."""
    by_name = {s.name: s for s in SYSCALLS}
    enters: dict[int, int] = {}
    exits: dict[int, int] = {}
    syscall: dict[int, Syscall] = {}
    for code, name in enumerate(names):
        short = name.split("/", 1)[-1]
        for prefix, table in (("sys_enter_", enters), ("sys_exit_", exits)):
            if short.startswith(prefix) and short[len(prefix):] in by_name:
                s = by_name[short[len(prefix):]]
                table[code] = OPS.index(s.op)
                syscall[code] = s
    return enters, exits, syscall
