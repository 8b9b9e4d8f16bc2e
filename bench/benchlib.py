"""What every benchmark here does the same way on a shared machine.

- ``start()``: output flushed line by line (a pipe or a log shows each figure as it comes), and
  SIGTERM/SIGINT/SIGHUP raise SystemExit in the main thread, so ``finally`` blocks and context
  managers remove what the script made (run directories, loop images, mounts) when it is
  stopped.
- ``load()``: the machine's load beside each figure (1-minute load average / CPUs).
- ``alternate()``: the two sides of a comparison in A B / B A order, repetition by repetition, so
  drift on a shared machine hits both alike.
- ``build_c()``: a baseline C program, compiled -O2 from its source text.
- ``add_smoke()`` / ``smoke()``: the ``--smoke`` mode every script has -- its own code path at
  tiny sizes, seconds long, which tests/test_bench_smoke.py runs so an import error or a changed
  API fails the suite, not the next measurement. Its figures judge nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path


def _stop(signum, _frame) -> None:
    raise SystemExit(128 + signum)


def start() -> None:
    sys.stdout.reconfigure(line_buffering=True)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)


def load() -> str:
    """``load 3.2/2 CPUs``: the 1-minute load average now."""
    with open("/proc/loadavg") as f:
        return f"load {float(f.read().split()[0]):.1f}/{os.cpu_count()} CPUs"


def load_value() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def alternate(sides: list, reps: int) -> Iterator[tuple[int, object]]:
    """(repetition, side) in the order A B, B A, A B, ... (every side once per repetition)."""
    for rep in range(reps):
        order = sides if rep % 2 == 0 else sides[::-1]
        for side in order:
            yield rep, side


def build_c(source: str, workdir: Path, name: str) -> Path:
    """The program ``name`` compiled -O2 in ``workdir`` from the C ``source`` text; its path."""
    source_path = workdir / f"{name}.c"
    source_path.write_text(source)
    binary = workdir / name
    subprocess.run(["cc", "-O2", "-o", str(binary), str(source_path)], check=True)
    return binary


def add_smoke(parser: argparse.ArgumentParser, sizes: str) -> None:
    parser.add_argument("--smoke", action="store_true",
                        help=f"seconds, tiny sizes ({sizes}): the same code path, run by the test "
                             "suite so a broken import or API fails there; its figures judge nothing")


def smoke(args: argparse.Namespace, **tiny: object) -> None:
    """With ``--smoke``, the tiny sizes ``tiny`` (argument name -> value) replace the given ones,
    and one line says so with the load."""
    if not args.smoke:
        return
    for name, value in tiny.items():
        setattr(args, name, value)
    print(f"smoke: {', '.join(f'{k}={v}' for k, v in tiny.items())}; {load()}; figures judge nothing")


def skipped(part: str, why: str) -> None:
    """The one line a script prints when its reference part cannot run here."""
    print(f"{part}: skipped, {why}")
