/*
 * _nongemm_sweep: the op tree of a trace in one sort and one pass.
 *
 * Why: the columnar sweep of nongemm_trace/link/nesting.py sorts the ops' starts, finds
 * each op's depth by binary search in the sorted ends and its parent (and each launch
 * call's innermost op) with as-of joins. On a 1 GB trace that is most of a second and
 * tens of MB of temporary columns; here the same numbers come from a radix sort of the
 * keys (Kineto writes each thread's events in start order: grouping them by thread mostly
 * suffices) and a single pass that keeps the open ops' ends in a heap and remembers, per
 * depth, the last op started on the thread.
 *
 * Input (Int64 columns, one chunk each, no nulls, as Arrow C streams): per op the packed
 * key of its start and of its end (thread * span + time - first time, computed by the
 * caller), minus its duration, its id and its thread; per query (launch call) the packed
 * key of its start and its thread; the number of threads (each below it). The sweep's order
 * and tie rules are nesting.py's: by key, ends before starts before queries at equal keys,
 * longer ops first, then by id. Output (Int64 columns in input order): each op's depth and parent id (null for depth 0), each query's hit: the
 * last op started at or before it on its thread whose depth is (ops open at the query) - 1
 * (null when none); the caller checks that the hit contains the query.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "arrow_c.h"

#define SWEEP_ABI 3

/* ---- input: one Int64 column from an Arrow C stream capsule ---- */

typedef struct {
    struct ArrowArray array;
    const int64_t *v;
    int64_t n;
} Column;

static void column_release(Column *c) {
    if (c->array.release) c->array.release(&c->array);
    c->array.release = NULL;
}

static int column_read(PyObject *capsule, Column *c, const char *what) {
    memset(c, 0, sizeof *c);
    struct ArrowArrayStream *stream = (struct ArrowArrayStream *)PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (!stream) return -1;
    struct ArrowSchema schema;
    memset(&schema, 0, sizeof schema);
    if (stream->get_schema(stream, &schema) != 0) {
        PyErr_Format(PyExc_ValueError, "%s: no schema", what);
        return -1;
    }
    int is_int64 = schema.format && strcmp(schema.format, "l") == 0;
    if (schema.release) schema.release(&schema);
    if (!is_int64) {
        PyErr_Format(PyExc_TypeError, "%s: an Int64 column expected", what);
        return -1;
    }
    if (stream->get_next(stream, &c->array) != 0) {
        PyErr_Format(PyExc_ValueError, "%s: the stream failed", what);
        return -1;
    }
    if (!c->array.release) { /* no chunk: an empty column */
        c->v = NULL;
        c->n = 0;
        return 0;
    }
    struct ArrowArray next;
    memset(&next, 0, sizeof next);
    if (stream->get_next(stream, &next) != 0 || next.release) {
        if (next.release) next.release(&next);
        column_release(c);
        PyErr_Format(PyExc_ValueError, "%s: one chunk expected (rechunk first)", what);
        return -1;
    }
    if (c->array.null_count != 0 || c->array.n_buffers != 2) {
        column_release(c);
        PyErr_Format(PyExc_ValueError, "%s: nulls are not allowed", what);
        return -1;
    }
    c->v = (const int64_t *)c->array.buffers[1] + c->array.offset;
    c->n = c->array.length;
    return 0;
}

/* ---- output: an Int64 column (nullable) as a (schema capsule, array capsule) pair ---- */

typedef struct { int64_t *vals; uint8_t *valid; const void *ptrs[2]; } Out;

static void out_release(struct ArrowArray *a) {
    Out *o = (Out *)a->private_data;
    free(o->vals);
    free(o->valid);
    free(o);
    a->release = NULL;
}

/* vals (n values, owned: freed here on failure) with valid (one byte per row, or NULL: all
 * valid; borrowed) -> (schema, array) capsules */
