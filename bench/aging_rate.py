#!/usr/bin/env python3
"""How fast does the ager age? Its ops/s against a C program replaying the same op log.

For each target directory (tmpfs ``/dev/shm`` = RAM, where Python's overhead is the
largest share it can be, and a directory on the root disk's file system, buffered, no
fsync) it runs ``fsscope.aging.ager.age`` from an empty directory to ``--max-ops``
operations with ``op_log_path`` set, then empties the directory and replays that exact
op log with a small C program (built with ``cc`` in a temp dir): ``openat`` (``mkdir -p``
on ENOENT) + ``write`` (or ``posix_fallocate``) + ``close`` per create, ``unlinkat`` per
delete, timed around the replay loop only. Python's time includes all its planning
(bucket bookkeeping, seeded choices, log hashing); C does only the syscalls. It prints
both rates and Python/C (target: >= 0.5). Runs alternate so drift hits both alike.

As root it also ages a loop image (``--loop-recipe``, default ext4-default; a sparse image
under /var/tmp attached with direct I/O through ``fsscope.targets``), formatting it afresh
before every Python and every C pass, so both start from the same empty file system. The
issue's target (Python >= 0.5 of C) is stated for the loop image.

    .venv/bin/python bench/aging_rate.py [--profile small] [--max-ops 200000]
        [--capacity-mib 64] [--reps 3] [--fallocate] [--dir PATH ...] [--jobs 1]
        [--loop-recipe ext4-default ...] [--no-loop]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fsscope.aging.ager import AgingSpec, age  # noqa: E402

C_SOURCE = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (1 << 20)

static int mkdir_p(int root, char *path) {  /* parents of path (path is a file) */
    for (char *p = path; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int rc = mkdirat(root, path, 0777);
        *p = '/';
        if (rc && errno != EEXIST) return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: replay OPLOG ROOT FALLOCATE(0|1)\n"); return 2; }
    int falloc = atoi(argv[3]);
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror("oplog"); return 1; }
    fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
    char *log = malloc(n + 1);
    if (fread(log, 1, n, f) != (size_t)n) { perror("read"); return 1; }
    log[n] = 0; fclose(f);
    int root = open(argv[2], O_RDONLY | O_DIRECTORY);
    if (root < 0) { perror("root"); return 1; }
    char *buf = malloc(CHUNK);
    for (int i = 0; i < CHUNK; i++) buf[i] = (char)(i * 131 + 7);
    struct timespec t0, t1;
    long ops = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (char *line = log; *line; ) {
        char *end = strchr(line, '\n'); *end = 0;
        char kind = line[0];
        char *path = line + 2;
        if (kind == 'c') {
            char *sp = strrchr(path, ' '); *sp = 0;
            long size = strtol(sp + 1, NULL, 10);
            int fd = openat(root, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd < 0 && errno == ENOENT) {
                if (mkdir_p(root, path)) { perror("mkdir"); return 1; }
                fd = openat(root, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            }
            if (fd < 0) { perror(path); return 1; }
            if (size > 0) {
                if (falloc) {
                    if (posix_fallocate(fd, 0, size)) { perror("fallocate"); return 1; }
                } else {
                    long left = size;
                    while (left > 0) {
                        ssize_t w = write(fd, buf, left < CHUNK ? left : CHUNK);
                        if (w < 0) { perror("write"); return 1; }
                        left -= w;
                    }
                }
            }
            close(fd);
        } else if (kind == 'd') {
            if (unlinkat(root, path, 0)) { perror(path); return 1; }
        }
        ops++;
        line = end + 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("%ld %.9f\n", ops, s);
    return 0;
}
"""


def build_replayer(workdir: Path) -> Path:
    src = workdir / "replay.c"
    exe = workdir / "replay"
    src.write_text(C_SOURCE)
    subprocess.run(["cc", "-O2", "-o", str(exe), str(src)], check=True)
    return exe


def empty_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)


def run_python(root: Path, args: argparse.Namespace, log_path: Path) -> tuple[int, float, str]:
    spec = AgingSpec(profile=args.profile, seed=args.seed, max_ops=args.max_ops,
                     capacity_bytes=args.capacity_mib << 20, fallocate=args.fallocate,
                     workers=args.jobs)
    result = age(root, spec, op_log_path=log_path)
    return result.session_ops, result.elapsed_s, result.op_log_sha256


