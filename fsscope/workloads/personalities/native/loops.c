/* The personalities' worker loops in C: the flowops of worker.py's Python loops, without
 * their cost.
 *
 * Where operations are cheap or fsync wakes the worker up every few ops, the generator's own
 * CPU per op decides the ops/s on a busy machine: the Python varmail loop spent ~3.9 us of
 * user CPU per op where Filebench spends ~1.3. These loops do what the Python ones do (same
 * flowops, same file picking, same timing around each syscall only) and hand control back to
 * Python at every "edge" (bin end, deadline poll), where worker.py closes bins and re-reads
 * the deadline as before.
 *
 * Built on first use by native/__init__.py (cc -O2 -shared); called through ctypes.
 * loop_state must match native/__init__.py's LoopState field for field.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_OPS 8

/* what each loop returns */
enum { AT_EDGE = 0, BUFFER_FULL = 1, FAILED = 2 };

typedef struct {
    const char *const *paths;   /* by file index (only this worker's are set) */
    int64_t *fsize;             /* current size of each file it touches, bytes */
    const int64_t *sizes;       /* fileserver: the size writewholefile gives a new file */
    int32_t *present;           /* owned files that exist ... */
    int64_t n_present;
    int32_t *absent;            /* ... and those that do not */
    int64_t n_absent;
    int64_t nfiles;             /* webserver: reads pick any file of the set */
    const char *wbuf;           /* write data, io_size bytes */
    char *rbuf;                 /* read buffer, io_size bytes */
    int64_t io_size;
    int64_t append_max;         /* appends are 1..append_max bytes, uniform */
    int64_t reads_per_iteration;/* webserver */
    int64_t log_limit;          /* webserver: truncate the shared log past this (-1: never) */
    int64_t rotate_every;       /* webserver: look at the log's size every this many iterations */
    int32_t log_fd;             /* webserver: the shared log, O_APPEND */
    int32_t n_ops;
    uint64_t rng;               /* xorshift64* state, never 0 */
    int64_t *lat;               /* n_ops rows of cap latencies (ns), row-major */
    int64_t cap;
    int64_t n_lat[MAX_OPS];     /* latencies recorded per op since Python last took them */
    int64_t nbytes[MAX_OPS];    /* bytes moved per op, likewise */
    int64_t iterations;         /* whole iterations done (resets Python's failures-in-a-row) */
    int64_t reads_done;         /* webserver: whole-file reads done in this iteration */
    int32_t step;               /* the next flowop of the iteration */
    int32_t fd;                 /* the iteration's open file, or -1 */
    int32_t index;              /* the file the current flowop works on, or -1 */
    int32_t pending_op;         /* AT_EDGE: the op that ended at or past the edge (not recorded) */
    int64_t pending_ns;         /* ... its latency */
    int64_t pending_bytes;      /* ... its bytes */
    int64_t t1;                 /* ... and when it ended (CLOCK_MONOTONIC ns) */
    int32_t err_op;             /* FAILED: the op that failed ... */
    int32_t err_errno;          /* ... and its errno */
} loop_state;

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* time.monotonic_ns()'s clock: edges compare */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline double uniform(loop_state *s) {   /* [0, 1) */
    uint64_t x = s->rng;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    s->rng = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-53;
}

static inline int32_t pick(loop_state *s, const int32_t *list, int64_t n) {
    return list[(int64_t)(uniform(s) * (double)n)];
}

/* take a random element out of list[0..*n) */
static inline int32_t take(loop_state *s, int32_t *list, int64_t *n) {
    int64_t i = (int64_t)(uniform(s) * (double)*n);
    int32_t index = list[i];
    list[i] = list[--*n];
    return index;
}

static inline int64_t append_size(loop_state *s) {
    return 1 + (int64_t)(uniform(s) * (double)s->append_max);
}

static int64_t read_whole(loop_state *s, int fd, int64_t size) {
    int64_t total = 0;
    while (total < size) {           /* the size is known: no EOF probe */
        ssize_t n = read(fd, s->rbuf, (size_t)s->io_size);
        if (n < 0) return -1;
        if (n == 0) break;
        total += n;
    }
    return total;
}

