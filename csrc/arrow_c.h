/*
 * The Arrow C Data Interface structures (https://arrow.apache.org/docs/format/CDataInterface.html),
 * shared by the project's C extensions: columns go to polars and come back from it through
 * them, without pyarrow and without copies.
 */
#ifndef NONGEMM_ARROW_C_H
#define NONGEMM_ARROW_C_H

#include <stdint.h>

#define ARROW_FLAG_NULLABLE 2

struct ArrowSchema {
    const char *format, *name, *metadata;
    int64_t flags, n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length, null_count, offset, n_buffers, n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};

/* Capsule destructors and the schema release of the columns the extensions hand to Python
 * (a schema that owns nothing); only where Python.h is included. */
#ifdef Py_PYTHON_H
static void arrow_schema_release(struct ArrowSchema *s) { s->release = NULL; }

static void arrow_drop_schema(PyObject *cap) {
    struct ArrowSchema *s = (struct ArrowSchema *)PyCapsule_GetPointer(cap, "arrow_schema");
    if (s && s->release) s->release(s);
    free(s);
}

static void arrow_drop_array(PyObject *cap) {
    struct ArrowArray *a = (struct ArrowArray *)PyCapsule_GetPointer(cap, "arrow_array");
    if (a && a->release) a->release(a);
    free(a);
}
#endif

#endif
