/* The ager's op loop in C: the planner's choices and the executor's syscalls of ager.py's
 * _Session.loop, without the interpreter's cost per op.
 *
 * The same seeded stream (CPython's MT19937 and random.random()), the same bucket scans in the
 * same order with the same double arithmetic, the same cells in the same order: so the same op
 * log as the Python loop, byte for byte. Python keeps every check between ops (limits, fit
 * points, re-cuts, settling, the clock, cancel, progress, the state file) and hashes and writes
 * the op log; this loop runs until the next op at which Python has something to do, or the
 * clock passes the edge Python gave, and says why it returned.
 *
 * Built on first use by fsscope.native (cc -O2 -shared); called through ctypes.
 * ager_state must match native/__init__.py's AgerState field for field.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* what fsscope_ager_run returns */
enum { AT_EDGE = 0, BUFFER_FULL = 1, SETTLE = 2, RAPID_OVER = 3, NO_ROOM = 4, FULL = 5, FAILED = 6 };
enum { RAPID = 0, STABLE = 1 };
#define MT_N 624
#define MT_M 397
#define LINE_MAX_BYTES (PATH_MAX + 32)

typedef struct { int64_t born; int64_t sib; } entry;
typedef struct { entry *items; int64_t n, cap; } cell;

typedef struct {
    /* the profile, fixed for the session */
    int32_t S, D, B, n_size_nz, n_depth_nz, pad0;
    const int32_t *size_nz, *depth_nz;   /* buckets with a non-zero share, ascending */
    const double *p, *q, *g, *r;         /* size, depth, age fractions; relative age cutoffs */
    const int64_t *size_bytes, *alloc_bytes;
    const int32_t *n_sib;                /* sibling directories per depth bucket */
    const int32_t *dir_first;            /* per depth bucket: its first prefix in dir_prefix */
    const char *const *dir_prefix;       /* "d1/d2.3/" ("" for the root), dir_first[d] + sibling */
    /* the executor */
    int32_t root_fd, fallocate;
    const char *pattern;                 /* write data */
    int64_t pattern_bytes;
    /* the planner's live files: cells[(a * S + s) * D + d], in the Python planner's order */
    cell *cells;
    int64_t *size_count, *depth_count, *age_count, *as_count;
    int64_t live_files, files_bytes, horizon_ops;
    uint8_t *alive;                      /* alive[born]: Python's bytearray, long enough */
    uint32_t mt[MT_N];
    int64_t mti;
    /* the session */
    int64_t phase, ops, ops_limit, edge_ns;
    int64_t base_used_bytes, capacity_bytes, written_bytes;
    double target_bytes, ceiling_bytes, floor_bytes, settle_at_bytes, max_written;
    char *log;                           /* op log lines since Python last took them */
    int64_t log_len, log_cap;
    int64_t err_errno;                   /* FULL / FAILED: the errno and the file */
    char err_path[PATH_MAX];
} ager_state;

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* time.monotonic()'s clock */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- CPython's Mersenne Twister (Modules/_randommodule.c) */

