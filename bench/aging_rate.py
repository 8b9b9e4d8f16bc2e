#!/usr/bin/env python3
"""How fast does the ager age? Its ops/s against a C program replaying the same op log.

Target (issues 28, 38): the ager >= 0.85 of the C replay's ops/s by the paired ratio, on tmpfs
and on a loop image.

On each target -- tmpfs (``/dev/shm``: RAM, where the ager's own cost per op is the largest
share it can be; ``--dir`` adds others) and, as root, a loop image (``--loop-recipe``, default
ext4-default; a sparse image in a fresh ``mkdtemp`` directory under ``--image-dir``, attached
through ``fsscope.targets`` and formatted afresh before every pass) -- it first runs
``fsscope.aging.ager.age`` once untimed to write the op log (``--max-ops`` operations from an
empty directory, buffered writes, no fsync), then alternates timed passes of the ager and of
a small C program (built with ``cc`` in a temp dir) that replays that log: ``openat``
(``mkdir -p`` on ENOENT) + ``write`` (or ``posix_fallocate``) + ``close`` per create,
``unlinkat`` per delete, timed around the replay loop only. The ager's time includes all its
planning (bucket bookkeeping, seeded choices, hashing the op log); every ager pass must make
the same op log (its sha256 is checked). Passes go A B, B A, ... from an emptied directory;
the load is printed beside every figure, medians at the end. Beside each pass's ops/s its
CPU time (user + system, kernel-accounted: the ager's process, the replayer child; the
ager's includes its setup and final state file, outside its timed span) gives ops per
CPU-second: on a loaded machine a pass's wall time is mostly waiting for a CPU, which
moves a single pass by +-30 %, so the ratio of those is printed as evidence (no target of its
own) and the default is 7 passes a side. The verdict is the paired ratio: the median over
repetitions of the ager's ops/s over the C replay's in the same repetition (a ratio of
medians can pair one side's fast pass with the other's slow one: 0.99 against 0.82 once).
``--op-loop python`` times the ager's reference Python loop instead of its C loop.

Stopping it (Ctrl-C, SIGTERM) removes its directories, unmounts and detaches the image.

    .venv/bin/python bench/aging_rate.py [--profile small] [--max-ops 200000]
        [--capacity-mib 64] [--reps 7] [--fallocate] [--dir PATH ...] [--op-loop auto|python]
        [--loop-recipe ext4-default ...] [--image-dir /var/tmp] [--no-loop] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import benchlib  # noqa: E402

from fsscope.aging.ager import AgingSpec, age  # noqa: E402

TARGET = 0.85  # ager / C replay, ops/s, on tmpfs and on a loop image

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


def empty_dir(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)


def run_ager(root: Path, args: argparse.Namespace, log_path: Path | None = None) -> tuple[int, float, str, str]:
    spec = AgingSpec(profile=args.profile, seed=args.seed, max_ops=args.max_ops,
                     capacity_bytes=args.capacity_mib << 20, fallocate=args.fallocate)
    result = age(root, spec, op_log_path=log_path, op_loop=args.op_loop)
    return result.session_ops, result.elapsed_s, result.op_log_sha256, result.op_loop


def cpu_s() -> float:
    """User + system CPU seconds so far of this process and its waited-for children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_c(exe: Path, root: Path, log_path: Path, fallocate: bool) -> tuple[int, float]:
    out = subprocess.run([str(exe), str(log_path), str(root), "1" if fallocate else "0"],
                         check=True, capture_output=True, text=True).stdout.split()
    return int(out[0]), float(out[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="small")
    parser.add_argument("--max-ops", type=int, default=200_000)
    parser.add_argument("--capacity-mib", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reps", type=int, default=7, help="timed passes of each side per target")
    parser.add_argument("--fallocate", action="store_true")
    parser.add_argument("--op-loop", choices=["auto", "python"], default="auto",
                        help="the ager's op loop: auto (C when it builds) or python (the reference)")
    parser.add_argument("--dir", action="append", type=Path,
                        help="parent directory to age in (default: /dev/shm)")
    parser.add_argument("--loop-recipe", action="append",
                        help="also age a loop image made with this recipe (default: ext4-default, as root)")
    parser.add_argument("--image-dir", type=Path, default=Path("/var/tmp"),
                        help="where the loop image's temporary directory goes (default: /var/tmp)")
    parser.add_argument("--no-loop", action="store_true", help="skip the loop-image variant")
    benchlib.add_smoke(parser, "2,000 ops, 8 MiB, 1 pass a side")
    args = parser.parse_args()
    benchlib.start()
    benchlib.smoke(args, max_ops=2000, capacity_mib=8, reps=1)
    parents = args.dir or [Path("/dev/shm")]
    loop_recipes = [] if args.no_loop or os.geteuid() != 0 else (args.loop_recipe or ["ext4-default"])
    mode = "fallocate" if args.fallocate else "write"
    print(f"profile={args.profile} ops={args.max_ops} capacity={args.capacity_mib} MiB mode={mode} "
          f"reps={args.reps} op_loop={args.op_loop}; {benchlib.load()}; target: ager/C paired >= {TARGET}")
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="fsscope-aging-bench-") as work:
        workdir = Path(work)
        exe = benchlib.build_c(C_SOURCE, workdir, "replay")
        log_path = workdir / "ops.log"
        for parent in parents:
            root = Path(tempfile.mkdtemp(prefix="fsscope-aging-bench-", dir=parent))

            def fresh_dir(root=root) -> Path:
                empty_dir(root)
                return root

            try:
                verdicts.append(compare(str(parent), _fs_type(parent), fresh_dir, exe, log_path, args))
            finally:
                shutil.rmtree(root, ignore_errors=True)
        for recipe_name in loop_recipes:
            verdicts.append(compare_on_loop(recipe_name, exe, log_path, args))
    for label, ratio, load in verdicts:
        print(f"target ager/C paired >= {TARGET:.2f} on {label}: {'met' if ratio >= TARGET else 'NOT met'} "
              f"({ratio:.2f}; median load {load:.1f})")
    return 0 if args.smoke or all(ratio >= TARGET for _, ratio, _ in verdicts) else 1


def compare(label: str, fs_type: str, fresh_root, exe: Path, log_path: Path,
            args: argparse.Namespace) -> tuple[str, float, float]:
    """The op log (an untimed ager pass), then ``reps`` timed passes of each side, alternated,
    each on a root ``fresh_root()`` hands out empty. Returns (label, median ratio, median load)."""
    label = f"{label} ({fs_type})"
    ops, _, digest, op_loop = run_ager(fresh_root(), args, log_path)
    print(f"{label}: op log {ops} ops, sha256 {digest[:12]}…, ager loop: {op_loop}")
    rates: dict[str, list[float]] = {"ager": [], "C replay": []}
    per_cpu_s: dict[str, list[float]] = {"ager": [], "C replay": []}
    loads = []
    for rep, side in benchlib.alternate(list(rates), args.reps):
        root, load = fresh_root(), benchlib.load_value()
        cpu0_s = cpu_s()
        if side == "ager":
            n, seconds, pass_digest, _ = run_ager(root, args)
            if pass_digest != digest:
                raise SystemExit(f"{label}: the ager's op log changed between passes "
                                 f"({pass_digest[:12]}… != {digest[:12]}…)")
        else:
            n, seconds = run_c(exe, root, log_path, args.fallocate)
        pass_cpu_s = cpu_s() - cpu0_s
        if n != ops:
            raise SystemExit(f"{label}: {side} did {n} ops, the op log has {ops}")
        rates[side].append(n / seconds)
        per_cpu_s[side].append(n / pass_cpu_s)
        loads.append(load)
        print(f"  rep {rep + 1} {side:<8} {n / seconds:10.0f} ops/s   {n / pass_cpu_s:8.0f} ops/CPU-s   "
              f"(load {load:.1f}/{os.cpu_count()})")
    ager, c = statistics.median(rates["ager"]), statistics.median(rates["C replay"])
    paired = statistics.median(a / b for a, b in zip(rates["ager"], rates["C replay"]))
    cpu_ratio = statistics.median(per_cpu_s["ager"]) / statistics.median(per_cpu_s["C replay"])
    load = statistics.median(loads)
    print(f"{label:>28}: ager {ager:10.0f} ops/s   C replay {c:10.0f} ops/s   ager/C paired {paired:5.2f} "
          f"(the verdict's statistic: the median of each repetition's ratio; ratio of medians {ager / c:.2f}, "
          f"per CPU-second {cpu_ratio:.2f}: evidence)   median load {load:.1f}/{os.cpu_count()}")
    return label, paired, load


def compare_on_loop(recipe_name: str, exe: Path, log_path: Path,
                    args: argparse.Namespace) -> tuple[str, float, float]:
    """The same comparison on a loop image formatted afresh before every pass."""
    from fsscope import recipes
    from fsscope.targets import Target, TargetSpec

    size_bytes = max(4 * (args.capacity_mib << 20), 512 << 20)  # room for metadata; xfs needs 300M
    image_dir = Path(tempfile.mkdtemp(prefix="fsscope-aging-bench-", dir=args.image_dir))
    try:
        spec = TargetSpec("image", str(image_dir / f"{recipe_name}.img"), size_bytes)
        recipe = recipes.load(recipe_name)
        with Target(spec, recipe) as target:
            try:
                return compare(f"loop image {recipe_name}", recipe.fs,
                               lambda: target.format_and_mount().workdir, exe, log_path, args)
            finally:
                target.unmount()
    finally:
        shutil.rmtree(image_dir, ignore_errors=True)


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
