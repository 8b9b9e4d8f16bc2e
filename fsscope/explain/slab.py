"""In-memory structures: the kernel's slab caches, as ``/proc/slabinfo`` gives them at the run.

A create takes objects from slab caches (a ``dentry``; the file system's inode:
``shmem_inode_cache`` on tmpfs, ``xfs_inode``, ``ext4_inode_cache``, ``btrfs_inode``). A slab is
``pages_per_slab`` pages holding ``objects_per_slab`` objects; when the current slab is full
the allocator takes pages for a new one, inside the call that needed the object. So creates
slow every ``objects_per_slab`` calls (tmpfs: 21 dentries of 192 B per 4 KiB page) -- a series
whose stride is a cache's objects per slab, which the kernel's ``kmem:mm_page_alloc`` (order:
log2 of the slab's pages) followed by ``kmem:kmem_cache_alloc`` of that cache inside the slow
call confirms (:func:`fsscope.trace.attribute.slab_series`). Where in a run the first new slab
falls depends on how full the cache's current slab was, so a slab series predicts a period,
never a file: the kernel, not the arithmetic, places it.
"""

from __future__ import annotations

from fsscope.records import Record

SLABINFO = "/proc/slabinfo"
PAGE_BYTES = 4096


class SlabCache(Record, frozen=True, kw_only=True):
    name: str
    object_bytes: int
    objects_per_slab: int
    pages_per_slab: int

    @property
    def order(self) -> int:
        """The page order of a slab (mm_page_alloc's ``order``): 2**order pages."""
        return max(self.pages_per_slab, 1).bit_length() - 1

    def arithmetic(self) -> str:
        """'21 objects of 192 B per 4 KiB slab (1 page)'."""
        pages = f"{self.pages_per_slab} page{'s' if self.pages_per_slab != 1 else ''}"
        return (f"{self.objects_per_slab} objects of {self.object_bytes:,} B per "
                f"{self.pages_per_slab * PAGE_BYTES // 1024} KiB slab ({pages})")


def parse_slabinfo(text: str) -> dict[str, SlabCache]:
    """Each cache of a ``/proc/slabinfo`` (version 2.x) text by name; lines that do not parse
    are left out (a cache named oddly is not guessed at)."""
    caches: dict[str, SlabCache] = {}
    for line in text.splitlines():
        if not line or line.startswith(("slabinfo", "#")):
            continue
        fields = line.split(":", 1)[0].split()
        if len(fields) != 6:
            continue
        try:
            object_bytes, per_slab, pages = int(fields[3]), int(fields[4]), int(fields[5])
        except ValueError:
            continue
        if per_slab > 0 and pages > 0:
            caches[fields[0]] = SlabCache(name=fields[0], object_bytes=object_bytes, objects_per_slab=per_slab,
                                          pages_per_slab=pages)
    return caches


def read_slabinfo(path: str = SLABINFO) -> dict[str, SlabCache]:
    """The caches of this kernel now ({} where /proc/slabinfo cannot be read: not root)."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return parse_slabinfo(f.read())
    except OSError:
        return {}
