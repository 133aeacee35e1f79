/*
 * _nongemm_scan: one pass over a JSON array of trace events, straight into columns.
 *
 * Why: decoding a Kineto trace into one Python object per event and then reading
 * each object's fields back into columns costs about as much again as the decoding
 * (and both hold the GIL). This scanner reads the few fields the analysis needs
 * (ph, cat, name, pid, tid, ts, dur and ten keys of args) and writes each event
 * straight into the Arrow buffers of its table (ops, launch calls, GPU activities,
 * Python functions, CUDA sync records: routed by category as the caller says), setting aside and
 * counting what the tables do not take and converting times to nanoseconds, as
 * the Python path does. It runs without the GIL, so two chunks can be scanned at
 * once on two cores, and no per-event work is left for Python or polars.
 *
 * Contract: it accepts only input that msgspec would decode into exactly the same
 * values (the Python path in nongemm_trace/load/kineto/events.py and tables.py). On
 * anything else (invalid or unusual JSON, a field of an unexpected type, an escaped
 * key, a duplicate key, an integer beyond int64, invalid UTF-8 anywhere) it gives
 * up and returns a short reason, and the caller decodes the chunk the Python way.
 * So the result never depends on whether this module is built.
 *
 * Floats are parsed exactly: by one correctly rounded IEEE operation when the
 * significand fits in 53 bits and the power of ten in 22 (Clinger's fast path),
 * else by CPython's own correctly rounded parser once the GIL is held again.
 */
#include "nongemm_scan.h"
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <math.h>
#include "arrow_c.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* bumped whenever the result layout changes; the Python side checks it */
#define SCAN_ABI 10
#define MAX_DEPTH 256

/* Column buffers are anonymous memory maps where there are such (not C heap blocks that grow
 * by realloc): a chunk's columns are returned to the system as soon as Python drops them,
 * instead of fragmenting the heap (tens of MB of resident memory on a 200 MB trace).
 * -DNONGEMM_NO_MMAP builds the malloc variant (what other systems get), to compare the two. */

#ifdef SCAN_MMAP
/* Maps of released columns, kept for the next chunk's columns (up to CACHE_BYTES): a fresh map
 * costs a page fault and a zeroed page per 4 KB written, most of a second per GB of trace.
 * trim() returns them to the system once the load is done, and stops the keeping until the next scan. Columns are released by whichever
 * thread drops them last, hence the lock. */
#define CACHE_SLOTS 256
#define CACHE_BYTES ((size_t)16 << 20)
static struct { char *p; size_t cap; } cache[CACHE_SLOTS];
static size_t cache_bytes;
static int cache_on; /* from a scan until trim(): columns released later are unmapped at once */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* a cached map of at least `need` bytes (the smallest such), or NULL */
static char *cache_take(size_t need, size_t *cap) {
    char *p = NULL;
    pthread_mutex_lock(&cache_lock);
    int best = -1;
    for (int k = 0; k < CACHE_SLOTS; k++)
        if (cache[k].p && cache[k].cap >= need && (best < 0 || cache[k].cap < cache[best].cap)) best = k;
    if (best >= 0) {
        p = cache[best].p;
        *cap = cache[best].cap;
        cache[best].p = NULL;
        cache_bytes -= *cap;
    }
    pthread_mutex_unlock(&cache_lock);
    return p;
}

static int cache_put(char *p, size_t cap) {
    int kept = 0;
    pthread_mutex_lock(&cache_lock);
    if (cache_on && cache_bytes + cap <= CACHE_BYTES)
        for (int k = 0; k < CACHE_SLOTS; k++)
            if (!cache[k].p) { cache[k].p = p; cache[k].cap = cap; cache_bytes += cap; kept = 1; break; }
    pthread_mutex_unlock(&cache_lock);
    return kept;
}
#endif

int ng_bad_time_limit(double limit) {
    if (limit > 0 && limit <= MAX_TIME_LIMIT_US) return 0;
    PyErr_SetString(PyExc_ValueError, "time_limit: more than 0 and at most 4.6e15 us");
    return -1;
}

void ng_cache_enable(void) {
#ifdef SCAN_MMAP
    pthread_mutex_lock(&cache_lock);
    cache_on = 1;
    pthread_mutex_unlock(&cache_lock);
#endif
}

static void buf_release(char *p, size_t cap) {
    if (!p) return;
#ifdef SCAN_MMAP
    if (!cache_put(p, cap)) munmap(p, cap);
#else
    (void)cap;
    free(p);
#endif
}

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64 * 1024;
    while (cap < b->len + extra) cap *= 2;
#ifdef SCAN_MMAP
    char *p;
    if (!b->p) {
        size_t got = 0;
        p = cache_take(cap, &got);
        if (p) { b->p = p; b->cap = got; return 0; }
    }
#if defined(__linux__)
    if (b->p) p = (char *)mremap(b->p, b->cap, cap, MREMAP_MAYMOVE);
    else
#endif
    {
        p = (char *)mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != (char *)MAP_FAILED && b->p) {
            memcpy(p, b->p, b->len);
            munmap(b->p, b->cap);
        }
    }
    if (p == (char *)MAP_FAILED) return -1;
#else
    char *p = (char *)realloc(b->p, cap);
    if (!p) return -1;
#endif
    b->p = p;
    b->cap = cap;
    return 0;
}

/* a buffer handed to a table keeps only the pages its contents use: one taken from the cache
 * (or grown by doubling) may have had pages written past its length by an earlier chunk's
 * column, and those stayed resident for as long as the table held the buffer (about 300 MB of
 * a 1 GB trace's tables); the pages past the end read as zeros when the buffer is next used */
static void buf_trim(const Buf *b) {
#if defined(SCAN_MMAP) && defined(MADV_DONTNEED)
    if (!b->p) return;
    size_t page = 4096, used = (b->len + page - 1) / page * page;
    if (used < b->cap) madvise(b->p + used, b->cap - used, MADV_DONTNEED);
#else
    (void)b;
#endif
}

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

/* the fields of one event, as read */
enum { S_PH, S_CAT, S_NAME, S_PID, S_TID, S_DIMS, S_TYPE, S_CONCRETE, S_SYNC_KIND, N_STR };
enum { F_TS, F_DUR, N_F };
enum { I_EXT, I_EXT_LEGACY, I_CORR, I_DEVICE, I_STREAM, I_BYTES, I_WAIT_STREAM, I_WAIT_CORR, I_SEQ, N_I };