static uint32_t genrand(ager_state *s) {
    static const uint32_t mag01[2] = {0x0U, 0x9908b0dfU};
    uint32_t *mt = s->mt, y;
    if (s->mti >= MT_N) {
        int kk;
        for (kk = 0; kk < MT_N - MT_M; kk++) {
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7fffffffU);
            mt[kk] = mt[kk + MT_M] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        for (; kk < MT_N - 1; kk++) {
            y = (mt[kk] & 0x80000000U) | (mt[kk + 1] & 0x7fffffffU);
            mt[kk] = mt[kk + (MT_M - MT_N)] ^ (y >> 1) ^ mag01[y & 0x1U];
        }
        y = (mt[MT_N - 1] & 0x80000000U) | (mt[0] & 0x7fffffffU);
        mt[MT_N - 1] = mt[MT_M - 1] ^ (y >> 1) ^ mag01[y & 0x1U];
        s->mti = 0;
    }
    y = mt[s->mti++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680U;
    y ^= (y << 15) & 0xefc60000U;
    y ^= (y >> 18);
    return y;
}

static inline double random_double(ager_state *s) {   /* random.random() */
    uint32_t a = genrand(s) >> 5, b = genrand(s) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

/* ---- the planner (_Planner's methods; strict ">" keeps the lowest index on ties) */

static int deficit_size(const ager_state *s, double room_bytes) {
    double n = (double)(s->live_files + 1), best_gap = -INFINITY;
    int best = -1;
    for (int k = 0; k < s->n_size_nz; k++) {
        int i = s->size_nz[k];
        double gap = s->p[i] * n - (double)s->size_count[i];
        if ((double)s->alloc_bytes[i] <= room_bytes && gap > best_gap) { best = i; best_gap = gap; }
    }
    return best;
}

static int deficit_depth(const ager_state *s) {
    double n = (double)(s->live_files + 1), best_gap = -INFINITY;
    int best = 0;
    for (int k = 0; k < s->n_depth_nz; k++) {
        int i = s->depth_nz[k];
        double gap = s->q[i] * n - (double)s->depth_count[i];
        if (gap > best_gap) { best = i; best_gap = gap; }
    }
    return best;
}

static int add_file(ager_state *s, int64_t born, int sz, int d, int64_t sib) {
    int a = s->B - 1;
    if (s->horizon_ops > 0) {
        double rel = (double)(s->horizon_ops - born) / (double)s->horizon_ops;
        int i = 0;
        while (i < s->B && s->r[i] < rel) i++;   /* bisect_left */
        if (i < a) a = i;
    }
    cell *c = &s->cells[((int64_t)a * s->S + sz) * s->D + d];
    if (c->n == c->cap) {
        int64_t cap = c->cap ? 2 * c->cap : 16;
        entry *items = realloc(c->items, (size_t)cap * sizeof *items);
        if (!items) return -1;
        c->items = items; c->cap = cap;
    }
    c->items[c->n].born = born;
    c->items[c->n].sib = sib;
    c->n++;
    s->alive[born] = 1;
    s->size_count[sz]++; s->depth_count[d]++; s->age_count[a]++; s->as_count[a * s->S + sz]++;
    s->live_files++;
    s->files_bytes += s->alloc_bytes[sz];
    return a;
}

static void remove_file(ager_state *s, int a, int sz, int d, int64_t pos) {
    cell *c = &s->cells[((int64_t)a * s->S + sz) * s->D + d];
    s->alive[c->items[pos].born] = 0;
    c->items[pos] = c->items[--c->n];   /* swap-remove, as list.pop() + assignment */
    s->size_count[sz]--; s->depth_count[d]--; s->age_count[a]--; s->as_count[a * s->S + sz]--;
    s->live_files--;
    s->files_bytes -= s->alloc_bytes[sz];
}

/* stable-phase delete: the largest surplus age bucket, then size, then depth; a random file */
static void victim(ager_state *s, int *a_out, int *s_out, int *d_out, int64_t *pos_out) {
    double n = (double)s->live_files, best_gap = -INFINITY;
    int a = -1, sz = -1, d = -1;
    for (int i = 0; i < s->B; i++) {
        int64_t c = s->age_count[i];
        if (c && (double)c - s->g[i] * n > best_gap) { a = i; best_gap = (double)c - s->g[i] * n; }
    }
    best_gap = -INFINITY;
    for (int i = 0; i < s->S; i++) {
        double gap = (double)s->size_count[i] - s->p[i] * n;
        if (s->as_count[a * s->S + i] && gap > best_gap) { sz = i; best_gap = gap; }
    }
    best_gap = -INFINITY;
    int64_t base = ((int64_t)a * s->S + sz) * s->D;
    for (int i = 0; i < s->D; i++) {
        double gap = (double)s->depth_count[i] - s->q[i] * n;
        if (s->cells[base + i].n && gap > best_gap) { d = i; best_gap = gap; }
    }
    *a_out = a; *s_out = sz; *d_out = d;
    *pos_out = (int64_t)(random_double(s) * (double)s->cells[base + d].n);
}

/* ---- the executor (executor.FileOps) */

static int mkdir_parents(int root_fd, char *path) {
    for (char *p = path; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int rc;
        do rc = mkdirat(root_fd, path, 0777); while (rc && errno == EINTR);
        *p = '/';
        if (rc && errno != EEXIST) return -1;
    }
    return 0;
}

static inline int is_full(int err) { return err == ENOSPC || err == EDQUOT; }

/* 0, or the errno (the partial file removed when the file system is full) */
static int create_file(ager_state *s, char *path, int64_t size) {
    const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    int fd;
    do fd = openat(s->root_fd, path, flags, 0600); while (fd < 0 && errno == EINTR);
    if (fd < 0 && errno == ENOENT) {
        if (mkdir_parents(s->root_fd, path)) return errno;
        do fd = openat(s->root_fd, path, flags, 0600); while (fd < 0 && errno == EINTR);
    }
    if (fd < 0) return errno;
    int err = 0;
    if (size > 0 && s->fallocate) {
        do err = posix_fallocate(fd, 0, size); while (err == EINTR);
    } else {
        for (int64_t left = size; left > 0; ) {
            ssize_t w = write(fd, s->pattern, left < s->pattern_bytes ? left : s->pattern_bytes);
            if (w < 0) {
                if (errno == EINTR) continue;
                err = errno;
                break;
            }
            left -= w;
        }
    }
    close(fd);
    if (err && is_full(err)) unlinkat(s->root_fd, path, 0);
    return err;
}

static int fail(ager_state *s, int err, const char *path, int full) {
    s->err_errno = err;
    strncpy(s->err_path, path, sizeof s->err_path - 1);
    s->err_path[sizeof s->err_path - 1] = 0;
    return full ? FULL : FAILED;
}

static char *put_int(char *out, int64_t v) {
    char digits[24];
    int n = 0;
    do { digits[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    while (n) *out++ = digits[--n];
    return out;
}

/* The op loop: until ops_limit, the clock passes edge_ns, or Python has to act (see the enum). */
int fsscope_ager_run(ager_state *s) {
    char path[PATH_MAX];
    while (s->ops < s->ops_limit) {
        if (now_ns() >= s->edge_ns) return AT_EDGE;
        if (s->log_cap - s->log_len < LINE_MAX_BYTES) return BUFFER_FULL;
        int64_t ops = s->ops, live = s->base_used_bytes + s->files_bytes;
        int create = 1, sz;
        if (s->phase == RAPID) {   /* _Session.rapid_choice */
            if ((double)live >= s->settle_at_bytes) return SETTLE;
            sz = deficit_size(s, (double)(s->capacity_bytes - live));
            if (!((double)live < s->target_bytes && sz >= 0)) return RAPID_OVER;
        } else {                   /* _Session.stable_choice */
            create = random_double(s) < 0.5;
            if (!create && ((double)live < s->floor_bytes || s->live_files == 0)) create = 1;
            sz = -1;
            if (create) {
                sz = deficit_size(s, s->ceiling_bytes - (double)live);
                if (sz < 0) {
                    if (s->live_files == 0) return NO_ROOM;
                    create = 0;
                }
            }
        }
        char *line = s->log + s->log_len, *out;
        if (create) {
            int d = deficit_depth(s);
            int64_t sib = s->n_sib[d] > 1 ? (int64_t)(random_double(s) * (double)s->n_sib[d]) : 0;
            const char *prefix = s->dir_prefix[s->dir_first[d] + sib];
            size_t plen = strlen(prefix);
            memcpy(path, prefix, plen);
            *put_int(path + plen, ops) = 0;
            int a = add_file(s, ops, sz, d, sib);
            if (a < 0) return fail(s, ENOMEM, path, 0);
            int64_t size = s->size_bytes[sz];
            int err = create_file(s, path, size);
            if (err) {
                cell *c = &s->cells[((int64_t)a * s->S + sz) * s->D + d];
                remove_file(s, a, sz, d, c->n - 1);   /* undo: the tree and the plan agree */
                return fail(s, err, path, is_full(err));
            }
            out = line;
            *out++ = 'c'; *out++ = ' ';
            out = stpcpy(out, path);
            *out++ = ' ';
            out = put_int(out, size);
            s->written_bytes += size;
        } else {
            int a, d;
            int64_t pos;
            victim(s, &a, &sz, &d, &pos);
            cell *c = &s->cells[((int64_t)a * s->S + sz) * s->D + d];
            entry e = c->items[pos];
            const char *prefix = s->dir_prefix[s->dir_first[d] + e.sib];
            size_t plen = strlen(prefix);
            memcpy(path, prefix, plen);
            *put_int(path + plen, e.born) = 0;
            remove_file(s, a, sz, d, pos);
            int rc;
            do rc = unlinkat(s->root_fd, path, 0); while (rc && errno == EINTR);
            if (rc) return fail(s, errno, path, 0);
            out = line;
            *out++ = 'd'; *out++ = ' ';
            out = stpcpy(out, path);
        }
        *out++ = '\n';
        s->log_len += out - line;
        s->ops = ops + 1;
        if ((double)s->written_bytes >= s->max_written) return AT_EDGE;
    }
    return AT_EDGE;
}

/* ---- moving the cells between Python and C (at the start, at a re-cut, at the end) */

void fsscope_ager_free_cells(ager_state *s) {
    int64_t n = (int64_t)s->B * s->S * s->D;
    for (int64_t i = 0; i < n; i++) {
        free(s->cells[i].items);
        s->cells[i].items = NULL;
        s->cells[i].n = s->cells[i].cap = 0;
    }
}

/* lens[cell], then each cell's (born, sibling) in order */
int fsscope_ager_set_cells(ager_state *s, const int64_t *lens, const int64_t *born, const int64_t *sib) {
    fsscope_ager_free_cells(s);
    int64_t n = (int64_t)s->B * s->S * s->D, k = 0;
    for (int64_t i = 0; i < n; i++) {
        cell *c = &s->cells[i];
        c->cap = lens[i] > 16 ? lens[i] : 16;
        c->items = malloc((size_t)c->cap * sizeof *c->items);
        if (!c->items) return -1;
        for (int64_t j = 0; j < lens[i]; j++, k++) {
            c->items[j].born = born[k];
            c->items[j].sib = sib[k];
        }
        c->n = lens[i];
    }
    return 0;
}

void fsscope_ager_get_cells(const ager_state *s, int64_t *lens, int64_t *born, int64_t *sib) {
    int64_t n = (int64_t)s->B * s->S * s->D, k = 0;
    for (int64_t i = 0; i < n; i++) {
        const cell *c = &s->cells[i];
        lens[i] = c->n;
        for (int64_t j = 0; j < c->n; j++, k++) {
            born[k] = c->items[j].born;
            sib[k] = c->items[j].sib;
        }
    }
}
