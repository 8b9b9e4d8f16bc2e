"""The whole audit: every reader, one sample of a few seconds for the counters that need a
before and after (other I/O, swapping, thermal throttling), findings ranked.

The external tools the readers need (``dumpe2fs`` for lazy init, the free-space histogram)
run here, so the readers themselves stay pure.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from fsscope import tools
from fsscope.check import system as S
from fsscope.check import target as T
from fsscope.check.findings import Finding, rank
from fsscope.check.system import REAL_ROOT, Root
from fsscope.check.target import TargetInfo
from fsscope.errors import FsscopeError
from fsscope.layout import freespace
from fsscope.trace.writers import BlockSubmitters, Submitted

#: Machine-wide items cheap enough for a one-line warning when ``bench`` starts (no sampling).
FAST_IDS = ("cpu-governor", "turbo", "load", "dirty-pending", "swap", "thp", "thermal", "cgroup-io-limit")


def fast_audit(root: Root = REAL_ROOT) -> list[Finding]:
    """The machine-wide items that need no target and no waiting (milliseconds)."""
    return [S.cpu_governor(root), S.turbo(root), S.load(root), S.dirty_pending(root), S.swap(root),
            S.thp(root), S.thermal(root), S.cgroup_io_limit(root, None)]


def _dumpe2fs(t: TargetInfo) -> tuple[str | None, str]:
    t = t.data  # overlay: the file system under its upper directory
    if t.fs != "ext4":
        return None, ""
    if not t.source.startswith("/dev/"):
        return None, f"mount source {t.source} is not a device node"
    try:
        return tools.run("dumpe2fs", t.source), ""
    except FsscopeError as exc:
        return None, _last_line(exc)


def _last_line(exc: Exception) -> str:
    """A tool's error in one line: its last line says why (the first is often a version banner)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:200]


def _free_space(t: TargetInfo) -> tuple[freespace.FreeSpaceHistogram | None, str]:
    """The target's free-space histogram: with the file system's tools on the device (after
    a sync), else live through the mounted file system (GETFSMAP: no device open, as scan
    reads it) -- a device the kernel will not open still has its free space read."""
    t = t.data  # overlay: the file system under its upper directory
    if t.fs in ("tmpfs", "ramfs"):
        return None, ""
    reasons = []
    device = t.source if t.source.startswith("/dev/") else None
    try:
        return freespace.free_space(t.fs, device=device, mountpoint=t.mountpoint), ""
    except (FsscopeError, OSError) as exc:
        reasons.append(f"{t.fs} tools: {_last_line(exc)}")
    try:
        return freespace.free_space_live(t.fs, t.mountpoint), ""
    except (FsscopeError, OSError) as exc:
        reasons.append(f"live: {_last_line(exc)}")
    return None, "; ".join(reasons)


class _Traced:
    """The block layer's submitters to the target's device over the sample (short-lived
    processes too); a trace that fails to start or stop costs only its names."""

    def __init__(self, tracer: BlockSubmitters):
        self.tracer: BlockSubmitters | None = tracer

    def stop(self, failed: bool = False) -> Submitted | None:
        tracer, self.tracer = self.tracer, None
        if tracer is None:
            return None
        try:
            tracer.__exit__(RuntimeError if failed else None, None, None)
        except (FsscopeError, OSError):
            return None
        return tracer.result


def _block_submitters(root: Root, t: TargetInfo, own: frozenset[int]) -> _Traced | None:
    """Trace who submits I/O to the target's device during the sample: the real machine, root,
    tracefs and a device node only (a made-up root has no kernel to ask)."""
    if root != REAL_ROOT or not t.block or not os.path.exists(f"/dev/{t.block}") or BlockSubmitters.unavailable():
        return None
    tracer = BlockSubmitters(f"/dev/{t.block}", set(own))
    try:
        tracer.__enter__()
    except (FsscopeError, OSError):
        return None
    return _Traced(tracer)


def run_audit(t: TargetInfo, *, root: Root = REAL_ROOT, sample_s: float = 3.0, dataset_bytes: int | None = None,
              own_pids: frozenset[int] | None = None,
              progress: Callable[[str], None] | None = None) -> list[Finding]:
    """Every audit item for the target ``t``, ranked (bad first, then by expected effect).

    The first and last counter snapshots are ``sample_s`` apart; the other readers (and the
    tools) run in between, so nothing this process does lands on the target meanwhile."""
    own = own_pids if own_pids is not None else frozenset({os.getpid(), os.getppid()})
    say = progress or (lambda _: None)
    # say it now: an event written during the sample would be I/O of our own on the device
    say(f"watching the device for {sample_s:g} s while reading the machine and the target")
    block = _block_submitters(root, t, own)
    try:
        before = T.snapshot(root, t.disks)
        findings = [S.cpu_governor(root), S.turbo(root), S.load(root), S.dirty_settings(root), S.dirty_pending(root),
                    S.thp(root), S.page_cache_fit(root, dataset_bytes), S.cgroup_io_limit(root, t.devno),
                    S.periodic_jobs(root)]
        findings += [T.io_scheduler(root, t), T.read_ahead(root, t), T.write_cache(root, t), T.rotational(root, t),
                     T.discard(t), T.atime(t), T.loop_direct_io(root, t)]
        try:
            vfs = os.statvfs(t.data.mountpoint)
        except OSError:
            vfs = None
        findings.append(T.fullness(t, vfs))
        remaining = sample_s - (time.monotonic() - before.t_s)
        if remaining > 0:
            time.sleep(remaining)
        after = T.snapshot(root, t.disks)
        submitted = block.stop() if block is not None else None
    finally:
        if block is not None:  # the sample failed: the trace instance goes anyway
            block.stop(failed=True)
    text, why = _dumpe2fs(t)  # reads the device: only after the sample
    findings += [T.other_io(root, t, before, after, own, submitted=submitted),
                 S.swap(root, before.vm, after.t_s - before.t_s),
                 S.thermal(root, before.throttle),
                 T.ext4_lazy_init(root, t.data, text, why, before.lazyinit + after.lazyinit)]
    say("free-space fragmentation")
    hist, why = _free_space(t)  # after the sample: it syncs the file system
    findings.append(T.free_space_fragmentation(t, hist, why))
    return sorted(findings, key=rank)
