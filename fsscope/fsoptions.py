"""The grammar of mkfs and mount options, so no option can make root's mkfs or mount touch a
device or file other than the target.

mkfs takes more devices as positional arguments (``mkfs.btrfs A B``) and as option values
(``mkfs.xfs -l logdev=DEV``, ``mke2fs -J device=DEV``, ``mkfs.f2fs -c DEV``); it reads or writes
files named in options (``-d DIR``, ``-z UNDO``, ``-p PROTO``); mount takes ``logdev=``,
``rtdev=``, ``device=``, ``journal_path=`` and mount(8)'s own ``loop=``, ``X-mount.*``. Each
file system's options are parsed here as its mkfs parses them (getopt: clustered short flags,
attached or separate values, btrfs's long options) against an allowlist: an option the table
does not know, any positional argument (fsscope appends the target itself), an option that
names a device or path, and any value with a ``/`` in it are refused with one line. Refusing
rather than checking the named device: fsscope formats, journals and undoes only its target.
"""

from __future__ import annotations

from fsscope.errors import RecipeError

FLAG, VALUE, PATH, SUB = "flag", "value", "path", "sub"  # what an option takes

# Short options as each mkfs's getopt string has them (mke2fs 1.47, xfsprogs 6.1,
# btrfs-progs 6.2, f2fs-tools 1.15). PATH: the value names a device or file.
_EXT4 = {**dict.fromkeys("cjnqvDFKSV", FLAG), **dict.fromkeys("begimorstCGILNOTUM", VALUE),
         **dict.fromkeys("dlz", PATH), **dict.fromkeys("EJR", SUB)}
_XFS = {**dict.fromkeys("KNqfVC", FLAG), "L": VALUE, "p": PATH, **dict.fromkeys("bcdilmnrs", SUB)}
_BTRFS = {**dict.fromkeys("fVvMKq", FLAG), **dict.fromkeys("bnsmdLROUl", VALUE), **dict.fromkeys("ru", PATH)}
_BTRFS_LONG = {"force": "f", "version": "V", "verbose": "v", "mixed": "M", "nodiscard": "K", "quiet": "q",
               "byte-count": "b", "nodesize": "n", "sectorsize": "s", "metadata": "m", "data": "d",
               "label": "L", "runtime-features": "R", "features": "O", "uuid": "U", "leafsize": "l",
               "rootdir": "r", "subvol": "u", "csum": "csum", "checksum": "csum", "shrink": "shrink"}
_BTRFS_EXTRA = {"csum": VALUE, "shrink": FLAG}
_F2FS = {**dict.fromkeys("fhimqrV", FLAG), **dict.fromkeys("aCdeEglORsStTUwz", VALUE), "c": PATH}

MKFS_GRAMMAR = {"ext4": (_EXT4, {}), "xfs": (_XFS, {}), "btrfs": ({**_BTRFS, **_BTRFS_EXTRA}, _BTRFS_LONG),
                "f2fs": (_F2FS, {})}

# Sub-options ("-l logdev=DEV,size=64m") that name a device or a file.
_PATH_SUBOPTS = {"ext4": {"device"}, "xfs": {"logdev", "rtdev", "name", "options"}}

# Mount options that name another device or file, or make mount(8) act beyond mounting the
# target on fsscope's mount point (a loop device of its own, a helper, bind/move/remount).
_MOUNT_REFUSED = {"loop", "offset", "sizelimit", "encryption", "helper", "uhelper", "bind", "rbind",
                  "move", "remount", "journal_path", "journal_dev", "logdev", "rtdev", "device"}
_MOUNT_SLASH_OK = {"btrfs": {"subvol"}}  # a path inside the file system being mounted


def _refuse(where: str, opt: str, why: str) -> RecipeError:
    return RecipeError(f"{where}: {opt!r} {why}; fsscope formats and mounts only its target "
                       "(options naming devices or files are refused)")


def _check_value(where: str, opt: str, value: str, kind: str, fs: str) -> None:
    if kind == PATH:
        raise _refuse(where, f"{opt} {value}".strip(), "names a device or file")
    if kind == SUB:
        for sub in value.split(","):
            key, _, subval = sub.partition("=")
            if key.strip() in _PATH_SUBOPTS.get(fs, ()):
                raise _refuse(where, f"{opt} {value}", f"names a device or file ({key.strip()}=)")
            if "/" in subval:
                raise _refuse(where, f"{opt} {value}", "has a path in it")
    elif "/" in value and opt != "-M":  # mke2fs -M is only a label ("last mounted on")
        raise _refuse(where, f"{opt} {value}", "has a path in it")


def check_mkfs(fs: str, opts: tuple[str, ...] | list[str], where: str) -> None:
    """Refuse (RecipeError naming ``where``) mkfs options that could touch anything but the
    target: positional arguments, device or file values, options this table does not know."""
    if fs not in MKFS_GRAMMAR:
        if opts:
            raise RecipeError(f"{where}: {fs} has no mkfs, so it takes no mkfs options")
        return
    shorts, longs = MKFS_GRAMMAR[fs]
    args = list(opts)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--" or not arg.startswith("-") or arg == "-":
            raise _refuse(where, arg, "is a positional argument (another device or size)")
        if arg.startswith("--"):
            name, has_value, value = arg[2:].partition("=")
            key = longs.get(name)
            if key is None:
                raise _refuse(where, arg, f"is not a {fs} mkfs option fsscope knows")
            kind = shorts[key]
            if kind == FLAG:
                if has_value:
                    raise _refuse(where, arg, "takes no value")
                continue
            if not has_value:
                if i >= len(args):
                    raise RecipeError(f"{where}: {arg} needs a value")
                value, i = args[i], i + 1
            _check_value(where, f"--{name}", value, kind, fs)
            continue
        for pos, letter in enumerate(arg[1:], start=1):  # a cluster: -Fq, -b4096
            short = shorts.get(letter)
            if short is None:
                raise _refuse(where, f"-{letter}", f"is not a {fs} mkfs option fsscope knows")
            if short == FLAG:
                continue
            value = arg[pos + 1:]
            if not value:
                if i >= len(args):  # else fsscope's own device argument would become its value
                    raise RecipeError(f"{where}: -{letter} needs a value")
                value, i = args[i], i + 1
            _check_value(where, f"-{letter}", value, short, fs)
            break


def check_mount(fs: str, opts: tuple[str, ...] | list[str], where: str) -> None:
    """Refuse mount options that name another device or file or make mount(8) do more than
    mount the target (``logdev=``, ``device=``, ``loop=``, ``X-mount.*``, ``bind``…)."""
    for item in opts:
        for opt in item.split(","):
            key, _, value = opt.strip().partition("=")
            if key.lower().startswith("x-"):
                raise _refuse(where, opt, "is a mount(8) action option")
            if key in _MOUNT_REFUSED:
                raise _refuse(where, opt, "names a device or file, or acts beyond the mount")
            if "/" in value and key not in _MOUNT_SLASH_OK.get(fs, ()):
                raise _refuse(where, opt, "has a path in it")
