#!/usr/bin/env python3
"""Is the workload engine as fast as Filebench, and what did its speed-up buy? (issue 15)

With Filebench installed (``filebench`` under ``--filebench-prefix``, default the one on PATH,
else /usr/local or /usr; there is no distribution package of it here:
``sudo bench/build_filebench.sh SRC_DIR [PREFIX]`` builds it from a source tree): per personality, Filebench's own workload file with the same
directory, file count, mean file size, directory width and worker count, run for the same
duration alternately with ours, ``--rounds`` times; prints the median ops/s of each and the
ratio ours/Filebench (target >= 1.0). Filebench runs under ``setarch -R`` (ASLR off for it
alone: with ASLR on, Filebench 1.5-alpha3's processes cannot map its shared memory and it hangs;
its own switch only queries), so the machine's setting is left as it is.

Always: the engine's throughput ceiling per personality on ``--dir`` (default a tmpfs
directory under /dev/shm, where the storage costs least and the generator shows most), and the
same runs with the engine as it was before the speed-up (``--reference``, a commit whose
``fsscope/workloads/personalities`` package is loaded from git into a temporary module), runs
alternated so the shared machine's drift hits both alike. Printed per personality: median
ops/s of each and the ratio new/old, and -- less noisy on a loaded machine -- ops per CPU
second of the workers (user+system, kernel-accounted) and the workers' user-space CPU per op,
the generator's own cost.

    .venv/bin/python bench/workload_parity.py [--duration 5] [--rounds 3] [--workers 2]
                                              [--dir /dev/shm/x] [--reference COMMIT]
                                              [--filebench-prefix /usr/local] [--smoke]

Measured (24 Nov 2026, quiet 2-CPU machine, a 4 GiB ext4 image on a RAM-backed loop device,
--full --workers 16 --duration 30, Filebench 1.5-alpha3 built from its git tree, ASLR off):
ours/Filebench fileserver 1.03, webserver 1.08 (3 rounds), varmail 0.84 (3 rounds) and 0.94
(5 rounds: 77.7k vs 83.0k ops/s). Varmail is fsync-bound; Filebench's own runs of it span
77-87k ops/s, and Filebench with 16 processes of one thread (our workers are processes)
instead of 16 threads ran 80.4k vs 82.8k (medians of 3 alternated): ours/that is 0.97.
After the workers' paths became bytes, the same setup again: fileserver 0.97, webserver 1.06,
varmail 0.89 (3 rounds) and 1.02 (5 rounds). Run to run the ratios move by +-8 %: parity is
within that, >= 1.0 on every personality is not shown.

More rounds, with the round-by-round ratios and a one-sided Wilcoxon test of "ours slower"
(same setup; a 12 GiB image for webserver, whose Filebench log filled 4 GiB in 28 s):
fileserver 8 rounds, ratio of medians 0.98, rounds 0.95-1.08, p = 0.63; webserver 6 rounds,
0.95, rounds 0.84-1.05 (median round 1.00), p = 0.58; varmail 8 rounds 0.96 (p = 0.10), 6
rounds 0.91 (p = 0.02) and, with latencies recorded into arrays, 6 rounds 0.92 (p = 0.05):
ours IS slower on varmail. Its workers' CPU per op is the difference:
18.3 us vs Filebench's 16.0 (ops per CPU-second 54.7k vs 62.6k), of which user 3.9 vs 1.3 us.
On webserver, where nothing blocks, user is 0.93 vs 0.63 us and CPU per op is equal; varmail
blocks in fsync twice an iteration, so every op after a wake-up runs with cold caches, and an
interpreter's working set is far larger than Filebench's C loop (16 threads sharing one address
space; in a bare Python varmail loop 16 threads ran 0.68-0.70x of 16 processes: the GIL).

Then (25 Nov 2026, same setup on a 12 GiB image) the workers' loops moved to C
(personalities/native/loops.c), their workers became threads over one process per CPU (the C
loops run without the GIL), and the deadline poll went from 10 to 100 ms. One at a time on
varmail, 6 rounds: C loops in 16 processes 0.86 (user 2.61 us/op against Filebench's 1.10);
as 2 x 8 threads 0.92; with the 100-ms poll 1.01 (81.2k vs 80.7k ops/s; rounds 1.00-1.05,
p(ours slower) = 0.95; user 0.56 vs 0.82 us/op). fileserver 1.16 (4 rounds, 1.09-1.17),
webserver 1.28 (4 rounds, 1.20-1.36; 615k vs 481k ops/s). --reference python compares with today's Python loops.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import benchlib  # noqa: E402

from fsscope.workloads import personalities as P  # noqa: E402

# the engine before the per-op speed-up (the package split; it already reports the workers' CPU)
REFERENCE = "fbaca3b"
PACKAGE = "fsscope/workloads/personalities"
REF_NAME = "fsscope_ref_personalities"
FILEBENCH_PREFIXES = (Path("/usr/local"), Path("/usr"))


def find_filebench(prefix: Path | None) -> tuple[Path, Path] | None:
    """Filebench's binary and workload directory under ``prefix`` (build_filebench.sh's PREFIX
    installs bin/filebench and share/filebench/workloads); without one, the filebench on PATH's
    prefix, then /usr/local and /usr. None where none has both."""
    on_path = shutil.which("filebench")
    candidates = [prefix] if prefix else [
        *([Path(on_path).resolve().parent.parent] if on_path else []), *FILEBENCH_PREFIXES]
    for root in candidates:
        binary, workloads = root / "bin" / "filebench", root / "share" / "filebench" / "workloads"
        if binary.is_file() and os.access(binary, os.X_OK) and (workloads / "varmail.f").exists():
            return binary, workloads
    return None


class PythonLoops:
    """``--reference python``: today's engine with its Python worker loops (no C loop)."""

    populate = staticmethod(P.populate)
    default_spec = staticmethod(P.default_spec)

    @staticmethod
    def run(root, spec):
        return P.run(root, spec, P.RunOptions(native_loops=False))