static PyObject *export_column(const char *name, int64_t *vals, const uint8_t *valid, int64_t n) {
    struct ArrowSchema *schema = (struct ArrowSchema *)calloc(1, sizeof *schema);
    struct ArrowArray *array = (struct ArrowArray *)calloc(1, sizeof *array);
    Out *o = (Out *)calloc(1, sizeof *o);
    int64_t nulls = 0;
    if (valid) for (int64_t r = 0; r < n; r++) nulls += !valid[r];
    uint8_t *bitmap = nulls ? (uint8_t *)calloc((size_t)(n + 7) / 8, 1) : NULL;
    if (!schema || !array || !o || (nulls && !bitmap)) {
        free(schema); free(array); free(o); free(bitmap); free(vals);
        return PyErr_NoMemory();
    }
    if (bitmap) for (int64_t r = 0; r < n; r++) if (valid[r]) bitmap[r >> 3] |= (uint8_t)(1u << (r & 7));
    o->vals = vals;
    o->valid = bitmap;
    o->ptrs[0] = bitmap;
    o->ptrs[1] = vals;
    *schema = (struct ArrowSchema){"l", name, NULL, ARROW_FLAG_NULLABLE, 0, NULL, NULL, arrow_schema_release, NULL};
    *array = (struct ArrowArray){n, nulls, 0, 2, 0, o->ptrs, NULL, NULL, out_release, o};
    PyObject *sc = PyCapsule_New(schema, "arrow_schema", arrow_drop_schema);
    if (!sc) { out_release(array); free(schema); free(array); return NULL; }
    PyObject *ac = PyCapsule_New(array, "arrow_array", arrow_drop_array);
    if (!ac) { Py_DECREF(sc); out_release(array); free(array); return NULL; }
    return Py_BuildValue("(NN)", sc, ac);
}

/* ---- the sort ---- */

typedef struct { int64_t k; int64_t i; } KeyIdx;

/* LSD radix on non-negative keys, stable, 11 bits a pass (passes whose digits are all equal skipped) */
static int radix_sort(KeyIdx *a, int64_t n) {
    uint64_t top = 0;
    for (int64_t r = 0; r < n; r++) top |= (uint64_t)a[r].k;
    KeyIdx *tmp = (KeyIdx *)malloc((size_t)(n ? n : 1) * sizeof *tmp);
    if (!tmp) return -1;
    KeyIdx *src = a, *dst = tmp;
    enum { BITS = 11, BUCKETS = 1 << 11 };
    for (int shift = 0; shift < 64 && (top >> shift); shift += BITS) {
        int64_t count[BUCKETS];
        memset(count, 0, sizeof count);
        for (int64_t r = 0; r < n; r++) count[((uint64_t)src[r].k >> shift) & (BUCKETS - 1)]++;
        int skip = 0;
        for (int d = 0; d < BUCKETS; d++) if (count[d] == n) skip = 1;
        if (skip) continue;
        int64_t pos = 0;
        for (int d = 0; d < BUCKETS; d++) { int64_t c = count[d]; count[d] = pos; pos += c; }
        for (int64_t r = 0; r < n; r++) dst[count[((uint64_t)src[r].k >> shift) & (BUCKETS - 1)]++] = src[r];
        KeyIdx *t = src; src = dst; dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof *a);
    free(tmp);
    return 0;
}

static int in_order(const KeyIdx *a, int64_t n) {
    for (int64_t r = 1; r < n; r++) if (a[r].k < a[r - 1].k) return 0;
    return 1;
}

/* a stably sorted by key. Kineto writes each thread's events in start order, so the keys are
 * grouped by thread first (a counting sort by thr[i], each below n_thr) and a thread's
 * run is radix-sorted only when it is not in order already. */
static int sort_keys(KeyIdx *a, int64_t n, const int64_t *thr, int64_t n_thr) {
    if (n < 2 || in_order(a, n)) return 0;
    if (n_thr <= 0 || n_thr > 2 * n + 65536) return radix_sort(a, n);
    int64_t *start = (int64_t *)calloc((size_t)n_thr + 1, sizeof *start);
    KeyIdx *tmp = (KeyIdx *)malloc((size_t)n * sizeof *tmp);
    if (!start || !tmp) { free(start); free(tmp); return -1; }
    for (int64_t r = 0; r < n; r++) start[thr[a[r].i] + 1]++;
    for (int64_t t = 0; t < n_thr; t++) start[t + 1] += start[t];
    for (int64_t r = 0; r < n; r++) tmp[start[thr[a[r].i]]++] = a[r]; /* start[t] ends as thread t's end */
    memcpy(a, tmp, (size_t)n * sizeof *a);
    free(tmp);
    int rc = 0;
    for (int64_t t = 0, lo = 0; t < n_thr && !rc; lo = start[t], t++)
        if (!in_order(a + lo, start[t] - lo)) rc = radix_sort(a + lo, start[t] - lo);
    free(start);
    return rc;
}

/* ties of the starts' keys: longer ops first (smaller minus-duration), then smaller id */
typedef struct { int64_t neg_dur, id, i; } Tie;

static int tie_cmp(const void *x, const void *y) {
    const Tie *a = (const Tie *)x, *b = (const Tie *)y;
    if (a->neg_dur != b->neg_dur) return a->neg_dur < b->neg_dur ? -1 : 1;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    return 0;
}