def run_c(exe: Path, root: Path, log_path: Path, fallocate: bool) -> tuple[int, float]:
    out = subprocess.run([str(exe), str(log_path), str(root), "1" if fallocate else "0"],
                         check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]), float(out[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="small")
    parser.add_argument("--max-ops", type=int, default=200_000)
    parser.add_argument("--capacity-mib", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--fallocate", action="store_true")
    parser.add_argument("--dir", action="append", type=Path,
                        help="parent directory to age in (default: /dev/shm and /var/tmp)")
    parser.add_argument("--loop-recipe", action="append",
                        help="also age a loop image made with this recipe (default: ext4-default, as root)")
    parser.add_argument("--no-loop", action="store_true", help="skip the loop-image variant")
    args = parser.parse_args()
    parents = args.dir or [Path("/dev/shm"), Path("/var/tmp")]
    loop_recipes = [] if args.no_loop or os.geteuid() != 0 else (args.loop_recipe or ["ext4-default"])
    mode = "fallocate" if args.fallocate else "write"
    print(f"profile={args.profile} ops={args.max_ops} capacity={args.capacity_mib} MiB "
          f"mode={mode} jobs={args.jobs} reps={args.reps}")
    worst_ratio = loop_ratio = float("inf")
    with tempfile.TemporaryDirectory(prefix="fsscope-aging-bench-") as work:
        workdir = Path(work)
        exe = build_replayer(workdir)
        log_path = workdir / "ops.log"
        for parent in parents:
            root = Path(tempfile.mkdtemp(prefix="fsscope-aging-bench-", dir=parent))

            def fresh_dir(root=root) -> Path:
                empty_dir(root)
                return root

            try:
                ratio = compare(str(parent), _fs_type(parent), fresh_dir, exe, log_path, args)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            worst_ratio = min(worst_ratio, ratio)
        for recipe_name in loop_recipes:
            loop_ratio = min(loop_ratio, compare_on_loop(recipe_name, workdir, exe, log_path, args))
    print(f"target python/C >= 0.50: {'met' if worst_ratio >= 0.5 else 'NOT met'} "
          f"(worst {worst_ratio:.2f})")
    if loop_recipes:
        print(f"target on the loop image python/C >= 0.50: {'met' if loop_ratio >= 0.5 else 'NOT met'} "
              f"(worst {loop_ratio:.2f})")
    return 0


def compare(label: str, fs_type: str, fresh_root, exe: Path, log_path: Path,
            args: argparse.Namespace) -> float:
    """Python then C, ``reps`` times, each on a root ``fresh_root()`` hands out empty."""
    py_rates, c_rates, sha = [], [], set()
    for _ in range(args.reps):
        ops, seconds, digest = run_python(fresh_root(), args, log_path)
        py_rates.append(ops / seconds)
        sha.add(digest)
        c_ops, c_seconds = run_c(exe, fresh_root(), log_path, args.fallocate)
        assert c_ops == ops, (c_ops, ops)
        c_rates.append(c_ops / c_seconds)
    py, c = statistics.median(py_rates), statistics.median(c_rates)
    print(f"{label:>24} ({fs_type:>6}): python {py:10.0f} ops/s   C replay {c:10.0f} ops/s   "
          f"python/C {py / c:5.2f}   (op log sha256 {'stable' if len(sha) == 1 else 'VARIES'}: "
          f"{next(iter(sha))[:12]}…)")
    return py / c


def compare_on_loop(recipe_name: str, workdir: Path, exe: Path, log_path: Path,
                    args: argparse.Namespace) -> float:
    """The same comparison on a loop image formatted afresh before every pass."""
    from fsscope import recipes
    from fsscope.targets import Target, TargetSpec

    size_bytes = max(4 * (args.capacity_mib << 20), 512 << 20)  # room for metadata; xfs needs 300M
    spec = TargetSpec("image", str(Path("/var/tmp") / f"{workdir.name}-{recipe_name}.img"), size_bytes)
    recipe = recipes.load(recipe_name)
    with Target(spec, recipe) as target:
        try:
            return compare(f"loop image {recipe_name}", recipe.fs,
                           lambda: target.format_and_mount().workdir, exe, log_path, args)
        finally:
            target.unmount()
            os.unlink(spec.path)


def _fs_type(path: Path) -> str:
    """The file-system type holding ``path`` (longest matching mount in /proc/mounts)."""
    best, fs_type = "", "?"
    real = os.path.realpath(path)
    with open("/proc/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            mount_point = fields[1]
            if (real == mount_point or real.startswith(mount_point.rstrip("/") + "/")) \
                    and len(mount_point) > len(best):
                best, fs_type = mount_point, fields[2]
    return fs_type


if __name__ == "__main__":
    sys.exit(main())