typedef struct { const char *s; size_t n; int esc; } Span; /* s == NULL: absent or null */

typedef struct {
    Span str[N_STR];
    double f[N_F];
    unsigned char f_ok[N_F];
    int64_t i[N_I];
    unsigned char i_ok[N_I];
} Ev;

/* The output: the tables' columns, in the order and types of the Python path's tables
 * (nongemm_trace/load/kineto/tables.py): events are routed by category, checked (complete 'X' events
 * with plausible times) and their times turned into integer nanoseconds here, so that the
 * Python side only wraps the buffers. */
enum { C_NAME, C_CAT, C_PID, C_TID, C_TS_NS, C_DUR_NS, C_KIND, C_EXT, C_CORR, C_DEVICE, C_STREAM, C_BYTES,
       C_DIMS, C_TYPE, C_CONCRETE, C_END_NS, C_EV_IDX, C_DUR_US, C_SYNC_KIND, C_WAIT_STREAM, C_WAIT_CORR, C_SEQ, N_COLKINDS };
static const struct { const char *name; const char *fmt; int nullable; } COLS[N_COLKINDS] = {
    [C_NAME] = {"name", "U", 0}, [C_CAT] = {"cat", "U", 0}, [C_PID] = {"pid", "U", 0}, [C_TID] = {"tid", "U", 0},
    [C_TS_NS] = {"ts_ns", "l", 0}, [C_DUR_NS] = {"dur_ns", "l", 0}, [C_KIND] = {"kind", "U", 0},
    [C_EXT] = {"external_id", "l", 1}, [C_CORR] = {"correlation", "l", 1}, [C_DEVICE] = {"device", "l", 1},
    [C_STREAM] = {"stream", "l", 1}, [C_BYTES] = {"bytes", "l", 1}, [C_DIMS] = {"input_dims", "U", 1},
    [C_TYPE] = {"input_type", "U", 1}, [C_CONCRETE] = {"concrete_inputs", "U", 1}, [C_END_NS] = {"end_ns", "l", 0},
    [C_EV_IDX] = {"ev_idx", "l", 0}, [C_DUR_US] = {"dur", "g", 0}, [C_SYNC_KIND] = {"kind", "U", 1},
    [C_WAIT_STREAM] = {"wait_on_stream", "l", 1}, [C_WAIT_CORR] = {"wait_on_cuda_event_record_corr_id", "l", 1},
    [C_SEQ] = {"seq", "l", 1},
};

/* the tables (the Python side's TABLES, then the other accelerators' events: category and duration) */
static const int SPEC[N_T][MAX_COLS + 1] = { /* each ends with -1 */
    [T_OPS] = {C_NAME, C_CAT, C_PID, C_TID, C_TS_NS, C_DUR_NS, C_EXT, C_DIMS, C_TYPE, C_CONCRETE, C_SEQ, C_END_NS,
                C_EV_IDX, -1},
    [T_LAUNCHES] = {C_NAME, C_CAT, C_PID, C_TID, C_TS_NS, C_DUR_NS, C_EXT, C_CORR, C_END_NS, C_EV_IDX, -1},
    [T_ACTS] = {C_NAME, C_CAT, C_PID, C_TID, C_TS_NS, C_DUR_NS, C_KIND, C_EXT, C_CORR, C_DEVICE, C_STREAM, C_BYTES,
                C_END_NS, C_EV_IDX, -1},
    [T_PY] = {C_NAME, C_CAT, C_PID, C_TID, C_TS_NS, C_DUR_NS, C_EXT, C_END_NS, C_EV_IDX, -1},
    [T_SYNCS] = {C_NAME, C_CAT, C_PID, C_TID, C_TS_NS, C_DUR_NS, C_EXT, C_SYNC_KIND, C_CORR, C_DEVICE, C_STREAM,
                 C_WAIT_STREAM, C_WAIT_CORR, C_END_NS, C_EV_IDX, -1},
    [T_OTHER] = {C_CAT, C_DUR_US, -1},
};


#define GIVE_UP(sc, reason) do { (sc)->why = (reason); return NULL; } while (0)

static inline const char *ws(const char *p, const char *end) {
    if (p < end && (unsigned char)*p > ' ') return p; /* most often: no whitespace at all */
    if (p + 1 < end && *p == ' ' && (unsigned char)p[1] > ' ') return p + 1; /* or one space */
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

static inline int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int hex4(const char *p, const char *end, unsigned *out) {
    if (end - p < 4) return -1;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(p[k]);
        if (h < 0) return -1;
        v = (v << 4) | (unsigned)h;
    }
    *out = v;
    return 0;
}

/* p at the opening quote; validates the string (escapes, control bytes, UTF-8) and returns
 * the position after the closing quote; span = the bytes between the quotes */
static const char *scan_string(Scan *sc, const char *p, Span *span) {
    const char *end = sc->end;
    const char *s = ++p;
    int esc = 0;
    while (p < end) {
#ifdef __SSE2__
        /* 16 plain bytes at a time: none is '"', '\\', a control byte or non-ASCII */
        while (end - p >= 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)p);
            __m128i special = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
                _mm_cmplt_epi8(x, _mm_set1_epi8(0x20))); /* signed: also catches bytes >= 0x80 */
            int mask = _mm_movemask_epi8(special);
            if (mask) { p += __builtin_ctz((unsigned)mask); break; }
            p += 16;
        }
        if (p >= end) break;
