/*
 * The read-ahead thread of _nongemm_scan: the first chunks of a JSON trace read (a .gz one inflated
 * with zlib where the extension links it), cut and scanned on another core.
 *
 * The command line starts it before it imports polars (0.15-0.3 s of Python on one core, holding
 * the GIL): this thread needs no GIL, so the other core reads, cuts and scans meanwhile. It cuts
 * exactly where the Python loader would (load/kineto/cutting.py: the last event boundary within one
 * chunk's length of the chunk's start), scans each chunk like scan(), and stops at the first
 * chunk it cannot cut or scan, near the end of the file (the last events and the tail stay with
 * the loader), or when taken. The loader then takes the scanned chunks and reads on from there
 * (nongemm_trace/load/kineto/read_ahead.py).
 *
 * Linked into the scanner's extension (nongemm_scan.h says why). The handle may be waited for
 * and taken from any Python thread: joins are serialised by the handle's lock and a handle is
 * taken once. */
#include "nongemm_scan.h"

#ifdef READ_AHEAD
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>
#ifdef NONGEMM_ZLIB
#include <zlib.h>
#endif

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock; /* serialises joins: wait and take may come from two Python threads */
    int started;          /* the thread runs and is not joined yet (under lock) */
    int taken;            /* set once, with the GIL held */
    int stop;             /* set by the taker (atomic) */
    char *path;
    PyObject *routes_arg; /* keeps the route texts alive */
    Route routes[MAX_ROUTES];
    int n_routes;
    double time_limit;
    size_t chunk, block, first_fill;
    /* results */
    const char *why;          /* why it stopped (informational) */
    char *prefix;             /* the bytes before the "traceEvents" key (the loader reads the metadata there) */
    long long key_start, key_end; /* the "traceEvents" key and the index after its '[' (-1: not found) */
    long long resume;         /* file offset of the next chunk's first event ('{'), -1 when no chunk was taken */
    Scan *done;
    size_t n_done, cap_done;
} ReadAhead;

/* JSON's whitespace (as cutting._WS: a form feed is not, and a cut must not drop one unseen) */
static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* the first `"traceEvents"\s*:\s*[` in b[0:n] (as cutting.EVENTS_KEY.search): its start, *after = after '[' */
static long long find_key(const char *b, size_t n, long long *after) {
    static const char KEY[] = "\"traceEvents\"";
    size_t k = sizeof KEY - 1;
    for (size_t i = 0; i + k <= n; i++) {
        const char *q = memchr(b + i, '"', n - i);
        if (!q) return -1;
        i = (size_t)(q - b);
        if (i + k > n) return -1;
        if (memcmp(b + i, KEY, k) != 0) continue;
        size_t j = i + k;
        while (j < n && is_space(b[j])) j++;
        if (j >= n || b[j] != ':') continue;
        j++;
        while (j < n && is_space(b[j])) j++;
        if (j >= n || b[j] != '[') continue;
        *after = (long long)j + 1;
        return (long long)i;
    }
    return -1;
}

/* the last `}\s*,\s*{` inside b[pos:end] (as cutting.last_boundary): 0 and *cut = index after the
 * '}', *nxt = index of the '{'; -1 when there is none */
static int last_boundary(const char *b, size_t pos, size_t end, size_t *cut, size_t *nxt) {
    size_t i = end;
    while (i > pos) {
        i--;
        if (b[i] != '{') continue;
        size_t j = i;
        while (j > pos && is_space(b[j - 1])) j--;
        if (j == pos || b[j - 1] != ',') continue;
        j--;
        while (j > pos && is_space(b[j - 1])) j--;
        if (j == pos || b[j - 1] != '}') continue;
        *cut = j; /* b[j - 1] is the '}' */
        *nxt = i;
        return 0;
    }
    return -1;
}

/* the file's bytes, or with zlib a gzip file's inflated bytes (its first member: the loader
 * reads any further members) */
typedef struct {
    int fd, gz, eof;
#ifdef NONGEMM_ZLIB
    z_stream zs;
    int zs_on, file_eof;
    unsigned char in[1 << 16];
#endif
} Source;

/* read until b holds `want` bytes or the data ends; -1 on a read error or corrupt data (the
 * loader reports those when it gets there) */
static int read_more(Source *src, char *b, size_t *len, size_t want) {
    while (*len < want && !src->eof) {
#ifdef NONGEMM_ZLIB
        if (src->gz) {
            z_stream *zs = &src->zs;
            if (zs->avail_in == 0 && !src->file_eof) {
                ssize_t r = read(src->fd, src->in, sizeof src->in);
                if (r < 0) { if (errno == EINTR) continue; return -1; }
                if (r == 0) src->file_eof = 1;
                zs->next_in = src->in;
                zs->avail_in = (uInt)r;
            }
            zs->next_out = (unsigned char *)b + *len;
            zs->avail_out = (uInt)(want - *len);
            int rc = inflate(zs, Z_NO_FLUSH);
            *len = want - zs->avail_out;
            if (rc == Z_STREAM_END) src->eof = 1;
            else if (rc == Z_BUF_ERROR && src->file_eof && zs->avail_in == 0) src->eof = 1; /* cut short */
            else if (rc != Z_OK && rc != Z_BUF_ERROR) return -1;
            continue;
        }
#endif
        ssize_t r = read(src->fd, b + *len, want - *len);
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        if (r == 0) src->eof = 1;
        *len += (size_t)r;
    }
    return 0;
}

