/* varmail's worker loop in C: the flowops of worker.py's Python loop, without its cost.
 *
 * Where fsync is the workload, the generator's own CPU per op decides the ops/s on a busy
 * machine: the Python loop spends ~3.9 us of user CPU per op where Filebench spends ~1.3.
 * This loop does exactly what the Python one does (same flowops, same file picking, same
 * timing around each syscall only) and hands control back to Python at every "edge" (bin
 * end, deadline poll), where worker.py closes bins and checks the deadline as before.
 *
 * Built on first use by native/__init__.py (cc -O2 -shared); called through ctypes.
 * The struct below must match native/__init__.py's VarmailState field for field.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* op indexes: the order of spec.OPS["varmail"] */
enum { DELETE, CREATE, APPEND, FSYNC, CLOSE, OPEN, READ, N_OPS };

/* what fsscope_varmail returns */
enum { AT_EDGE = 0, BUFFER_FULL = 1, FAILED = 2 };

typedef struct {
    const char *const *paths;   /* by file index (only this worker's are set) */
    int64_t *fsize;             /* current size of each owned file, bytes */
    int32_t *present;           /* owned files that exist ... */
    int64_t n_present;
    int32_t *absent;            /* ... and those that do not */
    int64_t n_absent;
    const char *wbuf;           /* append data */
    int64_t append_max;         /* appends are 1..append_max bytes, uniform */
    char *rbuf;                 /* read buffer of io_size bytes */
    int64_t io_size;
    uint64_t rng;               /* xorshift64* state, never 0 */
    int64_t *lat;               /* N_OPS rows of cap latencies (ns), row-major */
    int64_t cap;
    int64_t n_lat[N_OPS];       /* latencies recorded per op since Python last took them */
    int64_t nbytes[N_OPS];      /* bytes moved per op, likewise */
    int64_t iterations;         /* whole iterations done (resets Python's failures-in-a-row) */
    int32_t step;               /* the next flowop of the iteration */
    int32_t fd;                 /* the iteration's open file, or -1 */
    int32_t index;              /* the file the current flowop works on */
    int32_t pending_op;         /* the op that ended at or past the edge (not recorded) */
    int64_t pending_ns;         /* ... its latency */
    int64_t pending_bytes;      /* ... and bytes */
    int64_t t1;                 /* ... and when it ended (CLOCK_MONOTONIC ns) */
    int32_t err_op;             /* FAILED: the op that failed ... */
    int32_t err_errno;          /* ... and its errno */
} varmail_state;

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);   /* time.monotonic_ns()'s clock: edges compare */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline double uniform(varmail_state *s) {   /* [0, 1) */
    uint64_t x = s->rng;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    s->rng = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-53;
}

/* take a random element out of list[0..*n) */
static inline int32_t take(varmail_state *s, int32_t *list, int64_t *n) {
    int64_t i = (int64_t)(uniform(s) * (double)*n);
    int32_t index = list[i];
    list[i] = list[--*n];
    return index;
}

static int64_t read_whole(varmail_state *s, int fd, int64_t size) {
    int64_t total = 0;
    while (total < size) {           /* the size is known: no EOF probe */
        ssize_t n = read(fd, s->rbuf, (size_t)s->io_size);
        if (n < 0) return -1;
        if (n == 0) break;
        total += n;
    }
    return total;
}

/* A failed op: close the iteration's file, refresh the size we no longer know, forget a
 * file that vanished, and start the next iteration. */
static int failed(varmail_state *s, int op) {
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
    return FAILED;
}

/* Run flowops until one ends at or past edge_ns (AT_EDGE: that op is left pending for
 * Python to record after it closes the bin), a latency row fills (BUFFER_FULL), or an op
 * fails (FAILED). Each call resumes where the last one stopped. */
int fsscope_varmail(varmail_state *s, int64_t edge_ns) {
    const int f_create = O_RDWR | O_CREAT | O_TRUNC | O_APPEND, f_rw = O_RDWR | O_APPEND;
    for (;;) {
        int op;
        int64_t t0, t1, moved = 0;
        for (int k = 0; k < N_OPS; k++)
            if (s->n_lat[k] >= s->cap) return BUFFER_FULL;
        switch (s->step) {
        case 0:                                            /* deletefile */
            if (s->n_present == 0) { s->step = 1; continue; }
            s->index = take(s, s->present, &s->n_present);
            s->absent[s->n_absent++] = s->index;
            op = DELETE;
            t0 = now_ns();
            if (unlink(s->paths[s->index]) < 0) return failed(s, op);
            t1 = now_ns();
            s->step = 1;
            break;
        case 1:                                            /* createfile */
            if (s->n_absent == 0) { s->step = 5; continue; }
            s->index = take(s, s->absent, &s->n_absent);
            op = CREATE;
            t0 = now_ns();
            s->fd = open(s->paths[s->index], f_create, 0644);
            t1 = now_ns();
            if (s->fd < 0) {
                s->absent[s->n_absent++] = s->index;     /* not created: still absent */
                return failed(s, op);
            }
            s->present[s->n_present++] = s->index;
            s->fsize[s->index] = 0;
            s->step = 2;
            break;
        case 2: case 7: {                                  /* appendfilerand */
            size_t wanted = 1 + (size_t)(uniform(s) * (double)s->append_max);
            op = APPEND;
            t0 = now_ns();
            ssize_t n = write(s->fd, s->wbuf, wanted);
            t1 = now_ns();
            if (n < 0) return failed(s, op);
            s->fsize[s->index] += n;
            moved = n;
            s->step += 1;
            break;
        }
        case 3: case 8:                                    /* fsync */
            op = FSYNC;
            t0 = now_ns();
            if (fsync(s->fd) < 0) return failed(s, op);
            t1 = now_ns();
            s->step += 1;
            break;
        case 4: case 9: case 12: {                         /* closefile */
            op = CLOSE;
            t0 = now_ns();
            int rc = close(s->fd);
            t1 = now_ns();
            s->fd = -1;
            if (rc < 0) return failed(s, op);
            if (s->step == 12) { s->step = 0; s->iterations++; }
            else s->step += 1;
            break;
        }
        case 5: case 10:                                   /* openfile */
            if (s->n_present == 0) { s->step = 0; s->iterations++; continue; }
            s->index = s->present[(int64_t)(uniform(s) * (double)s->n_present)];
            op = OPEN;
            t0 = now_ns();
            s->fd = open(s->paths[s->index], f_rw);
            t1 = now_ns();
            if (s->fd < 0) return failed(s, op);
            s->step += 1;
            break;
        case 6: case 11: {                                 /* readwholefile */
            op = READ;
            t0 = now_ns();
            int64_t total = read_whole(s, s->fd, s->fsize[s->index]);
            t1 = now_ns();
            if (total < 0) return failed(s, op);
            moved = total;
            s->step += 1;
            break;
        }
        default:
            s->step = 0;
            continue;
        }
        if (t1 >= edge_ns) {
            s->pending_op = op;
            s->pending_ns = t1 - t0;
            s->pending_bytes = moved;
            s->t1 = t1;
            return AT_EDGE;
        }
        s->lat[op * s->cap + s->n_lat[op]++] = t1 - t0;
        s->nbytes[op] += moved;
    }
}