#endif
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            if (span) { span->s = s; span->n = (size_t)(p - s); span->esc = esc; }
            return p + 1;
        }
        if (c == '\\') {
            esc = 1;
            if (p + 1 >= end) GIVE_UP(sc, "truncated escape");
            char e = p[1];
            if (e == 'u') {
                unsigned u;
                if (hex4(p + 2, end, &u)) GIVE_UP(sc, "bad \\u escape");
                p += 6;
                if (u >= 0xD800 && u <= 0xDBFF) {
                    unsigned lo;
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, end, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                        GIVE_UP(sc, "lone surrogate");
                    p += 6;
                } else if (u >= 0xDC00 && u <= 0xDFFF) {
                    GIVE_UP(sc, "lone surrogate");
                }
                continue;
            }
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                p += 2;
                continue;
            }
            GIVE_UP(sc, "bad escape");
        }
        if (c < 0x20) GIVE_UP(sc, "control byte in string");
        if (c < 0x80) { p++; continue; }
        /* UTF-8: strict (no overlong forms, no surrogates, at most U+10FFFF) */
        int n;
        unsigned cp;
        if (c >= 0xC2 && c <= 0xDF) { n = 1; cp = c & 0x1F; }
        else if (c >= 0xE0 && c <= 0xEF) { n = 2; cp = c & 0x0F; }
        else if (c >= 0xF0 && c <= 0xF4) { n = 3; cp = c & 0x07; }
        else GIVE_UP(sc, "invalid UTF-8");
        if (end - p <= n) GIVE_UP(sc, "invalid UTF-8");
        for (int k = 1; k <= n; k++) {
            unsigned char cc = (unsigned char)p[k];
            if ((cc & 0xC0) != 0x80) GIVE_UP(sc, "invalid UTF-8");
            cp = (cp << 6) | (cc & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            GIVE_UP(sc, "invalid UTF-8");
        p += n + 1;
    }
    GIVE_UP(sc, "unterminated string");
}

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

typedef struct {
    int is_int;       /* no fraction, no exponent */
    int64_t ival;     /* when is_int */
    int fast;         /* dval is exact */
    double dval;
    const char *s;
    size_t n;
} Num;

/* a JSON number (strict grammar); integers must fit int64 */
static const char *scan_number(Scan *sc, const char *p, Num *num) {
    const char *end = sc->end, *s = p;
    int neg = 0;
    uint64_t m = 0;
    int sig = 0, frac_digits = 0, too_many = 0;
    if (p < end && *p == '-') { neg = 1; p++; }
    if (p >= end) GIVE_UP(sc, "bad number");
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        const char *stop = end - p > 19 ? p + 19 : end; /* 19 digits always fit 64 bits */
        while (p < stop && *p >= '0' && *p <= '9') m = m * 10 + (uint64_t)(*p++ - '0');
        sig = (int)(p - s) - neg;
        while (p < end && *p >= '0' && *p <= '9') { too_many = 1; p++; }
    } else {
        GIVE_UP(sc, "bad number");
    }
    int int_too_many = too_many;
    uint64_t int_m = m;
    int int_sig = sig;
    int has_frac = 0, has_exp = 0;
    long exp10 = 0;
    if (p < end && *p == '.') {
        has_frac = 1;
        p++;
        if (p >= end || *p < '0' || *p > '9') GIVE_UP(sc, "bad number");
        while (p < end && *p >= '0' && *p <= '9') {
            if (sig == 0 && m == 0 && *p == '0') { frac_digits++; p++; continue; } /* leading zeros */
            if (sig < 19) { m = m * 10 + (uint64_t)(*p - '0'); sig++; frac_digits++; } else too_many = 1;
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        has_exp = 1;
        p++;
        int eneg = 0;
        if (p < end && (*p == '+' || *p == '-')) { eneg = *p == '-'; p++; }
        if (p >= end || *p < '0' || *p > '9') GIVE_UP(sc, "bad number");
        long e = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (e < 100000) e = e * 10 + (*p - '0');
            p++;
        }
        exp10 = eneg ? -e : e;
    }
    num->s = s;
    num->n = (size_t)(p - s);
    num->is_int = !has_frac && !has_exp;
    if (num->is_int) {
        if (int_too_many || int_sig > 19) GIVE_UP(sc, "integer beyond int64");
        if (!neg && int_m > (uint64_t)INT64_MAX) GIVE_UP(sc, "integer beyond int64");
        if (neg && int_m > (uint64_t)INT64_MAX + 1) GIVE_UP(sc, "integer beyond int64");
        num->ival = neg ? (int64_t)(0 - int_m) : (int64_t)int_m;
        num->fast = 1;
        num->dval = (double)num->ival;
        return p;
    }
    long e10 = exp10 - frac_digits;
    num->fast = 0;
    if (!too_many && m <= ((uint64_t)1 << 53) && e10 >= -22 && e10 <= 22) {
        double d = (double)m;
        d = e10 < 0 ? d / POW10[-e10] : d * POW10[e10];
        num->dval = neg ? -d : d;
        num->fast = 1;
    } else if (!too_many && m == 0) {
        num->dval = neg ? -0.0 : 0.0;
        num->fast = 1;
    }
    return p;
}

/* a number whose value is not needed: its grammar only (msgspec, skipping it, accepts any size) */
static const char *skip_number(Scan *sc, const char *p) {
    const char *end = sc->end;
#define DIGIT(q) ((q) < end && *(q) >= '0' && *(q) <= '9')
    if (p < end && *p == '-') p++;
    if (p < end && *p == '0') p++;
    else if (DIGIT(p)) while (DIGIT(p)) p++;
    else GIVE_UP(sc, "bad number");
    if (p < end && *p == '.') {
        p++;
        if (!DIGIT(p)) GIVE_UP(sc, "bad number");
        while (DIGIT(p)) p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (!DIGIT(p)) GIVE_UP(sc, "bad number");
        while (DIGIT(p)) p++;
    }
#undef DIGIT
    return p;
}

static const char *skip_value(Scan *sc, const char *p, int depth);

static const char *skip_container(Scan *sc, const char *p, int depth) {
    char open = *p, close = open == '{' ? '}' : ']';
    if (depth > MAX_DEPTH) GIVE_UP(sc, "nested too deeply");
    p = ws(p + 1, sc->end);
    if (p < sc->end && *p == close) return p + 1;
    for (;;) {
        if (open == '{') {
            if (p >= sc->end || *p != '"') GIVE_UP(sc, "bad object");
            p = scan_string(sc, p, NULL);
            if (!p) return NULL;
            p = ws(p, sc->end);
            if (p >= sc->end || *p != ':') GIVE_UP(sc, "bad object");
            p = ws(p + 1, sc->end);
        }
        p = skip_value(sc, p, depth + 1);
        if (!p) return NULL;
        p = ws(p, sc->end);
        if (p >= sc->end) GIVE_UP(sc, "truncated");
        if (*p == ',') { p = ws(p + 1, sc->end); continue; }
        if (*p == close) return p + 1;
        GIVE_UP(sc, "bad separator");
    }
}

static const char *literal(Scan *sc, const char *p, const char *word, size_t n) {
    if ((size_t)(sc->end - p) < n || memcmp(p, word, n) != 0) GIVE_UP(sc, "bad literal");
    return p + n;
}