static void *read_ahead_main(void *arg) {
    ReadAhead *ra = (ReadAhead *)arg;
    Source *src = (Source *)calloc(1, sizeof *src);
    if (!src) { ra->why = "out of memory"; return NULL; }
    src->fd = open(ra->path, O_RDONLY);
    if (src->fd < 0) { free(src); ra->why = "cannot open"; return NULL; }
    /* the buffer holds the byte before the current chunk's first event, the chunk and a block */
    /* a map of its own, unmapped at the end (from the C heap, a thread's arena may keep it) */
    size_t cap = ra->first_fill + ra->chunk + 2 * ra->block + 2;
    char *b = (char *)mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) { close(src->fd); free(src); ra->why = "out of memory"; return NULL; }
    size_t len = 0;
    unsigned char magic[2];
    if (pread(src->fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
#ifdef NONGEMM_ZLIB
        src->gz = 1;
        if (inflateInit2(&src->zs, 16 + MAX_WBITS) != Z_OK) { ra->why = "zlib"; goto done; }
        src->zs_on = 1;
#else
        ra->why = "gzip (built without zlib)";
        goto done;
#endif
    }
    if (read_more(src, b, &len, ra->first_fill) < 0) { ra->why = "read error"; goto done; }
    long long after;
    ra->key_start = find_key(b, len, &after);
    if (ra->key_start < 0) { ra->why = "no traceEvents key in the first block"; goto done; }
    ra->key_end = after;
    ra->prefix = (char *)malloc((size_t)ra->key_start + 1);
    if (!ra->prefix) { ra->why = "out of memory"; goto done; }
    memcpy(ra->prefix, b, (size_t)ra->key_start);
    long long base = 0; /* file offset of b[0] */
    size_t pos = (size_t)after; /* the current chunk's first byte; b[pos - 1] becomes its '[' */
    for (;;) {
        if (__atomic_load_n(&ra->stop, __ATOMIC_ACQUIRE)) { ra->why = "taken"; break; }
        /* the loader cuts a chunk when a whole chunk's length is in; near the end it keeps the rest */
        while (len - pos < ra->chunk && !src->eof) {
            size_t want = len + ra->block;
            if (want > cap) want = cap;
            if (read_more(src, b, &len, want) < 0) { ra->why = "read error"; goto done; }
        }
        if (len - pos < ra->chunk) { ra->why = "near the end"; break; }
        size_t cut, nxt;
        if (last_boundary(b, pos, pos + ra->chunk, &cut, &nxt) < 0) { ra->why = "an event longer than a chunk"; break; }
        char keep_open = b[pos - 1], keep_close = b[cut];
        b[pos - 1] = '[';
        b[cut] = ']';
        if (ra->n_done == ra->cap_done) {
            size_t nc = ra->cap_done ? 2 * ra->cap_done : 16;
            Scan *grown = (Scan *)realloc(ra->done, nc * sizeof *grown);
            if (!grown) { ra->why = "out of memory"; break; }
            ra->done = grown;
            ra->cap_done = nc;
        }
        Scan *sc = &ra->done[ra->n_done];
        memset(sc, 0, sizeof *sc);
        sc->routes = ra->routes;
        sc->n_routes = ra->n_routes;
        sc->time_limit = ra->time_limit;
        sc->base = b + pos - 1;
        sc->end = b + cut + 1;
        sc->gil = NULL;
        sc->abort = &ra->stop; /* a chunk half scanned when the loader takes over is the loader's */
        int rc = ng_scan_array(sc);
        b[pos - 1] = keep_open;
        b[cut] = keep_close;
        if (rc) { /* this chunk is the loader's (it decodes what the scanner leaves, or decodes the file whole) */
            ra->why = rc < 0 ? "out of memory" : sc->why;
            ng_scan_free(sc);
            break;
        }
        ra->n_done++;
        ra->resume = base + (long long)nxt;
        /* keep from the byte before the next event */
        size_t from = nxt - 1;
        memmove(b, b + from, len - from);
        len -= from;
        base += (long long)from;
        pos = 1;
    }
done:
#ifdef NONGEMM_ZLIB
    if (src->zs_on) inflateEnd(&src->zs);
#endif
    munmap(b, cap);
    close(src->fd);
    free(src);
    return NULL;
}