static int order_ties(KeyIdx *a, int64_t n, const int64_t *neg_dur, const int64_t *id) {
    Tie *run = NULL;
    int64_t cap = 0;
    for (int64_t lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && a[hi].k == a[lo].k; hi++) {}
        int64_t len = hi - lo;
        if (len < 2) continue;
        if (len > cap) {
            Tie *grown = (Tie *)realloc(run, (size_t)len * sizeof *run);
            if (!grown) { free(run); return -1; }
            run = grown;
            cap = len;
        }
        for (int64_t r = 0; r < len; r++) {
            int64_t i = a[lo + r].i;
            run[r] = (Tie){neg_dur[i], id[i], i};
        }
        qsort(run, (size_t)len, sizeof *run, tie_cmp);
        for (int64_t r = 0; r < len; r++) a[lo + r].i = run[r].i;
    }
    free(run);
    return 0;
}

/* ---- the pass ---- */

/* per depth, the last op started on the thread being swept (thread stamps tell stale entries) */
typedef struct { int64_t *op, *thr; int64_t cap; } Last;

static int last_reserve(Last *l, int64_t depth) {
    if (depth < l->cap) return 0;
    int64_t cap = l->cap ? l->cap : 64;
    while (cap <= depth) cap *= 2;
    int64_t *op = (int64_t *)realloc(l->op, (size_t)cap * sizeof *op);
    if (!op) return -1;
    l->op = op;
    int64_t *thr = (int64_t *)realloc(l->thr, (size_t)cap * sizeof *thr);
    if (!thr) return -1;
    l->thr = thr;
    for (int64_t d = l->cap; d < cap; d++) l->thr[d] = -1;
    l->cap = cap;
    return 0;
}

/* the ends of the ops open so far, smallest on top: "ends at or before key k" is what the
 * heap sheds before k (an op with dur > 0 ends after it starts, so every such end belongs
 * to an op already started); the ops open at k are what remains */
typedef struct { int64_t *v; int64_t n, cap; } Heap;

