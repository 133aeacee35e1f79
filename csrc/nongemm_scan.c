/*
 * _nongemm_scan: one pass over a JSON array of trace events, straight into columns.
 *
 * Why: decoding a Kineto trace into one Python object per event and then reading
 * each object's fields back into columns costs about as much again as the decoding
 * (and both hold the GIL). This scanner reads the few fields the analysis needs
 * (ph, cat, name, pid, tid, ts, dur and seven keys of args) into Arrow-layout
 * buffers, without the GIL, so two chunks can be scanned at once on two cores.
 *
 * Contract: it accepts only input that msgspec would decode into exactly the same
 * values (the Python path in nongemm_trace/load/events.py and tables.py). On
 * anything else (invalid or unusual JSON, a field of an unexpected type, an escaped
 * key, a duplicate key, an integer beyond int64, invalid UTF-8 anywhere) it gives
 * up and returns a short reason, and the caller decodes the chunk the Python way.
 * So the result never depends on whether this module is built.
 *
 * Floats are parsed exactly: by one correctly rounded IEEE operation when the
 * significand fits in 53 bits and the power of ten in 22 (Clinger's fast path),
 * else by CPython's own correctly rounded parser once the GIL is held again.
 */
#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mremap */
#endif
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* bumped whenever the result layout changes; the Python side checks it */
#define SCAN_ABI 4
#define MAX_DEPTH 256

typedef struct { char *p; size_t len, cap; } Buf;

/* Column buffers are anonymous memory maps where there are such (not C heap blocks that grow
 * by realloc): a chunk's columns are returned to the system as soon as Python drops them,
 * instead of fragmenting the heap (tens of MB of resident memory on a 200 MB trace).
 * -DNONGEMM_NO_MMAP builds the malloc variant (what other systems get), to compare the two. */
#if (defined(__linux__) || defined(__APPLE__) || defined(__FreeBSD__)) && !defined(NONGEMM_NO_MMAP)
#define SCAN_MMAP 1
#include <sys/mman.h>
#ifndef MAP_ANONYMOUS
#define MAP_ANONYMOUS MAP_ANON
#endif
#endif

#ifdef SCAN_MMAP
/* Maps of released columns, kept for the next chunk's columns (up to CACHE_BYTES): a fresh map
 * costs a page fault and a zeroed page per 4 KB written, most of a second per GB of trace.
 * trim() returns them to the system once the load is done, and stops the keeping until the next scan. Columns are released by whichever
 * thread drops them last, hence the lock. */
#include <pthread.h>
#define CACHE_SLOTS 64
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

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

/* text columns: ph, cat, name, pid, tid (ints written as decimal text), and the raw JSON of three args */
enum { S_PH, S_CAT, S_NAME, S_PID, S_TID, S_DIMS, S_TYPE, S_CONCRETE, N_STR };
enum { F_TS, F_DUR, N_F };
enum { I_EXT, I_EXT_LEGACY, I_CORR, I_DEVICE, I_STREAM, I_BYTES, N_I };

typedef struct { Buf valid, offs, data; } StrCol;
typedef struct { Buf valid, vals; } NumCol;

typedef struct { const char *s; size_t n; int esc; } Span; /* s == NULL: absent or null */

typedef struct {
    Span str[N_STR];
    char pid_txt[24], tid_txt[24];
    double f[N_F];
    unsigned char f_ok[N_F];
    const char *f_slow[N_F]; /* a float to parse later (with the GIL), its text */
    size_t f_slow_n[N_F];
    int64_t i[N_I];
    unsigned char i_ok[N_I];
} Ev;

typedef struct { int col; size_t row; size_t off, len; } SlowFloat;

typedef struct {
    const char *base, *end;
    const char *why; /* the reason for giving up */
    StrCol s[N_STR];
    NumCol f[N_F];
    NumCol i[N_I];
    Buf slow;
    size_t n;
    int oom;
} Scan;

#define GIVE_UP(sc, reason) do { (sc)->why = (reason); return NULL; } while (0)