static const char *skip_value(Scan *sc, const char *p, int depth) {
    if (p >= sc->end) GIVE_UP(sc, "truncated");
    switch (*p) {
    case '"': return scan_string(sc, p, NULL);
    case '{': case '[': return skip_container(sc, p, depth);
    case 't': return literal(sc, p, "true", 4);
    case 'f': return literal(sc, p, "false", 5);
    case 'n': return literal(sc, p, "null", 4);
    default:
        return skip_number(sc, p);
    }
}

static inline int is_null(Scan *sc, const char *p) {
    return sc->end - p >= 4 && memcmp(p, "null", 4) == 0;
}

/* a text field: a string or null */
static const char *text_field(Scan *sc, const char *p, Span *out) {
    if (p < sc->end && *p == '"') return scan_string(sc, p, out);
    if (is_null(sc, p)) { out->s = NULL; return p + 4; }
    GIVE_UP(sc, "text field of another type");
}

/* pid / tid: a string, an int (kept as its decimal text) or null */
static const char *id_field(Scan *sc, const char *p, Span *out) {
    if (p < sc->end && *p == '"') return scan_string(sc, p, out);
    if (is_null(sc, p)) { out->s = NULL; return p + 4; }
    if (p < sc->end && (*p == '-' || (*p >= '0' && *p <= '9'))) {
        Num num;
        p = scan_number(sc, p, &num);
        if (!p) return NULL;
        if (!num.is_int) GIVE_UP(sc, "non-integer pid/tid");
        /* JSON writes an integer one way only (no leading zeros, no '+'), which is its decimal
         * text, but for "-0" */
        if (num.ival == 0) { out->s = "0"; out->n = 1; }
        else { out->s = num.s; out->n = num.n; }
        out->esc = 0;
        return p;
    }
    GIVE_UP(sc, "pid/tid of another type");
}

/* a number beyond the fast path, by CPython's correctly rounded parser: the GIL is taken back for
 * it (rare: more than 19 significant digits or a large exponent); -1 when it is not a finite double */
static int slow_float(Scan *sc, const char *s, size_t n, double *out) {
    char tmp[512];
    if (n >= sizeof tmp) { sc->why = "number too long"; return -1; }
    memcpy(tmp, s, n);
    tmp[n] = 0;
    if (!sc->gil) { sc->why = "a number for CPython's parser (read ahead without the GIL)"; return -1; }
    PyEval_RestoreThread(sc->gil);
    char *stop = NULL;
    double d = PyOS_string_to_double(tmp, &stop, NULL);
    int bad = PyErr_Occurred() != NULL || stop != tmp + n || !Py_IS_FINITE(d);
    PyErr_Clear();
    sc->gil = PyEval_SaveThread();
    if (bad) { sc->why = "number out of range"; return -1; }
    *out = d;
    return 0;
}

/* ts / dur: a number or null */
static const char *float_field(Scan *sc, const char *p, Ev *ev, int col) {
    if (is_null(sc, p)) { ev->f_ok[col] = 0; return p + 4; }
    if (p < sc->end && (*p == '-' || (*p >= '0' && *p <= '9'))) {
        Num num;
        p = scan_number(sc, p, &num);
        if (!p) return NULL;
        ev->f_ok[col] = 1;
        if (num.fast) ev->f[col] = num.dval;
        else if (slow_float(sc, num.s, num.n, &ev->f[col])) return NULL;
        return p;
    }
    GIVE_UP(sc, "time of another type");
}

/* an integer argument or null */
static const char *int_field(Scan *sc, const char *p, Ev *ev, int col) {
    if (is_null(sc, p)) { ev->i_ok[col] = 0; return p + 4; }
    if (p < sc->end && (*p == '-' || (*p >= '0' && *p <= '9'))) {
        Num num;
        p = scan_number(sc, p, &num);
        if (!p) return NULL;
        if (!num.is_int) GIVE_UP(sc, "non-integer id");
        ev->i[col] = num.ival;
        ev->i_ok[col] = 1;
        return p;
    }
    GIVE_UP(sc, "id of another type");
}

#define KEY(s, n, lit) ((n) == sizeof(lit) - 1 && memcmp((s), (lit), sizeof(lit) - 1) == 0)

/* one value of an object, by its key: the position after it (NULL: given up); *bit = the key's
 * bit for the duplicate check, -1 for keys that are skipped */
typedef const char *(*FieldFn)(Scan *sc, const Span *key, const char *p, Ev *ev, int *bit);

/* p at '{': each key and value, the values handed to field() */
static const char *scan_object(Scan *sc, const char *p, Ev *ev, FieldFn field) {
    const char *end = sc->end;
    unsigned seen = 0;
    p = ws(p + 1, end);
    if (p < end && *p == '}') return p + 1;
    for (;;) {
        Span key;
        if (p >= end || *p != '"') GIVE_UP(sc, "bad object");
        p = scan_string(sc, p, &key);
        if (!p) return NULL;
        if (key.esc) GIVE_UP(sc, "escaped key");
        p = ws(p, end);
        if (p >= end || *p != ':') GIVE_UP(sc, "bad object");
        p = ws(p + 1, end);
        int bit = -1;
        const char *q = field(sc, &key, p, ev, &bit);
        if (!q) return NULL;
        if (bit >= 0) {
            if (seen & (1u << bit)) GIVE_UP(sc, "duplicate key");
            seen |= 1u << bit;
        }
        p = ws(q, end);
        if (p >= end) GIVE_UP(sc, "truncated");
        if (*p == ',') { p = ws(p + 1, end); continue; }
        if (*p == '}') return p + 1;
        GIVE_UP(sc, "bad separator");
    }
}

