"""Kadekodi, Nagarajan, Gibson: "Aging Gracefully with Geriatrix" (CMU-PDL-17-106).

The paper ages a fresh 20 GB ext4 partition with Geriatrix (the Dabre profile: a one-year-old
20 GB ext4 at ~80 % capacity; ~90 minutes) and measures the layout against a freshly made
one (section 5, figures 2 and 3):

- free space: fresh ext4's free extents are mostly 1-2 GB; the aged image's range from 4 KB to
  100 MB and none is GB-sized -- the largest free extent drops by an order of magnitude or more.
- a 2 GB file copied to the aged image splits into 763 fragments (1,010 on the naturally aged
  one), "orders of magnitude" more than on the fresh file system.

The benchmark slowdowns (9-80 %) need the paper's HDD/SSD and hours of Filebench; they are
not replicated here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from fsscope import recipes
from fsscope.format import format_pct
from fsscope.layout.summary import summary_rows
from fsscope.replicate.base import Finding, JobResult, run_engine_job
from fsscope.targets import TargetSpec

NAME = "geriatrix"
TITLE = "Geriatrix: aging breaks up free space and fragments a new file (ext4)"
PAPER = "Kadekodi, Nagarajan, Gibson: Aging Gracefully with Geriatrix (CMU-PDL-17-106, 2017)"
SETUP = [
    "paper: a 20 GB ext4 partition aged with the Dabre profile to ~80 % capacity (~90 min), "
    "e2freefrag for free space, filefrag of a 2 GB file copied in; HDD and SSD",
    "here: fsscope age (Geriatrix's method) of a RAM image with ext4-default and the shipped "
    "'small' profile to 80 % fullness, bounded in time (--quick: 512 MiB for 3 min; full: 2 GiB "
    "for 30 min); free space from fsscope's histogram, the test file's fragments by FIEMAP; "
    "today's kernel and mke2fs defaults with -i 4096 (the profile's small files exhaust a default "
    "ext4's inodes before its blocks). A smaller image and a shorter aging than the paper's: "
    "the scale of the extents differs, so the findings compare fresh with aged, as the paper does",
]

#: verdict thresholds: "orders of magnitude" is at least one (10x); at most 2x is no effect
ORDER_OF_MAGNITUDE = 10.0
NO_EFFECT = 2.0


@dataclass(frozen=True)
class AgeRun:
    key: str
    size_bytes: int
    max_seconds: float
    fullness: float = 0.8
    profile: str = "small"
    recipe: str = "ext4-default"
    #: one inode per 4 KiB: the profile's small files run a default ext4 out of inodes first
    mkfs_opts: str = "-i 4096"

    def describe(self) -> str:
        return (f"{self.recipe} {self.mkfs_opts}, RAM image of {self.size_bytes // 2**20} MiB aged with profile "
                f"'{self.profile}' to {self.fullness:.0%} for at most {self.max_seconds / 60:.0f} min")

    def unbounded_command(self) -> str:
        """The same aging with no time bound: what decides where this one stopped at its bound
        (on a busy machine the self-test's row reaches 80 % power only so)."""
        return (f"fsscope age --ram --size {self.size_bytes // 2**20}M --recipe {self.recipe} "
                f"--mkfs-opts \"{self.mkfs_opts}\" --profile {self.profile} --fullness {self.fullness:g} "
                f"(no --max-minutes: it stops at its plan's end)")

    def cost_s(self) -> float:
        return self.max_seconds + 60

    def execute(self, *, progress: Callable[[str], None] = lambda line: None):
        spec = {"profile": self.profile, "fullness": self.fullness, "max_seconds": self.max_seconds,
                "snapshot_path": "", "layout": True}
        recipe = recipes.load(self.recipe).with_extra(self.mkfs_opts, "")
        run_dir = run_engine_job(self, "age", spec, TargetSpec("ram", size_bytes=self.size_bytes), recipe, progress=progress)
        return AgeResult.of(self, run_dir)


@dataclass
class AgeResult(JobResult):
    run: AgeRun


def runs(quick: bool) -> list[AgeRun]:
    return [AgeRun("ext4-aged", 512 * 2**20, 180.0) if quick else AgeRun("ext4-aged", 2 * 2**30, 1800.0)]


NEEDS = {"free-space-fragmented": ("ext4-aged",), "new-file-fragmented": ("ext4-aged",)}

#: What a student takes from this scenario, in plain words.
LESSON = (
    "A freshly made file system is an unrealistically tidy one: its free space is a few huge "
    "extents. Months of creating and deleting files break the free space into small pieces, and "
    "a new file written then has to be split across many of them. Geriatrix ages a file system "
    "quickly to a realistic state, so benchmarks measure what users actually have."
)

#: finding id -> (what the paper saw, why, in plain words)
CLAIMS = {
    "free-space-fragmented": (
        "After aging, ext4's largest free extent is an order of magnitude (or more) smaller.",
        "Deleting files scattered across the disk leaves holes between the survivors."),
    "new-file-fragmented": (
        "A file copied onto the aged file system splits into hundreds of fragments.",
        "With only small free extents left, the allocator must piece the new file together."),
}


def judge(results: dict, quick: bool) -> list[Finding]:
    result = results.get("ext4-aged")
    if result is None:
        return []
    fresh, aged = summary_rows(result.report.get("fresh")), summary_rows(result.report.get("aged"))
    setup = result.run.describe() + f"; reached {format_pct(aged['fullness'], '?', 0)} full"
    return judge_aged(fresh, aged, _unfinished(result.report), setup,
                      decides=f"age to its plan's end with no time bound: {result.run.unbounded_command()}")


#: what decides an aging stopped short, where the scenario's own command is not at hand
AGE_TO_THE_END = "age to its plan's end with no time bound (fsscope age without --max-minutes)"


def judge_aged(fresh: dict, aged: dict, unfinished: str, setup: str = "", decides: str = AGE_TO_THE_END
               ) -> list[Finding]:
    """Both findings from the fresh and aged measurements' headline numbers
    (:func:`fsscope.layout.summary.summary_rows`) and why the aging is unfinished ("" when it
    is not): what the scenario and the self-test both call. ``decides``: the aging that would."""
    return [_short_of_aged(f, unfinished, decides)
            for f in (_free_space(fresh, aged, setup), _test_file(fresh, aged, setup))]


def _unfinished(report: dict) -> str:
    """Why the image is not yet aged as the paper's was ("" when it is): stopped by its time
    bound before the plan ended, or a profile distribution the fit rejects."""
    reasons = []
    if report.get("stop_reason") == "time":
        reasons.append("the aging stopped at its time bound")
    rejected = [f"{name} p = {fit['p_value']:.3f}" for name, fit in (report.get("fit") or {}).items()
                if isinstance(fit, dict) and fit.get("p_value") is not None and fit["p_value"] < 0.05]
    if rejected:
        reasons.append("the fit rejects the profile's " + ", ".join(rejected))
    return "; ".join(reasons)


def _short_of_aged(finding: Finding, unfinished: str, decides: str = AGE_TO_THE_END) -> Finding:
    """A verdict from an image that did not finish aging is not about the paper's state: any
    verdict becomes inconclusive (an agree as much as a disagree -- a fit the profile rejects
    means the image was aged to some other state), with what would decide it."""
    statistic = finding.statistic | {"aging_unfinished": unfinished or None}
    if unfinished and finding.verdict != "inconclusive":
        return msgspec.structs.replace(
            finding, verdict="inconclusive", statistic=statistic | {"verdict_before": finding.verdict},
            why=finding.why + f" — it would be {finding.verdict}, but {unfinished}, so this is not yet the paper's "
                              f"aged state: {decides}")
    return msgspec.structs.replace(finding, statistic=statistic)


def _free_space(fresh: dict, aged: dict, setup: str) -> Finding:
    paper = {"fresh_largest": "1-2 GB", "aged_largest": "~100 MB", "aged_smallest": "4 KB"}
    expected = f"largest free extent at least {ORDER_OF_MAGNITUDE:.0f}x smaller after aging"
    f_big, a_big = fresh["largest_free_extent_bytes"], aged["largest_free_extent_bytes"]
    f_n, a_n = fresh["free_extents"], aged["free_extents"]
    measured = {"fresh_largest_bytes": f_big, "aged_largest_bytes": a_big,
                "fresh_free_extents": f_n, "aged_free_extents": a_n}
    if not (f_big and a_big and f_n and a_n):
        return Finding("free-space-fragmented", paper, expected, measured, "inconclusive",
                       "the fresh or the aged free-space histogram is missing", setup=setup)
    shrink = f_big / a_big
    statistic = {"largest_shrink": round(shrink, 1), "extent_count_growth": round(a_n / f_n, 1)}
    why = (f"largest free extent {f_big / 2**20:.1f} MiB fresh → {a_big / 2**20:.2f} MiB aged "
           f"({shrink:.1f}x smaller); free extents {f_n} → {a_n}")
    if shrink >= ORDER_OF_MAGNITUDE:
        return Finding("free-space-fragmented", paper, expected, measured, "agree",
                       f"{why}: at least {ORDER_OF_MAGNITUDE:.0f}x, as the paper's 1-2 GB → ~100 MB",
                       statistic, setup)
    if shrink <= NO_EFFECT:
        return Finding("free-space-fragmented", paper, expected, measured, "disagree",
                       f"{why}: at most {NO_EFFECT:.0f}x — aging left large free extents", statistic, setup)
    return Finding("free-space-fragmented", paper, expected, measured, "inconclusive",
                   f"{why}: between {NO_EFFECT:.0f}x and {ORDER_OF_MAGNITUDE:.0f}x; a longer aging "
                   f"(the full scenario) would decide", statistic, setup)


def _test_file(fresh: dict, aged: dict, setup: str) -> Finding:
    paper = {"aged_fragments": 763, "file_bytes": 2 * 10**9, "fresh": "orders of magnitude fewer"}
    expected = f"at least {ORDER_OF_MAGNITUDE:.0f}x the fragments of the same file on the fresh file system"
    f_n, a_n = fresh["test_file_fragments"], aged["test_file_fragments"]
    measured = {"test_file_bytes": aged["test_file_bytes"], "fresh_fragments": f_n, "aged_fragments": a_n}
    if f_n is None or a_n is None:
        return Finding("new-file-fragmented", paper, expected, measured, "inconclusive",
                       "the test file was not measured on both sides", setup=setup)
    growth = a_n / max(f_n, 1)
    statistic = {"fragment_growth": round(growth, 1)}
    why = f"a {aged['test_file_bytes'] or 0:,}-byte file: {f_n} fragment(s) fresh, {a_n} aged ({growth:.0f}x)"
    if growth >= ORDER_OF_MAGNITUDE:
        return Finding("new-file-fragmented", paper, expected, measured, "agree", why, statistic, setup)
    if growth <= NO_EFFECT:
        return Finding("new-file-fragmented", paper, expected, measured, "disagree",
                       f"{why}: aging did not fragment a new file", statistic, setup)
    return Finding("new-file-fragmented", paper, expected, measured, "inconclusive",
                   f"{why}: more than {NO_EFFECT:.0f}x but under an order of magnitude", statistic, setup)
