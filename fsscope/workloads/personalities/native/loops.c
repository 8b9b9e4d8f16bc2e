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

/* The timed flowops. Each brackets only its syscall(s) with *t0 and *t1 and returns the bytes
 * it moved, or -1 with errno set (the file lists and sizes are kept right either way). */

static int64_t create_file(loop_state *s, int64_t *t0, int64_t *t1) {
    s->index = take(s, s->absent, &s->n_absent);
    *t0 = now_ns();
    s->fd = open(s->paths[s->index], O_RDWR | O_CREAT | O_TRUNC | O_APPEND, 0644);
    *t1 = now_ns();
    if (s->fd < 0) {
        s->absent[s->n_absent++] = s->index;     /* not created: still absent */
        return -1;
    }
    s->present[s->n_present++] = s->index;
    s->fsize[s->index] = 0;
    return 0;
}

static int64_t delete_file(loop_state *s, int64_t *t0, int64_t *t1) {
    s->index = take(s, s->present, &s->n_present);
    s->absent[s->n_absent++] = s->index;
    *t0 = now_ns();
    int rc = unlink(s->paths[s->index]);
    *t1 = now_ns();
    return rc;
}

static int64_t open_file(loop_state *s, int32_t index, int flags, int64_t *t0, int64_t *t1) {
    s->index = index;
    *t0 = now_ns();
    s->fd = open(s->paths[index], flags);
    *t1 = now_ns();
    return s->fd < 0 ? -1 : 0;
}

static int64_t close_file(loop_state *s, int64_t *t0, int64_t *t1) {
    *t0 = now_ns();
    int rc = close(s->fd);
    *t1 = now_ns();
    s->fd = -1;
    return rc;
}

static int64_t append_file(loop_state *s, int fd, int64_t *t0, int64_t *t1) {   /* appendfilerand */
    size_t wanted = 1 + (size_t)(uniform(s) * (double)s->append_max);
    *t0 = now_ns();
    ssize_t n = write(fd, s->wbuf, wanted);       /* O_APPEND: no lseek */
    *t1 = now_ns();
    if (n > 0 && s->index >= 0) s->fsize[s->index] += n;
    return n;
}

static int64_t read_whole_file(loop_state *s, int64_t *t0, int64_t *t1) {
    int64_t total = 0, size = s->fsize[s->index];
    *t0 = now_ns();
    while (total < size) {           /* the size is known: no EOF probe */
        ssize_t n = read(s->fd, s->rbuf, (size_t)s->io_size);
        if (n < 0) return -1;
        if (n == 0) break;
        total += n;
    }
    *t1 = now_ns();
    return total;
}

static int64_t write_whole_file(loop_state *s, int64_t *t0, int64_t *t1) {   /* writewholefile */
    int64_t done = 0, size = s->sizes[s->index];
    *t0 = now_ns();
    while (done < size) {            /* io_size chunks */
        int64_t chunk = size - done < s->io_size ? size - done : s->io_size;
        ssize_t n = write(s->fd, s->wbuf, (size_t)chunk);
        if (n < 0) return -1;
        done += n;
    }
    *t1 = now_ns();
    s->fsize[s->index] = done;
    return done;
}

static int64_t fsync_file(loop_state *s, int64_t *t0, int64_t *t1) {
    *t0 = now_ns();
    int rc = fsync(s->fd);
    *t1 = now_ns();
    return rc;
}

static int64_t stat_file(loop_state *s, int32_t index, int64_t *t0, int64_t *t1) {
    struct stat st;
    s->index = index;
    *t0 = now_ns();
    int rc = stat(s->paths[index], &st);
    *t1 = now_ns();
    return rc;
}

/* Run one flowop, then go on at step NEXT: record the op, or, if it ended at or past the
 * edge, leave it pending for Python (which closes the bin first) and return. */
#define OP(ID, CALL, NEXT) do {                                              \
        int64_t moved_ = (CALL);                                             \
        if (moved_ < 0) return failed(s, (ID));                              \
        NEXT;                                                                \
        if (t1 >= edge_ns) {                                                 \
            s->pending_op = (ID); s->pending_ns = t1 - t0;                   \
            s->pending_bytes = moved_; s->t1 = t1;                           \
            return AT_EDGE;                                                  \
        }                                                                    \
        s->lat[(ID) * s->cap + s->n_lat[(ID)]++] = t1 - t0;                  \
        s->nbytes[(ID)] += moved_;                                           \
    } while (0)

#define GOTO(STEP) (s->step = (STEP))
#define END_ITERATION() (s->step = 0, s->iterations++)

/* Each loop runs flowops until one ends at or past edge_ns (AT_EDGE), a latency row fills
 * (BUFFER_FULL), or an op fails (FAILED); each call resumes where the last one stopped.
 * A flowop whose file list is empty is skipped, as in the Python loops. */

/* varmail; ops in spec.OPS["varmail"] order */
enum { V_DELETE, V_CREATE, V_APPEND, V_FSYNC, V_CLOSE, V_OPEN, V_READ };