/* keys are told apart by length first: most keys of an event are neither */
static const char *args_field(Scan *sc, const Span *key, const char *p, Ev *ev, int *bit) {
    const char *k = key->s;
    int col = -1;
    switch (key->n) {
    case 5: if (KEY(k, 5, "bytes")) { *bit = 5; return int_field(sc, p, ev, I_BYTES); } break;
    case 6:
        if (KEY(k, 6, "device")) { *bit = 3; return int_field(sc, p, ev, I_DEVICE); }
        if (KEY(k, 6, "stream")) { *bit = 4; return int_field(sc, p, ev, I_STREAM); }
        break;
    case 10:
        if (KEY(k, 10, "Input Dims")) col = S_DIMS;
        else if (KEY(k, 10, "Input type")) col = S_TYPE;
        break;
    case 11:
        if (KEY(k, 11, "External id")) { *bit = 0; return int_field(sc, p, ev, I_EXT); }
        if (KEY(k, 11, "external id")) { *bit = 1; return int_field(sc, p, ev, I_EXT_LEGACY); }
        if (KEY(k, 11, "correlation")) { *bit = 2; return int_field(sc, p, ev, I_CORR); }
        break;
    case 14:
        if (KEY(k, 14, "cuda_sync_kind")) { *bit = 9; return text_field(sc, p, &ev->str[S_SYNC_KIND]); }
        if (KEY(k, 14, "wait_on_stream")) { *bit = 10; return int_field(sc, p, ev, I_WAIT_STREAM); }
        break;
    case 15:
        if (KEY(k, 15, "Concrete Inputs")) col = S_CONCRETE;
        else if (KEY(k, 15, "Sequence number")) { *bit = 12; return int_field(sc, p, ev, I_SEQ); }
        break;
    case 33:
        if (KEY(k, 33, "wait_on_cuda_event_record_corr_id")) { *bit = 11; return int_field(sc, p, ev, I_WAIT_CORR); }
        break;
    }
    if (col >= 0) { /* kept as the raw JSON text of the value */
        *bit = 6 + (col - S_DIMS);
        const char *q = skip_value(sc, p, 2);
        if (q) { ev->str[col].s = p; ev->str[col].n = (size_t)(q - p); ev->str[col].esc = 0; }
        return q;
    }
    return skip_value(sc, p, 2);
}

static const char *event_field(Scan *sc, const Span *key, const char *p, Ev *ev, int *bit) {
    const char *k = key->s;
    switch (key->n) {
    case 2:
        if (KEY(k, 2, "ph")) { *bit = 0; return text_field(sc, p, &ev->str[S_PH]); }
        if (KEY(k, 2, "ts")) { *bit = 5; return float_field(sc, p, ev, F_TS); }
        break;
    case 3:
        if (KEY(k, 3, "cat")) { *bit = 1; return text_field(sc, p, &ev->str[S_CAT]); }
        if (KEY(k, 3, "pid")) { *bit = 3; return id_field(sc, p, &ev->str[S_PID]); }
        if (KEY(k, 3, "tid")) { *bit = 4; return id_field(sc, p, &ev->str[S_TID]); }
        if (KEY(k, 3, "dur")) { *bit = 6; return float_field(sc, p, ev, F_DUR); }
        break;
    case 4:
        if (KEY(k, 4, "name")) { *bit = 2; return text_field(sc, p, &ev->str[S_NAME]); }
        if (KEY(k, 4, "args")) {
            *bit = 7;
            if (is_null(sc, p)) return p + 4;
            if (p < sc->end && *p == '{') return scan_object(sc, p, ev, args_field);
            GIVE_UP(sc, "args of another type");
        }
        break;
    }
    return skip_value(sc, p, 1);
}

/* the text of a string with its escapes resolved, as UTF-8 */
static char *unescape(const Span *sp, char *o) {
    const char *p = sp->s, *end = sp->s + sp->n;
    while (p < end) {
        if (*p != '\\') { *o++ = *p++; continue; }
        char e = p[1];
        p += 2;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        default: { /* 'u', validated by scan_string */
            unsigned u = 0;
            hex4(p, end, &u);
            p += 4;
            if (u >= 0xD800 && u <= 0xDBFF) {
                unsigned lo = 0xDC00;
                hex4(p + 2, end, &lo);
                p += 6;
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (u < 0x80) *o++ = (char)u;
            else if (u < 0x800) { *o++ = (char)(0xC0 | (u >> 6)); *o++ = (char)(0x80 | (u & 0x3F)); }
            else if (u < 0x10000) {
                *o++ = (char)(0xE0 | (u >> 12)); *o++ = (char)(0x80 | ((u >> 6) & 0x3F)); *o++ = (char)(0x80 | (u & 0x3F));
            } else {
                *o++ = (char)(0xF0 | (u >> 18)); *o++ = (char)(0x80 | ((u >> 12) & 0x3F));
                *o++ = (char)(0x80 | ((u >> 6) & 0x3F)); *o++ = (char)(0x80 | (u & 0x3F));
            }
        }
        }
    }
    return o;
}

static int put_unescaped(Buf *out, const Span *sp) {
    if (buf_reserve(out, sp->n)) return -1; /* never longer than the escaped form */
    out->len = (size_t)(unescape(sp, out->p + out->len) - out->p);
    return 0;
}

/* a text value: the bytes (escapes resolved) and the end offset (after the first offset, 0) */
static inline int put_text(Col *c, const char *s, size_t n, int esc) {
    static const int64_t zero = 0;
    if (!c->vals.len && buf_put(&c->vals, &zero, sizeof zero)) return -1;
    if (esc) {
        Span sp = {s, n, 1};
        if (put_unescaped(&c->data, &sp)) return -1;
    } else if (buf_put(&c->data, s, n)) {
        return -1;
    }
    int64_t off = (int64_t)c->data.len;
    return buf_put(&c->vals, &off, sizeof off);
}

static inline int put_valid(Col *c, int nullable, unsigned char ok) {
    return nullable ? buf_put(&c->valid, &ok, 1) : 0;
}

static inline int put_int(Col *c, int nullable, int ok, int64_t v) {
    if (put_valid(c, nullable, (unsigned char)ok)) return -1;
    if (!ok) v = 0;
    return buf_put(&c->vals, &v, sizeof v);
}

/* Microsecond floats -> int64 nanoseconds, rounded half to even, the whole and fractional
 * microseconds scaled apart (as tables._ns does: x * 1000 on an epoch-based time would exceed
 * a double's 53-bit mantissa) */
static inline int64_t to_ns(double us) {
    /* only times checked against the caller's limit get here (at most MAX_TIME_LIMIT_US, so that
     * us * 1000 and the end ts + dur stay inside int64); anything else would be undefined */
    if (!(us > -MAX_TIME_LIMIT_US && us < MAX_TIME_LIMIT_US)) return 0;
    double whole = floor(us);
    double frac = nearbyint((us - whole) * 1000.0);
    return (int64_t)whole * 1000 + (int64_t)frac;
}