static inline const char *ws(const char *p, const char *end) {
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
        while (p < end && *p >= '0' && *p <= '9') {
            if (sig < 19) { m = m * 10 + (uint64_t)(*p - '0'); sig++; } else too_many = 1;
            p++;
        }
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

/* v as decimal text at out (at most 20 bytes); its length */
static size_t decimal(int64_t v, char *out) {
    char tmp[24];
    size_t k = 0, n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do { tmp[k++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) out[n++] = '-';
    while (k) out[n++] = tmp[--k];
    return n;
}

/* pid / tid: a string, an int (kept as its decimal text) or null */
static const char *id_field(Scan *sc, const char *p, Span *out, char *txt) {
    if (p < sc->end && *p == '"') return scan_string(sc, p, out);
    if (is_null(sc, p)) { out->s = NULL; return p + 4; }
    if (p < sc->end && (*p == '-' || (*p >= '0' && *p <= '9'))) {
        Num num;
        p = scan_number(sc, p, &num);
        if (!p) return NULL;
        if (!num.is_int) GIVE_UP(sc, "non-integer pid/tid");
        out->n = decimal(num.ival, txt);
        out->s = txt;
        out->esc = 0;
        return p;
    }
    GIVE_UP(sc, "pid/tid of another type");
}

/* ts / dur: a number or null */
static const char *float_field(Scan *sc, const char *p, Ev *ev, int col) {
    if (is_null(sc, p)) { ev->f_ok[col] = 0; return p + 4; }
    if (p < sc->end && (*p == '-' || (*p >= '0' && *p <= '9'))) {
        Num num;
        p = scan_number(sc, p, &num);
        if (!p) return NULL;
        ev->f_ok[col] = 1;
        if (num.fast) {
            ev->f[col] = num.dval;
            ev->f_slow[col] = NULL;
        } else {
            ev->f[col] = 0.0;
            ev->f_slow[col] = num.s;
            ev->f_slow_n[col] = num.n;
        }
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

static const char *args_field(Scan *sc, const Span *key, const char *p, Ev *ev, int *bit) {
    if (KEY(key->s, key->n, "External id")) { *bit = 0; return int_field(sc, p, ev, I_EXT); }
    if (KEY(key->s, key->n, "external id")) { *bit = 1; return int_field(sc, p, ev, I_EXT_LEGACY); }
    if (KEY(key->s, key->n, "correlation")) { *bit = 2; return int_field(sc, p, ev, I_CORR); }
    if (KEY(key->s, key->n, "device")) { *bit = 3; return int_field(sc, p, ev, I_DEVICE); }
    if (KEY(key->s, key->n, "stream")) { *bit = 4; return int_field(sc, p, ev, I_STREAM); }
    if (KEY(key->s, key->n, "bytes")) { *bit = 5; return int_field(sc, p, ev, I_BYTES); }
    if (KEY(key->s, key->n, "Input Dims") || KEY(key->s, key->n, "Input type") ||
        KEY(key->s, key->n, "Concrete Inputs")) { /* kept as the raw JSON text of the value */
        int col = key->s[0] == 'C' ? S_CONCRETE : key->s[6] == 'D' ? S_DIMS : S_TYPE;
        *bit = 6 + (col - S_DIMS);
        const char *q = skip_value(sc, p, 2);
        if (q) { ev->str[col].s = p; ev->str[col].n = (size_t)(q - p); ev->str[col].esc = 0; }
        return q;
    }
    return skip_value(sc, p, 2);
}

static const char *event_field(Scan *sc, const Span *key, const char *p, Ev *ev, int *bit) {
    if (KEY(key->s, key->n, "ph")) { *bit = 0; return text_field(sc, p, &ev->str[S_PH]); }
    if (KEY(key->s, key->n, "cat")) { *bit = 1; return text_field(sc, p, &ev->str[S_CAT]); }
    if (KEY(key->s, key->n, "name")) { *bit = 2; return text_field(sc, p, &ev->str[S_NAME]); }
    if (KEY(key->s, key->n, "pid")) { *bit = 3; return id_field(sc, p, &ev->str[S_PID], ev->pid_txt); }
    if (KEY(key->s, key->n, "tid")) { *bit = 4; return id_field(sc, p, &ev->str[S_TID], ev->tid_txt); }
    if (KEY(key->s, key->n, "ts")) { *bit = 5; return float_field(sc, p, ev, F_TS); }
    if (KEY(key->s, key->n, "dur")) { *bit = 6; return float_field(sc, p, ev, F_DUR); }
    if (KEY(key->s, key->n, "args")) {
        *bit = 7;
        if (is_null(sc, p)) return p + 4;
        if (p < sc->end && *p == '{') return scan_object(sc, p, ev, args_field);
        GIVE_UP(sc, "args of another type");
    }
    return skip_value(sc, p, 1);
}

/* the text of a string with its escapes resolved, as UTF-8 */
static int put_unescaped(Buf *out, const Span *sp) {
    const char *p = sp->s, *end = sp->s + sp->n;
    if (buf_reserve(out, sp->n)) return -1; /* never longer than the escaped form */
    char *o = out->p + out->len;
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
    out->len = (size_t)(o - out->p);
    return 0;
}

static int append(Scan *sc, const Ev *ev) {
    for (int c = 0; c < N_STR; c++) {
        StrCol *col = &sc->s[c];
        const Span *sp = &ev->str[c];
        unsigned char ok = sp->s != NULL;
        if (buf_put(&col->valid, &ok, 1)) return -1;
        if (ok) {
            if (sp->esc ? put_unescaped(&col->data, sp) : buf_put(&col->data, sp->s, sp->n)) return -1;
        }
        int64_t off = (int64_t)col->data.len;
        if (buf_put(&col->offs, &off, sizeof off)) return -1;
    }
    for (int c = 0; c < N_F; c++) {
        if (buf_put(&sc->f[c].valid, &ev->f_ok[c], 1) || buf_put(&sc->f[c].vals, &ev->f[c], sizeof(double))) return -1;
        if (ev->f_ok[c] && ev->f_slow[c]) {
            SlowFloat sf = {c, sc->n, (size_t)(ev->f_slow[c] - sc->base), ev->f_slow_n[c]};
            if (buf_put(&sc->slow, &sf, sizeof sf)) return -1;
        }
    }
    for (int c = 0; c < N_I; c++) {
        int64_t v = ev->i_ok[c] ? ev->i[c] : 0;
        if (buf_put(&sc->i[c].valid, &ev->i_ok[c], 1) || buf_put(&sc->i[c].vals, &v, sizeof v)) return -1;
    }
    sc->n++;
    return 0;
}

/* the whole array; 0 when scanned, 1 when given up (sc->why), -1 when out of memory */
static int scan_array(Scan *sc) {
    const char *p = ws(sc->base, sc->end);
    for (int c = 0; c < N_STR; c++) {
        int64_t zero = 0;
        if (buf_put(&sc->s[c].offs, &zero, sizeof zero)) return -1;
    }
    if (p >= sc->end || *p != '[') { sc->why = "not an array"; return 1; }
    p = ws(p + 1, sc->end);
    if (p < sc->end && *p == ']') {
        p = ws(p + 1, sc->end);
        if (p != sc->end) { sc->why = "data after the array"; return 1; }
        return 0;
    }
    for (;;) {
        if (p >= sc->end || *p != '{') { sc->why = "an item is not an object"; return 1; }
        Ev ev;
        memset(&ev, 0, sizeof ev);
        p = scan_object(sc, p, &ev, event_field);
        if (!p) return 1;
        if (append(sc, &ev)) return -1;
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

static void scan_free(Scan *sc) {
    for (int c = 0; c < N_STR; c++) { buf_free(&sc->s[c].valid); buf_free(&sc->s[c].offs); buf_free(&sc->s[c].data); }
    for (int c = 0; c < N_F; c++) { buf_free(&sc->f[c].valid); buf_free(&sc->f[c].vals); }
    for (int c = 0; c < N_I; c++) { buf_free(&sc->i[c].valid); buf_free(&sc->i[c].vals); }
    buf_free(&sc->slow);
}

/* ---- the result: one Arrow struct array (C Data Interface), imported by polars without a copy ---- */

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

#define ARROW_FLAG_NULLABLE 2
#define N_COLS (N_STR + N_F + N_I)

static const char *COL_NAMES[N_COLS] = {"ph", "cat", "name", "pid", "tid", "input_dims", "input_type",
                                        "concrete_inputs", "ts", "dur", "ext", "ext_legacy", "correlation",
                                        "device", "stream", "bytes"};

typedef struct { Buf bufs[3]; const void *ptrs[3]; } ColData; /* one column's buffers, owned */

static void release_column(struct ArrowArray *a) {
    ColData *cd = (ColData *)a->private_data;
    for (int k = 0; k < 3; k++) buf_release(cd->bufs[k].p, cd->bufs[k].cap);
    free(cd);
    a->release = NULL;
}

static void release_schema(struct ArrowSchema *s) {
    s->release = NULL;
}

static void drop_schema(PyObject *cap) {
    struct ArrowSchema *s = (struct ArrowSchema *)PyCapsule_GetPointer(cap, "arrow_schema");
    if (s && s->release) s->release(s);
    free(s);
}

static void drop_array(PyObject *cap) {
    struct ArrowArray *a = (struct ArrowArray *)PyCapsule_GetPointer(cap, "arrow_array");
    if (a && a->release) a->release(a);
    free(a);
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

/* one column as a (schema, array) pair of capsules; the column's buffers move into it.
 * Columns are separate arrays (not one struct array) because an importer keeps every buffer
 * of an imported array until the last one is dropped: the columns kept in the tables would
 * otherwise hold all of a chunk's columns. */
static PyObject *column(int c, size_t n, Buf *valid, Buf *second, Buf *third) {
    struct ArrowSchema *schema = (struct ArrowSchema *)calloc(1, sizeof *schema);
    struct ArrowArray *array = (struct ArrowArray *)calloc(1, sizeof *array);
    ColData *cd = (ColData *)calloc(1, sizeof *cd);
    if (!schema || !array || !cd) { free(schema); free(array); free(cd); return PyErr_NoMemory(); }
    const char *fmt = c < N_STR ? "U" : c < N_STR + N_F ? "g" : "l";
    *schema = (struct ArrowSchema){fmt, COL_NAMES[c], NULL, ARROW_FLAG_NULLABLE, 0, NULL, NULL, release_schema, NULL};
    int64_t nulls = pack_validity(valid, n, &cd->bufs[0]);
    cd->bufs[1] = *second;
    second->p = NULL;
    if (third) { cd->bufs[2] = *third; third->p = NULL; }
    *array = (struct ArrowArray){(int64_t)n, nulls, 0, third ? 3 : 2, 0, cd->ptrs, NULL, NULL, release_column, cd};
    if (nulls < 0 || buf_reserve(&cd->bufs[1], 8) || (third && buf_reserve(&cd->bufs[2], 1))) {
        release_column(array);
        free(schema);
        free(array);
        return PyErr_NoMemory();
    }
    cd->ptrs[0] = nulls ? cd->bufs[0].p : NULL;
    cd->ptrs[1] = cd->bufs[1].p;
    cd->ptrs[2] = third ? cd->bufs[2].p : NULL;
    PyObject *sc = PyCapsule_New(schema, "arrow_schema", drop_schema);
    if (!sc) { release_column(array); free(schema); free(array); return NULL; }
    PyObject *ac = PyCapsule_New(array, "arrow_array", drop_array);
    if (!ac) { Py_DECREF(sc); release_column(array); free(array); return NULL; }
    return Py_BuildValue("(sNN)", COL_NAMES[c], sc, ac);
}

/* (rows, ((name, schema capsule, array capsule), ...)); NULL with an error set */
static PyObject *to_arrow(Scan *sc) {
    size_t n = sc->n;
    PyObject *cols = PyTuple_New(N_COLS);
    if (!cols) return NULL;
    for (int c = 0; c < N_COLS; c++) {
        PyObject *col;
        if (c < N_STR) col = column(c, n, &sc->s[c].valid, &sc->s[c].offs, &sc->s[c].data);
        else if (c < N_STR + N_F) col = column(c, n, &sc->f[c - N_STR].valid, &sc->f[c - N_STR].vals, NULL);
        else col = column(c, n, &sc->i[c - N_STR - N_F].valid, &sc->i[c - N_STR - N_F].vals, NULL);
        if (!col) { Py_DECREF(cols); return NULL; }
        PyTuple_SET_ITEM(cols, c, col);
    }
    return Py_BuildValue("(nN)", (Py_ssize_t)n, cols);
}

static PyObject *scan(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Scan sc;
    memset(&sc, 0, sizeof sc);
    sc.base = (const char *)view.buf;
    sc.end = sc.base + view.len;
    int rc;
    Py_BEGIN_ALLOW_THREADS
#ifdef SCAN_MMAP
    pthread_mutex_lock(&cache_lock);
    cache_on = 1;
    pthread_mutex_unlock(&cache_lock);
#endif
    rc = scan_array(&sc);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (rc < 0) {
        PyErr_NoMemory();
        goto done;
    }
    if (rc > 0) {
        result = PyUnicode_FromString(sc.why ? sc.why : "unsupported");
        goto done;
    }
    /* floats beyond the fast path: CPython's correctly rounded parser, with the GIL */
    {
        SlowFloat *sf = (SlowFloat *)sc.slow.p;
        size_t ns = sc.slow.len / sizeof(SlowFloat);
        char tmp[512];
        for (size_t k = 0; k < ns; k++) {
            if (sf[k].len >= sizeof tmp) { result = PyUnicode_FromString("number too long"); goto done; }
            memcpy(tmp, sc.base + sf[k].off, sf[k].len);
            tmp[sf[k].len] = 0;
            char *stop = NULL;
            double d = PyOS_string_to_double(tmp, &stop, NULL);
            if (d == -1.0 && PyErr_Occurred()) goto done;
            if (stop != tmp + sf[k].len || !Py_IS_FINITE(d)) { result = PyUnicode_FromString("number out of range"); goto done; }
            ((double *)sc.f[sf[k].col].vals.p)[sf[k].row] = d;
        }
    }
    result = to_arrow(&sc);
done:
    scan_free(&sc);
    PyBuffer_Release(&view);
    return result;
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
    {"scan", scan, METH_O,
     "scan(buffer) -> (rows, ((column name, arrow_schema capsule, arrow_array capsule), ...)) | str\n\n"
     "Columns of a JSON array of trace events, or the reason it was left to the Python decoder."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nongemm_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__nongemm_scan(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "ABI", SCAN_ABI) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
