"""Mingardi & Vieira, "Characterizing Synchronous Writes in Stable Memory Devices".

The paper writes a NEW 16 MB file sequentially with synchronous writes (iozone -I -o: O_DIRECT
+ O_SYNC) for buffers of 4 KB..16 MB, 30 repetitions, on an HDD, an SSD and an SD card with
XFS, ext4, btrfs (and F2FS). Its headline findings:

- three phases as the buffer grows: throughput first grows with latency flat, then both grow,
  then throughput saturates while latency grows. The two transitions are at different sizes:
  latency picks up first (XFS on the HDD: latency at 512 KB-1 MB, throughput levels off at
  4-8 MB).
- XFS leads ext4 for small buffers (SSD, 128 KB: 50,127 vs 45,675 kB/s, t(30) = 13.8,
  p < 0.001).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fsscope import recipes
from fsscope.analysis.variation.stats import welch
from fsscope.replicate.base import Finding, JobResult, private_image, run_engine_job
from fsscope.targets import TargetSpec

NAME = "mingardi"
TITLE = "Mingardi & Vieira: synchronous writes, buffer size vs throughput and latency (XFS, ext4)"
PAPER = "Mingardi, Vieira: Characterizing Synchronous Writes in Stable Memory Devices (UFSCar)"
SETUP = [
    "paper: iozone -I -o (O_DIRECT + O_SYNC), a new 16 MB file per point written sequentially, "
    "buffers 4 KB..16 MB, 30 repetitions; HDD, SSD, SD card; XFS, ext4, btrfs, F2FS",
    "here: fsscope syncwrite --mode direct+osync --no-preallocate (a new file, as iozone wrote), "
    "16 MiB per point, 4 KiB..16 MiB doubling, sizes visited in a seeded random order; 5 "
    "repetitions (--quick) or the paper's 30; XFS and ext4 with today's mkfs defaults on a sparse "
    "image on this machine's virtual disk (a loop device: its cache and the host's disk stand in "
    "for the paper's devices, so absolute numbers differ; the shapes are what is compared)",
]

SIZES_BYTES = tuple(4096 << k for k in range(13))  # 4 KiB .. 16 MiB
SMALL_BUFFER_BYTES = 128 * 1024
ALPHA = 0.01


@dataclass(frozen=True)
class SyncRun:
    key: str
    recipe: str
    repeats: int
    size_bytes: int = 1 << 30

    def describe(self) -> str:
        return (f"{self.recipe}, direct+osync, a new 16 MiB file per point, 4 KiB..16 MiB, {self.repeats} "
                f"repetitions, disk image")

    def cost_s(self) -> float:
        return 30.0 + self.repeats * 25.0

    def execute(self, *, progress: Callable[[str], None] = lambda line: None):
        spec = {"buffer_sizes_bytes": list(SIZES_BYTES), "file_size_bytes": 16 << 20, "mode": "direct+osync",
                "repeats": self.repeats, "preallocate": False}
        with private_image(self.key) as image:
            run_dir = run_engine_job(self, "syncwrite", spec, TargetSpec("image", str(image), self.size_bytes),
                                     recipes.load(self.recipe), progress=progress)
        return SyncResult.of(self, run_dir)


@dataclass
class SyncResult(JobResult):
    run: SyncRun


def runs(quick: bool) -> list[SyncRun]:
    repeats = 5 if quick else 30
    return [SyncRun("xfs", "xfs-default", repeats), SyncRun("ext4", "ext4-default", repeats)]


NEEDS = {"xfs-latency-rises-before-throughput-saturates": ("xfs",),
         "ext4-latency-rises-before-throughput-saturates": ("ext4",),
         "xfs-ahead-of-ext4-small-buffers": ("xfs", "ext4")}

#: What a student takes from this scenario, in plain words.
LESSON = (
    "With synchronous writes every write waits for the device. Bigger buffers amortise that "
    "wait, so throughput grows -- until the device is busy all the time. Latency starts to grow "
    "before throughput stops growing, so the buffer size that looks best for throughput may "
    "already cost latency. And file systems differ most where the per-write overhead matters: "
    "small buffers."
)

#: finding id -> (what the paper saw, why, in plain words)
CLAIMS = {
    "xfs-latency-rises-before-throughput-saturates": (
        "XFS: latency starts rising at a smaller buffer than the one where throughput levels off.",
        "Once a write takes longer than the fixed per-write cost, each byte more adds latency, "
        "while throughput still gains until the device is saturated."),
    "ext4-latency-rises-before-throughput-saturates": (
        "ext4: the same two transitions, latency first.",
        "The same arithmetic: fixed per-write cost versus the device's bandwidth."),
    "xfs-ahead-of-ext4-small-buffers": (
        "For small buffers (128 KiB) XFS writes faster than ext4 (50,127 vs 45,675 kB/s).",
        "With small writes the file system's own work per synchronous write (journal, metadata) "
        "weighs most, and XFS's is lighter."),
}


def judge(results: dict, quick: bool) -> list[Finding]:
    out = [_knees(f"{key}-latency-rises-before-throughput-saturates", results[key])
           for key in ("xfs", "ext4") if key in results]
    if "xfs" in results and "ext4" in results:
        out.append(_small_buffers(results["xfs"], results["ext4"]))
    return out


def _kib(n) -> str:
    return "?" if n is None else (f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 1024} KiB")


def _knees(finding_id: str, result: SyncResult) -> Finding:
    """Agree when the latency knee's bootstrap range ends below the throughput knee's range
    (latency rises at a smaller buffer, as in the paper); disagree when the ranges are apart
    the other way round; inconclusive when they overlap or a knee is missing."""
    knees = result.report.get("knees") or {}
    lat, tput = knees.get("latency_rise") or {}, knees.get("throughput_saturation") or {}
    paper = {"latency_rise": "512 KB-1 MB", "throughput_saturation": "4-8 MB", "fs": "XFS on the HDD"}
    expected = "latency rises at a smaller buffer than throughput saturates"
    measured = {"latency_rise_bytes": lat.get("buffer_bytes"), "throughput_saturation_bytes": tput.get("buffer_bytes")}
    statistic = {"latency_range_bytes": [lat.get("low_bytes"), lat.get("high_bytes")],
                 "throughput_range_bytes": [tput.get("low_bytes"), tput.get("high_bytes")],
                 "latency_agreement": lat.get("agreement"), "throughput_agreement": tput.get("agreement")}
    setup = result.run.describe()
    if None in (lat.get("high_bytes"), lat.get("low_bytes"), tput.get("low_bytes"), tput.get("high_bytes")):
        return Finding(finding_id, paper, expected, measured, "inconclusive",
                       "a knee was not found (no bootstrap range for it)", statistic, setup)
    text = (f"latency rises at {_kib(lat['buffer_bytes'])} (95 % of bootstrap resamples in "
            f"{_kib(lat['low_bytes'])}–{_kib(lat['high_bytes'])}), throughput saturates at "
            f"{_kib(tput['buffer_bytes'])} ({_kib(tput['low_bytes'])}–{_kib(tput['high_bytes'])})")
    if lat["high_bytes"] < tput["low_bytes"]:
        return Finding(finding_id, paper, expected, measured, "agree",
                       f"{text}: the ranges do not overlap, latency first", statistic, setup)
    if tput["high_bytes"] < lat["low_bytes"]:
        return Finding(finding_id, paper, expected, measured, "disagree",
                       f"{text}: throughput saturates first, the ranges apart", statistic, setup)
    return Finding(finding_id, paper, expected, measured, "inconclusive",
                   f"{text}: the bootstrap ranges overlap; more repetitions (the paper's 30) would decide",
                   statistic, setup)


def _throughputs(result: SyncResult, buffer_bytes: int) -> list[float]:
    sizes = (result.report.get("sizes") or [])
    point = next((s for s in sizes if s.get("buffer_bytes") == buffer_bytes), None)
    return list(point.get("throughput_runs") or []) if point else []


def _small_buffers(xfs: SyncResult, ext4: SyncResult) -> Finding:
    """Welch's t-test on throughput at 128 KiB: agree when XFS is significantly ahead,
    disagree when ext4 is, inconclusive otherwise."""
    a, b = _throughputs(xfs, SMALL_BUFFER_BYTES), _throughputs(ext4, SMALL_BUFFER_BYTES)
    test = welch(a, b, alpha=ALPHA, labels=("xfs", "ext4"))
    paper = {"xfs_kB_s": 50127, "ext4_kB_s": 45675, "t": 13.8, "df": 30, "device": "SSD"}
    expected = "XFS ahead of ext4 at 128 KiB"
    measured = {"xfs_bytes_s": round(test.mean_a) if a else None, "ext4_bytes_s": round(test.mean_b) if b else None}
    statistic = {"t": test.t, "p": test.p, "df": test.df, "alpha": ALPHA, "runs": [len(a), len(b)]}
    setup = f"{xfs.run.describe()}; {ext4.run.describe()}"
    if test.winner == "xfs":
        verdict = "agree"
    elif test.winner == "ext4":
        verdict = "disagree"
    else:
        verdict = "inconclusive"
    return Finding("xfs-ahead-of-ext4-small-buffers", paper, expected, measured, verdict,
                   f"throughput at 128 KiB: {test.note}", statistic, setup)