/* a text that may be absent: null when it is, else the text (pid/tid/name: absent reads as "") */
static inline int put_span(Col *c, int nullable, const Span *sp) {
    if (put_valid(c, nullable, sp->s != NULL)) return -1;
    if (!sp->s) return put_text(c, "", 0, 0);
    return put_text(c, sp->s, sp->n, sp->esc);
}

/* one row of table t */
static int put_row(Scan *sc, Table *t, const int *spec, const Ev *ev, const Route *rt, size_t ev_idx) {
    /* other accelerators' events keep their duration in microseconds, and their start is not
     * range-checked: no time of theirs is converted */
    int64_t ts_ns = 0, dur_ns = 0;
    if (rt->table != T_OTHER) {
        ts_ns = to_ns(ev->f[F_TS]);
        dur_ns = to_ns(ev->f[F_DUR]);
    }
    for (const int *c = spec; *c >= 0; c++) {
        Col *col = &t->col[c - spec];
        int nullable = COLS[*c].nullable, rc = 0;
        switch (*c) {
        case C_NAME: rc = put_span(col, 0, &ev->str[S_NAME]); break;
        case C_CAT: rc = put_span(col, 0, &ev->str[S_CAT]); break;
        case C_PID: rc = put_span(col, 0, &ev->str[S_PID]); break;
        case C_TID: rc = put_span(col, 0, &ev->str[S_TID]); break;
        case C_DIMS: rc = put_span(col, 1, &ev->str[S_DIMS]); break;
        case C_TYPE: rc = put_span(col, 1, &ev->str[S_TYPE]); break;
        case C_CONCRETE: rc = put_span(col, 1, &ev->str[S_CONCRETE]); break;
        case C_SYNC_KIND: rc = put_span(col, 1, &ev->str[S_SYNC_KIND]); break;
        case C_WAIT_STREAM: rc = put_int(col, nullable, ev->i_ok[I_WAIT_STREAM], ev->i[I_WAIT_STREAM]); break;
        case C_WAIT_CORR: rc = put_int(col, nullable, ev->i_ok[I_WAIT_CORR], ev->i[I_WAIT_CORR]); break;
        case C_KIND: rc = put_text(col, rt->kind, (size_t)rt->kind_n, 0); break;
        case C_TS_NS: rc = put_int(col, 0, 1, ts_ns); break;
        case C_DUR_NS: rc = put_int(col, 0, 1, dur_ns); break;
        case C_END_NS: rc = put_int(col, 0, 1, ts_ns + dur_ns); break;
        case C_EV_IDX: rc = put_int(col, 0, 1, (int64_t)ev_idx); break;
        case C_EXT: /* "External id", else the legacy "external id" */
            rc = ev->i_ok[I_EXT] ? put_int(col, nullable, 1, ev->i[I_EXT])
                                 : put_int(col, nullable, ev->i_ok[I_EXT_LEGACY], ev->i[I_EXT_LEGACY]);
            break;
        case C_CORR: rc = put_int(col, nullable, ev->i_ok[I_CORR], ev->i[I_CORR]); break;
        case C_DEVICE: rc = put_int(col, nullable, ev->i_ok[I_DEVICE], ev->i[I_DEVICE]); break;
        case C_STREAM: rc = put_int(col, nullable, ev->i_ok[I_STREAM], ev->i[I_STREAM]); break;
        case C_BYTES: rc = put_int(col, nullable, ev->i_ok[I_BYTES], ev->i[I_BYTES]); break;
        case C_SEQ: rc = put_int(col, nullable, ev->i_ok[I_SEQ], ev->i[I_SEQ]); break;
        case C_DUR_US: rc = buf_put(&col->vals, &ev->f[F_DUR], sizeof(double)); break;
        }
        if (rc) return -1;
    }
    t->n++;
    return 0;
}

/* a category or phase with its escapes resolved into plain (at most MAX_KEY bytes: no route is
 * longer, see read_routes, so a longer one matches none and is left as it is) */
static Span plain_span(const Span *sp, char *plain) {
    if (!sp->s || !sp->esc || sp->n > MAX_KEY) return *sp; /* unescaped, it is never longer */
    Span out = {plain, (size_t)(unescape(sp, plain) - plain), 0};
    return out;
}

/* the route of a category, or -1 (not tabled) */
static inline int route_of(const Scan *sc, const Span *cat) {
    if (cat->esc) return -1; /* longer than any route even with its escapes resolved */
    for (int r = 0; r < sc->n_routes; r++)
        if ((size_t)sc->routes[r].cat_n == cat->n && memcmp(sc->routes[r].cat, cat->s, cat->n) == 0) return r;
    return -1;
}

/* one event, routed: to its table, or counted as set aside (what tables._valid and _other_frame do);
 * 0, 1 when given up (sc->why), -1 when out of memory */
static int route_event(Scan *sc, const Ev *ev) {
    size_t idx = sc->n++;
    char ph_plain[MAX_KEY], cat_plain[MAX_KEY];
    Span ph = plain_span(&ev->str[S_PH], ph_plain), cat = plain_span(&ev->str[S_CAT], cat_plain);
    int is_x = ph.s && ph.n == 1 && ph.s[0] == 'X';
    if (!cat.s) {
        sc->no_cat += is_x;
        return 0;
    }
    int r = route_of(sc, &cat);
    if (r < 0) return 0;
    const Route *rt = &sc->routes[r];
    double ts = ev->f[F_TS], dur = ev->f[F_DUR];
    double limit = sc->time_limit;
    int dur_ok = ev->f_ok[F_DUR] && dur >= 0 && dur < limit;
    if (rt->table == T_OTHER) { /* counted and summed for a warning, not tabled */
        if (!(is_x && ev->f_ok[F_TS] && dur_ok)) return 0;
    } else if (!is_x) {
        sc->bad_phase[r]++;
        return 0;
    } else if (!(dur_ok && ev->f_ok[F_TS] && ts > -limit && ts < limit)) {
        sc->bad_time[r]++;
        return 0;
    }
    return put_row(sc, &sc->t[rt->table], SPEC[rt->table], ev, rt, idx) ? -1 : 0;
}

