"""The hygiene ladder (Cao et al., FAST'17, Sec. 4): how each preparation step narrows the
run-to-run variation of one configuration. ``fsscope bench --ladder``.

Steps, cumulative, each R runs of the personality on a RAM image of the recipe's file system:

  baseline  mkfs as the recipe says (ext4: lazy inode-table/journal init), populate, sync,
            drop caches, measure.
  no_lazy   + ext4 inode tables and journal written at mkfs (-E lazy_itable_init=0,
            lazy_journal_init=0): no ext4lazyinit thread writes behind the measurement.
  umount    + unmount and mount again after populating (cold cache, clean journal).
  alloc     + the dataset populated ONCE (on a no_lazy fs, then unmounted) and kept as an
            image; every run restores those exact bytes (``image.copy_image``, as
            ``--from-snapshot`` does) -- no re-population, so runs differ only in what the
            workload does.

Each run records ``image_sha256`` -- the image's checksum when the measured run starts (the
fs synced; for umount/alloc it is unmounted at that moment, so the bytes are settled) --,
the mkfs command actually run and the superblock's mount count (ext4), so a test can see
each step change what it claims. Every image, loop and mount is journalled (owner: the job).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fsscope import tools
from fsscope.analysis import variation as V
from fsscope.engine.specs import checked_fields, with_tuples
from fsscope.errors import FsscopeError
from fsscope.jsonsafe import plain
from fsscope.recipes import Recipe
from fsscope.study import diskstate
from fsscope.targets import filesystem, image
from fsscope.targets.journal import Journal, undo_group
from fsscope.workloads import personalities as P

STEPS = ("baseline", "no_lazy", "umount", "alloc")
BIN_S = 1.0


@dataclass(frozen=True)
class Spec:
    personality: str = "fileserver"
    runs: int = 3
    duration_s: float = 10.0
    nfiles: int | None = None
    workers: int | None = None
    image_size_bytes: int = 1 << 30
    seed: int = 1
    steps: tuple[str, ...] = STEPS

    def __post_init__(self) -> None:
        if self.personality not in P.PERSONALITIES:
            raise FsscopeError(f"ladder: unknown personality {self.personality!r}")
        bad = [s for s in self.steps if s not in STEPS]
        if bad:
            raise FsscopeError(f"ladder: unknown step {bad[0]!r} (steps: {', '.join(STEPS)})")

    @classmethod
    def from_dict(cls, data: dict) -> Spec:
        return cls(**with_tuples(checked_fields(cls, data, "ladder"), ("steps",)))  # "a,b" splits

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"steps": list(self.steps)}


def sha256_file(path: Path, chunk: int = 4 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def mount_count(device: str) -> int | None:
    """ext4's superblock mount count (dumpe2fs -h); None elsewhere."""
    try:
        text = tools.run("dumpe2fs", "-h", device)
    except Exception:  # noqa: BLE001 - not ext*, or no e2fsprogs: the fact is just absent
        return None
    for line in text.splitlines():
        if line.startswith("Mount count:"):
            return int(line.split(":", 1)[1])
    return None


def step_recipe(recipe: Recipe, step: str) -> Recipe:
    """The recipe of a step: the hygiene up to and including it, nothing more."""
    rank = STEPS.index(step)
    return recipe.with_prep(no_lazy_init=recipe.fs == "ext4" and rank >= 1, remount_after_populate=rank >= 2,
                            drop_caches=True, null_hash_seed=False)


class _Commands:
    """The external commands run while it is active (the mkfs argv is the evidence)."""

    def __init__(self):
        self.argv: list[tuple[str, ...]] = []

    def __enter__(self):
        tools.listeners.append(self._add)
        return self

    def __exit__(self, *exc):
        tools.listeners.remove(self._add)

    def _add(self, rec) -> None:
        self.argv.append(rec.argv)

    def mkfs(self) -> list[str]:
        return next((list(a) for a in self.argv if a and a[0].startswith("mkfs")), [])


@contextmanager
def _image(journal: Journal, group: str, size_bytes: int, source: Path | None = None):
    img = diskstate.ram_dir() / f"fsscope-ladder-{group}.img"
    journal.record("image", group, path=str(img))
    if source is None:
        image.create_image(img, size_bytes)
    else:
        image.copy_image(source, img)
    yield img


def _device_of(journal: Journal, group: str) -> str:
    return next(e.fields["source"] for e in journal.entries(group=group) if e.kind == "mount")


