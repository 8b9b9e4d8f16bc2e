"""One audit finding, and the order in which findings matter."""

from __future__ import annotations

from typing import Any

from fsscope.records import Record

SEVERITIES = ("ok", "warn", "bad", "unknown")

# Expected effect on a storage benchmark, largest first: how "caution" ranks what to fix.
# (Another writer on the device or swapping can move throughput by integer factors; a cached
# dataset measures RAM; lazy init and pending dirty data add device writes the benchmark did
# not ask for; CPU-side items matter less for I/O-bound work.)
EFFECT_RANK = ("other-io", "swap", "page-cache-fit", "cgroup-io-limit", "ext4-lazy-init", "dirty-pending",
               "loop-direct-io", "load", "fullness", "free-space-fragmentation", "discard", "thermal",
               "periodic-jobs", "cpu-governor", "io-scheduler", "thp", "turbo", "dirty-settings",
               "read-ahead", "atime", "write-cache", "rotational")

# Bad findings that make a benchmark on this machine meaningless until fixed. (Lazy init is
# bad but not here: it ends by itself and a recipe option avoids it — "caution" says how.)
BLOCKING = frozenset({"other-io", "swap", "cgroup-io-limit"})


class Finding(Record, frozen=True, kw_only=False):
    """One audit item: the check's own events and its report list these (the readers make
    them positionally, tests and the report by keyword)."""

    id: str                     # stable kebab-case name (EFFECT_RANK lists them)
    severity: str               # ok | warn | bad | unknown
    title: str = ""
    evidence: str = ""          # the paths and values read ("path = value; ...")
    effect: str = ""            # what it does to results
    fix: str = ""               # the command that fixes it ("" when nothing to do)
    values: dict[str, Any] = {}

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding {self.id}: severity {self.severity!r} not in {SEVERITIES}")


def unknown(id: str, title: str, why: str, effect: str, fix: str = "") -> Finding:
    """An item that could not be read: say so and why (never 'ok')."""
    return Finding(id, "unknown", f"{title}: cannot tell", why, effect, fix)


def rank(finding: Finding) -> tuple[int, int]:
    """Sort key: bad before warn, then by expected effect."""
    order = {"bad": 0, "warn": 1, "unknown": 2, "ok": 3}[finding.severity]
    pos = EFFECT_RANK.index(finding.id) if finding.id in EFFECT_RANK else len(EFFECT_RANK)
    return order, pos