static int64_t write_whole(loop_state *s, int fd, int64_t size) {
    int64_t done = 0;
    while (done < size) {            /* Filebench writewholefile: io_size chunks */
        int64_t chunk = size - done < s->io_size ? size - done : s->io_size;
        ssize_t n = write(fd, s->wbuf, (size_t)chunk);
        if (n < 0) return -1;
        done += n;
    }
    return done;
}

/* A failed op: close the iteration's file, refresh the size we no longer know, forget a
 * file that vanished, and start the next iteration. */
static int failed(loop_state *s, int op) {
    s->err_op = op;
    s->err_errno = errno;
    if (s->fd >= 0) { close(s->fd); s->fd = -1; }
    if (s->index >= 0) {
        struct stat st;
        s->fsize[s->index] = stat(s->paths[s->index], &st) == 0 ? st.st_size : 0;
        if (s->err_errno == ENOENT) {
            for (int64_t i = 0; i < s->n_present; i++) {
                if (s->present[i] == s->index) {
                    s->present[i] = s->present[--s->n_present];
                    s->absent[s->n_absent++] = s->index;
                    break;
                }
            }
        }
    }
    s->step = 0;
    s->reads_done = 0;
    return FAILED;
}

static inline int buffer_full(const loop_state *s) {
    for (int k = 0; k < s->n_ops; k++)
        if (s->n_lat[k] >= s->cap) return 1;
    return 0;
}

/* After each op: record it, or, if it ended at or past the edge, leave it pending for Python
 * (which closes the bin first) and return. */
#define DONE(OP, T0, T1, MOVED) do {                                         \
        if ((T1) >= edge_ns) {                                               \
            s->pending_op = (OP); s->pending_ns = (T1) - (T0);               \
            s->pending_bytes = (MOVED); s->t1 = (T1);                        \
            return AT_EDGE;                                                  \
        }                                                                    \
        s->lat[(OP) * s->cap + s->n_lat[(OP)]++] = (T1) - (T0);              \
        s->nbytes[(OP)] += (MOVED);                                          \
    } while (0)

#define END_ITERATION() do { s->step = 0; s->iterations++; } while (0)

/* Each loop runs flowops until one ends at or past edge_ns (AT_EDGE), a latency row fills
 * (BUFFER_FULL), or an op fails (FAILED); each call resumes where the last one stopped. */

/* varmail; ops in spec.OPS["varmail"] order */
enum { V_DELETE, V_CREATE, V_APPEND, V_FSYNC, V_CLOSE, V_OPEN, V_READ };