def load_reference(commit: str, into: Path):
    """The personalities package as of ``commit``, importable as REF_NAME (its imports of
    itself rewritten); sys.path gets ``into`` before any worker starts, so the forkserver
    finds it too. ``python``: this engine with its Python loops (:class:`PythonLoops`)."""
    if commit == "python":
        return PythonLoops
    names = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", f"{commit}:{PACKAGE}"],
                           check=True, capture_output=True, text=True).stdout.split()
    pkg = into / REF_NAME
    pkg.mkdir()
    for name in names:
        text = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{PACKAGE}/{name}"],
                              check=True, capture_output=True, text=True).stdout
        (pkg / name).write_text(text.replace("fsscope.workloads.personalities", REF_NAME))
    # its statistics module as of the same commit (the package imported it whole; it has since
    # become a package of its own), beside it
    variation = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:fsscope/analysis/variation.py"],
                               check=True, capture_output=True, text=True).stdout
    (pkg / "_variation.py").write_text(variation.replace("from fsscope.jsonsafe import plain",
                                                         "from fsscope.records import plain"))
    for path in pkg.glob("*.py"):
        path.write_text(path.read_text().replace("from fsscope.analysis import variation",
                                                 f"from {REF_NAME} import _variation as variation"))
    sys.path.insert(0, str(into))
    return importlib.import_module(REF_NAME)


def spec_for(name: str, workers: int | None, duration_s: float, full: bool = False, engine=P):
    # small file sets, so the numbers are the generator's and the file system's, not the disk's;
    # --full: Filebench's own file counts (its fileserver.f has 10,000). ``engine``: whose spec
    # type (the reference's is its own)
    nfiles = {"fileserver": 10000 if full else 2000, "webserver": 1000, "varmail": 1000}[name]
    return engine.default_spec(name, nfiles=nfiles, duration_s=duration_s, seed=1,
                               **({"workers": workers} if workers else {}))


def ours(engine, root: Path, spec: P.PersonalitySpec) -> dict:
    engine.populate(root, spec, evict_cache=False)
    result = engine.run(root, spec)
    return {"ops_per_s": result.ops_per_s, "total_ops": result.total_ops,
            "cpu_s": result.worker_cpu_user_s + result.worker_cpu_system_s, "user_s": result.worker_cpu_user_s}


