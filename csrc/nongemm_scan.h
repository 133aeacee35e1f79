/*
 * What the scanner (nongemm_scan.c) and its read-ahead thread (nongemm_read_ahead.c) share.
 * Both are linked into the one extension _nongemm_scan: the thread fills the scanner's own
 * Scan results (column buffers from the same map cache, handed to Python by the same code),
 * so a second extension would need this whole interface exported through a capsule.
 */
#ifndef NONGEMM_SCAN_H
#define NONGEMM_SCAN_H

#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mremap */
#endif
#include <Python.h>
#include <stddef.h>

/* Column buffers are anonymous memory maps where there are such (see nongemm_scan.c);
 * -DNONGEMM_NO_MMAP builds the malloc variant (what other systems get). */
#if (defined(__linux__) || defined(__APPLE__) || defined(__FreeBSD__)) && !defined(NONGEMM_NO_MMAP)
#define SCAN_MMAP 1
#include <sys/mman.h>
#include <pthread.h>
#ifndef MAP_ANONYMOUS
#define MAP_ANONYMOUS MAP_ANON
#endif
/* the read-ahead thread needs threads and maps */
#define READ_AHEAD 1
#endif

#if defined(__GNUC__)
#define NG_HIDDEN __attribute__((visibility("hidden")))
#else
#define NG_HIDDEN
#endif

typedef struct { char *p; size_t len, cap; } Buf;

/* the tables (the Python side's TABLES: ops, launch calls, activities, Python functions, CUDA sync
 * records; then the other accelerators' events: category and duration) */
enum { T_OPS, T_LAUNCHES, T_ACTS, T_PY, T_SYNCS, T_OTHER, N_T };
#define MAX_COLS 16

/* one column: validity bytes (nullable columns), then values or offsets, then text */
typedef struct { Buf valid, vals, data; } Col;
typedef struct { size_t n; Col col[MAX_COLS]; } Table;

/* a category the caller routes to a table (activities: with their kind) */
#define MAX_ROUTES 64
/* no route's category is longer (checked when routes are read) */
#define MAX_KEY 256
typedef struct { const char *cat; Py_ssize_t cat_n; int table; const char *kind; Py_ssize_t kind_n; } Route;

typedef struct {
    const char *base, *end;
    const char *why; /* the reason for giving up */
    PyThreadState *gil; /* while the GIL is released: to take it back for a float CPython must parse */
    const Route *routes;
    int n_routes;
    double time_limit; /* a time must be below this many microseconds (the caller's events.TIME_LIMIT_US) */
    const int *abort; /* the read-ahead thread's stop flag: checked every 4096 events (NULL: none) */
    Table t[N_T];
    size_t n;                 /* events */
    size_t no_cat;            /* complete events without a category */
    size_t bad_phase[MAX_ROUTES], bad_time[MAX_ROUTES]; /* per route: not 'X'; 'X' without valid times */
} Scan;

/* the whole array sc->base..sc->end; 0 when scanned, 1 when given up (sc->why), -1 when out of memory */
NG_HIDDEN int ng_scan_array(Scan *sc);
/* the scan's columns returned (to the map cache) */
NG_HIDDEN void ng_scan_free(Scan *sc);
/* (events, (columns of each table), no_cat, bad_phase, bad_time); the columns move into it (GIL held) */
NG_HIDDEN PyObject *ng_scan_result(Scan *sc);
/* the routes argument ((category, table, kind or None), ...) into routes[0..*n) (GIL held) */
NG_HIDDEN int ng_read_routes(PyObject *arg, Route *routes, int *n);
/* the largest time limit a caller may give (microseconds): 1000 times it, and the sum of two
 * times under it, fit int64 nanoseconds */
#define MAX_TIME_LIMIT_US 4.6e15
/* -1 with ValueError set unless 0 < limit <= MAX_TIME_LIMIT_US */
NG_HIDDEN int ng_bad_time_limit(double limit);
/* keep released column maps for reuse from now until trim() */
NG_HIDDEN void ng_cache_enable(void);

#ifdef READ_AHEAD
NG_HIDDEN PyObject *ng_read_ahead(PyObject *self, PyObject *args);
NG_HIDDEN PyObject *ng_read_ahead_wait(PyObject *self, PyObject *arg);
NG_HIDDEN PyObject *ng_read_ahead_take(PyObject *self, PyObject *arg);
#endif

#endif