int fsscope_varmail(loop_state *s, int64_t edge_ns) {
    const int f_create = O_RDWR | O_CREAT | O_TRUNC | O_APPEND, f_rw = O_RDWR | O_APPEND;
    int64_t t0, t1, n;
    for (;;) {
        if (buffer_full(s)) return BUFFER_FULL;
        switch (s->step) {
        case 0:                                            /* deletefile */
            if (s->n_present == 0) { s->step = 1; continue; }
            s->index = take(s, s->present, &s->n_present);
            s->absent[s->n_absent++] = s->index;
            t0 = now_ns();
            if (unlink(s->paths[s->index]) < 0) return failed(s, V_DELETE);
            t1 = now_ns();
            s->step = 1;
            DONE(V_DELETE, t0, t1, 0);
            break;
        case 1:                                            /* createfile */
            if (s->n_absent == 0) { s->step = 5; continue; }
            s->index = take(s, s->absent, &s->n_absent);
            t0 = now_ns();
            s->fd = open(s->paths[s->index], f_create, 0644);
            t1 = now_ns();
            if (s->fd < 0) {
                s->absent[s->n_absent++] = s->index;     /* not created: still absent */
                return failed(s, V_CREATE);
            }
            s->present[s->n_present++] = s->index;
            s->fsize[s->index] = 0;
            s->step = 2;
            DONE(V_CREATE, t0, t1, 0);
            break;
        case 2: case 7:                                    /* appendfilerand */
            n = append_size(s);
            t0 = now_ns();
            n = write(s->fd, s->wbuf, (size_t)n);
            t1 = now_ns();
            if (n < 0) return failed(s, V_APPEND);
            s->fsize[s->index] += n;
            s->step += 1;
            DONE(V_APPEND, t0, t1, n);
            break;
        case 3: case 8:                                    /* fsync */
            t0 = now_ns();
            if (fsync(s->fd) < 0) return failed(s, V_FSYNC);
            t1 = now_ns();
            s->step += 1;
            DONE(V_FSYNC, t0, t1, 0);
            break;
        case 4: case 9: case 12:                           /* closefile */
            t0 = now_ns();
            n = close(s->fd);
            t1 = now_ns();
            s->fd = -1;
            if (n < 0) return failed(s, V_CLOSE);
            if (s->step == 12) END_ITERATION(); else s->step += 1;
            DONE(V_CLOSE, t0, t1, 0);
            break;
        case 5: case 10:                                   /* openfile */
            if (s->n_present == 0) { END_ITERATION(); continue; }
            s->index = pick(s, s->present, s->n_present);
            t0 = now_ns();
            s->fd = open(s->paths[s->index], f_rw);
            t1 = now_ns();
            if (s->fd < 0) return failed(s, V_OPEN);
            s->step += 1;
            DONE(V_OPEN, t0, t1, 0);
            break;
        case 6: case 11:                                   /* readwholefile */
            t0 = now_ns();
            n = read_whole(s, s->fd, s->fsize[s->index]);
            t1 = now_ns();
            if (n < 0) return failed(s, V_READ);
            s->step += 1;
            DONE(V_READ, t0, t1, n);
            break;
        default:
            s->step = 0;
        }
    }
}

/* fileserver; ops in spec.OPS["fileserver"] order */
enum { F_CREATE, F_WRITE, F_CLOSE, F_OPEN, F_APPEND, F_READ, F_DELETE, F_STAT };

int fsscope_fileserver(loop_state *s, int64_t edge_ns) {
    const int f_create = O_RDWR | O_CREAT | O_TRUNC | O_APPEND, f_rw = O_RDWR | O_APPEND;
    int64_t t0, t1, n;
    struct stat st;
    for (;;) {
        if (buffer_full(s)) return BUFFER_FULL;
        switch (s->step) {
        case 0:                                            /* createfile */
            if (s->n_absent == 0) { s->step = 3; continue; }
            s->index = take(s, s->absent, &s->n_absent);
            t0 = now_ns();
            s->fd = open(s->paths[s->index], f_create, 0644);
            t1 = now_ns();
            if (s->fd < 0) {
                s->absent[s->n_absent++] = s->index;     /* not created: still absent */
                return failed(s, F_CREATE);
            }
            s->present[s->n_present++] = s->index;
            s->fsize[s->index] = 0;
            s->step = 1;
            DONE(F_CREATE, t0, t1, 0);
            break;
        case 1:                                            /* writewholefile */
            t0 = now_ns();
            n = write_whole(s, s->fd, s->sizes[s->index]);
            t1 = now_ns();
            if (n < 0) return failed(s, F_WRITE);
            s->fsize[s->index] = n;
            s->step = 2;
            DONE(F_WRITE, t0, t1, n);
            break;
        case 2: case 5: case 8:                            /* closefile */
            t0 = now_ns();
            n = close(s->fd);
            t1 = now_ns();
            s->fd = -1;
            if (n < 0) return failed(s, F_CLOSE);
            s->step += 1;
            DONE(F_CLOSE, t0, t1, 0);
            break;
        case 3: case 6:                                    /* openfile */
            if (s->n_present == 0) { END_ITERATION(); continue; }
            s->index = pick(s, s->present, s->n_present);
            t0 = now_ns();
            s->fd = open(s->paths[s->index], f_rw);
            t1 = now_ns();
            if (s->fd < 0) return failed(s, F_OPEN);
            s->step += 1;
            DONE(F_OPEN, t0, t1, 0);
            break;
        case 4:                                            /* appendfilerand */
            n = append_size(s);
            t0 = now_ns();
            n = write(s->fd, s->wbuf, (size_t)n);
            t1 = now_ns();
            if (n < 0) return failed(s, F_APPEND);
            s->fsize[s->index] += n;
            s->step = 5;
            DONE(F_APPEND, t0, t1, n);
            break;
        case 7:                                            /* readwholefile */
            t0 = now_ns();
            n = read_whole(s, s->fd, s->fsize[s->index]);
            t1 = now_ns();
            if (n < 0) return failed(s, F_READ);
            s->step = 8;
            DONE(F_READ, t0, t1, n);
            break;
        case 9:                                            /* deletefile */
            if (s->n_present == 0) { END_ITERATION(); continue; }
            s->index = take(s, s->present, &s->n_present);
            s->absent[s->n_absent++] = s->index;
            t0 = now_ns();
            if (unlink(s->paths[s->index]) < 0) return failed(s, F_DELETE);
            t1 = now_ns();
            s->step = 10;
            DONE(F_DELETE, t0, t1, 0);
            break;
        case 10:                                           /* statfile */
            if (s->n_present == 0) { END_ITERATION(); continue; }
            s->index = pick(s, s->present, s->n_present);
            t0 = now_ns();
            if (stat(s->paths[s->index], &st) < 0) return failed(s, F_STAT);
            t1 = now_ns();
            END_ITERATION();
            DONE(F_STAT, t0, t1, 0);
            break;
        default:
            s->step = 0;
        }
    }
}

