/* The probe's timed loop in C: per file the sync (if any), clock, the syscall, clock.
 *
 * Python hands it a chunk of names and a deadline and takes the latencies back (batches,
 * cancel and errors stay in probe.py), so between two calls nothing else runs, as in the C
 * reference. In Python the timed region also held the interpreter's work for the call
 * (argument parsing, the clock's int objects, the returned fd), and between two calls ran the
 * interpreter's loop, which after a sync() -- caches cold -- cost 0.2-0.3 of the C reference's
 * latency. ctypes releases the GIL for the whole chunk, so no GIL wait lands in a region.
 *
 * Built on first use by fsscope.native (cc -O2 -shared); called through ctypes (probe.py).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* the op codes of probe.py's NATIVE_OPS */
enum { OPEN = 0, MKDIR = 1, UNLINK = 2, STAT = 3, RENAME = 4, SYMLINK = 5, WRITE_FSYNC = 6, FALLOCATE = 7 };
#define SYNC_ALL (-2)   /* probe.py's SYNC_ALL */

/* this thread's run delay (ns runnable but not running), from an open schedstat fd: the
 * second field; 0 without one (probe.py's Accounting reads the same, as often) */
static inline int64_t run_delay_ns(int fd) {
    char buf[64];
    if (fd < 0) return 0;
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *end;
    strtoll(buf, &end, 10);
    return strtoll(end, NULL, 10);
}

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* time.monotonic_ns()'s clock */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One timed call of ``op`` on ``name`` (relative to ``dfd``), after a sync when ``sync_fd``
 * says so (SYNC_ALL: sync(); an fd >= 0: syncfs() of its file system; -1: none, as probe.py's
 * _drive chooses): its latency in ns, its start in *t0_out; or -errno. ``arg``: OPEN the
 * open flags, MKDIR the mode. ``other``: RENAME the new name, SYMLINK the target.
 * ``buf``/``size``: WRITE_FSYNC the data, FALLOCATE the length (its file is created, untimed,
 * before the sync). A call interrupted by a signal is restarted inside the region, as Python's
 * os functions do. */
static int64_t one_call(int op, int dfd, const char *name, const char *other, int64_t arg,
                        const char *buf, int64_t size, int sync_fd, int acct_fd, int64_t *t0_out,
                        int64_t *wait_out) {
    struct stat st;
    int rc, fd = -1;
    ssize_t written = 0;
    if (op == FALLOCATE) {
        do fd = openat(dfd, name, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644); while (fd < 0 && errno == EINTR);
        if (fd < 0) return -errno;
    }
    if (sync_fd == SYNC_ALL) sync();
    else if (sync_fd >= 0 && syncfs(sync_fd)) {
        int err = errno;
        if (fd >= 0) close(fd);
        return -err;
    }
    int64_t delay0 = run_delay_ns(acct_fd);   /* right before t0, right after t1: outside */
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
        do rc = posix_fallocate(fd, 0, size); while (rc == EINTR);
        if (rc) { errno = rc; rc = -1; }
        break;
    default:
        errno = EINVAL;
        rc = -1;
    }
    int64_t t1 = now_ns();
    int err = rc ? errno : 0;
    *wait_out = run_delay_ns(acct_fd) - delay0;
    if (fd >= 0) close(fd);
    if (err) return -err;
    if (op == WRITE_FSYNC && written != size) return -ENOSPC;   /* a short write */
    *t0_out = t0;
    return t1 - t0;
}

/* The calls on names[0..count): name k at names + k * stride (NUL-terminated), for RENAME its
 * new name at others + k * stride. Stores each call's latency, start and CPU wait (run delay
 * inside the call, from ``acct_fd``: -1 for none), and stops after ``count`` calls or the first
 * whose end is at or past ``deadline_ns`` (probe.py's loops do the same). Returns the calls
 * done; when one fails, *err_out is its errno and it is not counted. */
int64_t fsscope_probe_loop(int op, int dfd, const char *names, const char *others, int64_t stride,
                           int64_t count, int64_t arg, const char *buf, int64_t size, int sync_fd,
                           int acct_fd, int64_t deadline_ns, int64_t *latency_ns, int64_t *start_ns,
                           int64_t *wait_ns, int *err_out) {
    *err_out = 0;
    for (int64_t k = 0; k < count; k++) {
        const char *name = names + k * stride;
        const char *other = op == RENAME ? others + k * stride : others;
        int64_t t0 = 0, wait = 0;
        int64_t latency = one_call(op, dfd, name, other, arg, buf, size, sync_fd, acct_fd, &t0, &wait);
        if (latency < 0) {
            *err_out = (int)-latency;
            return k;
        }
        latency_ns[k] = latency;
        start_ns[k] = t0;
        wait_ns[k] = wait;
        if (t0 + latency >= deadline_ns) return k + 1;
    }
    return count;
}