def populate_snapshot(recipe: Recipe, pspec: P.PersonalitySpec, size_bytes: int, dest: Path, seed: int) -> dict:
    """The alloc step's dataset image: mkfs (no_lazy), populate once, unmount; kept at ``dest``."""
    journal, group = Journal(), "ladder-" + uuid.uuid4().hex[:10]
    try:
        with _image(journal, group, size_bytes) as img:
            with diskstate.mounted_image(img, recipe, journal, group, make_fs=True) as mnt:
                populated = P.populate(mnt, pspec, seed=seed, evict_cache=True)
                os.sync()
            os.replace(img, dest)
    finally:
        undo_group(journal, group)
    return {"files": populated.files, "bytes_written": populated.bytes_written}


def one_run(step: str, recipe: Recipe, pspec: P.PersonalitySpec, size_bytes: int, seed: int,
            snapshot: Path | None, cancelled) -> dict:
    journal, group = Journal(), "ladder-" + uuid.uuid4().hex[:10]
    facts: dict = {"step": step}
    try:
        with _Commands() as cmds, _image(journal, group, size_bytes, snapshot if step == "alloc" else None) as img:
            if step == "alloc":
                facts["image_sha256"] = sha256_file(img)  # the restored bytes, before any mount
            with diskstate.mounted_image(img, recipe, journal, group, make_fs=step != "alloc") as mnt:
                dev = _device_of(journal, group)
                if step != "alloc":
                    P.populate(mnt, pspec, seed=seed, evict_cache=True)
                if recipe.prep.remount_after_populate and step != "alloc":
                    filesystem.umount(str(mnt))
                    facts["image_sha256"] = sha256_file(img)
                    filesystem.mount(recipe, dev, str(mnt))
                elif step != "alloc":
                    os.sync()
                    facts["image_sha256"] = sha256_file(img)
                filesystem.drop_caches()
                facts["mount_count"] = mount_count(dev) if recipe.fs == "ext4" else None
                facts["mkfs_argv"] = cmds.mkfs()
                result = P.run(mnt, pspec, cancelled=cancelled)
    finally:
        undo_group(journal, group)
    return facts | {"ops_per_s": result.ops_per_s, "elapsed_s": result.elapsed_s,
                    "counts_per_bin": result.counts.sum(axis=0).tolist(), "cancelled": result.cancelled}


def run(ctx, spec: Spec) -> dict:
    recipe = ctx.recipe
    if recipe is None or recipe.fs in ("tmpfs",):
        raise FsscopeError("--ladder needs a file-system recipe fsscope formats (e.g. --recipe ext4-default)")
    overrides = {"duration_s": float(spec.duration_s), "seed": spec.seed, "bin_s": BIN_S,
                 "latency_window_s": float(min(spec.duration_s, 10))}
    overrides |= {k: getattr(spec, k) for k in ("nfiles", "workers") if getattr(spec, k)}
    pspec = P.default_spec(spec.personality, capacity_bytes=spec.image_size_bytes, **overrides)
    journal, keep = Journal(), "ladder-snap-" + uuid.uuid4().hex[:8]
    snapshot = diskstate.ram_dir() / f"fsscope-{keep}.img"
    journal.record("image", keep, path=str(snapshot))  # the kept dataset image goes with the job
    ladder, total, done = [], len(spec.steps) * spec.runs, 0
    t0 = time.monotonic()
    try:
        for step in spec.steps:
            r_recipe = step_recipe(recipe, step)
            if step == "alloc":
                ctx.phase("alloc: populating the dataset once")
                populate_snapshot(r_recipe, pspec, spec.image_size_bytes, snapshot, spec.seed)
            runs = []
            for r in range(spec.runs):
                if ctx.cancelled:
                    break
                ctx.phase(f"{step}: run {r + 1} of {spec.runs}")
                runs.append(one_run(step, r_recipe, pspec, spec.image_size_bytes, spec.seed,
                                    snapshot, lambda: ctx.cancelled))
                done += 1
                ctx.progress(done, total, unit="runs", info=f"{step} {runs[-1]['ops_per_s']:,.0f} ops/s",
                             step=step, ops_per_s=runs[-1]["ops_per_s"])  # the TUI's ladder view reads them
            ops = [x["ops_per_s"] for x in runs if not x["cancelled"]]
            ladder.append({"step": step, "relative_range": V.relative_range(ops) if ops else None,
                           "rsd": V.rsd(ops) if len(ops) > 1 else None,
                           "mean_ops_per_s": sum(ops) / len(ops) if ops else None, "runs": runs})
            if ctx.cancelled:
                break
    finally:
        undo_group(journal, keep)
    rrs = [s["relative_range"] for s in ladder if s["relative_range"] is not None]
    return plain({"ladder": ladder, "personality": spec.personality, "recipe": recipe.name, "fs": recipe.fs,
                  "spec": spec.to_dict(), "workload": dataclasses.asdict(pspec),
                  "monotone": all(b <= a for a, b in zip(rrs, rrs[1:])),
                  "elapsed_s": round(time.monotonic() - t0, 2)})