def filebench(spec: P.PersonalitySpec, root: Path, binary: Path, workload_dir: Path) -> dict | None:
    """ops/s of Filebench's own workload file with our settings, and the CPU its processes
    used (whole run: its file-set creation included, so its CPU per op is an upper bound)."""
    text = (workload_dir / f"{spec.name}.f").read_text()
    sets = {"dir": str(root), "nfiles": spec.nfiles, "meandirwidth": spec.dir_width, "nthreads": spec.workers}
    for key, value in sets.items():
        text = re.sub(rf"^set \${key}=.*$", f"set ${key}={value}", text, flags=re.M)
    text = re.sub(r"mean:\d+", f"mean:{spec.mean_file_size_bytes}", text)
    text = re.sub(r"^run\b.*$", "", text, flags=re.M) + f"\nrun {int(spec.duration_s)}\n"
    with tempfile.NamedTemporaryFile("w", suffix=".f", delete=False) as fh:
        fh.write(text)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        # setarch -R: ASLR off for Filebench alone (with it on, its processes cannot map its
        # shared memory and it hangs instead of failing)
        out = subprocess.run(["setarch", platform.machine(), "-R", str(binary), "-f", fh.name],
                             capture_output=True, text=True,
                             timeout=spec.duration_s * 5 + 300).stdout
    finally:
        os.unlink(fh.name)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    match = re.search(r"IO Summary:\s+(\d+) ops\s+([\d.]+) ops/s", out)
    if not match:
        free = os.statvfs(root)
        if free.f_bavail * free.f_frsize < 64 << 20:
            # its webserver appends to one log it never rotates (ours rotates it): at ~100k ops/s
            # that is ~70 MB/s, a 4 GiB file system full within a minute
            print(f"  Filebench {spec.name}: the file system filled up, no result this round "
                  "(a larger --dir or a shorter --duration)", flush=True)
            return None
        raise SystemExit(f"filebench printed no 'IO Summary' for {spec.name}:\n{out[-2000:]}")
    user_s = after.ru_utime - before.ru_utime
    return {"ops_per_s": float(match.group(2)), "total_ops": int(match.group(1)), "user_s": user_s,
            "cpu_s": user_s + after.ru_stime - before.ru_stime}