static int heap_push(Heap *h, int64_t x) {
    if (h->n == h->cap) {
        int64_t cap = h->cap ? 2 * h->cap : 256;
        int64_t *v = (int64_t *)realloc(h->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        h->v = v;
        h->cap = cap;
    }
    int64_t r = h->n++;
    while (r > 0 && h->v[(r - 1) / 2] > x) { h->v[r] = h->v[(r - 1) / 2]; r = (r - 1) / 2; }
    h->v[r] = x;
    return 0;
}

static void heap_shed(Heap *h, int64_t k) {
    while (h->n && h->v[0] <= k) {
        int64_t x = h->v[--h->n], r = 0;
        for (;;) {
            int64_t c = 2 * r + 1;
            if (c >= h->n) break;
            if (c + 1 < h->n && h->v[c + 1] < h->v[c]) c++;
            if (h->v[c] >= x) break;
            h->v[r] = h->v[c];
            r = c;
        }
        if (h->n) h->v[r] = x;
    }
}

typedef struct {
    Column start, end, neg_dur, id, thr, query, query_thr;
    int64_t n_thr;
    KeyIdx *starts, *queries;
    int64_t *depth, *parent, *hit;
    uint8_t *parent_ok, *hit_ok;
    Last last;
    Heap open;
} Sweep;

static int sweep(Sweep *s) {
    int64_t n = s->start.n, m = s->query.n;
    const int64_t *op_thr = s->thr.v, *q_thr = s->query_thr.v;
    size_t nn = (size_t)(n ? n : 1), mm = (size_t)(m ? m : 1);
    s->starts = (KeyIdx *)malloc(nn * sizeof(KeyIdx));
    s->queries = (KeyIdx *)malloc(mm * sizeof(KeyIdx));
    s->depth = (int64_t *)malloc(nn * sizeof(int64_t));
    s->parent = (int64_t *)calloc(nn, sizeof(int64_t));
    s->parent_ok = (uint8_t *)calloc(nn, 1);
    s->hit = (int64_t *)calloc(mm, sizeof(int64_t));
    s->hit_ok = (uint8_t *)calloc(mm, 1);
    if (!s->starts || !s->queries || !s->depth || !s->parent || !s->parent_ok || !s->hit || !s->hit_ok)
        return -1;
    for (int64_t r = 0; r < n; r++) s->starts[r] = (KeyIdx){s->start.v[r], r};
    for (int64_t r = 0; r < m; r++) s->queries[r] = (KeyIdx){s->query.v[r], r};
    if (sort_keys(s->starts, n, op_thr, s->n_thr) || order_ties(s->starts, n, s->neg_dur.v, s->id.v) ||
        sort_keys(s->queries, m, q_thr, s->n_thr))
        return -1;
    int64_t j = 0;
    for (int64_t qn = 0; qn <= m; qn++) {
        /* the starts at or before this query (all of them after the last query) */
        int64_t limit_k = qn < m ? s->queries[qn].k : INT64_MAX;
        for (; j < n && s->starts[j].k <= limit_k; j++) {
            int64_t k = s->starts[j].k, i = s->starts[j].i, thr = op_thr[i];
            heap_shed(&s->open, k); /* ends before starts at equal keys */
            int64_t depth = s->open.n;
            s->depth[i] = depth;
            if (depth > 0 && depth - 1 < s->last.cap && s->last.thr[depth - 1] == thr) {
                s->parent[i] = s->id.v[s->last.op[depth - 1]];
                s->parent_ok[i] = 1;
            }
            if (last_reserve(&s->last, depth) || heap_push(&s->open, s->end.v[i])) return -1;
            s->last.op[depth] = i;
            s->last.thr[depth] = thr;
        }
        if (qn == m) break;
        int64_t k = s->queries[qn].k, i = s->queries[qn].i, thr = q_thr[i];
        heap_shed(&s->open, k);
        int64_t want = s->open.n - 1;
        if (want >= 0 && want < s->last.cap && s->last.thr[want] == thr) {
            s->hit[i] = s->id.v[s->last.op[want]];
            s->hit_ok[i] = 1;
        }
    }
    return 0;
}

static void sweep_free(Sweep *s) {
    column_release(&s->start);
    column_release(&s->end);
    column_release(&s->neg_dur);
    column_release(&s->id);
    column_release(&s->thr);
    column_release(&s->query_thr);
    column_release(&s->query);
    free(s->starts); free(s->queries); free(s->open.v);
    free(s->depth); free(s->parent); free(s->hit);
    free(s->parent_ok); free(s->hit_ok);
    free(s->last.op); free(s->last.thr);
}

static PyObject *op_tree(PyObject *self, PyObject *args) {
    PyObject *start, *end, *neg_dur, *id, *thr, *query, *query_thr;
    long long n_thr;
    if (!PyArg_ParseTuple(args, "OOOOOOOL", &start, &end, &neg_dur, &id, &thr, &query, &query_thr, &n_thr))
        return NULL;
    Sweep s;
    memset(&s, 0, sizeof s);
    PyObject *out = NULL;
    if (column_read(start, &s.start, "start") || column_read(end, &s.end, "end") ||
        column_read(neg_dur, &s.neg_dur, "neg_dur") || column_read(id, &s.id, "id") ||
        column_read(thr, &s.thr, "thr") || column_read(query, &s.query, "query") ||
        column_read(query_thr, &s.query_thr, "query_thr"))
        goto done;
    if (s.end.n != s.start.n || s.neg_dur.n != s.start.n || s.id.n != s.start.n || s.thr.n != s.start.n ||
        s.query_thr.n != s.query.n) {
        PyErr_SetString(PyExc_ValueError, "columns of different lengths");
        goto done;
    }
    for (int64_t r = 0; r < s.start.n; r++)
        if (s.start.v[r] < 0 || s.end.v[r] <= s.start.v[r] || s.thr.v[r] < 0 || s.thr.v[r] >= n_thr) {
            PyErr_SetString(PyExc_ValueError, "a key is negative, beyond the threads, or an op does not end after it starts");
            goto done;
        }
    for (int64_t r = 0; r < s.query.n; r++)
        if (s.query.v[r] < 0 || s.query_thr.v[r] < 0 || s.query_thr.v[r] >= n_thr) {
            PyErr_SetString(PyExc_ValueError, "a query key is negative or beyond the threads");
            goto done;
        }
    s.n_thr = (int64_t)n_thr;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sweep(&s);
    Py_END_ALLOW_THREADS
    if (rc) { PyErr_NoMemory(); goto done; }
    {
        int64_t n = s.start.n, m = s.query.n;
        /* each export owns its values from the call on, whether it succeeds or not */
        PyObject *d = export_column("depth", s.depth, NULL, n), *p = NULL, *h = NULL;
        s.depth = NULL;
        if (d) { p = export_column("parent_id", s.parent, s.parent_ok, n); s.parent = NULL; }
        if (p) { h = export_column("op_id", s.hit, s.hit_ok, m); s.hit = NULL; }
        if (d && p && h) out = Py_BuildValue("(NNN)", d, p, h);
        else { Py_XDECREF(d); Py_XDECREF(p); Py_XDECREF(h); }
    }
done:
    sweep_free(&s);
    return out;
}

static PyMethodDef methods[] = {
    {"op_tree", op_tree, METH_VARARGS,
     "op_tree(start_key, end_key, neg_dur, op_id, thread, query_key, query_thread, threads)\n"
     "-> (depth, parent_id, hit)\n\n"
     "Arrow C stream capsules of Int64 columns in; (schema, array) capsule pairs out, in input order."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nongemm_sweep", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__nongemm_sweep(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "ABI", SWEEP_ABI) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