/* the whole array; 0 when scanned, 1 when given up (sc->why), -1 when out of memory */
int ng_scan_array(Scan *sc) {
    const char *p = ws(sc->base, sc->end);
    if (p >= sc->end || *p != '[') { sc->why = "not an array"; return 1; }
    p = ws(p + 1, sc->end);
    if (p < sc->end && *p == ']') {
        p = ws(p + 1, sc->end);
        if (p != sc->end) { sc->why = "data after the array"; return 1; }
        return 0;
    }
    for (;;) {
        if (p >= sc->end || *p != '{') { sc->why = "an item is not an object"; return 1; }
        Ev ev; /* only the presence flags need clearing: values are read where present */
        for (int c = 0; c < N_STR; c++) ev.str[c].s = NULL;
        memset(ev.f_ok, 0, sizeof ev.f_ok);
        memset(ev.i_ok, 0, sizeof ev.i_ok);
        if (sc->abort && (sc->n & 4095) == 4095 && __atomic_load_n(sc->abort, __ATOMIC_ACQUIRE)) {
            sc->why = "taken";
            return 1;
        }
        p = scan_object(sc, p, &ev, event_field);
        if (!p) return 1;
        int rc = route_event(sc, &ev);
        if (rc) return rc;
        p = ws(p, sc->end);
        if (p >= sc->end) { sc->why = "truncated"; return 1; }
        if (*p == ',') { p = ws(p + 1, sc->end); continue; }
        if (*p == ']') break;
        sc->why = "bad separator";
        return 1;
    }
    p = ws(p + 1, sc->end);
    if (p != sc->end) { sc->why = "data after the array"; return 1; }
    return 0;
}

static void buf_free(Buf *b) {
    buf_release(b->p, b->cap);
    b->p = NULL;
}

void ng_scan_free(Scan *sc) {
    for (int t = 0; t < N_T; t++)
        for (int c = 0; c < MAX_COLS; c++) {
            buf_free(&sc->t[t].col[c].valid);
            buf_free(&sc->t[t].col[c].vals);
            buf_free(&sc->t[t].col[c].data);
        }
}

/* ---- the result: one Arrow array per column (C Data Interface), imported by polars without a copy ---- */

typedef struct { Buf bufs[3]; const void *ptrs[3]; } ColData; /* one column's buffers, owned */

/* the buffers of an empty column (an offsets buffer holds one 0): nothing is mapped for them */
static const int64_t EMPTY[2] = {0, 0};

static void release_column(struct ArrowArray *a) {
    ColData *cd = (ColData *)a->private_data;
    for (int k = 0; k < 3; k++) buf_release(cd->bufs[k].p, cd->bufs[k].cap);
    free(cd);
    a->release = NULL;
}

/* one byte per row -> an Arrow validity bitmap in bm (left empty when every row is valid);
 * the number of nulls, or -1 when out of memory */
static int64_t pack_validity(const Buf *valid, size_t n, Buf *bm) {
    size_t nulls = 0;
    for (size_t r = 0; r < n; r++) nulls += !valid->p[r];
    if (!nulls) return 0;
    size_t nb = (n + 7) / 8;
    if (buf_reserve(bm, nb)) return -1;
    unsigned char *b = (unsigned char *)bm->p;
    memset(b, 0, nb);
    for (size_t r = 0; r < n; r++) if (valid->p[r]) b[r >> 3] |= (unsigned char)(1u << (r & 7));
    bm->len = nb;
    return (int64_t)nulls;
}

/* one column as a (name, schema capsule, array capsule) triple; the column's buffers move into it.
 * Columns are separate arrays (not one struct array) because an importer keeps every buffer
 * of an imported array until the last one is dropped: the columns kept in the tables would
 * otherwise hold all of a table's columns. */
static PyObject *column(int kind, size_t n, Col *col) {
    struct ArrowSchema *schema = (struct ArrowSchema *)calloc(1, sizeof *schema);
    struct ArrowArray *array = (struct ArrowArray *)calloc(1, sizeof *array);
    ColData *cd = (ColData *)calloc(1, sizeof *cd);
    if (!schema || !array || !cd) { free(schema); free(array); free(cd); return PyErr_NoMemory(); }
    int text = COLS[kind].fmt[0] == 'U';
    *schema = (struct ArrowSchema){COLS[kind].fmt, COLS[kind].name, NULL, ARROW_FLAG_NULLABLE, 0, NULL, NULL,
                                   arrow_schema_release, NULL};
    int64_t nulls = COLS[kind].nullable ? pack_validity(&col->valid, n, &cd->bufs[0]) : 0;
    buf_free(&col->valid);
    cd->bufs[1] = col->vals;
    col->vals.p = NULL;
    if (text) { cd->bufs[2] = col->data; col->data.p = NULL; }
    *array = (struct ArrowArray){(int64_t)n, nulls, 0, text ? 3 : 2, 0, cd->ptrs, NULL, NULL, release_column, cd};
    if (nulls < 0) {
        release_column(array);
        free(schema);
        free(array);
        return PyErr_NoMemory();
    }
    for (int k = 0; k < 3; k++) buf_trim(&cd->bufs[k]);
    cd->ptrs[0] = nulls ? cd->bufs[0].p : NULL;
    cd->ptrs[1] = cd->bufs[1].p ? cd->bufs[1].p : (const void *)EMPTY;
    cd->ptrs[2] = text ? (cd->bufs[2].p ? cd->bufs[2].p : (const void *)EMPTY) : NULL;
    PyObject *sc = PyCapsule_New(schema, "arrow_schema", arrow_drop_schema);
    if (!sc) { release_column(array); free(schema); free(array); return NULL; }
    PyObject *ac = PyCapsule_New(array, "arrow_array", arrow_drop_array);
    if (!ac) { Py_DECREF(sc); release_column(array); free(array); return NULL; }
    return Py_BuildValue("(sNN)", COLS[kind].name, sc, ac);
}

/* ((name, schema capsule, array capsule), ...) of table t */
static PyObject *table_columns(Scan *sc, int t) {
    int ncols = 0;
    while (SPEC[t][ncols] >= 0) ncols++;
    PyObject *cols = PyTuple_New(ncols);
    if (!cols) return NULL;
    for (int c = 0; c < ncols; c++) {
        PyObject *col = column(SPEC[t][c], sc->t[t].n, &sc->t[t].col[c]);
        if (!col) { Py_DECREF(cols); return NULL; }
        PyTuple_SET_ITEM(cols, c, col);
    }
    return cols;
}