def paired(new_runs: list[dict], fb_runs: list[dict]) -> str:
    """Round by round (the two ran back to back): ours/Filebench of each round, and whether
    they show ours slower -- a one-sided Wilcoxon signed-rank test of the log ratios < 0."""
    ratios = [r["ops_per_s"] / f["ops_per_s"] for r, f in zip(new_runs, fb_runs) if f and f["ops_per_s"]]
    text = "per round ours/FB " + " ".join(f"{x:.2f}" for x in ratios)
    if len(ratios) >= 5:
        from scipy.stats import wilcoxon
        p = wilcoxon([math.log(x) for x in ratios], alternative="less").pvalue
        text += f"; ours slower than Filebench: p = {p:.2f} (one-sided Wilcoxon, {len(ratios)} rounds)"
    return text


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run (default 5)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated runs of each engine (default 3)")
    parser.add_argument("--workers", type=int, help="workers (default: the personality's default here)")
    parser.add_argument("--dir", type=Path, help="where to run (default: a new directory under /dev/shm)")
    parser.add_argument("--reference", default=REFERENCE,
                        help=f"commit of the old engine (default {REFERENCE}), or 'python': this engine's Python loops")
    parser.add_argument("--personality", action="append", choices=P.PERSONALITIES,
                        help="only these (repeat; default all three)")
    parser.add_argument("--full", action="store_true",
                        help="Filebench's own file counts (fileserver 10,000 files, not 2,000)")
    parser.add_argument("--no-filebench", action="store_true", help="do not run Filebench even where installed")
    parser.add_argument("--filebench-prefix", type=Path,
                        help="where build_filebench.sh installed Filebench (default: the one on PATH, "
                             "else /usr/local or /usr)")
    parser.add_argument("--no-reference", action="store_true",
                        help="skip the old engine's runs (a third less time; its columns print '-')")
    benchlib.add_smoke(parser, "1 round of 1 s per personality, 2 workers")
    args = parser.parse_args()
    benchlib.start()
    benchlib.smoke(args, duration=1.0, rounds=1, workers=2)
    names = args.personality or list(P.PERSONALITIES)
    base = args.dir or Path(tempfile.mkdtemp(prefix="fsscope-parity-", dir="/dev/shm"))
    base.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="fsscope-parity-ref-"))
    try:
        ref = load_reference(args.reference, scratch)
        found = None if args.no_filebench else find_filebench(args.filebench_prefix)
        fb, workloads = found if found else (None, None)
        if args.no_filebench:
            benchlib.skipped("Filebench", "--no-filebench: printing the engine's own ceiling and its speed-up")
        elif found is None:
            where = args.filebench_prefix or "PATH, /usr/local or /usr"
            benchlib.skipped("Filebench", f"not installed under {where} (bench/build_filebench.sh SRC_DIR [PREFIX] "
                             "builds it): printing the engine's own ceiling and its speed-up instead")
        print(benchlib.load())
        print(f"{'personality':<11} {'workers':>7} {'new ops/s':>11} {'old ops/s':>11} {'new/old':>7} "
              f"{'ops/CPU-s new':>13} {'old':>9} {'new/old':>7} {'user µs/op new':>14} {'old':>6}"
              + (f" {'Filebench':>11} {'new/FB':>6}" if fb and workloads else ""))
        for name in names:
            spec = spec_for(name, args.workers, args.duration, args.full)
            ref_spec = spec_for(name, args.workers, args.duration, args.full, engine=ref)  # its own spec type
            new_runs, old_runs, fb_runs = [], [], []
            for r in range(args.rounds):
                # alternated: the shared machine's drift hits every engine alike
                order = [("new", P), ("old", ref)] + ([("fb", None)] if fb and workloads else [])
                order = [o for o in order if not (args.no_reference and o[0] == "old")]
                for label, engine in order if r % 2 == 0 else order[::-1]:
                    root = base / label
                    root.mkdir(exist_ok=True)
                    if label == "fb":
                        fb_runs.append(filebench(spec, root, fb, workloads))  # None: no result this round
                    else:
                        (new_runs if label == "new" else old_runs).append(
                            ours(engine, root, spec if label == "new" else ref_spec))
                    shutil.rmtree(root)

            def stat(runs, key):
                return median([r[key] for r in runs if r])

            def per_cpu(runs):
                return median([r["total_ops"] / r["cpu_s"] for r in runs if r and r["cpu_s"]])

            def user_us(runs):
                return median([r["user_s"] / r["total_ops"] * 1e6 for r in runs
                               if r and r["user_s"] and r["total_ops"]])

            n, o = stat(new_runs, "ops_per_s"), stat(old_runs, "ops_per_s")
            nc, oc = per_cpu(new_runs), per_cpu(old_runs)
            nu, ou = user_us(new_runs), user_us(old_runs)

            def fmt(x, spec_="{:,.0f}"):
                return "-" if x is None else spec_.format(x)
            line = (f"{name:<11} {spec.workers:>7} {fmt(n):>11} {fmt(o):>11} {fmt(n / o if o else None, '{:.2f}'):>7} "
                    f"{fmt(nc):>13} {fmt(oc):>9} {fmt(nc / oc if nc and oc else None, '{:.2f}'):>7} "
                    f"{fmt(nu, '{:.2f}'):>14} {fmt(ou, '{:.2f}'):>6}")
            if any(fb_runs):
                f = stat(fb_runs, "ops_per_s")
                line += f" {f:>11,.0f} {n / f:>6.2f}"
            print(line, flush=True)
            if any(fb_runs):
                print(f"            Filebench: {fmt(per_cpu(fb_runs))} ops/CPU-s, {fmt(user_us(fb_runs), '{:.2f}')} "
                      "user µs/op (its processes' whole run: file-set creation included)", flush=True)
                print("            " + paired(new_runs, fb_runs), flush=True)
        print(f"\nmedians of {args.rounds} alternated runs of {args.duration:g} s on {base} "
              f"(old = {args.reference}); ops/CPU-s and user µs/op use the workers' kernel-accounted CPU; {benchlib.load()}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
