"""The kernel events fsscope traces, per file system and job, and what each one means.

Every entry names a tracepoint (``system/event``, as under ``tracefs/events``), what it means
in a note's words, its kind (what attribution does with it), how it is filtered (``pid``: fired
by the measured process; ``dev``: on the target's device; ``bdi``: writeback of the target's
device; ``switch``: the measured process switched out or in; ``none``) and which of its
fields go into the compact event record (:mod:`fsscope.trace.decode`). Field names are the
kernel's (``events/SYS/EVENT/format``); an event this kernel does not have is reported as
missing and left out -- never guessed.

``structures`` names the :mod:`fsscope.explain.rules` structure an event is direct evidence
of, so the probe can set prediction, kernel and latency side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["structure", "alloc", "io", "journal", "writeback", "sched", "syscall", "cache"]
Scope = Literal["pid", "dev", "bdi", "switch", "none"]

#: Kinds that change an on-disk structure inside the call that fires them.
STRUCTURAL_KINDS = frozenset({"structure", "alloc"})


@dataclass(frozen=True)
class CatalogEvent:
    event: str  # "sys/name"
    kind: Kind
    scope: Scope
    meaning: str
    #: explain.rules structures this event is direct evidence of
    structures: tuple[str, ...] = ()
    #: record column -> kernel field ("rwbs" is parsed into flag bits)
    columns: dict[str, str] = field(default_factory=dict)

    #: fires for nothing but its structure (a format change), so an unpredicted one counts
    exclusive: bool = False
    #: record column -> kernel string field: the column holds its index in Decoded.texts
    texts: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.event.split("/", 1)[1]


def _xfs_dir(name: str, meaning: str, structure: str = "", exclusive: bool = True) -> CatalogEvent:
    return CatalogEvent(f"xfs/{name}", "structure", "pid", meaning,
                        (structure,) if structure else (), {"dev": "dev", "arg": "ino"}, exclusive)


def _jbd2(name: str, meaning: str) -> CatalogEvent:
    return CatalogEvent(f"jbd2/{name}", "journal", "dev", meaning,
                        columns={"dev": "dev", "arg": "transaction", "flags": "sync_commit"})


def _ext4_alloc(name: str, meaning: str, sector: str = "", size: str = "", flags: str = "",
                structures: tuple[str, ...] = ()) -> CatalogEvent:
    """An ext4 allocator event of the measured process: its inode, and the kernel fields of
    where (``sector``), how much (``size``: the bytes column) and how (``flags``)."""
    named = {"sector": sector, "bytes": size, "flags": flags}
    return CatalogEvent(f"ext4/{name}", "alloc", "pid", meaning, structures,
                        {"dev": "dev", "arg": "ino", **{k: v for k, v in named.items() if v}})


BLOCK = (
    CatalogEvent("block/block_rq_issue", "io", "dev",
                 "a block request was issued to the device (sector, bytes, FLUSH/FUA/SYNC flags)",
                 columns={"dev": "dev", "sector": "sector", "bytes": "bytes", "flags": "rwbs"}),
    CatalogEvent("block/block_rq_complete", "io", "dev",
                 "the device completed a block request",
                 columns={"dev": "dev", "sector": "sector", "bytes": "nr_sector", "flags": "rwbs",
                          "arg": "error"}),
)
SCHED = (
    CatalogEvent("sched/sched_switch", "sched", "switch",
                 "the measured process left the CPU (preempted, or blocked waiting) or came back",
                 columns={"arg": "next_pid", "flags": "prev_state", "sector": "prev_pid"}),
)
WRITEBACK = (
    CatalogEvent("writeback/writeback_start", "writeback", "bdi",
                 "the flusher started writing back dirty pages of the device",
                 columns={"dev": "sb_dev", "bytes": "nr_pages", "arg": "reason"}),
)
JBD2 = (
    _jbd2("jbd2_start_commit", "ext4's journal (jbd2) started committing a transaction"),
    _jbd2("jbd2_end_commit", "ext4's journal (jbd2) finished committing a transaction"),
)
XFS = (
    _xfs_dir("xfs_dir2_sf_to_block", "the XFS directory outgrew its inode: short form became "
             "one directory block", "xfs-dir-shortform-to-block"),
    _xfs_dir("xfs_dir2_block_to_leaf", "the XFS single-block directory became leaf format "
             "(data blocks + a separate hash leaf block)", "xfs-dir-block-to-leaf"),
    _xfs_dir("xfs_dir2_leaf_to_node", "the XFS leaf directory became node format (the hash "
             "leaf split under a da-btree node)", "xfs-dir-leaf-to-node"),
    _xfs_dir("xfs_dir2_block_to_sf", "the XFS directory block shrank back into the inode "
             "(short form)", "xfs-dir-block-to-shortform"),
    _xfs_dir("xfs_dir2_leaf_to_block", "the XFS leaf directory shrank back to one block"),
    _xfs_dir("xfs_dir2_node_to_leaf", "the XFS node directory shrank back to leaf format"),
    _xfs_dir("xfs_dir2_grow_inode", "the XFS directory got a new block (data, leaf or node)",
             "xfs-dir-new-data-block", exclusive=False),
    CatalogEvent("xfs/xfs_alloc_vextent_finish", "alloc", "pid",
                 "XFS allocated an extent (a new inode chunk, or blocks for a directory/file)",
                 ("xfs-inode-chunk-alloc",), {"dev": "dev", "sector": "agbno", "bytes": "len"}),
)
EXT4 = (
    _ext4_alloc("ext4_allocate_blocks", "ext4 allocated blocks for an inode (for creat: a new directory block)",
                "block", "len", structures=("ext4-dir-htree-conversion", "ext4-htree-first-leaf-split",
                                            "ext4-dir-new-linear-block")),
    _ext4_alloc("ext4_mballoc_alloc", "ext4's multiblock allocator searched the buddy bitmaps (goal vs result)",
                "result_start", "result_len", "cr"),
    _ext4_alloc("ext4_mballoc_prealloc", "ext4 served an allocation from a preallocation (inode or locality group)",
                "result_start", "result_len"),
    _ext4_alloc("ext4_mb_new_inode_pa", "ext4 made a per-inode preallocation (a large or growing file)",
                "pa_pstart", "pa_len"),
    _ext4_alloc("ext4_mb_new_group_pa", "ext4 made a locality-group preallocation (small files share it per CPU)",
                "pa_pstart", "pa_len"),
    _ext4_alloc("ext4_discard_preallocations", "ext4 dropped an inode's unused preallocation", size="len"),
    CatalogEvent("ext4/ext4_mballoc_discard", "alloc", "dev",
                 "ext4 discarded (TRIMmed) freed blocks",
                 columns={"dev": "dev", "sector": "result_start", "bytes": "result_len"}),
)
BTRFS = (
    CatalogEvent("btrfs/btrfs_cow_block", "structure", "pid",
                 "btrfs copied a tree block on write (copy-on-write of a B-tree node/leaf)",
                 columns={"arg": "root_objectid", "sector": "cow_start", "flags": "cow_level"}),
    CatalogEvent("btrfs/btrfs_reserve_extent", "alloc", "pid",
                 "btrfs reserved an extent (data or metadata) in a block group",
                 columns={"sector": "start", "bytes": "len", "arg": "bg_objectid"}),
    CatalogEvent("btrfs/btrfs_chunk_alloc", "alloc", "none",
                 "btrfs allocated a new chunk (block group) (machine-wide: the event names no device)",
                 columns={"sector": "offset", "bytes": "size"}),
    CatalogEvent("btrfs/btrfs_transaction_commit", "journal", "none",
                 "btrfs committed a transaction, its counterpart of a journal commit (machine-wide: "
                 "the event names no device)",
                 columns={"arg": "generation"}),
)

#: In-memory structures (``explain.slab``): a slab cache handing out an object, and pages taken
#: for a new slab (what the kernel took them for is the next object handed out in the call).
SLAB = (
    CatalogEvent("kmem/kmem_cache_alloc", "cache", "pid",
                 "the kernel took an object from a slab cache (the cache's name)", texts={"arg": "name"}),
    CatalogEvent("kmem/mm_page_alloc", "cache", "pid",
                 "the kernel allocated 2^order pages (inside a slab allocation: a new slab)",
                 columns={"bytes": "order"}),
)
SLAB_NAMES = tuple(e.name for e in SLAB)

BY_FS: dict[str, tuple[CatalogEvent, ...]] = {
    "xfs": XFS, "ext4": EXT4 + JBD2, "ext3": EXT4 + JBD2, "ext2": EXT4, "btrfs": BTRFS,
}


def events_for(fs: str, job: str = "probe") -> tuple[CatalogEvent, ...]:
    """What to trace for ``job`` on file system ``fs``: for the probe its own events, the block
    layer and the measured process's scheduling; for throughput jobs (many processes, long
    runs) its journal commits, the block layer and writeback."""
    own = BY_FS.get(fs, ())
    if job == "probe":
        return own + BLOCK + SCHED + SLAB
    return tuple(e for e in own if e.kind == "journal") + BLOCK + WRITEBACK


def lookup(event: str) -> CatalogEvent | None:
    """The catalog entry of ``sys/name`` or bare ``name``."""
    for group in (*BY_FS.values(), BLOCK, SCHED, WRITEBACK, JBD2, SLAB):
        for entry in group:
            if event in (entry.event, entry.name):
                return entry
    return None
