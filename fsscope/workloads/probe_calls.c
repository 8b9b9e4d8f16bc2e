/* The probe's timed calls in C: the sync before the call (if any), clock, the syscall, clock.
 *
 * The Python loop around a call (names, storing the latency, batches, cancel) stays in
 * probe.py; the timed region and what comes right before it are here. In Python the region
 * also held the interpreter's own work for the call (argument parsing, the clock's int
 * objects, the returned fd), and between the sync and the region ran the interpreter's work
 * of the next call, which after a sync() -- caches cold -- cost 0.2-0.3 of the C reference's
 * latency; here sync, clock, call, clock follow each other as in the C reference. ctypes
 * releases the GIL before the call, so a GIL wait is outside the region too.
 *
 * Built on first use by fsscope.native (cc -O2 -shared); called through ctypes (probe.py).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* the op codes of probe.py's NATIVE_OPS */
enum { OPEN = 0, MKDIR = 1, UNLINK = 2, STAT = 3, RENAME = 4, SYMLINK = 5, WRITE_FSYNC = 6, FALLOCATE = 7 };
#define SYNC_ALL (-2)   /* probe.py's SYNC_ALL */

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* time.monotonic_ns()'s clock */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One timed call of ``op`` on ``name`` (relative to ``dfd``), after a sync when ``sync_fd``
 * says so (SYNC_ALL: sync(); an fd >= 0: syncfs() of its file system; -1: none, as probe.py's
 * _sync_call chooses): its latency in ns, its start in *t0_out; or -errno. ``arg``: OPEN the open flags, MKDIR the mode, FALLOCATE the open fd.
 * ``other``: RENAME the new name, SYMLINK the target. ``buf``/``size``: WRITE_FSYNC the data,
 * FALLOCATE the length. A call interrupted by a signal is restarted inside the region, as
 * Python's os functions do. */
int64_t fsscope_probe_call(int op, int dfd, const char *name, const char *other, int64_t arg,
                           const char *buf, int64_t size, int sync_fd, int64_t *t0_out) {
    struct stat st;
    int rc, fd = -1;
    ssize_t written = 0;
    if (sync_fd == SYNC_ALL) sync();
    else if (sync_fd >= 0 && syncfs(sync_fd)) return -errno;
    int64_t t0 = now_ns();
    switch (op) {
    case OPEN:
        do fd = openat(dfd, name, (int)arg, 0644); while (fd < 0 && errno == EINTR);
        rc = fd < 0 ? -1 : 0;
        break;
    case MKDIR:
        do rc = mkdirat(dfd, name, (mode_t)arg); while (rc && errno == EINTR);
        break;
    case UNLINK:
        do rc = unlinkat(dfd, name, 0); while (rc && errno == EINTR);
        break;
    case STAT:
        do rc = fstatat(dfd, name, &st, 0); while (rc && errno == EINTR);
        break;
    case RENAME:
        do rc = renameat(dfd, name, dfd, other); while (rc && errno == EINTR);
        break;
    case SYMLINK:
        do rc = symlinkat(other, dfd, name); while (rc && errno == EINTR);
        break;
    case WRITE_FSYNC:
        do fd = openat(dfd, name, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644); while (fd < 0 && errno == EINTR);
        rc = fd < 0 ? -1 : 0;
        if (!rc && size > 0) {
            do written = write(fd, buf, (size_t)size); while (written < 0 && errno == EINTR);
            rc = written < 0 ? -1 : 0;
        }
        if (!rc) do rc = fsync(fd); while (rc && errno == EINTR);
        break;
    case FALLOCATE:
        do rc = posix_fallocate((int)arg, 0, size); while (rc == EINTR);
        if (rc) { errno = rc; rc = -1; }
        break;
    default:
        errno = EINVAL;
        rc = -1;
    }
    int64_t t1 = now_ns();
    int err = rc ? errno : 0;
    if (fd >= 0) close(fd);
    if (err) return -err;
    if (op == WRITE_FSYNC && written != size) return -ENOSPC;   /* a short write */
    *t0_out = t0;
    return t1 - t0;
}