static PyObject *counts(const size_t *v, int n) {
    PyObject *out = PyTuple_New(n);
    if (!out) return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *x = PyLong_FromSize_t(v[k]);
        if (!x) { Py_DECREF(out); return NULL; }
        PyTuple_SET_ITEM(out, k, x);
    }
    return out;
}

/* (events, (columns of each table), complete events without a category, not-'X' events per
 * route, 'X' events without valid times per route); NULL with an error set */
PyObject *ng_scan_result(Scan *sc) {
    PyObject *tables = PyTuple_New(N_T);
    if (!tables) return NULL;
    for (int t = 0; t < N_T; t++) {
        PyObject *cols = table_columns(sc, t);
        if (!cols) { Py_DECREF(tables); return NULL; }
        PyTuple_SET_ITEM(tables, t, cols);
    }
    PyObject *phase = counts(sc->bad_phase, sc->n_routes), *time = counts(sc->bad_time, sc->n_routes);
    if (!phase || !time) { Py_XDECREF(phase); Py_XDECREF(time); Py_DECREF(tables); return NULL; }
    return Py_BuildValue("(nNnNN)", (Py_ssize_t)sc->n, tables, (Py_ssize_t)sc->no_cat, phase, time);
}

/* the routes argument: ((category, table, kind or None), ...) */
int ng_read_routes(PyObject *arg, Route *routes, int *n) {
    if (!PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) > MAX_ROUTES) {
        PyErr_SetString(PyExc_TypeError, "routes: a tuple of at most 64 (category, table, kind) tuples");
        return -1;
    }
    *n = (int)PyTuple_GET_SIZE(arg);
    for (int r = 0; r < *n; r++) {
        PyObject *item = PyTuple_GET_ITEM(arg, r), *cat, *kind;
        int table;
        if (!PyArg_ParseTuple(item, "UiO", &cat, &table, &kind)) return -1;
        if (table < 0 || table >= N_T || (kind != Py_None && !PyUnicode_Check(kind))) {
            PyErr_SetString(PyExc_ValueError, "routes: a table is 0-5, a kind a str or None");
            return -1;
        }
        routes[r].cat = PyUnicode_AsUTF8AndSize(cat, &routes[r].cat_n);
        if (routes[r].cat && routes[r].cat_n > MAX_KEY) {
            PyErr_SetString(PyExc_ValueError, "routes: a category is at most 256 bytes");
            return -1;
        }
        routes[r].table = table;
        routes[r].kind = "";
        routes[r].kind_n = 0;
        if (kind != Py_None) routes[r].kind = PyUnicode_AsUTF8AndSize(kind, &routes[r].kind_n);
        if (!routes[r].cat || !routes[r].kind) return -1;
    }
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *buffer, *route_arg;
    double time_limit;
    if (!PyArg_ParseTuple(args, "OOd", &buffer, &route_arg, &time_limit)) return NULL;
    if (ng_bad_time_limit(time_limit)) return NULL;
    Route routes[MAX_ROUTES];
    Scan sc;
    memset(&sc, 0, sizeof sc);
    if (ng_read_routes(route_arg, routes, &sc.n_routes) < 0) return NULL;
    sc.time_limit = time_limit;
    sc.routes = routes;
    Py_buffer view;
    if (PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE) < 0) return NULL;
    sc.base = (const char *)view.buf;
    sc.end = sc.base + view.len;
    sc.gil = PyEval_SaveThread();
    ng_cache_enable();
    int rc = ng_scan_array(&sc);
    PyEval_RestoreThread(sc.gil);
    PyObject *out;
    if (rc < 0) out = PyErr_NoMemory();
    else if (rc > 0) out = PyUnicode_FromString(sc.why ? sc.why : "unsupported");
    else out = ng_scan_result(&sc);
    ng_scan_free(&sc);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *trim(PyObject *self, PyObject *unused) {
#ifdef SCAN_MMAP
    pthread_mutex_lock(&cache_lock);
    for (int k = 0; k < CACHE_SLOTS; k++)
        if (cache[k].p) { munmap(cache[k].p, cache[k].cap); cache[k].p = NULL; }
    cache_bytes = 0;
    cache_on = 0;
    pthread_mutex_unlock(&cache_lock);
#endif
    Py_RETURN_NONE;
}

static PyObject *cached(PyObject *self, PyObject *unused) {
    size_t n = 0;
#ifdef SCAN_MMAP
    pthread_mutex_lock(&cache_lock);
    n = cache_bytes;
    pthread_mutex_unlock(&cache_lock);
#endif
    return PyLong_FromSize_t(n);
}

static PyMethodDef methods[] = {
    {"cached", cached, METH_NOARGS, "cached() -> bytes of column maps kept for reuse"},
    {"trim", trim, METH_NOARGS, "trim()\n\nReturn the column maps kept for reuse to the system (after a load)."},
    {"scan", scan, METH_VARARGS,
     "scan(buffer, routes, time_limit) -> (events, tables, no_cat, bad_phase, bad_time) | str\n\n"
     "The tables of a JSON array of trace events (each a tuple of (column name, arrow_schema capsule,\n"
     "arrow_array capsule)), or the reason it was left to the Python decoder. routes: ((category,\n"
     "table 0-5, activity kind or None), ...); time_limit: the largest valid |time| in us (exclusive);\n"
     "bad_phase / bad_time: counts per route."},
#ifdef READ_AHEAD
    {"read_ahead", ng_read_ahead, METH_VARARGS,
     "read_ahead(path: bytes, routes, time_limit, chunk, block, first_fill) -> handle\n\n"
     "Start a thread that reads (inflates, READ_AHEAD_GZIP), cuts and scans the first chunks of a JSON trace."},
    {"read_ahead_wait", ng_read_ahead_wait, METH_O, "read_ahead_wait(handle): until the thread stops by itself"},
    {"read_ahead_take", ng_read_ahead_take, METH_O,
     "read_ahead_take(handle) -> (why, key_start, key_end, resume, (scan results, ...), prefix)"},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nongemm_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__nongemm_scan(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "ABI", SCAN_ABI) < 0) { Py_DECREF(m); return NULL; }
#ifdef NONGEMM_ZLIB
    if (PyModule_AddIntConstant(m, "READ_AHEAD_GZIP", 1) < 0) { Py_DECREF(m); return NULL; }
#else
    if (PyModule_AddIntConstant(m, "READ_AHEAD_GZIP", 0) < 0) { Py_DECREF(m); return NULL; }
#endif
    return m;
}