int fsscope_varmail(loop_state *s, int64_t edge_ns) {
    int64_t t0 = 0, t1 = 0;
    for (;;) {
        if (buffer_full(s)) return BUFFER_FULL;
        switch (s->step) {
        case 0:                                                   /* deletefile */
            if (s->n_present == 0) { GOTO(1); continue; }
            OP(V_DELETE, delete_file(s, &t0, &t1), GOTO(1));
            break;
        case 1:                                                   /* createfile */
            if (s->n_absent == 0) { GOTO(5); continue; }
            OP(V_CREATE, create_file(s, &t0, &t1), GOTO(2));
            break;
        case 2: case 7:                                           /* appendfilerand */
            OP(V_APPEND, append_file(s, s->fd, &t0, &t1), GOTO(s->step + 1));
            break;
        case 3: case 8:                                           /* fsync */
            OP(V_FSYNC, fsync_file(s, &t0, &t1), GOTO(s->step + 1));
            break;
        case 4: case 9:                                           /* closefile */
            OP(V_CLOSE, close_file(s, &t0, &t1), GOTO(s->step + 1));
            break;
        case 12:
            OP(V_CLOSE, close_file(s, &t0, &t1), END_ITERATION());
            break;
        case 5: case 10:                                          /* openfile */
            if (s->n_present == 0) { END_ITERATION(); continue; }
            OP(V_OPEN, open_file(s, pick(s, s->present, s->n_present), O_RDWR | O_APPEND, &t0, &t1),
               GOTO(s->step + 1));
            break;
        case 6: case 11:                                          /* readwholefile */
            OP(V_READ, read_whole_file(s, &t0, &t1), GOTO(s->step + 1));
            break;
        default:
            GOTO(0);
        }
    }
}

/* fileserver; ops in spec.OPS["fileserver"] order */
enum { F_CREATE, F_WRITE, F_CLOSE, F_OPEN, F_APPEND, F_READ, F_DELETE, F_STAT };

int fsscope_fileserver(loop_state *s, int64_t edge_ns) {
    int64_t t0 = 0, t1 = 0;
    for (;;) {
        if (buffer_full(s)) return BUFFER_FULL;
        switch (s->step) {
        case 0:                                                   /* createfile */
            if (s->n_absent == 0) { GOTO(3); continue; }
            OP(F_CREATE, create_file(s, &t0, &t1), GOTO(1));
            break;
        case 1:                                                   /* writewholefile */
            OP(F_WRITE, write_whole_file(s, &t0, &t1), GOTO(2));
            break;
        case 2: case 5: case 8:                                   /* closefile */
            OP(F_CLOSE, close_file(s, &t0, &t1), GOTO(s->step + 1));
            break;
        case 3: case 6:                                           /* openfile */
            if (s->n_present == 0) { END_ITERATION(); continue; }
            OP(F_OPEN, open_file(s, pick(s, s->present, s->n_present), O_RDWR | O_APPEND, &t0, &t1),
               GOTO(s->step + 1));
            break;
        case 4:                                                   /* appendfilerand */
            OP(F_APPEND, append_file(s, s->fd, &t0, &t1), GOTO(5));
            break;
        case 7:                                                   /* readwholefile */
            OP(F_READ, read_whole_file(s, &t0, &t1), GOTO(8));
            break;
        case 9:                                                   /* deletefile */
            if (s->n_present == 0) { END_ITERATION(); continue; }
            OP(F_DELETE, delete_file(s, &t0, &t1), GOTO(10));
            break;
        case 10:                                                  /* statfile */
            if (s->n_present == 0) { END_ITERATION(); continue; }
            OP(F_STAT, stat_file(s, pick(s, s->present, s->n_present), &t0, &t1), END_ITERATION());
            break;
        default:
            GOTO(0);
        }
    }
}

/* webserver; ops in spec.OPS["webserver"] order */
enum { W_OPEN, W_READ, W_CLOSE, W_APPEND };

/* Rotate the shared log, untimed (the next append starts it again): its real size is looked
 * at every few iterations, since every worker appends to it. */
static int64_t rotate_log(loop_state *s) {
    struct stat st;
    if (s->log_limit < 0 || s->iterations % s->rotate_every != 0) return 0;
    if (fstat(s->log_fd, &st) < 0) return -1;
    return st.st_size > s->log_limit ? ftruncate(s->log_fd, 0) : 0;
}

int fsscope_webserver(loop_state *s, int64_t edge_ns) {
    int64_t t0 = 0, t1 = 0;
    for (;;) {
        if (buffer_full(s)) return BUFFER_FULL;
        switch (s->step) {
        case 0:                                                   /* openfile: any of the set */
            if (s->reads_done >= s->reads_per_iteration) { GOTO(3); continue; }
            OP(W_OPEN, open_file(s, (int32_t)(uniform(s) * (double)s->nfiles), O_RDONLY, &t0, &t1), GOTO(1));
            break;
        case 1:                                                   /* readwholefile */
            OP(W_READ, read_whole_file(s, &t0, &t1), GOTO(2));
            break;
        case 2:                                                   /* closefile */
            OP(W_CLOSE, close_file(s, &t0, &t1), (s->reads_done++, GOTO(0)));
            break;
        case 3:                                                   /* appendfilerand to the log */
            s->index = -1;
            OP(W_APPEND, append_file(s, s->log_fd, &t0, &t1), (s->reads_done = 0, END_ITERATION()));
            if (rotate_log(s) < 0) return failed(s, W_APPEND);   /* (not reached at an edge) */
            break;
        default:
            GOTO(0);
        }
    }
}
