"""What root may trust on a machine other users share.

fsscope runs as root; nothing another user can write -- a symbolic link, a file in a sticky
world-writable directory (/tmp, /dev/shm), a directory they own, a guessable name -- may steer
what it formats, mounts, deletes or loads. A path is trusted when no other user can change
what it names: every directory on the way is owned by a trusted user and writable by no one
else, or is sticky (others may add names there, but not move or remove ours) and the entry in
it is a trusted user's. Trusted users: root, the user fsscope runs as, and the one who ran
sudo (``SUDO_UID``): their own files are theirs to hand to fsscope.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field

from fsscope.errors import SafetyRefusal

_PACKAGE = os.path.dirname(os.path.realpath(__file__))
#: the data shipped inside the package (paths.DATA_DIR, which imports this module)
PACKAGE_DATA = os.path.join(_PACKAGE, "data")


def _shipped(name: str) -> str:
    """Where ``recipes/`` or ``themes/`` is: a wheel carries it inside the package, in
    ``data/`` (setup.py's build step copies it there); a checkout (an editable install, tests)
    keeps it at the repository's top level. Only a checkout's (beside its pyproject.toml): an
    installed fsscope missing its data must not read a ``recipes/`` another package left in
    site-packages."""
    inside = os.path.join(PACKAGE_DATA, name)
    checkout = os.path.dirname(_PACKAGE)
    if os.path.isdir(inside) or not os.path.isfile(os.path.join(checkout, "pyproject.toml")):
        return inside
    return os.path.join(checkout, name)


#: the shipped recipes (aging profiles and factor spaces below them) and themes
SHIPPED_RECIPES = _shipped("recipes")
SHIPPED_THEMES = _shipped("themes")
SHIPPED = (PACKAGE_DATA, SHIPPED_RECIPES, SHIPPED_THEMES)
MAX_LINKS = 40  # as the kernel's own limit on symbolic links in one lookup


def trusted_uids() -> frozenset[int]:
    uids = {0, os.geteuid()}
    sudo = os.environ.get("SUDO_UID", "")
    if sudo.isdigit():
        uids.add(int(sudo))
    return frozenset(uids)


def others_may_write(st: os.stat_result, owners: frozenset[int]) -> str:
    """Why users other than ``owners`` may change the directory ``st`` ("" if they may not)."""
    if st.st_uid not in owners:
        return f"owned by uid {st.st_uid}"
    if st.st_mode & stat.S_IWOTH:
        return "writable by everyone"
    if st.st_mode & stat.S_IWGRP and st.st_gid != 0:
        return f"writable by group {st.st_gid}"
    return ""


@dataclass(frozen=True)
class Place:
    """Where a path's last component lives: ``parent``, a real directory reached only through
    entries no other user can change; ``missing`` the names below it that do not exist yet
    (the last one is the path's own name); ``shared`` why other users may add or replace
    names in ``parent`` ("" if they cannot)."""

    parent: str
    missing: tuple[str, ...]
    shared: str

    @property
    def name(self) -> str:
        return self.missing[-1]

    @property
    def sticky(self) -> bool:
        return bool(os.stat(self.parent).st_mode & stat.S_ISVTX)


def _follow(target: str, todo: list[str], links: int, where: str) -> int:
    """Put the components of a link's ``target`` (read once) on ``todo`` (a stack, next on
    top); the count of links followed so far, refused past the kernel's own limit."""
    if links + 1 > MAX_LINKS:
        raise SafetyRefusal(f"{where}: too many symbolic links")
    todo += [p for p in reversed(target.split("/")) if p]
    return links + 1


def locate(path: str | os.PathLike, what: str, owners: frozenset[int] | None = None,
           fix: str = "use a path only root can change") -> Place:
    """Walk ``path``'s directories from /, following symbolic links on the way (each must sit
    where only trusted users can change it), and stop before its last component, which is
    never followed. Raises SafetyRefusal (one line: which directory, whose) when another user
    could change a directory on the way."""
    owners = trusted_uids() if owners is None else owners
    todo = [p for p in reversed(os.path.abspath(os.fspath(path)).split("/")) if p]
    if not todo:
        raise SafetyRefusal(f"{what} {path}: not a file or directory fsscope can use")
    cur, links = "/", 0
    while len(todo) > 1:
        name = todo.pop()
        if name == ".":
            continue
        if name == "..":
            cur = os.path.dirname(cur)
            continue
        here = os.stat(cur)
        nxt = os.path.join(cur, name)
        try:
            st = os.lstat(nxt)
        except FileNotFoundError:
            todo.append(name)  # the first missing component is part of what is missing
            break
        why = others_may_write(here, owners)
        if why and here.st_mode & stat.S_ISVTX and st.st_uid not in owners:
            raise SafetyRefusal(f"{what} {path}: {nxt} is owned by uid {st.st_uid} in {cur}, which is {why}, "
                                f"so another user could change it; {fix}")
        if why and not here.st_mode & stat.S_ISVTX:
            raise SafetyRefusal(f"{what} {path}: directory {cur} is {why}, so another user could "
                                f"change what {nxt} is; {fix}")
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(nxt)
            links = _follow(target, todo, links, f"{what} {path}")
            if target.startswith("/"):
                cur = "/"
        elif stat.S_ISDIR(st.st_mode):
            cur = nxt
        else:
            raise SafetyRefusal(f"{what} {path}: {nxt} is not a directory")
    missing = tuple(reversed([p for p in todo if p not in (".", "..")]))
    if not missing:
        raise SafetyRefusal(f"{what} {path}: not a file or directory fsscope can use")
    return Place(cur, missing, others_may_write(os.stat(cur), owners))


def check_private_dir(path: str | os.PathLike, what: str, fix: str) -> None:
    """Refuse a directory of root's own data (fsscope's home, its journal, its built code)
    that is a symbolic link, or that another user owns or may write. Missing: fine (fsscope
    makes it). Root only; as another user there is nothing to take over."""
    if os.geteuid() != 0:
        return
    owners = frozenset({os.geteuid()})
    place = locate(path, what, owners, fix)
    if len(place.missing) > 1:
        return
    try:
        st = os.lstat(os.path.join(place.parent, place.name))
    except FileNotFoundError:
        if place.shared and not place.sticky:
            raise SafetyRefusal(f"{what} {path}: its directory {place.parent} is {place.shared}; {fix}") from None
        return
    if stat.S_ISLNK(st.st_mode):
        raise SafetyRefusal(f"{what} {path} is a symbolic link; {fix}")
    why = "not a directory" if not stat.S_ISDIR(st.st_mode) else others_may_write(st, owners)
    if why:
        raise SafetyRefusal(f"{what} {path} is {why} (fsscope runs as root); {fix}")
    if place.shared and not place.sticky:
        raise SafetyRefusal(f"{what} {path}: its directory {place.parent} is {place.shared}; {fix}")


def open_owned_file(path: str | os.PathLike, what: str) -> int:
    """An O_RDONLY fd of a regular file that is root's own when fsscope runs as root (not a
    link, owned by root, writable by no one else, in a directory no one else may change)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    if os.geteuid() != 0:
        return fd
    st = os.fstat(fd)
    why = ("not a regular file" if not stat.S_ISREG(st.st_mode)
           else others_may_write(st, frozenset({0})))
    if why:
        os.close(fd)
        raise SafetyRefusal(f"{what} {path} is {why}: not loaded (fsscope runs as root); remove it")
    check_private_dir(os.path.dirname(os.path.abspath(path)), "directory", "remove it and run again")
    return fd


def check_work_dir(path: str | os.PathLike, what: str) -> None:
    """Refuse a directory root makes its own files in (a work directory, images) when another
    user may rename entries in it -- theirs, or writable by them and not sticky: they could swap
    what root made there, between making and using it, for a link to one of root's files."""
    place = locate(os.path.join(path, "fsscope"), what)
    if place.shared and not place.sticky:
        raise SafetyRefusal(f"{what} {path}: directory {place.parent} is {place.shared}, so another user could "
                            "swap what fsscope makes there for a link; use a directory only you can change")


def output_place(path: str | os.PathLike, what: str, fix: str = "write it somewhere only you can change") -> Place:
    """Where root may write a file it was asked for (``--json``, ``-o``): a name whose directory
    only trusted users can change, or a sticky one (/tmp) where the name is new or a trusted
    user's. A symbolic link at the name is followed only where no other user could have put
    it. Raises SafetyRefusal (one line) otherwise."""
    owners, links = trusted_uids(), 0
    while True:
        place = locate(path, what, owners, fix)
        if len(place.missing) > 1:
            raise SafetyRefusal(f"{what} {path}: {os.path.join(place.parent, place.missing[0])}: no such directory")
        if place.shared and not place.sticky:
            raise SafetyRefusal(f"{what} {path}: its directory {place.parent} is {place.shared}, so another user "
                                f"could change what it names; {fix}")
        full = os.path.join(place.parent, place.name)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return place
        if stat.S_ISLNK(st.st_mode) and not place.shared and links < MAX_LINKS:
            links += 1
            path = os.path.join(place.parent, os.readlink(full))
            continue
        _refuse_existing_output(st, place, path, what, owners)
        return place


def read_input_text(path: str | os.PathLike, what: str, limit_bytes: int = 8 << 20) -> str:
    """The text of a file that steers what root does (a recipe, a space, an aging profile),
    read through the descriptor checked: as root, only a trusted user's regular file, writable
    by no one else, in a directory no one else can change (or a sticky one), reached through
    no link another user could have planted. Raises SafetyRefusal (one line) otherwise, and
    UnicodeDecodeError for a file that is not UTF-8. As another user, read as it is. The
    files shipped inside the package are read as they are too: whoever may change them may
    change fsscope's code beside them, which root runs anyway."""
    if os.geteuid() != 0:
        with open(path, "rb") as f:
            return f.read(limit_bytes + 1).decode("utf-8")
    # shipped: judged by where the descriptor opened really is (the kernel's name for it), not
    # by a name resolved before the open, which a link swapped in between would redirect
    # (O_NONBLOCK: a FIFO planted where a recipe was named must not hang root at the open)
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb") as f:
        opened = os.readlink(f"/proc/self/fd/{f.fileno()}")
        if opened.startswith(tuple(where + os.sep for where in SHIPPED)):
            return f.read(limit_bytes + 1).decode("utf-8")
    place = output_place(path, what, "keep it where only you can change it")
    dir_fd = os.open(place.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = os.open(place.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        why = "not a regular file" if not stat.S_ISREG(st.st_mode) else others_may_write(st, trusted_uids())
        if why:
            raise SafetyRefusal(f"{what} {path} is {why}: not read (fsscope runs as root, and it decides "
                                "what root formats and mounts); keep it where only you can change it")
        return f.read(limit_bytes + 1).decode("utf-8")


def check_input_file(path: str | os.PathLike, what: str) -> None:
    """Refuse a file root would restore and mount (a snapshot) unless no other user could have
    written it: a trusted user's, writable by no one else, where no one else can swap it."""
    place = output_place(path, what)
    st = os.stat(os.path.join(place.parent, place.name))
    why = others_may_write(st, trusted_uids())
    if why:
        raise SafetyRefusal(f"{what} {path} is {why}: not restored as root (another user could have "
                            "crafted it); copy it somewhere only you can change, as yourself")


def _refuse_existing_output(st: os.stat_result, place: Place, path: str | os.PathLike, what: str, owners: frozenset[int]) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise SafetyRefusal(f"{what} {path} is a symbolic link in {place.parent}, which is {place.shared}: "
                            "not followed (fsscope runs as root)")
    if not stat.S_ISREG(st.st_mode):
        raise SafetyRefusal(f"{what} {path}: not a regular file")
    if place.shared and (st.st_uid not in owners or st.st_nlink != 1):
        whose = f"owned by uid {st.st_uid}" if st.st_uid not in owners else f"one of {st.st_nlink} hard links"
        raise SafetyRefusal(f"{what} {path} is {whose} in {place.parent}, which is {place.shared}: "
                            "not used (fsscope runs as root)")


def write_output(path: str | os.PathLike, text: str | bytes, what: str) -> None:
    """Write ``text`` to the file ``path`` root was asked for, through the descriptor checked
    (see :func:`output_place`): never through a link another user planted, never into a file
    they chose."""
    place = output_place(path, what)
    dir_fd = os.open(place.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(place.name, flags | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=dir_fd)
        except FileExistsError:
            try:
                fd = os.open(place.name, flags, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                raise SafetyRefusal(f"{what} {path} became a symbolic link; not followed (fsscope runs as root)") from None
            try:
                _refuse_existing_output(os.fstat(fd), place, path, what, trusted_uids())
            except SafetyRefusal:
                os.close(fd)
                raise
            os.ftruncate(fd, 0)
    finally:
        os.close(dir_fd)
    if isinstance(text, bytes):  # an op log (watch --capture)
        with os.fdopen(fd, "wb") as out:
            out.write(text)
        return
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def trusted_program(path: str | os.PathLike, what: str) -> str:
    """The real path of the program ``path`` names (its links followed), when no user but root
    and the one fsscope runs as could have put it there: every directory on the way and every
    link theirs and writable by no one else, the file theirs, a regular file writable by no
    one else. Raises SafetyRefusal (one line: which, whose) otherwise. A compiler found so is
    the one fsscope may run to build code it then loads as root."""
    owners, links = frozenset({0, os.geteuid()}), 0
    fix = "not run (fsscope runs as root); install it where only root can change it"
    while True:
        place = locate(path, what, owners, fix)
        if len(place.missing) > 1:
            raise SafetyRefusal(f"{what} {path}: {os.path.join(place.parent, place.missing[0])}: no such directory")
        if place.shared:
            raise SafetyRefusal(f"{what} {path}: its directory {place.parent} is {place.shared}; {fix}")
        full = os.path.join(place.parent, place.name)
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode) and links < MAX_LINKS:
            links += 1
            path = os.path.join(place.parent, os.readlink(full))
            continue
        why = "not a regular file" if not stat.S_ISREG(st.st_mode) else others_may_write(st, owners)
        if why:
            raise SafetyRefusal(f"{what} {full} is {why}; {fix}")
        return full


# --- walking a tree another user can change ---------------------------------------------------

def real_tree(path: str | os.PathLike, what: str) -> str:
    """The real path of the tree root was asked to read (``scan``, ``profile capture``), its
    symbolic links followed only when a trusted user made them: a link of another user's
    (``~/tree`` -> ``/root``) says where *they* chose, so its tree is not the one named.
    Raises SafetyRefusal (one line: which link, whose); FileNotFoundError when a part is missing."""
    owners, links = trusted_uids(), 0
    todo = [p for p in reversed(os.path.abspath(os.fspath(path)).split("/")) if p]
    cur = "/"
    while todo:
        name = todo.pop()
        if name == ".":
            continue
        if name == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, name)
        st = os.lstat(nxt)
        if not stat.S_ISLNK(st.st_mode):
            cur = nxt
            continue
        if st.st_uid not in owners:
            raise SafetyRefusal(f"{what} {path}: {nxt} is a symbolic link of uid {st.st_uid}'s: not followed "
                                "(fsscope runs as root; they chose where it leads); name the directory itself")
        target = os.readlink(nxt)
        links = _follow(target, todo, links, f"{what} {path}")
        if target.startswith("/"):
            cur = "/"
    return cur


#: directories held open at once (one per level): deeper levels are not walked, and the walk says so
MAX_WALK_DEPTH = 400


@dataclass
class Listed:
    """One directory of a :class:`TreeWalk`, open (``fd``) while the walk's reader looks at it:
    ``entries`` its names (scandir on ``fd``: an entry's stat asks ``fd``, never a path),
    ``subdirs`` the ones the walk goes into next (on the tree's file system, not links)."""

    path: str
    depth: int
    fd: int
    st: os.stat_result
    entries: list[os.DirEntry]
    subdirs: list[tuple[str, os.stat_result]]


@dataclass
class TreeWalk:
    """A walk of the tree at ``root`` no other user can redirect: every directory is opened
    from its parent's descriptor (``openat``, ``O_NOFOLLOW|O_DIRECTORY``) and must be the inode
    its parent listed (device and inode, from ``fstatat`` without following links), on the
    root's file system. A directory swapped (for a link, another directory, a mount) between
    its listing and its opening is not followed: ``swapped`` says so in one line each.
    ``noatime``: open with O_NOATIME where allowed (the owner or root), counting refusals.
    ``exclude``: names skipped anywhere."""

    root: str
    noatime: bool = True
    exclude: frozenset[str] = frozenset()
    limit_dirs: int | None = None
    swapped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    symlinks: int = 0
    other_device: int = 0
    noatime_refused: int = 0
    root_dev: int = 0

    def _open(self, name: str, dir_fd: int | None) -> int:
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        if self.noatime:
            try:
                return os.open(name, flags | os.O_NOATIME, dir_fd=dir_fd)
            except PermissionError as exc:
                if exc.errno != errno.EPERM:
                    raise
                self.noatime_refused += 1
        return os.open(name, flags, dir_fd=dir_fd)

    def _open_root(self) -> int:
        """The root as asked (its own path resolved once), refused if it changed meanwhile."""
        fd = self._open(self.root, None)
        if os.readlink(f"/proc/self/fd/{fd}") != self.root:
            os.close(fd)
            raise SafetyRefusal(f"{self.root} changed while it was opened (a directory on the way "
                                "was swapped): not walked")
        return fd

    def _list(self, fd: int, path: str, depth: int) -> Listed:
        entries: list[os.DirEntry] = []
        subdirs: list[tuple[str, os.stat_result]] = []
        with os.scandir(fd) as it:
            for entry in it:
                if entry.name in self.exclude:
                    continue
                entries.append(entry)
                try:
                    if entry.is_symlink():
                        self.symlinks += 1
                    elif entry.is_dir(follow_symlinks=False):
                        sub = entry.stat(follow_symlinks=False)
                        if sub.st_dev != self.root_dev:
                            self.other_device += 1
                        else:
                            subdirs.append((entry.name, sub))
                except OSError as exc:
                    self.errors.append(f"{path}/{entry.name}: {exc.strerror}")
        return Listed(path, depth, fd, os.fstat(fd), entries, subdirs)

    def _descend(self, parent: Listed, name: str, listed: os.stat_result) -> int | None:
        """``name`` in ``parent`` opened from its descriptor, if it is still what was listed."""
        path = os.path.join(parent.path, name)
        try:
            fd = self._open(name, parent.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                self.swapped.append(f"{path}: a directory when listed, {'a symbolic link' if exc.errno == errno.ELOOP else 'not a directory'} "
                                    "when opened (swapped during the walk): not followed")
            else:
                self.errors.append(f"{path}: {exc.strerror}")
            return None
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (listed.st_dev, listed.st_ino):
            os.close(fd)
            self.swapped.append(f"{path}: replaced after it was listed (device {st.st_dev} inode {st.st_ino}, "
                                f"listed {listed.st_dev} inode {listed.st_ino}): not followed")
            return None
        return fd

    def __iter__(self) -> Iterator[Listed]:
        """Each directory, depth first, its descriptor open until the next one is asked for."""
        fd = self._open_root()
        self.root_dev = os.fstat(fd).st_dev
        stack: list[tuple[Listed, list[tuple[str, os.stat_result]]]] = []
        walked = 0
        try:
            try:
                top = self._list(fd, self.root, 0)
            except OSError:
                os.close(fd)
                raise
            stack.append((top, list(top.subdirs)))
            walked = 1
            yield top
            while stack:
                parent, todo = stack[-1]
                if not todo:
                    os.close(parent.fd)
                    stack.pop()
                    continue
                name, listed = todo.pop()
                if self.limit_dirs is not None and walked >= self.limit_dirs:
                    self.errors.append(f"stopped after {self.limit_dirs} directories")
                    return
                if parent.depth + 1 >= MAX_WALK_DEPTH:
                    self.errors.append(f"{os.path.join(parent.path, name)}: deeper than {MAX_WALK_DEPTH} "
                                       "levels, not walked")
                    continue
                child_fd = self._descend(parent, name, listed)
                if child_fd is None:
                    continue
                path = os.path.join(parent.path, name)
                try:
                    child = self._list(child_fd, path, parent.depth + 1)
                except OSError as exc:
                    os.close(child_fd)
                    self.errors.append(f"{path}: {exc.strerror}")
                    continue
                stack.append((child, list(child.subdirs)))
                walked += 1
                yield child
        finally:
            for listed_dir, _ in stack:
                os.close(listed_dir.fd)