/* webserver; ops in spec.OPS["webserver"] order */
enum { W_OPEN, W_READ, W_CLOSE, W_APPEND };

int fsscope_webserver(loop_state *s, int64_t edge_ns) {
    int64_t t0, t1, n;
    struct stat st;
    for (;;) {
        if (buffer_full(s)) return BUFFER_FULL;
        switch (s->step) {
        case 0:                                            /* openfile (any file of the set) */
            if (s->reads_done >= s->reads_per_iteration) { s->step = 3; continue; }
            s->index = (int32_t)(uniform(s) * (double)s->nfiles);
            t0 = now_ns();
            s->fd = open(s->paths[s->index], O_RDONLY);
            t1 = now_ns();
            if (s->fd < 0) return failed(s, W_OPEN);
            s->step = 1;
            DONE(W_OPEN, t0, t1, 0);
            break;
        case 1:                                            /* readwholefile */
            t0 = now_ns();
            n = read_whole(s, s->fd, s->fsize[s->index]);
            t1 = now_ns();
            if (n < 0) return failed(s, W_READ);
            s->step = 2;
            DONE(W_READ, t0, t1, n);
            break;
        case 2:                                            /* closefile */
            t0 = now_ns();
            n = close(s->fd);
            t1 = now_ns();
            s->fd = -1;
            if (n < 0) return failed(s, W_CLOSE);
            s->reads_done++;
            s->step = 0;
            DONE(W_CLOSE, t0, t1, 0);
            break;
        case 3:                                            /* appendfilerand to the shared log */
            s->index = -1;
            n = append_size(s);
            t0 = now_ns();
            n = write(s->log_fd, s->wbuf, (size_t)n);
            t1 = now_ns();
            if (n < 0) return failed(s, W_APPEND);
            s->reads_done = 0;
            END_ITERATION();
            /* rotate, untimed (the next append starts it again); the log is shared, so its
             * real size is looked at, every few iterations */
            if (s->log_limit >= 0 && s->iterations % s->rotate_every == 0
                    && fstat(s->log_fd, &st) == 0 && st.st_size > s->log_limit
                    && ftruncate(s->log_fd, 0) < 0)
                return failed(s, W_APPEND);
            DONE(W_APPEND, t0, t1, n);
            break;
        default:
            s->step = 0;
        }
    }
}