/* wait for the thread (stop: told to stop first, else until it stops by itself) */
static void read_ahead_join(ReadAhead *ra, int stop) {
    if (stop) __atomic_store_n(&ra->stop, 1, __ATOMIC_RELEASE);
    Py_BEGIN_ALLOW_THREADS /* the lock is taken without the GIL: its holder may be joining without it */
    pthread_mutex_lock(&ra->lock);
    if (ra->started) {
        pthread_join(ra->thread, NULL);
        ra->started = 0;
    }
    pthread_mutex_unlock(&ra->lock);
    Py_END_ALLOW_THREADS
}

static void read_ahead_free(ReadAhead *ra) {
    read_ahead_join(ra, 1);
    pthread_mutex_destroy(&ra->lock);
    for (size_t k = 0; k < ra->n_done; k++) ng_scan_free(&ra->done[k]);
    free(ra->done);
    free(ra->prefix);
    free(ra->path);
    Py_XDECREF(ra->routes_arg);
    free(ra);
}

static void read_ahead_capsule_free(PyObject *cap) {
    ReadAhead *ra = (ReadAhead *)PyCapsule_GetPointer(cap, "nongemm_read_ahead");
    if (ra) read_ahead_free(ra);
}

PyObject *ng_read_ahead(PyObject *self, PyObject *args) {
    const char *path;
    PyObject *route_arg;
    double time_limit;
    Py_ssize_t chunk, block, first_fill;
    if (!PyArg_ParseTuple(args, "yOdnnn", &path, &route_arg, &time_limit, &chunk, &block, &first_fill)) return NULL;
    if (ng_bad_time_limit(time_limit)) return NULL;
    if (chunk < 16 || block < 1 || first_fill < 1) {
        PyErr_SetString(PyExc_ValueError, "read_ahead: chunk, block and first_fill must be positive");
        return NULL;
    }
    ReadAhead *ra = (ReadAhead *)calloc(1, sizeof *ra);
    if (!ra) return PyErr_NoMemory();
    pthread_mutex_init(&ra->lock, NULL);
    ra->key_start = ra->key_end = ra->resume = -1;
    ra->path = strdup(path);
    if (!ra->path) { pthread_mutex_destroy(&ra->lock); free(ra); return PyErr_NoMemory(); }
    if (ng_read_routes(route_arg, ra->routes, &ra->n_routes) < 0) {
        pthread_mutex_destroy(&ra->lock);
        free(ra->path);
        free(ra);
        return NULL;
    }
    Py_INCREF(route_arg);
    ra->routes_arg = route_arg;
    ra->time_limit = time_limit;
    ra->chunk = (size_t)chunk;
    ra->block = (size_t)block;
    ra->first_fill = (size_t)first_fill;
    PyObject *cap = PyCapsule_New(ra, "nongemm_read_ahead", read_ahead_capsule_free);
    if (!cap) { read_ahead_free(ra); return NULL; }
    ng_cache_enable();
    if (pthread_create(&ra->thread, NULL, read_ahead_main, ra) != 0) {
        ra->why = "no thread";
        return cap;
    }
    ra->started = 1;
    return cap;
}

/* wait(capsule): until the thread stops by itself (at the end of what it reads ahead, or at a chunk
 * it leaves to the loader); for tests, which must know what was read ahead */
PyObject *ng_read_ahead_wait(PyObject *self, PyObject *arg) {
    ReadAhead *ra = (ReadAhead *)PyCapsule_GetPointer(arg, "nongemm_read_ahead");
    if (!ra) return NULL;
    read_ahead_join(ra, 0);
    Py_RETURN_NONE;
}

/* take(capsule) -> (why, key_start, key_end, resume, (scan results, ...), prefix): stops the thread (a
 * chunk it is scanning is dropped: the loader scans it); the results are scan()'s, one per chunk, in
 * file order; prefix: the bytes before the key; offsets are of the (inflated) JSON text */
PyObject *ng_read_ahead_take(PyObject *self, PyObject *arg) {
    ReadAhead *ra = (ReadAhead *)PyCapsule_GetPointer(arg, "nongemm_read_ahead");
    if (!ra) return NULL;
    if (ra->taken) { PyErr_SetString(PyExc_ValueError, "read_ahead: already taken"); return NULL; }
    ra->taken = 1; /* before the GIL is let go in the join: a second taker is refused, not let in */
    read_ahead_join(ra, 1);
    PyObject *parts = PyTuple_New((Py_ssize_t)ra->n_done);
    if (!parts) return NULL;
    for (size_t k = 0; k < ra->n_done; k++) {
        PyObject *r = ng_scan_result(&ra->done[k]);
        if (!r) { Py_DECREF(parts); return NULL; }
        PyTuple_SET_ITEM(parts, (Py_ssize_t)k, r);
    }
    for (size_t k = 0; k < ra->n_done; k++) ng_scan_free(&ra->done[k]);
    ra->n_done = 0;
    return Py_BuildValue("(sLLLNy#)", ra->why ? ra->why : "", ra->key_start, ra->key_end, ra->resume, parts,
                         ra->prefix ? ra->prefix : "", (Py_ssize_t)(ra->prefix ? ra->key_start : 0));
}
#endif
